package kubewire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// upstreamEncode is the reference: upstream's protobuf serializer on the
// typed object, as the apiserver encodes it (with and without
// streaming collection encoding, which v1.33 turns on).
func upstreamEncode(t testing.TB, obj runtime.Object, streaming bool) []byte {
	t.Helper()
	var b bytes.Buffer
	s := protobuf.NewSerializerWithOptions(nil, nil, protobuf.SerializerOptions{StreamingCollectionsEncoding: streaming})
	if err := s.Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestObjectMatchesUpstreamSerializer(t *testing.T) {
	unv := schema.GroupVersion{Version: "v1"}
	crd := realisticCRD(t, 1)
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: `customresourcedefinitions.apiextensions.k8s.io "x" not found`,
		Details: &metav1.StatusDetails{Name: "x", Group: "apiextensions.k8s.io", Kind: "customresourcedefinitions"}}
	status.SetGroupVersionKind(unv.WithKind("Status"))
	groups := &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "apiextensions.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apiextensions.k8s.io/v1", Version: "v1"}},
		PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "apiextensions.k8s.io/v1", Version: "v1"}}}}
	groups.SetGroupVersionKind(unv.WithKind("APIGroupList"))
	resources := &metav1.APIResourceList{GroupVersion: "apiextensions.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "customresourcedefinitions", SingularName: "customresourcedefinition", Kind: "CustomResourceDefinition", Verbs: metav1.Verbs{"create", "delete", "get", "list"}, ShortNames: []string{"crd", "crds"}, StorageVersionHash: "jfWCUB31mvA="},
		{Name: "customresourcedefinitions/status", Kind: "CustomResourceDefinition", Verbs: metav1.Verbs{"get", "patch", "update"}},
	}}
	resources.SetGroupVersionKind(unv.WithKind("APIResourceList"))
	versions := &metav1.APIVersions{Versions: []string{}, ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "127.0.0.1:6443"}}}
	versions.SetGroupVersionKind(unv.WithKind("APIVersions"))
	disc := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{{ObjectMeta: metav1.ObjectMeta{Name: "stable.example.com"}, Versions: []apidiscoveryv2.APIVersionDiscovery{{
		Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{{
			Resource: "crontabs", Scope: apidiscoveryv2.ScopeNamespace, SingularResource: "crontab", Verbs: []string{"get", "list"},
			ResponseKind: &metav1.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"},
			Subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: []string{"get", "patch", "update"}}},
		}},
	}}}}}
	disc.SetGroupVersionKind(apidiscoveryv2.SchemeGroupVersion.WithKind("APIGroupDiscoveryList"))
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "my-new-cron-object", Namespace: "default", UID: "u1", ResourceVersion: "7", CreationTimestamp: crd.CreationTimestamp},
		Spec: autoscalingv1.ScaleSpec{Replicas: 5}, Status: autoscalingv1.ScaleStatus{Replicas: 3, Selector: "app=cron"}}
	scale.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	pom := &metav1.PartialObjectMetadata{ObjectMeta: crd.ObjectMeta}
	pom.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	bookmark := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1234", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	bookmark.SetGroupVersionKind(crdV1)

	e := NewEncoder(EncoderConfig{})
	for _, tc := range []struct {
		name string
		obj  runtime.Object
	}{
		{"CustomResourceDefinition", crd},
		{"Status", status},
		{"APIGroupList", groups},
		{"APIResourceList", resources},
		{"APIVersions", versions},
		{"APIGroupDiscoveryList", disc},
		{"Scale", scale},
		{"PartialObjectMetadata", pom},
		{"bookmark", bookmark},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := upstreamEncode(t, tc.obj, false)
			if _, ok := tc.obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				want = v133(t, want, false)
			}
			for range 2 { // cold, then cached
				got, err := e.Object(mustJSON(t, tc.obj))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("encoding differs from upstream's serializer:\n got %x\nwant %x", got, want)
				}
			}
		})
	}
}

func TestListMatchesUpstreamSerializer(t *testing.T) {
	crds, docs := realisticCRDs(t, 40)
	// items as a typed list's items carry them: no apiVersion or kind
	bare := make([][]byte, len(crds))
	for i, c := range crds {
		c := c.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{}
		bare[i] = mustJSON(t, c)
	}
	remaining := int64(17)
	poms := make([][]byte, len(crds))
	pomItems := make([]metav1.PartialObjectMetadata, len(crds))
	for i, c := range crds {
		pomItems[i] = metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: c.ObjectMeta}
		poms[i] = mustJSON(t, pomItems[i])
	}
	for _, tc := range []struct {
		name  string
		meta  ListMeta
		docs  [][]byte
		n     int
		cache int
	}{
		{name: "empty", meta: ListMeta{ResourceVersion: "5"}},
		{name: "one", meta: ListMeta{ResourceVersion: "1001"}, docs: docs[:1], n: 1},
		{name: "40 with continue", meta: ListMeta{ResourceVersion: "99", Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", RemainingItemCount: &remaining}, docs: docs, n: 40},
		{name: "40 bare items", meta: ListMeta{ResourceVersion: "99"}, docs: bare, n: 40},
		{name: "no cache", meta: ListMeta{ResourceVersion: "99"}, docs: docs, n: 40, cache: -1},
		{name: "cache of 3", meta: ListMeta{ResourceVersion: "99"}, docs: docs, n: 40, cache: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := &apiextensionsv1.CustomResourceDefinitionList{ListMeta: metav1.ListMeta{ResourceVersion: tc.meta.ResourceVersion, Continue: tc.meta.Continue, RemainingItemCount: tc.meta.RemainingItemCount}}
			for _, c := range crds[:tc.n] {
				list.Items = append(list.Items, *c)
			}
			list.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
			want := upstreamEncode(t, list, false)
			if streamed := upstreamEncode(t, list, true); !bytes.Equal(streamed, want) {
				t.Fatal("upstream's streaming and buffered encodings differ")
			}
			want = v133(t, want, true)
			e := NewEncoder(EncoderConfig{CacheEntries: tc.cache, Workers: 2})
			for pass := range 3 {
				got, err := e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", tc.meta, tc.docs)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("pass %d: list differs from upstream's serializer (%d vs %d bytes)", pass, len(got), len(want))
				}
			}
			if tc.cache > 0 && e.Len() > tc.cache {
				t.Fatalf("cache holds %d entries, bound %d", e.Len(), tc.cache)
			}
		})
	}
	t.Run("PartialObjectMetadataList", func(t *testing.T) {
		list := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "77"}, Items: pomItems}
		list.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"))
		want := upstreamEncode(t, list, false)
		got, err := NewEncoder(EncoderConfig{}).List("meta.k8s.io/v1", "PartialObjectMetadataList", ListMeta{ResourceVersion: "77"}, poms)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("PartialObjectMetadataList differs from upstream's serializer")
		}
	})
}

func TestWatchEventMatchesUpstream(t *testing.T) {
	crd := realisticCRD(t, 3)
	e := NewEncoder(EncoderConfig{})
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"} {
		t.Run(typ, func(t *testing.T) {
			var obj runtime.Object = crd
			if typ == "ERROR" {
				s := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (5)"}
				s.SetGroupVersionKind(schema.GroupVersion{Version: "v1"}.WithKind("Status"))
				obj = s
			}
			// upstream: the object with the protobuf serializer, the event
			// with the raw serializer, a length-delimited frame
			raw := upstreamEncode(t, obj, false)
			if typ != "ERROR" {
				raw = v133(t, raw, false)
			}
			ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
			var want bytes.Buffer
			fw := protobuf.LengthDelimitedFramer.NewFrameWriter(&want)
			var evb bytes.Buffer
			if err := protobuf.NewRawSerializer(nil, nil).Encode(ev, &evb); err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Write(evb.Bytes()); err != nil {
				t.Fatal(err)
			}
			got, err := e.WatchEvent(typ, mustJSON(t, obj))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("frame differs:\n got %x\nwant %x", got[:32], want.Bytes()[:32])
			}
		})
	}
}

func TestEncodeCustomResourceNotAcceptable(t *testing.T) {
	e := NewEncoder(EncoderConfig{})
	cr := readJSON(t, "crontab-valid.yaml")
	_, errObj := e.Object(cr)
	_, errList := e.List("stable.example.com/v1", "CronTabList", ListMeta{}, [][]byte{cr})
	for _, err := range []error{errObj, errList} {
		s, ok := err.(apierrors.APIStatus)
		if !ok {
			t.Fatalf("%v is not a Status error", err)
		}
		st := s.Status()
		if st.Code != http.StatusNotAcceptable || st.Reason != metav1.StatusReasonNotAcceptable ||
			st.Message != "object *unstructured.Unstructured does not implement the protobuf marshalling interface and cannot be encoded to a protobuf message" {
			t.Fatalf("got %+v", st)
		}
	}
}

func TestItemCacheBounds(t *testing.T) {
	_, docs := realisticCRDs(t, 30)
	e := NewEncoder(EncoderConfig{CacheEntries: 10})
	for range 3 {
		if _, err := e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", ListMeta{}, docs); err != nil {
			t.Fatal(err)
		}
		if e.Len() > 10 {
			t.Fatalf("%d entries cached, bound 10", e.Len())
		}
	}
	one, err := e.Object(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	e = NewEncoder(EncoderConfig{CacheBytes: int64(len(one)) * 5 / 2})
	if _, err := e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", ListMeta{}, docs); err != nil {
		t.Fatal(err)
	}
	if e.Len() != 2 {
		t.Fatalf("%d entries of %d bytes cached under a bound of %d bytes; want 2", e.Len(), len(one), len(one)*5/2)
	}
	// a changed object (new resourceVersion) is encoded anew
	e = NewEncoder(EncoderConfig{})
	crd := realisticCRD(t, 0)
	before, err := e.Object(mustJSON(t, crd))
	if err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion = "99999"
	crd.Spec.Names.ShortNames = []string{"w"}
	after, err := e.Object(mustJSON(t, crd))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) || !bytes.Equal(after, v133(t, upstreamEncode(t, crd, false), false)) {
		t.Fatal("a new resourceVersion was served from the cache")
	}
}

// TestEncoderConcurrent lists from many goroutines through a cache smaller
// than the list (evictions racing hits); run with -race.
func TestEncoderConcurrent(t *testing.T) {
	crds, docs := realisticCRDs(t, 60)
	list := &apiextensionsv1.CustomResourceDefinitionList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
	for _, c := range crds {
		list.Items = append(list.Items, *c)
	}
	list.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	want := v133(t, upstreamEncode(t, list, false), true)
	e := NewEncoder(EncoderConfig{CacheEntries: 25, Workers: 3})
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			for range 5 {
				var got []byte
				if got, err = e.List("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", ListMeta{ResourceVersion: "9"}, docs); err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("goroutine %d: list differs", g)
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if e.Len() > 25 {
		t.Fatalf("%d entries cached, bound 25", e.Len())
	}
}
