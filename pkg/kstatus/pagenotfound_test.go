package kstatus

import (
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPageNotFoundMarker(t *testing.T) {
	const msg = "the server could not find the requested resource"
	marked := NewPageNotFound(msg)
	wire := ToGRPC(marked)
	if status.Code(wire) != codes.NotFound {
		t.Fatalf("code %v, want NotFound", status.Code(wire))
	}
	// What crosses gRPC: the status rebuilt from its proto, as a client sees it.
	received := status.FromProto(status.Convert(wire).Proto()).Err()
	for name, err := range map[string]error{"marked": marked, "wrapped": fmt.Errorf("resolve: %w", marked), "over gRPC": received} {
		if !IsPageNotFound(err) {
			t.Errorf("%s: IsPageNotFound = false", name)
		}
		if s := FromError(err); s.Code != http.StatusNotFound || s.Reason != metav1.StatusReasonNotFound || s.Message != msg {
			t.Errorf("%s: Status %d %s %q", name, s.Code, s.Reason, s.Message)
		}
	}
	// The same wording without the marker is an ordinary 404.
	for name, err := range map[string]error{
		"generic":   apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false),
		"over gRPC": ToGRPC(apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false)),
		"object":    ToGRPC(apierrors.NewNotFound(schema.GroupResource{Group: "g", Resource: "things"}, "a")),
		"plain":     status.Error(codes.NotFound, msg),
		"nil":       nil,
	} {
		if IsPageNotFound(err) {
			t.Errorf("%s: IsPageNotFound = true", name)
		}
	}
}
