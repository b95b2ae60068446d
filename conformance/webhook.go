package conformance

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
)

// ConversionWebhook is a conversion webhook both servers call in the
// webhook cases: it converts the cases' Gadget between v1 (spec.hostPort
// "h:p") and v2 (spec.host, spec.port), and fails the conversion of an
// object whose spec.fail is true, so that both servers' rendering of a
// failed conversion is compared too.
type ConversionWebhook struct {
	srv *httptest.Server
}

// StartConversionWebhook serves the webhook over TLS on loopback.
func StartConversionWebhook() *ConversionWebhook {
	w := &ConversionWebhook{}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	return w
}

// Vars are what the cases use: ${webhookURL} and ${webhookCABundle}.
func (w *ConversionWebhook) Vars() map[string]string {
	cert := w.srv.Certificate()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return map[string]string{
		"webhookURL":      w.srv.URL + "/convert",
		"webhookCABundle": base64.StdEncoding.EncodeToString(ca),
	}
}

// Close stops the webhook.
func (w *ConversionWebhook) Close() { w.srv.Close() }

type conversionReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID               string           `json:"uid"`
		DesiredAPIVersion string           `json:"desiredAPIVersion"`
		Objects           []map[string]any `json:"objects"`
	} `json:"request,omitempty"`
	Response *conversionResponse `json:"response,omitempty"`
}

type conversionResponse struct {
	UID              string           `json:"uid"`
	ConvertedObjects []map[string]any `json:"convertedObjects"`
	Result           map[string]any   `json:"result"`
}

func (w *ConversionWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review conversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	resp := &conversionResponse{UID: review.Request.UID, Result: map[string]any{"status": "Success"}}
	for _, obj := range review.Request.Objects {
		spec, _ := obj["spec"].(map[string]any)
		if fail, _ := spec["fail"].(bool); fail {
			resp.ConvertedObjects = nil
			resp.Result = map[string]any{"status": "Failure", "message": "conversion of this gadget is refused by the webhook"}
			break
		}
		convertGadget(obj, review.Request.DesiredAPIVersion)
		resp.ConvertedObjects = append(resp.ConvertedObjects, obj)
	}
	review.Request = nil
	review.Response = resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

func convertGadget(obj map[string]any, to string) {
	from, _ := obj["apiVersion"].(string)
	obj["apiVersion"] = to
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil || from == to {
		return
	}
	switch {
	case strings.HasSuffix(to, "/v2"):
		if hp, ok := spec["hostPort"].(string); ok {
			host, port, _ := strings.Cut(hp, ":")
			spec["host"], spec["port"] = host, port
			delete(spec, "hostPort")
		}
	case strings.HasSuffix(to, "/v1"):
		host, _ := spec["host"].(string)
		port, _ := spec["port"].(string)
		if host != "" || port != "" {
			spec["hostPort"] = host + ":" + port
		}
		delete(spec, "host")
		delete(spec, "port")
	}
}
