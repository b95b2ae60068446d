package kubewire

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

// Side-by-side benchmarks against upstream (KUBEWIRE_UPSTREAM set): the
// same LIST of 1,000 CRDs and GET of one, in protobuf and JSON, end to
// end over HTTPS on loopback; then the Encoder on upstream's own JSON
// documents of those CRDs.

const benchCRDs = 1000

// seedUpstream creates the 1,000 realistic CRDs (realisticCRD without
// its server-set fields) unless they exist.
func seedUpstream(b *testing.B, u *upstream) {
	b.Helper()
	r := u.do(b, "GET", crdsPath+"?labelSelector=app.kubernetes.io/name%3Dbench&limit=1", map[string]string{"Accept": "application/json"}, nil)
	var l jsonList
	if err := json.Unmarshal(r.body, &l); err != nil {
		b.Fatalf("list: %s", r)
	}
	if len(l.Items) > 0 {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range benchCRDs {
		crd := realisticCRD(b, i)
		crd.UID, crd.ResourceVersion, crd.Generation, crd.ManagedFields = "", "", 0, nil
		body := mustJSON(b, crd)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if r := u.do(b, "POST", crdsPath, map[string]string{"Content-Type": "application/json"}, body); r.code != 201 && r.code != 409 {
				b.Errorf("create %d: %s", i, r)
			}
		})
	}
	wg.Wait()
}

func BenchmarkUpstream(b *testing.B) {
	u := upstreamFromEnv(b)
	seedUpstream(b, u)
	list := crdsPath + "?labelSelector=app.kubernetes.io/name%3Dbench"
	one := crdsPath + "/widgets0500.bench.example.com"
	for _, tc := range []struct{ name, path, accept string }{
		{"LIST/protobuf", list, ContentTypeProtobuf},
		{"LIST/json", list, ContentTypeJSON},
		{"GET/protobuf", one, ContentTypeProtobuf},
		{"GET/json", one, ContentTypeJSON},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := map[string]string{"Accept": tc.accept}
			var n int
			for b.Loop() {
				r := u.do(b, "GET", tc.path, h, nil)
				if r.code != 200 {
					b.Fatalf("%s", r)
				}
				n = len(r.body)
			}
			b.ReportMetric(float64(n), "bytes/op")
		})
	}
	// the Encoder on upstream's JSON of the same CRDs
	r := u.do(b, "GET", list, map[string]string{"Accept": ContentTypeJSON}, nil)
	var l jsonList
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Items) != benchCRDs {
		b.Fatalf("list: %d items, %v", len(l.Items), err)
	}
	items := l.items()
	// the same snapshot in protobuf (upstream's controllers may still be
	// updating the CRDs' status)
	want := u.do(b, "GET", list+"&resourceVersionMatch=Exact&resourceVersion="+l.Metadata.ResourceVersion, map[string]string{"Accept": ContentTypeProtobuf}, nil).body
	meta := ListMeta{ResourceVersion: l.Metadata.ResourceVersion}
	for _, tc := range []struct {
		name string
		warm bool
	}{{"Encoder/LIST/cold", false}, {"Encoder/LIST/warm", true}} {
		b.Run(tc.name, func(b *testing.B) {
			e := NewEncoder(EncoderConfig{})
			got, err := e.List(l.APIVersion, l.Kind, meta, items)
			if err != nil {
				b.Fatal(err)
			}
			if string(got) != string(want) {
				b.Fatal(fmt.Errorf("the Encoder's list differs from upstream's (%d vs %d bytes)", len(got), len(want)))
			}
			for b.Loop() {
				if !tc.warm {
					e = NewEncoder(EncoderConfig{})
				}
				if _, err := e.List(l.APIVersion, l.Kind, meta, items); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
