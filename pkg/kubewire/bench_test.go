package kubewire

import (
	"bytes"
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	sigsjson "sigs.k8s.io/json"
)

// The list benchmarks encode a LIST of 1,000 realistic CRDs (about 14 KiB
// of JSON each) from the registry's JSON documents.

func benchList(b *testing.B, n int, cfg EncoderConfig, warm bool) {
	_, docs := realisticCRDs(b, n)
	meta := ListMeta{ResourceVersion: "123456"}
	e := NewEncoder(cfg)
	if warm {
		if _, err := e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", meta, docs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		if !warm {
			e = NewEncoder(cfg)
		}
		out, err := e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", meta, docs)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/list")
}

// BenchmarkListProtobufCold: every item decoded from JSON and marshaled
// (an empty cache; the items on GOMAXPROCS goroutines).
func BenchmarkListProtobufCold(b *testing.B) { benchList(b, 1000, EncoderConfig{}, false) }

// BenchmarkListProtobufColdOneWorker: the same on one goroutine.
func BenchmarkListProtobufColdOneWorker(b *testing.B) {
	benchList(b, 1000, EncoderConfig{Workers: 1}, false)
}

// BenchmarkListProtobufWarm: every item's encoding cached (the CRDs did not
// change since the last LIST).
func BenchmarkListProtobufWarm(b *testing.B) { benchList(b, 1000, EncoderConfig{}, true) }

// BenchmarkListJSON is the JSON response of the same list as the gateway
// assembles it (items spliced in as they are).
func BenchmarkListJSON(b *testing.B) {
	_, docs := realisticCRDs(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		buf.WriteString(`{"apiVersion":"apiextensions.k8s.io/v1","items":[`)
		for i, d := range docs {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(d)
		}
		buf.WriteString(`],"kind":"CustomResourceDefinitionList","metadata":{"resourceVersion":"123456"}}`)
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes/list")
}

// BenchmarkListUpstreamSerializer is upstream's path for comparison: the
// typed list (already decoded) through the protobuf serializer.
func BenchmarkListUpstreamSerializer(b *testing.B) {
	crds, _ := realisticCRDs(b, 1000)
	list := &apiextensionsv1.CustomResourceDefinitionList{ListMeta: metav1.ListMeta{ResourceVersion: "123456"}}
	for _, c := range crds {
		list.Items = append(list.Items, *c)
	}
	list.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	s := protobuf.NewSerializer(nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var buf bytes.Buffer
		if err := s.Encode(list, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchOne(b *testing.B, warm bool) {
	_, docs := realisticCRDs(b, 1)
	e := NewEncoder(EncoderConfig{CacheEntries: -1})
	if warm {
		e = NewEncoder(EncoderConfig{})
		if _, err := e.Object(docs[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Object(docs[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetProtobufCold encodes one CRD (JSON decoded, marshaled).
func BenchmarkGetProtobufCold(b *testing.B) { benchOne(b, false) }

// BenchmarkGetProtobufWarm encodes one CRD from the cache.
func BenchmarkGetProtobufWarm(b *testing.B) { benchOne(b, true) }

// BenchmarkGetJSONDecode is the cost the cold path is made of: decoding
// one CRD's JSON into the typed object.
func BenchmarkGetJSONDecode(b *testing.B) {
	_, docs := realisticCRDs(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(docs[0], &crd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetJSONPretty is the gateway's pretty JSON of one CRD (curl).
func BenchmarkGetJSONPretty(b *testing.B) {
	_, docs := realisticCRDs(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		var buf bytes.Buffer
		if err := json.Indent(&buf, docs[0], "", "  "); err != nil {
			b.Fatal(err)
		}
	}
}
