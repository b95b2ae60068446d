package watch

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

// A backend's Status that travels with a context code (the storage
// service's 504 Too large resource version) is an error event, not the
// end of the stream.
func TestIsStreamEnd(t *testing.T) {
	withStatus := kstatus.ToGRPC(apierrors.NewTimeoutError("Too large resource version: 9, current: 3", 1))
	if status.Code(withStatus) != codes.DeadlineExceeded || isStreamEnd(withStatus) {
		t.Fatalf("%v: a stream end", withStatus)
	}
	for _, err := range []error{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), status.Error(codes.Canceled, "context canceled")} {
		if !isStreamEnd(err) {
			t.Fatalf("%v: not a stream end", err)
		}
	}
}

// A panic in a watch's backend reader is a 500 error, not a crash.
func TestRecoverRecv(t *testing.T) {
	// A watch's backend reader runs in a goroutine of its own.
	_, err := recoverRecv(func() (Event, error) { panic("reader bug") })
	if err == nil || !strings.Contains(err.Error(), "This request caused apiserver to panic") {
		t.Fatalf("recoverRecv: %v", err)
	}
}
