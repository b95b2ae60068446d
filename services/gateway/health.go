package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/api/httpbody"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
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

// Readyz serves /readyz as kube-apiserver's healthz handler does: "ok"
// when every check passes ("[+]<check> ok" lines with ?verbose), else 500
// with every check's line, a failed one as "[-]<check> failed: reason
// withheld" (the endpoint is public; the reason goes to the log).
func (a *kubeAPI) Readyz(ctx context.Context, req *gatewayv1.ReadyzRequest) (*httpbody.HttpBody, error) {
	var out strings.Builder
	out.WriteString("[+]ping ok\n")
	var failed []any
	for _, c := range a.readyChecks() {
		if err := c.check(); err != nil {
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
			failed = append(failed, c.name, err.Error())
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.name)
	}
	if len(failed) > 0 {
		a.log.Debug("readyz check failed", failed...)
		httpx.SetHTTPCode(ctx, http.StatusInternalServerError)
		return textBody(out.String() + "readyz check failed\n"), nil
	}
	if req.GetVerbose() {
		return textBody(out.String() + "readyz check passed\n"), nil
	}
	return textBody("ok"), nil
}
