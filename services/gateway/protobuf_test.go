package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// Kubernetes protobuf on the CRD API and the custom resources' read paths
// (issue 12), over real HTTP against the gateway and its real backends;
// the bodies are encoded and decoded with upstream's serializer.

const pbType = "application/vnd.kubernetes.protobuf"

var pbScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

var pbSerializer = protobuf.NewSerializer(pbScheme, pbScheme)

func pbEncode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := pbSerializer.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pbDecode(t *testing.T, data []byte, into runtime.Object) runtime.Object {
	t.Helper()
	obj, _, err := pbSerializer.Decode(data, nil, into)
	if err != nil {
		t.Fatalf("decode protobuf: %v (%q)", err, data)
	}
	return obj
}

func pbCRD(name string) *apiextensionsv1.CustomResourceDefinition {
	plural, group, _ := strings.Cut(name, ".")
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pb": "yes"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "Gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// pbStatus decodes a protobuf Status answer and checks its code.
func pbStatus(t *testing.T, resp *http.Response, body []byte, code int) *metav1.Status {
	t.Helper()
	if resp.StatusCode != code || resp.Header.Get("Content-Type") != pbType {
		t.Fatalf("want %d in protobuf, got %d %s: %q", code, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	st := pbDecode(t, body, &metav1.Status{}).(*metav1.Status)
	if int(st.Code) != code {
		t.Fatalf("Status %+v", st)
	}
	return st
}

func TestProtobufCRDLifecycle(t *testing.T) {
	g := newTestGateway(t)
	accept := pbType + ", */*"

	// create in protobuf, answered in protobuf
	resp, body := g.do("POST", crdsPath, pbEncode(t, pbCRD("gadgets.pb.example.com")), "Content-Type", pbType, "Accept", accept)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != pbType {
		t.Fatalf("create: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	created := pbDecode(t, body, &apiextensionsv1.CustomResourceDefinition{}).(*apiextensionsv1.CustomResourceDefinition)
	if created.Name != "gadgets.pb.example.com" || created.UID == "" || created.Spec.Names.ListKind != "GadgetList" {
		t.Fatalf("created %+v", created.ObjectMeta)
	}
	// get and list in protobuf
	resp, body = g.do("GET", crdsPath+"/gadgets.pb.example.com", nil, "Accept", accept)
	if got := pbDecode(t, body, &apiextensionsv1.CustomResourceDefinition{}).(*apiextensionsv1.CustomResourceDefinition); resp.StatusCode != 200 || got.UID != created.UID {
		t.Fatalf("get: %d %+v", resp.StatusCode, got.ObjectMeta)
	}
	g.expect(http.StatusCreated, "POST", crdsPath, pbCRDJSON("others.pb.example.com"))
	resp, body = g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", accept)
	list := pbDecode(t, body, &apiextensionsv1.CustomResourceDefinitionList{}).(*apiextensionsv1.CustomResourceDefinitionList)
	if resp.StatusCode != 200 || len(list.Items) != 2 || list.ResourceVersion == "" || list.Items[0].Name != "gadgets.pb.example.com" {
		t.Fatalf("list: %d %d items", resp.StatusCode, len(list.Items))
	}
	// a list read again at the same resourceVersion (the controllers
	// settle the new CRDs' conditions first) is the same bytes, its items
	// from the encoder's cache
	for i := 0; ; i++ {
		_, a := g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", accept)
		_, b := g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", accept)
		la := pbDecode(t, a, &apiextensionsv1.CustomResourceDefinitionList{}).(*apiextensionsv1.CustomResourceDefinitionList)
		lb := pbDecode(t, b, &apiextensionsv1.CustomResourceDefinitionList{}).(*apiextensionsv1.CustomResourceDefinitionList)
		if la.ResourceVersion == lb.ResourceVersion {
			if !bytes.Equal(a, b) {
				t.Fatal("a list read again answered other bytes")
			}
			break
		}
		if i == 50 {
			t.Fatal("the CRDs never settled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// metadata only, in protobuf
	resp, body = g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", pbType+";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if pl := pbDecode(t, body, &metav1.PartialObjectMetadataList{}).(*metav1.PartialObjectMetadataList); resp.StatusCode != 200 || len(pl.Items) != 2 || pl.Items[1].Name != "others.pb.example.com" {
		t.Fatalf("partial list: %d %+v", resp.StatusCode, pl)
	}
	// a Table has no protobuf encoding: 406, in upstream's indented JSON
	// (no Accept clause without a transformation to encode it in)
	resp, body = g.do("GET", crdsPath+"/gadgets.pb.example.com", nil, "Accept", pbType+";as=Table;v=v1;g=meta.k8s.io")
	if resp.StatusCode != http.StatusNotAcceptable || resp.Header.Get("Content-Type") != "application/json" || !bytes.HasPrefix(body, []byte("{\n  \"kind\": \"Status\"")) {
		t.Fatalf("Table in protobuf: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// a 404 in protobuf
	resp, body = g.do("GET", crdsPath+"/missing.pb.example.com", nil, "Accept", accept)
	if st := pbStatus(t, resp, body, http.StatusNotFound); st.Reason != metav1.StatusReasonNotFound {
		t.Fatalf("404: %+v", st)
	}

	// a protobuf watch: length-prefixed WatchEvent frames
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.srv.URL+crdsPath+"?watch=true&labelSelector=pb%3Dyes&resourceVersion="+list.ResourceVersion, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept", accept)
	wresp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer wresp.Body.Close()
	if ct := wresp.Header.Get("Content-Type"); ct != pbType+";stream=watch" {
		t.Fatalf("watch Content-Type %q", ct)
	}

	// update in protobuf (the watch sees it)
	_, body = g.do("GET", crdsPath+"/gadgets.pb.example.com", nil, "Accept", pbType)
	current := pbDecode(t, body, &apiextensionsv1.CustomResourceDefinition{}).(*apiextensionsv1.CustomResourceDefinition)
	current.Labels["updated"] = "yes"
	resp, body = g.do("PUT", crdsPath+"/gadgets.pb.example.com", pbEncode(t, current), "Content-Type", pbType, "Accept", accept)
	updated := pbDecode(t, body, &apiextensionsv1.CustomResourceDefinition{}).(*apiextensionsv1.CustomResourceDefinition)
	if resp.StatusCode != 200 || updated.Labels["updated"] != "yes" {
		t.Fatalf("update: %d %+v", resp.StatusCode, updated.ObjectMeta)
	}
	// (the controllers' status updates may come first)
	for i := 0; ; i++ {
		ev := readPBFrame(t, wresp.Body)
		if ev.Type != "MODIFIED" {
			t.Fatalf("watch event %s", ev.Type)
		}
		if obj := pbDecode(t, ev.Object.Raw, &apiextensionsv1.CustomResourceDefinition{}).(*apiextensionsv1.CustomResourceDefinition); obj.Labels["updated"] == "yes" {
			break
		}
		if i == 10 {
			t.Fatal("the watch never saw the update")
		}
	}

	// delete with protobuf DeleteOptions
	opts := &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}, Preconditions: &metav1.Preconditions{UID: ptrTo(created.UID)}}
	resp, body = g.do("DELETE", crdsPath+"/gadgets.pb.example.com", pbEncode(t, opts), "Content-Type", pbType, "Accept", accept)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != pbType {
		t.Fatalf("delete: %d %q", resp.StatusCode, body)
	}
	// garbage DeleteOptions: upstream's 500 with the decoder's message; nothing deleted
	resp, body = g.do("DELETE", crdsPath+"/others.pb.example.com", []byte("k8s\x00\n\xff"), "Content-Type", pbType, "Accept", accept)
	if st := pbStatus(t, resp, body, http.StatusInternalServerError); st.Message != "unexpected EOF" {
		t.Fatalf("garbage DeleteOptions: %+v", st)
	}
	g.expect(http.StatusOK, "GET", crdsPath+"/others.pb.example.com", nil)
}

func pbCRDJSON(name string) map[string]any {
	plural, group, _ := strings.Cut(name, ".")
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"pb": "yes"}},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names":    map[string]any{"plural": plural, "kind": "Other"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}},
		},
	}
}

// readPBFrame reads one frame of a protobuf watch stream.
func readPBFrame(t *testing.T, r io.Reader) *metav1.WatchEvent {
	t.Helper()
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		t.Fatalf("watch frame: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r, frame); err != nil {
		t.Fatalf("watch frame: %v", err)
	}
	ev := &metav1.WatchEvent{}
	if err := ev.Unmarshal(frame); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestProtobufBadBodies: protobuf bodies that do not decode are 4xx Status
// errors with upstream's wording, nothing is written, and the server keeps
// serving.
func TestProtobufBadBodies(t *testing.T) {
	g := newTestGateway(t)
	good := pbEncode(t, pbCRD("bads.pb.example.com"))
	huge := append(append([]byte{}, good...), make([]byte, 4<<20)...)
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		code              int
		message           string
	}{
		{"truncated", pbType, good[:len(good)/2], 400, "the object provided is unrecognized (must be of type CustomResourceDefinition): unexpected EOF ("},
		{"wrong magic", pbType, append([]byte("k8s\x01"), good[4:]...), 400, "the object provided is unrecognized (must be of type CustomResourceDefinition): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"},
		{"only magic", pbType, []byte("k8s\x00"), 400, "the object provided is unrecognized (must be of type CustomResourceDefinition): empty body (6b387300)"},
		{"Status kind", pbType, pbEncode(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Message: "x"}), 400, `Status in version "v1" cannot be handled as a CustomResourceDefinition`},
		{"4 MiB", pbType, huge, 413, "Request entity too large: limit is 3145728"},
		{"YAML Content-Type", "application/yaml", good, 400, ""},
		{"cbor", "application/cbor", []byte{0xa1}, 415, "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := g.do("POST", crdsPath, tc.body, "Content-Type", tc.contentType, "Accept", pbType)
			st := pbStatus(t, resp, body, tc.code)
			if !strings.HasPrefix(st.Message, tc.message) {
				t.Fatalf("message %q, want %q", st.Message, tc.message)
			}
		})
	}
	resp, _ := g.do("GET", crdsPath+"/bads.pb.example.com", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a bad body made a CRD: %d", resp.StatusCode)
	}
	// the same body, good, still creates it
	resp, body := g.do("POST", crdsPath, good, "Content-Type", pbType)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
}

// TestProtobufCustomResources: custom resources stay JSON; protobuf is
// served for their metadata only, a plain protobuf Accept is the 406 (in
// protobuf), and a protobuf body is a 400 whatever the field validation.
func TestProtobufCustomResources(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	crontabs := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"cronSpec": "* * * * *"}))

	resp, body := g.do("GET", crontabs+"/a", nil, "Accept", pbType)
	if st := pbStatus(t, resp, body, http.StatusNotAcceptable); !strings.HasPrefix(st.Message, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf") {
		t.Fatalf("406: %+v", st)
	}
	resp, body = g.do("GET", crontabs+"/a", nil, "Accept", pbType+";as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	if pm := pbDecode(t, body, &metav1.PartialObjectMetadata{}).(*metav1.PartialObjectMetadata); resp.StatusCode != 200 || pm.Name != "a" || pm.Namespace != "default" {
		t.Fatalf("partial: %d %+v", resp.StatusCode, pm)
	}
	resp, body = g.do("GET", crontabs, nil, "Accept", pbType+";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if pl := pbDecode(t, body, &metav1.PartialObjectMetadataList{}).(*metav1.PartialObjectMetadataList); resp.StatusCode != 200 || len(pl.Items) != 1 {
		t.Fatalf("partial list: %d %+v", resp.StatusCode, pl)
	}
	for _, fv := range []string{"", "?fieldValidation=Strict", "?fieldValidation=Ignore"} {
		resp, body = g.do("POST", crontabs+fv, []byte("k8s\x00\n\x02\n\x00"), "Content-Type", pbType)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `CronTab in version \"v1\" cannot be handled as a CronTab`) {
			t.Fatalf("protobuf body %q: %d %s", fv, resp.StatusCode, body)
		}
	}
	g.expect(http.StatusOK, "GET", crontabs+"/a", nil)
}

// TestGzipResponses: a response over 128 KiB is gzipped when the client
// accepts gzip (Content-Encoding, Vary), a smaller one is not, and a
// watch never is.
func TestGzipResponses(t *testing.T) {
	g := newTestGateway(t)
	big := pbCRDJSON("bigs.gz.example.com")
	big["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "description": strings.Repeat("x", 200<<10)}}
	g.expect(http.StatusCreated, "POST", crdsPath, big)
	g.expect(http.StatusCreated, "POST", crdsPath, pbCRDJSON("smalls.gz.example.com"))
	get := func(path, ae string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", g.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := g.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, tc := range []struct {
		path, ae string
		gzipped  bool
	}{
		{crdsPath + "/bigs.gz.example.com", "gzip", true},
		{crdsPath + "/bigs.gz.example.com", "br, gzip", true},
		{crdsPath + "/bigs.gz.example.com", "gzip;q=1", false}, // upstream reads exact tokens
		{crdsPath + "/bigs.gz.example.com", "identity", false},
		{crdsPath + "/smalls.gz.example.com", "gzip", false},
		{crdsPath, "gzip", true},
	} {
		resp, body := get(tc.path, tc.ae)
		gz := resp.Header.Get("Content-Encoding") == "gzip"
		if resp.StatusCode != 200 || gz != tc.gzipped || gz != (resp.Header.Get("Vary") == "Accept-Encoding") {
			t.Errorf("%s %q: %d Content-Encoding %q Vary %q", tc.path, tc.ae, resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
		}
		if gz && (len(body) > 100<<10 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b})) {
			t.Errorf("%s: %d bytes, not gzip", tc.path, len(body))
		}
	}
	// OpenAPI as kube-openapi serves it: v2 through a gzip handler (1400
	// bytes, q-values), Vary: Accept-Encoding and Accept; v3 documents
	// Vary: Accept
	resp, body := get("/openapi/v2", "gzip")
	if vary := resp.Header.Values("Vary"); resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || strings.Join(vary, ",") != "Accept-Encoding,Accept" || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Errorf("/openapi/v2: %d %q %v", resp.StatusCode, resp.Header.Get("Content-Encoding"), vary)
	}
	if resp, _ := get("/openapi/v2", "gzip;q=0"); resp.Header.Get("Content-Encoding") != "" || len(resp.Header.Values("Vary")) != 2 {
		t.Errorf("/openapi/v2 without gzip: %v", resp.Header)
	}
	if resp, _ := get("/openapi/v3/apis/apiextensions.k8s.io/v1", ""); resp.StatusCode != 200 || strings.Join(resp.Header.Values("Vary"), ",") != "Accept" {
		t.Errorf("/openapi/v3: %d %v", resp.StatusCode, resp.Header)
	}

	// a watch is not compressed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.srv.URL+crdsPath+"?watch=true&timeoutSeconds=1", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("watch compressed")
	}
}
