package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/services/registry/openapi"
)

// The publishing benchmarks measure what a CRD change costs the registry:
// the discovery documents and the OpenAPI documents (v3 per group-version,
// v2 as one document) of 1,000 Established CRDs in 100 groups, each with
// two served versions and a schema of some 40 properties. (kube-apiserver
// takes about 35 s to republish OpenAPI for 500 CRDs.)
//
//	go test -run '^$' -bench Publish -benchtime 10x ./services/registry

const benchCRDs = 1000

// benchSchema is a CRD schema of realistic size.
var benchSchema = func() *apiextensionsv1.JSONSchemaProps {
	fields := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range 30 {
		fields[fmt.Sprintf("field%02d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: strings.Repeat("words ", 10), MaxLength: ptrTo(int64(64))}
	}
	fields["replicas"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptrTo(1.0), Maximum: ptrTo(10.0), Default: &apiextensionsv1.JSON{Raw: []byte("1")}}
	fields["ports"] = apiextensionsv1.JSONSchemaProps{Type: "array", XListType: ptrTo("map"), XListMapKeys: []string{"name"}, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Required: []string{"name"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name": {Type: "string"}, "port": {XIntOrString: true}, "protocol": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"TCP"`)}, {Raw: []byte(`"UDP"`)}}},
		},
	}}}
	fields["labels"] = apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
	fields["extra"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec":   {Type: "object", Properties: fields, XValidations: apiextensionsv1.ValidationRules{{Rule: "self.replicas <= 10"}}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "boolean"}, "observedGeneration": {Type: "integer", Format: "int64"}}},
	}}
}()

// benchCRD is the i-th Established CRD of the benchmark.
func benchCRD(i int) *CRD {
	group := fmt.Sprintf("g%03d.bench.example.com", i/10)
	kind := fmt.Sprintf("Thing%04d", i)
	plural := strings.ToLower(kind) + "s"
	crd := &CRD{}
	crd.Name, crd.UID, crd.Generation, crd.ResourceVersion = plural+"."+group, "uid", 1, "1"
	crd.Spec.Group, crd.Spec.Scope = group, apiextensionsv1.NamespaceScoped
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List", ShortNames: []string{fmt.Sprintf("t%d", i)}, Categories: []string{"all"}}
	crd.Status.AcceptedNames = crd.Spec.Names
	for _, v := range []string{"v1", "v1beta1"} {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: v == "v1",
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: benchSchema.DeepCopy()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
		})
	}
	crd.Status.StoredVersions = []string{"v1"}
	setCondition(crd, condition{Type: condNamesAccepted, Status: apiextensionsv1.ConditionTrue})
	setCondition(crd, condition{Type: condEstablished, Status: apiextensionsv1.ConditionTrue})
	return crd
}

// publisher is what the registry keeps for publishing: discovery and the
// OpenAPI documents, fed CRD changes as the informer does.
type publisher struct {
	discovery *discoveryIndex
	openapi   *openapi.Builder
}

func newPublisher() *publisher {
	return &publisher{discovery: newDiscoveryIndex(), openapi: openapi.New()}
}

func (p *publisher) update(old, new *CRD) {
	p.discovery.update(old, new)
	p.openapi.Update(old, new)
}

// publish renders every document a client would read after a change of
// crd: /apis (legacy and aggregated), the group's and version's documents,
// the OpenAPI v3 index and group-version document, and /openapi/v2.
func (p *publisher) publish(tb testing.TB, crd *CRD) int {
	tb.Helper()
	n := 0
	for _, accept := range []string{"", aggregatedAccept} {
		_, d, err := p.discovery.document("", "", accept)
		if err != nil {
			tb.Fatal(err)
		}
		n += len(d.body)
	}
	for _, v := range []string{"", "v1"} {
		_, d, err := p.discovery.document(crd.Spec.Group, v, "")
		if err != nil {
			tb.Fatal(err)
		}
		n += len(d.body)
	}
	n += len(p.openapi.Index().Body)
	d, ok := p.openapi.Get("apis/" + crd.Spec.Group + "/v1")
	if !ok {
		tb.Fatal("no v3 document")
	}
	n += len(d.Body)
	n += len(p.openapi.V2().Body)
	return n
}

// cpuTime is the CPU time this process used so far: on a busy machine the
// benchmarks report it next to wall time ("cpu-ms/op").
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

func benchCRDSet() []*CRD { return crdSet(benchCRDs) }

func crdSet(n int) []*CRD {
	crds := make([]*CRD, n)
	for i := range crds {
		crds[i] = benchCRD(i)
	}
	return crds
}

// BenchmarkPublishFullBuild: everything from scratch, as after a restart.
func BenchmarkPublishFullBuild(b *testing.B) {
	crds := benchCRDSet()
	var size int
	start := cpuTime()
	for b.Loop() {
		p := newPublisher()
		for _, crd := range crds {
			p.update(nil, crd)
		}
		size = p.publish(b, crds[0])
	}
	reportCPU(b, start)
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// changed returns crd with a spec change (a new short name) accepted.
func changed(crd *CRD, n int) *CRD {
	c := crd.DeepCopy()
	c.Generation++
	c.ResourceVersion = fmt.Sprint(n + 2)
	c.Spec.Names.ShortNames = []string{fmt.Sprintf("x%d", n)}
	c.Status.AcceptedNames = c.Spec.Names
	return c
}

// BenchmarkPublishOneChange: one CRD's spec changes among 1,000; time until
// every document reflects it.
func BenchmarkPublishOneChange(b *testing.B) {
	crds := benchCRDSet()
	p := newPublisher()
	for _, crd := range crds {
		p.update(nil, crd)
	}
	p.publish(b, crds[0])
	cur := crds[500]
	i := 0
	start := cpuTime()
	for b.Loop() {
		next := changed(cur, i)
		p.update(cur, next)
		p.publish(b, next)
		cur = next
		i++
	}
	reportCPU(b, start)
}

// BenchmarkPublishOneChangeV2Protobuf adds the protobuf form of
// /openapi/v2 (what kubectl asks for), built lazily on its first request.
func BenchmarkPublishOneChangeV2Protobuf(b *testing.B) {
	crds := benchCRDSet()
	p := newPublisher()
	for _, crd := range crds {
		p.update(nil, crd)
	}
	if _, err := p.openapi.V2Proto(); err != nil {
		b.Fatal(err)
	}
	cur := crds[500]
	i := 0
	start := cpuTime()
	for b.Loop() {
		next := changed(cur, i)
		p.update(cur, next)
		if _, err := p.openapi.V2Proto(); err != nil {
			b.Fatal(err)
		}
		cur = next
		i++
	}
	reportCPU(b, start)
}

// TestPublishIncremental: with a hundred CRDs, a spec change shows in
// every document, and a status-only change re-renders nothing. (The
// benchmarks measure the same with 1,000.)
func TestPublishIncremental(t *testing.T) {
	crds := crdSet(100)
	p := newPublisher()
	start := time.Now()
	for _, crd := range crds {
		p.update(nil, crd)
	}
	p.publish(t, crds[0])
	full := time.Since(start)

	start = time.Now()
	next := changed(crds[50], 0)
	p.update(crds[50], next)
	p.publish(t, next)
	t.Logf("%d CRDs: full build %v, one change republished in %v", len(crds), full, time.Since(start))
	short, _ := json.Marshal(next.Spec.Names.ShortNames)
	if _, d, _ := p.discovery.document("", "", aggregatedAccept); !strings.Contains(string(d.body), string(short)) {
		t.Error("change not in aggregated discovery")
	}
	if d, _ := p.openapi.Get("apis/" + next.Spec.Group + "/v1"); !strings.Contains(string(d.Body), next.Spec.Names.Kind) {
		t.Error("change not in OpenAPI v3")
	}

	// a status-only change renders nothing
	status := next.DeepCopy()
	status.ResourceVersion = "999"
	status.Status.StoredVersions = []string{"v1", "v1beta1"}
	_, before, _ := p.discovery.document("", "", aggregatedAccept)
	v2, index := p.openapi.V2(), p.openapi.Index()
	p.update(next, status)
	if _, after, _ := p.discovery.document("", "", aggregatedAccept); after.etag != before.etag || p.openapi.V2() != v2 || p.openapi.Index() != index {
		t.Error("a status-only change re-rendered documents")
	}
}
