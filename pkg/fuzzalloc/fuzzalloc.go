// Package fuzzalloc bounds what the code under a fuzz target allocates: no
// input may make it allocate out of proportion to the input's size (a
// decoding bomb, an alias expansion). HeapAllocated reads the process's
// cumulative allocation cheaply, and Check fails a test when a function
// allocated more than Allowance plus a cost per byte of input.
package fuzzalloc

import (
	"runtime/metrics"
	"testing"
)

// Allowance is what Check allows a function to allocate whatever its input.
const Allowance = 64 << 20

// HeapAllocated returns the bytes the process has allocated so far (cheap:
// no stop-the-world, unlike runtime.ReadMemStats).
func HeapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Check runs fn and fails t when it allocated more than Allowance plus
// perByte for every byte of input (the input's size in bytes). Allocation
// is counted for the whole process: fn's own goroutines count too, and so
// would any other goroutine's, which the fuzzing engine does not run
// concurrently with an input.
func Check(t testing.TB, input, perByte int, fn func()) {
	t.Helper()
	before := HeapAllocated()
	fn()
	n := max(Allowance+perByte*input, 0)
	if alloc, limit := HeapAllocated()-before, uint64(n); alloc > limit { //nolint:gosec // n is not negative
		t.Fatalf("allocated %d bytes for %d bytes of input", alloc, input)
	}
}
