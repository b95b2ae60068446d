package kstatus

import (
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRoundTrip(t *testing.T) {
	gr := schema.GroupResource{Group: "stable.example.com", Resource: "crontabs"}
	gk := schema.GroupKind{Group: "stable.example.com", Kind: "CronTab"}
	tests := []struct {
		name       string
		err        error
		wantCode   int32
		wantReason metav1.StatusReason
		wantMsg    string
		wantCauses int
	}{
		{"not found", apierrors.NewNotFound(gr, "x"), 404, metav1.StatusReasonNotFound, `crontabs.stable.example.com "x" not found`, 0},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("the object has been modified; please apply your changes to the latest version and try again")), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on crontabs.stable.example.com "x": the object has been modified; please apply your changes to the latest version and try again`, 0},
		{"invalid", apierrors.NewInvalid(gk, "x", field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), 15, "too big")}), 422, metav1.StatusReasonInvalid,
			`CronTab.stable.example.com "x" is invalid: spec.replicas: Invalid value: 15: too big`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gerr := ToGRPC(tt.err)
			if _, ok := status.FromError(gerr); !ok {
				t.Fatalf("ToGRPC gave a non-status error %T", gerr)
			}
			s := FromError(gerr)
			if s.Code != tt.wantCode || s.Reason != tt.wantReason || s.Message != tt.wantMsg {
				t.Fatalf("got %d %s %q", s.Code, s.Reason, s.Message)
			}
			if tt.wantCauses > 0 && (s.Details == nil || len(s.Details.Causes) != tt.wantCauses) {
				t.Fatalf("causes: %+v", s.Details)
			}
			if s.Kind != "Status" || s.APIVersion != "v1" || s.Status != metav1.StatusFailure {
				t.Fatalf("type meta: %+v", s)
			}
		})
	}
}

func TestFromNil(t *testing.T) {
	if s := FromError(nil); s != nil {
		t.Fatalf("FromError(nil) = %+v", s)
	}
	if ToGRPC(nil) != nil {
		t.Fatal("ToGRPC(nil) != nil")
	}
}

func TestFromPlainGRPCCode(t *testing.T) {
	s := FromError(status.Error(codes.Unavailable, "storage down"))
	if s.Code != http.StatusServiceUnavailable || s.Reason != metav1.StatusReasonServiceUnavailable {
		t.Fatalf("got %+v", s)
	}
	s = FromError(errors.New("boom"))
	if s.Code != http.StatusInternalServerError {
		t.Fatalf("got %+v", s)
	}
}

// A message over gRPC's size limit is a 500 (retrying cannot help); other
// ResourceExhausted errors are 429s.
func TestFromResourceExhausted(t *testing.T) {
	s := FromError(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (20000000 vs. 16777216)"))
	if s.Code != http.StatusInternalServerError || s.Reason != metav1.StatusReasonInternalError ||
		s.Message != "Internal error occurred: grpc: received message larger than max (20000000 vs. 16777216)" {
		t.Fatalf("got %+v", s)
	}
	s = FromError(status.Error(codes.ResourceExhausted, "slow down"))
	if s.Code != http.StatusTooManyRequests || s.Reason != metav1.StatusReasonTooManyRequests || s.Details.RetryAfterSeconds != 1 {
		t.Fatalf("got %+v", s)
	}
}
