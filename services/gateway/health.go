package gateway

import (
	"context"
	"fmt"
	"net/http"

	"google.golang.org/genproto/googleapis/api/httpbody"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
)

func textBody(s string) *httpbody.HttpBody {
	return &httpbody.HttpBody{ContentType: "text/plain; charset=utf-8", Data: []byte(s)}
}

// Healthz serves /healthz: the process is up.
func (a *kubeAPI) Healthz(_ context.Context, req *gatewayv1.HealthzRequest) (*httpbody.HttpBody, error) {
	if req.GetVerbose() {
		return textBody("[+]ping ok\nhealthz check passed\n"), nil
	}
	return textBody("ok"), nil
}

// Livez serves /livez.
func (a *kubeAPI) Livez(_ context.Context, req *gatewayv1.LivezRequest) (*httpbody.HttpBody, error) {
	if req.GetVerbose() {
		return textBody("[+]ping ok\nlivez check passed\n"), nil
	}
	return textBody("ok"), nil
}

// Readyz serves /readyz: ready once the CRD cache has synced; 500 with the
// reason otherwise.
func (a *kubeAPI) Readyz(ctx context.Context, req *gatewayv1.ReadyzRequest) (*httpbody.HttpBody, error) {
	if err := a.ready(); err != nil {
		setHTTPCode(ctx, http.StatusInternalServerError)
		return textBody(fmt.Sprintf("[+]ping ok\n[-]crd-cache failed: %v\nreadyz check failed\n", err)), nil
	}
	if req.GetVerbose() {
		return textBody("[+]ping ok\n[+]crd-cache ok\nreadyz check passed\n"), nil
	}
	return textBody("ok"), nil
}
