package openapi

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// Server serves a Builder's documents as crdplane.registry.v1.OpenAPIService.
type Server struct {
	registryv1.UnimplementedOpenAPIServiceServer
	b *Builder
}

// NewServer returns a Server for b.
func NewServer(b *Builder) *Server { return &Server{b: b} }

// GetDocument returns the v3 index or one group-version document.
func (s *Server) GetDocument(_ context.Context, req *registryv1.GetDocumentRequest) (*registryv1.GetDocumentResponse, error) {
	if req.GetVersion() != "v3" {
		return nil, kstatus.ToGRPC(notFound())
	}
	d := s.b.Index()
	if req.GetPath() != "" {
		var ok bool
		if d, ok = s.b.Get(req.GetPath()); !ok {
			return nil, kstatus.ToGRPC(notFound())
		}
	}
	return &registryv1.GetDocumentResponse{ContentType: "application/json", Body: d.Body, Etag: `"` + d.Hash + `"`}, nil
}

func notFound() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource",
	}}
}
