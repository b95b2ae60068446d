package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// TestServeHTTPS runs the gateway as it is deployed: HTTPS with HTTP/2,
// a certificate from localpki, a watch streamed over HTTP/2, and an
// incoming W3C traceparent continued by the server's spans.
func TestServeHTTPS(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	shutdown, err := telemetry.Setup(t.Context(), telemetry.Config{ServiceName: "gateway-test", SpanProcessor: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shutdown(context.Background())
		otel.SetTracerProvider(sdktrace.NewTracerProvider())
	})

	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	b := backendtest.Start(t)
	svc, err := New(t.Context(), Config{
		ListenAddr: "127.0.0.1:0", RegistryAddr: b.RegistryAddr, ValidatorAddr: b.ValidatorAddr, StorageAddr: b.StorageAddr,
		Tokens: []string{testToken}, TLSCert: &cert, ShutdownGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- svc.Run(ctx) }()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pki.CACertPEM)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "localhost"},
		ForceAttemptHTTP2: true,
	}}
	base := "https://" + svc.Addr()
	get := func(path string, hdr ...string) *http.Response {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp := get("/readyz", "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	var continued, grpcSpan bool
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			continued = true
			if strings.Contains(s.Name(), "KubeAPIService") {
				grpcSpan = true
			}
		}
	}
	if !continued || !grpcSpan {
		t.Fatalf("trace not continued through HTTP and gRPC (http=%v grpc=%v)", continued, grpcSpan)
	}

	// A CRD watch streams over HTTP/2: events arrive while the response is open.
	w := get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true")
	defer w.Body.Close()
	if w.StatusCode != 200 {
		t.Fatalf("watch: %d", w.StatusCode)
	}
	go func() {
		req, _ := http.NewRequest("POST", base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", strings.NewReader(mustJSON(cronTabCRD())))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var ev watchEvent
	done := make(chan error, 1)
	go func() { done <- json.NewDecoder(w.Body).Decode(&ev) }()
	select {
	case err := <-done:
		if err != nil || ev.Type != "ADDED" {
			t.Fatalf("watch event: %v %v", ev.Type, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event over HTTP/2")
	}

	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
