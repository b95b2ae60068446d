package conformance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ConversionWebhook is a conversion webhook both servers call in the
// webhook cases: it converts the cases' Gadget between v1 (spec.hostPort
// "h:p") and v2 (spec.host, spec.port), and fails the conversion of an
// object whose spec.fail is true, so that both servers' rendering of a
// failed conversion is compared too. An object whose spec.misbehave names a
// fault gets a bad answer (see misbehave), to compare how both servers
// check what a webhook returns.
type ConversionWebhook struct {
	srv *httptest.Server
	// otherCA is a CA bundle that did not sign the webhook's certificate.
	otherCA []byte
}

// StartConversionWebhook serves the webhook over TLS on loopback.
func StartConversionWebhook() *ConversionWebhook {
	w := &ConversionWebhook{otherCA: selfSignedCA()}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	return w
}

// selfSignedCA is the PEM of a fresh self-signed CA certificate.
func selfSignedCA() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Vars are what the cases use: ${webhookURL} and ${webhookCABundle}.
func (w *ConversionWebhook) Vars() map[string]string {
	cert := w.srv.Certificate()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return map[string]string{
		"webhookURL":      w.srv.URL + "/convert",
		"webhookCABundle": base64.StdEncoding.EncodeToString(ca),
		// A CA bundle that does not verify the webhook's certificate.
		"webhookWrongCABundle": base64.StdEncoding.EncodeToString(w.otherCA),
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
	if fault := misbehaving(review.Request.Objects); fault != "" {
		misbehave(rw, fault, review.APIVersion, review.Request.UID, review.Request.DesiredAPIVersion, review.Request.Objects)
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

// misbehaving is the fault the first object with a spec.misbehave asks for.
func misbehaving(objs []map[string]any) string {
	for _, o := range objs {
		spec, _ := o["spec"].(map[string]any)
		if f, _ := spec["misbehave"].(string); f != "" {
			return f
		}
	}
	return ""
}

// misbehave answers a review with the fault named: the objects converted
// as usual, then the answer spoilt.
func misbehave(rw http.ResponseWriter, fault, apiVersion, uid, to string, objs []map[string]any) {
	for _, o := range objs {
		convertGadget(o, to)
	}
	meta := func() map[string]any {
		m, _ := objs[0]["metadata"].(map[string]any)
		if m == nil {
			m = map[string]any{}
			objs[0]["metadata"] = m
		}
		return m
	}
	rw.Header().Set("Content-Type", "application/json")
	switch fault {
	case "extraObject":
		objs = append(objs, objs[0])
	case "noObjects":
		objs = []map[string]any{}
	case "uid":
		meta()["uid"] = "00000000-0000-0000-0000-000000000000"
	case "name":
		meta()["name"] = "renamed"
	case "namespace":
		meta()["namespace"] = "elsewhere"
	case "invalidLabel":
		meta()["labels"] = map[string]any{"not a label": "x"}
	case "labelNotString":
		meta()["labels"] = map[string]any{"n": 1}
	case "invalidAnnotation":
		meta()["annotations"] = map[string]any{"-bad/key": "x"}
	case "metadataChanges":
		// Allowed changes kept (labels, annotations), others dropped.
		meta()["labels"] = map[string]any{"added": "by-webhook"}
		meta()["annotations"] = map[string]any{"note": "by-webhook"}
		meta()["finalizers"] = []any{"example.com/by-webhook"}
		meta()["generation"] = 42
	case "metadataNotObject":
		objs[0]["metadata"] = "not an object"
	case "apiVersion":
		objs[0]["apiVersion"] = "webhook.api.example.com/v9"
	case "kind":
		objs[0]["kind"] = "Gizmo"
	case "reviewKind":
		apiVersion = "apiextensions.k8s.io/v1beta1"
	case "reviewNoTypeMeta":
		b, _ := json.Marshal(map[string]any{"response": conversionResponse{UID: uid, ConvertedObjects: objs, Result: map[string]any{"status": "Success"}}})
		_, _ = rw.Write(b)
		return
	case "reviewOtherKind":
		b, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "ConversionRequest",
			"response": conversionResponse{UID: uid, ConvertedObjects: objs, Result: map[string]any{"status": "Success"}}})
		_, _ = rw.Write(b)
		return
	case "yaml":
		b, _ := json.Marshal(conversionReview{APIVersion: apiVersion, Kind: "ConversionReview",
			Response: &conversionResponse{UID: uid, ConvertedObjects: objs, Result: map[string]any{"status": "Success"}}})
		y, _ := yaml.JSONToYAML(b)
		_, _ = rw.Write(y)
		return
	case "badYAML":
		_, _ = rw.Write([]byte("response: [unclosed\n"))
		return
	case "reviewUID":
		uid = "not-the-request-uid"
	case "noResponse":
		_, _ = rw.Write([]byte(`{"apiVersion":"` + apiVersion + `","kind":"ConversionReview"}`))
		return
	case "invalidJSON":
		_, _ = rw.Write([]byte(`{"apiVersion":"` + apiVersion + `","kind":"ConversionReview","response":{"uid":`))
		return
	case "notJSON":
		_, _ = rw.Write([]byte("this is not JSON"))
		return
	case "empty":
		return
	case "statusError":
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = rw.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the webhook is overloaded","code":503}`))
		return
	case "huge":
		// A 10 MiB answer: the object carries a field its schema prunes.
		spec, _ := objs[0]["spec"].(map[string]any)
		spec["padding"] = strings.Repeat("x", 10<<20)
	}
	out := conversionReview{APIVersion: apiVersion, Kind: "ConversionReview",
		Response: &conversionResponse{UID: uid, ConvertedObjects: objs, Result: map[string]any{"status": "Success"}}}
	_ = json.NewEncoder(rw).Encode(out)
}
