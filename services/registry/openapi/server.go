package openapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/types/known/timestamppb"

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

// GetDocument returns the v3 index, one v3 group-version document, or the
// v2 document (JSON or protobuf, as the Accept header prefers). A v3
// group-version without a document is an empty response (no body, no
// content type), as upstream answers it.
func (s *Server) GetDocument(_ context.Context, req *registryv1.GetDocumentRequest) (*registryv1.GetDocumentResponse, error) {
	if req.GetVersion() == "v2" && req.GetPath() == "" {
		return s.v2(req.GetAccept())
	}
	if req.GetVersion() != "v3" {
		return nil, kstatus.ToGRPC(notFound())
	}
	d := s.b.Index()
	if req.GetPath() != "" {
		var ok bool
		if d, ok = s.b.Get(req.GetPath()); !ok {
			// upstream's handler (kube-openapi's HandleGroupVersion) writes
			// nothing for a group-version it has no document of: 200, no
			// body, no Content-Type
			return &registryv1.GetDocumentResponse{}, nil
		}
	}
	return response("application/json", d), nil
}

// response is d as a GetDocumentResponse of content type ct.
func response(ct string, d *Document) *registryv1.GetDocumentResponse {
	r := &registryv1.GetDocumentResponse{ContentType: ct, Body: d.Body, Etag: `"` + d.Hash + `"`}
	if !d.Modified.IsZero() {
		r.LastModified = timestamppb.New(d.Modified)
	}
	return r
}

func notFound() error {
	return kstatus.NewPageNotFound("the server could not find the requested resource")
}

// Media types of /openapi/v2, as kube-apiserver serves them.
const (
	v2JSON          = "application/json"
	v2Protobuf      = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	v2ProtobufAlias = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// v2 negotiates /openapi/v2: the first acceptable of JSON and protobuf in
// the client's order of preference, else 406.
func (s *Server) v2(accept string) (*registryv1.GetDocumentResponse, error) {
	if accept == "" {
		accept = "*/*"
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		for _, mt := range []string{v2JSON, v2ProtobufAlias, v2Protobuf} {
			typ, sub, _ := strings.Cut(mt, "/")
			if (c.Type != typ && c.Type != "*") || (c.SubType != sub && c.SubType != "*") {
				continue
			}
			if mt == v2JSON {
				return response(v2JSON, s.b.V2()), nil
			}
			d, err := s.b.V2Proto()
			if err != nil {
				return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
			}
			return response(v2Protobuf, d), nil
		}
	}
	return nil, kstatus.ToGRPC(&apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("only the following media types are accepted: %s, %s", v2JSON, v2Protobuf),
	}})
}
