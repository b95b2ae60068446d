package fuzzalloc

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

var sink []byte

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		input    int
		perByte  int
		allocate int
		fails    bool
	}{
		{"within the allowance", 0, 0, 1 << 20, false},
		{"within the allowance and the input's share", 1 << 20, 100, 100 << 20, false},
		{"beyond", 1 << 10, 100, 80 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			Check(r, tc.input, tc.perByte, func() { sink = make([]byte, tc.allocate) })
			if failed := r.fatal != ""; failed != tc.fails {
				t.Fatalf("failed %v (%q), want %v", failed, r.fatal, tc.fails)
			}
			if tc.fails && !strings.Contains(r.fatal, fmt.Sprintf("for %d bytes of input", tc.input)) {
				t.Fatalf("message %q", r.fatal)
			}
		})
	}
	sink = nil
}

func TestHeapAllocatedGrows(t *testing.T) {
	before := HeapAllocated()
	sink = make([]byte, 1<<20)
	if got := HeapAllocated() - before; got < 1<<20 {
		t.Fatalf("HeapAllocated grew by %d after a 1 MiB allocation", got)
	}
	sink = nil
}
