package validator

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// fakeRegistry serves a CRD watch: the initial CRDs, a bookmark, then
// whatever is sent on events.
type fakeRegistry struct {
	registryv1.UnimplementedRegistryServiceServer
	initial []*CRD
	events  chan *registryv1.WatchResponse
}

func (f *fakeRegistry) Watch(_ *registryv1.WatchRequest, stream grpc.ServerStreamingServer[registryv1.WatchResponse]) error {
	for _, crd := range f.initial {
		if err := stream.Send(crdEvent(commonv1.EventType_EVENT_TYPE_ADDED, crd)); err != nil {
			return err
		}
	}
	if err := stream.Send(&registryv1.WatchResponse{Type: commonv1.EventType_EVENT_TYPE_BOOKMARK, ResourceVersion: 1}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-f.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func crdEvent(typ commonv1.EventType, crd *CRD) *registryv1.WatchResponse {
	b, err := json.Marshal(crd)
	if err != nil {
		panic(err)
	}
	return &registryv1.WatchResponse{Type: typ, Object: b, ResourceVersion: crd.Generation + 1}
}

func loadCRD(t testing.TB, path string) *CRD {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &CRD{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	return crd
}

func withMaximum(crd *CRD, generation int64, max float64) *CRD {
	c := crd.DeepCopy()
	c.Generation = generation
	props := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	replicas := props.Properties["replicas"]
	replicas.Maximum = &max
	props.Properties["replicas"] = replicas
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = props
	return c
}

func TestRegistrySource(t *testing.T) {
	base := loadCRD(t, "testdata/crds/crontab-validation.yaml")
	base.UID = "uid-1"
	gen1 := withMaximum(base, 1, 10)
	reg := &fakeRegistry{initial: []*CRD{gen1}, events: make(chan *registryv1.WatchResponse, 4)}

	addr := "inproc://validator-test-registry"
	lis, err := grpcx.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer()
	registryv1.RegisterRegistryServiceServer(srv, reg)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	svc, err := New(context.Background(), Config{RegistryAddr: addr, CRDWaitTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	deadline := time.Now().Add(5 * time.Second)
	for svc.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatal("never ready:", svc.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	client := serve(t, svc)
	obj := toJSON(t, cronTab("  replicas: 15\n"))
	admit := func(gen int64) (*validatorv1.AdmitResponse, error) {
		return client.Admit(context.Background(), &validatorv1.AdmitRequest{
			Crd:     &commonv1.CRDRef{Name: base.Name, Uid: "uid-1", Generation: gen},
			Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE, Object: obj,
		})
	}

	resp, err := admit(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Causes) != 1 || !strings.Contains(resp.Causes[0].Message, "less than or equal to 10") {
		t.Fatalf("generation 1: %v", resp.Causes)
	}

	// A request for generation 2 waits for it to arrive.
	go func() {
		time.Sleep(50 * time.Millisecond)
		reg.events <- crdEvent(commonv1.EventType_EVENT_TYPE_MODIFIED, withMaximum(base, 2, 20))
	}()
	resp, err = admit(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Causes) != 0 {
		t.Fatalf("generation 2 (maximum 20) rejected: %v", resp.Causes)
	}
	if n := svc.compiled.len(); n != 1 {
		t.Errorf("%d compiled entries after generation 2, want 1 (generation 1 evicted)", n)
	}

	// A generation that does not come: 503 after the bound.
	_, err = admit(3)
	if st := kstatus.FromError(err); st.Code != 503 || !strings.Contains(st.Message, "generation 3") {
		t.Errorf("got %d %q, want 503", st.Code, st.Message)
	}

	// Deleted: entries evicted, then 404.
	reg.events <- crdEvent(commonv1.EventType_EVENT_TYPE_DELETED, withMaximum(base, 2, 20))
	cache := svc.src.(*cacheSource).cache
	for _, found := cache.Get(base.Name); found; _, found = cache.Get(base.Name) {
		time.Sleep(5 * time.Millisecond)
	}
	_, err = admit(2)
	if st := kstatus.FromError(err); st.Code != 404 {
		t.Errorf("after delete: got %d %q, want 404", st.Code, st.Message)
	}
	if n := svc.compiled.len(); n != 0 {
		t.Errorf("%d compiled entries after delete, want 0", n)
	}
}

func TestCompiledCacheEviction(t *testing.T) {
	c := newCompiledCache(DefaultCompiledMemoryLimit())
	crd := loadCRD(t, "testdata/crds/widgets.yaml")
	crd.UID, crd.Generation = "w", 1
	for _, v := range []string{"v1", "v2"} {
		if _, err := c.get(crd, v); err != nil {
			t.Fatal(err)
		}
	}
	if c.len() != 2 {
		t.Fatalf("len %d", c.len())
	}
	gen2 := crd.DeepCopy()
	gen2.Generation = 2
	c.onChange(crd, gen2)
	if c.len() != 0 {
		t.Errorf("generation 1 not evicted: %d", c.len())
	}
	// A late request for generation 1 is served but not kept.
	if _, err := c.get(crd, "v1"); err != nil {
		t.Fatal(err)
	}
	if c.len() != 0 {
		t.Errorf("superseded generation cached")
	}
	if _, err := c.get(gen2, "v1"); err != nil || c.len() != 1 {
		t.Errorf("generation 2: %v, len %d", err, c.len())
	}
	// Unknown versions are not cached.
	if _, err := c.get(gen2, "v9"); err == nil || c.len() != 1 {
		t.Errorf("unknown version: %v, len %d", err, c.len())
	}
	c.onChange(gen2, nil)
	if c.len() != 0 {
		t.Errorf("deleted CRD not evicted")
	}
}

// TestCompiledCELOncePerGeneration: the CEL programs are compiled with the
// schema, once per CRD generation and version, and reused by requests.
func TestCompiledCELOncePerGeneration(t *testing.T) {
	c := newCompiledCache(DefaultCompiledMemoryLimit())
	crd := loadCRD(t, "testdata/crds/crontab-cel.yaml")
	crd.UID, crd.Generation = "c", 1
	a, err := c.get(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if a.cel == nil || len(a.cel.Rules()) != 2 || len(a.cel.Rules("spec", "env", "[]", "name")) != 1 {
		t.Fatalf("rules not compiled: %+v", a.cel)
	}
	b, err := c.get(crd.DeepCopy(), "v1")
	if err != nil || b.cel != a.cel {
		t.Errorf("generation 1 compiled twice: %v", err)
	}
	gen2 := crd.DeepCopy()
	gen2.Generation = 2
	c.onChange(crd, gen2)
	d, err := c.get(gen2, "v1")
	if err != nil || d.cel == a.cel {
		t.Errorf("generation 2 not recompiled: %v", err)
	}
}
