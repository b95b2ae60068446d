package validator

// The performance proof: this validator's admission pipeline against
// upstream's (k8s.io/apiextensions-apiserver's decoder steps and
// strategies, test-only) on the same corpus, in the same run.
//
//	go test -run '^$' -bench 'Corpus|CompileMemory' -count 5 -cpu 1 .
//
// BenchmarkCorpus reports objects/s (the corpus is decoded from JSON,
// pruned, defaulted and validated: schema, metadata, list types, embedded
// resources and CEL rules, with ratcheting on updates). BenchmarkCompile-
// Memory reports the heap a compiled CRD version keeps (retained-B/crd)
// and what compiling it allocates.

import (
	"context"
	"runtime"
	"testing"
	"time"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

type corpusItem struct {
	crd      string
	sub      string
	obj, old string
}

// corpus is a mix of creates and updates, mostly valid, across the
// reference CronTab (no CEL), a Widget (defaults, list-type map, embedded
// resource, status and scale) and the CEL CronTab (11 rules of every
// scope, transition rules).
var corpus = []corpusItem{
	{crd: "crontabs.stable.example.com", obj: cronTab("  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image\n  replicas: 5\n")},
	{crd: "crontabs.stable.example.com", obj: cronTab("  cronSpec: \"* * * *\"\n  image: my-awesome-cron-image\n  replicas: 15\n")},
	{crd: "widgets.example.com", obj: widgetMeta + "spec: {size: small, ports: [{name: a, port: 80}, {name: b, port: 443}], template: {apiVersion: v1, kind: Pod, metadata: {name: p}}}\n"},
	{crd: "widgets.example.com", sub: "status",
		obj: widgetMeta + "spec: {size: small}\nstatus: {phase: Ready, replicas: 2}\n",
		old: widgetMeta + "spec: {size: small}\n"},
	{crd: celCRD, obj: celTab(celSpec)},
	{crd: celCRD, obj: celTab(celSpec)},
	{crd: celCRD, obj: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:2', paused: true, env: [{name: A, value: '1'}, {name: B}], labels: {app: x, tier: y}}\n"),
		old: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:1', env: [{name: A, value: '0'}], labels: {app: x}}\n")},
	{crd: celCRD, sub: "status",
		obj: celTab(celSpec + "status: {phase: Running, availableReplicas: 2}\n"),
		old: celTab(celSpec + "status: {phase: Pending}\n")},
	{crd: celCRD, obj: celTab("spec: {cronSpec: '* * *', image: nginx, replicas: 20, env: [{name: lower}]}\n")},
}

type preparedItem struct {
	cv       *compiledVersion
	up       *upstreamCRD
	sub      string
	obj, old []byte
}

func prepareCorpus(b *testing.B) []preparedItem {
	svc := newDirService(b)
	var out []preparedItem
	for _, it := range corpus {
		crd, err := svc.src.Get(context.Background(), &commonv1.CRDRef{Name: it.crd})
		if err != nil {
			b.Fatal(err)
		}
		cv, err := svc.compiled.get(crd, "v1")
		if err != nil {
			b.Fatal(err)
		}
		p := preparedItem{cv: cv, up: newUpstreamCRD(b, crd, "v1"), sub: it.sub, obj: toJSON(b, it.obj)}
		if it.old != "" {
			p.old = toJSON(b, it.old)
		}
		out = append(out, p)
	}
	return out
}

// ours is Admit without the gRPC layer and the encoding of the result.
func (p *preparedItem) ours(ctx context.Context) int {
	a := admission{cv: p.cv, update: p.old != nil, status: p.sub == "status"}
	obj, _, err := a.decode(p.obj, false)
	if err != nil {
		panic(err)
	}
	if a.update {
		if a.old, _, err = a.decode(p.old, true); err != nil {
			panic(err)
		}
	}
	return len(a.validate(ctx, obj))
}

func (p *preparedItem) upstream(b *testing.B) int {
	rec := &warningRecorder{}
	obj := p.up.decode(b, p.obj, false)
	switch {
	case p.sub == "status":
		return len(p.up.status(rec, obj, p.up.decode(b, p.old, true)))
	case p.old != nil:
		return len(p.up.update(rec, obj, p.up.decode(b, p.old, true)))
	}
	return len(p.up.create(rec, obj))
}

func BenchmarkCorpus(b *testing.B) {
	items := prepareCorpus(b)
	ctx := context.Background()
	// Both pipelines agree on the number of errors of each item.
	for i := range items {
		if o, u := items[i].ours(ctx), items[i].upstream(b); o != u {
			b.Fatalf("corpus item %d: %d errors, upstream %d", i, o, u)
		}
	}
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range items {
				items[i].ours(ctx)
			}
		}
		b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run("upstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range items {
				items[i].upstream(b)
			}
		}
		b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "objects/s")
	})
}

// BenchmarkCorpusInterleaved runs both pipelines in alternation (a few
// milliseconds each), so that both see the same machine load, and reports
// each one's objects/s and their ratio (ours/upstream).
func BenchmarkCorpusInterleaved(b *testing.B) {
	items := prepareCorpus(b)
	ctx := context.Background()
	const rounds = 8 // corpus passes per turn
	var oursT, upT time.Duration
	var n int
	for b.Loop() {
		start := time.Now()
		for range rounds {
			for i := range items {
				items[i].ours(ctx)
			}
		}
		mid := time.Now()
		for range rounds {
			for i := range items {
				items[i].upstream(b)
			}
		}
		oursT += mid.Sub(start)
		upT += time.Since(mid)
		n += rounds * len(items)
	}
	ours, up := float64(n)/oursT.Seconds(), float64(n)/upT.Seconds()
	b.ReportMetric(ours, "ours-objects/s")
	b.ReportMetric(up, "upstream-objects/s")
	b.ReportMetric(ours/up, "ratio")
}

// BenchmarkCompileMemory compiles the CRD versions of the corpus (a copy
// per iteration, as a new generation would be) and reports the heap they
// keep per CRD version.
func BenchmarkCompileMemory(b *testing.B) {
	svc := newDirService(b)
	var crds []*CRD
	for _, name := range []string{"crontabs.stable.example.com", "widgets.example.com", celCRD} {
		crd, err := svc.src.Get(context.Background(), &commonv1.CRDRef{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		crds = append(crds, crd)
	}
	measure := func(b *testing.B, compile func(crd *CRD) any) {
		b.ReportAllocs()
		const n = 20
		var retained uint64
		for b.Loop() {
			keep := make([]any, 0, n*len(crds))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range n {
				for _, crd := range crds {
					keep = append(keep, compile(crd.DeepCopy()))
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			retained += after.HeapAlloc - before.HeapAlloc
			runtime.KeepAlive(keep)
		}
		b.ReportMetric(float64(retained)/float64(b.N*n*len(crds)), "retained-B/crd")
	}
	b.Run("ours", func(b *testing.B) {
		measure(b, func(crd *CRD) any {
			cv, err := compileVersion(crd, "v1")
			if err != nil {
				b.Fatal(err)
			}
			return cv
		})
	})
	b.Run("upstream", func(b *testing.B) {
		measure(b, func(crd *CRD) any { return newUpstreamCRD(b, crd, "v1") })
	})
}

var _ = validatorv1.Operation_OPERATION_CREATE
