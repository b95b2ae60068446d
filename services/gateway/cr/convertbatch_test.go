package cr

import (
	"fmt"
	"testing"

	"github.com/crdplane/crdplane/pkg/grpcx"
)

// TestConvertBatches: a list to convert goes to the converter in requests
// within gRPC's request limit; an object over it alone.
func TestConvertBatches(t *testing.T) {
	obj := func(n int) []byte { return make([]byte, n) }
	for _, tc := range []struct {
		sizes []int
		max   int
		want  string
	}{
		{nil, 100, "[]"},
		{[]int{10, 10, 10}, 100, "[[0 3]]"},
		{[]int{40, 40, 40}, 100, "[[0 2] [2 3]]"},
		{[]int{200, 10, 10}, 100, "[[0 1] [1 3]]"},
		{[]int{10, 200, 10}, 100, "[[0 1] [1 2] [2 3]]"},
		{[]int{90, 90}, 100, "[[0 1] [1 2]]"},
	} {
		var objs [][]byte
		for _, n := range tc.sizes {
			objs = append(objs, obj(n))
		}
		if got := fmt.Sprint(convertBatches(objs, tc.max)); got != tc.want {
			t.Errorf("%v by %d: %s, want %s", tc.sizes, tc.max, got, tc.want)
		}
	}
	if convertBatchBytes >= grpcx.MaxRequestMessageSize {
		t.Fatal("a batch does not fit in a request")
	}
}
