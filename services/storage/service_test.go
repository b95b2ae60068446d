package storage

import (
	"context"
	"flag"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/crdplane/crdplane/pkg/telemetry"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	key := "/registry/" + testGroup() + "/crontabs/ns/x"

	first := startEnv(t, testConfig(dir))
	cr, err := first.client.Create(ctxT(t), &storagev1.CreateRequest{Key: key, Object: object("x", "ns", nil, nil)})
	first.stop()
	if err != nil {
		t.Fatal(err)
	}

	second := startEnv(t, testConfig(dir))
	defer second.stop()
	gr, err := second.client.Get(ctxT(t), &storagev1.GetRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if gr.ResourceVersion != cr.ResourceVersion || string(gr.Object) != string(cr.Object) {
		t.Fatalf("after restart: %d %s, before %d %s", gr.ResourceVersion, gr.Object, cr.ResourceVersion, cr.Object)
	}
	if err := second.svc.Ready(); err != nil {
		t.Fatal(err)
	}
}

func TestExternalEtcd(t *testing.T) {
	embedded := shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The shared service's embedded etcd stands in for an external cluster.
	svc, err := New(ctx, Config{EtcdEndpoints: []string{embedded.svc.embed.endpoint}, EtcdLogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	if svc.embed != nil {
		t.Fatal("an embedded etcd started despite endpoints")
	}
	if err := svc.Ready(); err != nil {
		t.Fatal(err)
	}
	key := "/registry/" + testGroup() + "/crontabs/ns/x"
	if _, _, err := svc.create(ctx, key, object("x", "ns", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing it leaves the cluster (and its other clients) alone.
	if _, err := embedded.client.Get(ctx, &storagev1.GetRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
}

// spanRecorder records the spans of the test process. OpenTelemetry's global
// provider delegates to the first one installed, so it is installed once.
var spanRecorder = sync.OnceValues(func() (*tracetest.SpanRecorder, error) {
	rec := tracetest.NewSpanRecorder()
	_, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "storage-test", SpanProcessor: rec})
	return rec, err
})

func TestEtcdCallsAreTraced(t *testing.T) {
	rec, err := spanRecorder()
	if err != nil {
		t.Fatal(err)
	}
	e := shared(t)
	if _, err := e.client.Get(ctxT(t), &storagev1.GetRequest{Key: "/registry/" + testGroup() + "/crontabs/ns/x"}); err == nil {
		t.Fatal("want NotFound")
	}
	var spans []string
	for _, s := range rec.Ended() {
		spans = append(spans, s.Name())
	}
	if !slices.ContainsFunc(spans, func(n string) bool { return strings.Contains(n, "etcdserverpb.KV/Range") }) {
		t.Fatalf("no etcd span among %v", spans)
	}
}

func TestConfigFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--etcd-endpoints", "http://a:2379, http://b:2379,", "--data-dir", "/d", "--watch-bookmark-interval", "5s"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.EtcdEndpoints, []string{"http://a:2379", "http://b:2379"}) || c.DataDir != "/d" || c.BookmarkInterval != 5*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c.EtcdLogLevel != "warn" || c.EmbeddedClientURL != "" || c.AutoCompactionRetention != "5m" {
		t.Fatalf("defaults %+v", c)
	}
}
