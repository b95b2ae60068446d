package e2e

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/platform/platformtest"
)

// TestOneCreateOneTrace: a create sent with a W3C traceparent produces one
// trace (the client's) with spans from the gateway, the validator, the
// storage service and etcd.
func TestOneCreateOneTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "crdplane-test", SpanProcessor: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()

	p, cfg := platformtest.Start(t)
	platformtest.CreateCRD(t, dynamic.NewForConfigOrDie(cfg), platformtest.Object(t, []byte(platformtest.CronTabCRD)))
	client := platformtest.HTTPClient(p)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"traced"},"spec":{"cronSpec":"* * * * */5","replicas":2}}`)
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/apis/stable.example.com/v1/namespaces/default/crontabs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}

	want := map[string]bool{
		"gateway HTTP server span":                     false,
		"crdplane.validator.v1.ValidatorService/Admit": false,
		"crdplane.storage.v1.StorageService/Create":    false,
		"etcd call": false,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() != traceID {
				continue
			}
			switch {
			case s.SpanKind() == trace.SpanKindServer && s.InstrumentationScope().Name == "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp":
				want["gateway HTTP server span"] = true
			case s.SpanKind() == trace.SpanKindServer && s.Name() == "crdplane.validator.v1.ValidatorService/Admit":
				want[s.Name()] = true
			case s.SpanKind() == trace.SpanKindServer && s.Name() == "crdplane.storage.v1.StorageService/Create":
				want[s.Name()] = true
			case s.SpanKind() == trace.SpanKindClient && len(s.Name()) > 13 && s.Name()[:13] == "etcdserverpb.":
				want["etcd call"] = true
			}
		}
		all := true
		for _, ok := range want {
			all = all && ok
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID().String() == traceID {
					names = append(names, s.Name())
				}
			}
			t.Fatalf("spans of the trace: %v; missing some of %v", names, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
