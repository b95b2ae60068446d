package kubewire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// probe is one request to upstream.
type probe struct {
	name                string
	method, path        string
	accept, contentType string
	body                func(testing.TB) []byte
}

func probes() []probe {
	get := func(name, path, accept string) probe {
		return probe{name: name, method: "GET", path: path, accept: accept}
	}
	create := func(name, ct string, body func(testing.TB) []byte) probe {
		return probe{name: name, method: "POST", path: crdsPath, contentType: ct, accept: "application/json", body: body}
	}
	pb := ContentTypeProtobuf
	return []probe{
		get("crd get protobuf", crdPath, pb),
		get("crd get pb,json", crdPath, pb+", application/json"),
		get("crd get q json<pb", crdPath, "application/json;q=0.5, "+pb+";q=0.9"),
		get("crd get q pb<yaml", crdPath, pb+";q=0.1, application/yaml"),
		get("crd get pb table", crdPath, protoTable),
		get("crd get pb table,json", crdPath, protoTable+", application/json"),
		get("crd get pb pom", crdPath, protoPOM),
		get("crd get pb pom v1beta1", crdPath, strings.Replace(protoPOM, "v=v1", "v=v1beta1", 1)),
		get("crd get cbor", crdPath, "application/cbor"),
		get("crd get text/html", crdPath, "text/html"),
		get("crd get as=Foo", crdPath, "application/json;as=Foo;g=meta.k8s.io;v=v1"),
		get("crd get application/*", crdPath, "application/*"),
		get("crd get sv=v2", crdPath, "application/json;sv=v2"),
		get("crd get yaml stream", crdPath, "application/yaml;stream=watch"),
		get("crd get json q=0", crdPath, "application/json;q=0"),
		get("crd get */*", crdPath, "*/*"),
		get("crd get pb stream", crdPath, pb+";stream=watch"),
		get("crd get json,text/html", crdPath, "application/json, text/html"),
		get("crd get text/html,*/*", crdPath, "text/html, */*;q=0.1"),
		get("crd get pb pretty", crdPath, "application/json;pretty=1"),
		get("crd list protobuf", crdsPath, pb),
		get("crd list pb poml", crdsPath, protoPOML),
		get("cr get protobuf", crPath, pb),
		get("cr get pb,json", crPath, pb+", application/json"),
		get("cr get pb pom", crPath, protoPOM),
		get("cr get pb table", crPath, protoTable),
		get("cr get cbor", crPath, "application/cbor"),
		get("cr get application/*", crPath, "application/*"),
		get("cr get text/html,*/*", crPath, "text/html, */*;q=0.1"),
		get("cr get text/html", crPath, "text/html"),
		get("cr get yaml table", crPath, "application/yaml;as=Table;g=meta.k8s.io;v=v1"),
		get("cr list protobuf", crsPath, pb),
		get("cr list pb poml", crsPath, protoPOML),
		get("cr list json table", crsPath, "application/json;as=Table;g=meta.k8s.io;v=v1"),
		get("scale get protobuf", scalePath, pb),
		get("scale get pb pom", scalePath, protoPOM),
		get("apis protobuf", "/apis", pb),
		get("apis aggregated pb", "/apis", aggregated),
		get("apis aggregated v2beta1", "/apis", strings.Replace(aggregated, "v=v2", "v=v2beta1", 1)),
		get("apis aggregated v2beta1,json", "/apis", strings.Replace(aggregated, "v=v2", "v=v2beta1", 1)+", application/json"),
		get("apis text/html", "/apis", "text/html"),
		get("apis table", "/apis", "application/json;as=Table;g=meta.k8s.io;v=v1"),
		get("apis group protobuf", "/apis/apiextensions.k8s.io", pb),
		get("apis group aggregated", "/apis/apiextensions.k8s.io", aggregated),
		get("apis version protobuf", "/apis/apiextensions.k8s.io/v1", pb),
		get("api protobuf", "/api", pb),
		get("crd watch protobuf", crdsPath+"?watch=1&timeoutSeconds=1", pb),
		get("crd watch yaml", crdsPath+"?watch=1&timeoutSeconds=1", "application/yaml"),
		get("cr watch protobuf", crsPath+"?watch=1&timeoutSeconds=1", pb),
		get("cr watch pb pom", crsPath+"?watch=1&timeoutSeconds=1", protoPOM),
		create("crd create protobuf", pb, func(t testing.TB) []byte { return crdProto(t, "pbcreates") }),
		create("crd create truncated", pb, func(t testing.TB) []byte { b := crdProto(t, "truncs"); return b[:len(b)/2] }),
		create("crd create wrong magic", pb, func(t testing.TB) []byte { b := crdProto(t, "magics"); b[3] = 1; return b }),
		create("crd create only magic", pb, func(testing.TB) []byte { return []byte("k8s\x00") }),
		create("crd create Status kind", pb, statusProto),
		create("crd create Pod kind", pb, func(t testing.TB) []byte { return podKindProto(t, "pods") }),
		create("crd create no kind", pb, func(t testing.TB) []byte { return noKindProto(t, "nokinds") }),
		create("crd create v1beta1", pb, func(t testing.TB) []byte { return crdProtoV1beta1(t, "betas") }),
		create("crd create unknown fields", pb, func(t testing.TB) []byte { return crdProtoUnknownField(t, "unknowns") }),
		create("crd create 4MiB", pb, func(t testing.TB) []byte {
			b := crdProto(t, "bigs")
			return append(b, bytes.Repeat([]byte{0}, 4<<20)...)
		}),
		create("crd create ct pb body json", pb, func(t testing.TB) []byte { return readJSON(t, "crontab-crd.yaml") }),
		create("crd create ct json body pb", "application/json", func(t testing.TB) []byte { return crdProto(t, "jsonpbs") }),
		create("crd create ct yaml body pb", "application/yaml", func(t testing.TB) []byte { return crdProto(t, "yamlpbs") }),
		create("crd create text/plain", "text/plain", func(t testing.TB) []byte { return readJSON(t, "crontab-crd.yaml") }),
		create("crd create cbor", "application/cbor", func(t testing.TB) []byte { return readJSON(t, "crontab-crd.yaml") }),
		create("crd create bad ct", "application/json;;", func(t testing.TB) []byte { return readJSON(t, "crontab-crd.yaml") }),
		{name: "crd update protobuf", method: "PUT", path: crdsPath + "/pbcreates.stable.example.com", contentType: pb, body: func(t testing.TB) []byte { return crdProto(t, "pbcreates") }},
		{name: "cr create protobuf ignore", method: "POST", path: crsPath + "?fieldValidation=Ignore", contentType: pb, body: func(t testing.TB) []byte { return crdProto(t, "crs") }},
		{name: "cr create protobuf garbage ignore", method: "POST", path: crsPath + "?fieldValidation=Ignore", contentType: pb, body: func(testing.TB) []byte { return []byte("k8s\x00\x0a\xff") }},
		{name: "cr create text/plain", method: "POST", path: crsPath, contentType: "text/plain", body: func(t testing.TB) []byte { return readJSON(t, "crontab-valid.yaml") }},
		{name: "crd delete pb options", method: "DELETE", path: crdsPath + "/pbcreates.stable.example.com", contentType: pb, body: deleteOptionsProto},
		{name: "crd delete pb garbage", method: "DELETE", path: crdsPath + "/nothere.stable.example.com", contentType: pb, body: func(testing.TB) []byte { return []byte("k8s\x00\x0a\xff") }},
		{name: "cr update protobuf ignore", method: "PUT", path: crPath + "?fieldValidation=Ignore", contentType: pb, body: func(t testing.TB) []byte { return crdProto(t, "crs") }},
		{name: "crd delete text/plain", method: "DELETE", path: crdsPath + "/nothere.stable.example.com", contentType: "text/plain", body: func(testing.TB) []byte { return []byte("{}") }},
		// (a protobuf create of a CronTab without fieldValidation=Ignore:
		// upstream's handler panics and the connection is closed without a
		// response; TestDecodeBodyUpstream checks it)
	}
}

// TestProbeUpstream prints upstream's answers to the probes (run with
// KUBEWIRE_UPSTREAM set and -v; it documents, the table tests assert).
func TestProbeUpstream(t *testing.T) {
	u := upstreamFromEnv(t)
	setupUpstream(t, u)
	for _, p := range probes() {
		h := map[string]string{}
		if p.accept != "" {
			h["Accept"] = p.accept
		}
		if p.contentType != "" {
			h["Content-Type"] = p.contentType
		}
		var body []byte
		if p.body != nil {
			body = p.body(t)
		}
		r := u.do(t, p.method, p.path, h, body)
		t.Logf("%-32s %s", p.name, r)
	}
}

// setupUpstream creates the CronTab CRD (with status and scale) and one
// CronTab.
func setupUpstream(t testing.TB, u *upstream) {
	t.Helper()
	ct := map[string]string{"Content-Type": "application/json"}
	r := u.do(t, "POST", crdsPath, ct, readJSON(t, "api-crontab-crd.yaml"))
	if r.code != 201 && r.code != 409 {
		t.Fatalf("create CRD: %s", r)
	}
	for range 50 {
		if r = u.do(t, "GET", "/apis/stable.example.com/v1", nil, nil); r.code == 200 {
			break
		}
		waitABit()
	}
	r = u.do(t, "POST", crsPath, ct, readJSON(t, "crontab-valid.yaml"))
	if r.code != 201 && r.code != 409 {
		t.Fatalf("create CR: %s", r)
	}
}

// targetPath is the probed path of a target (watch: the collection with
// watch=1).
func targetPath(t Target, watch bool) string {
	switch t {
	case TargetCRD:
		return crdPath
	case TargetCRDCollection:
		if watch {
			return crdsPath + "?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dcrontabs.stable.example.com"
		}
		return crdsPath
	case TargetCustomResource:
		if watch {
			return crsPath + "?watch=1&timeoutSeconds=1"
		}
		return crPath
	case TargetScale:
		return scalePath
	case TargetBuiltinDiscovery:
		return "/apis/apiextensions.k8s.io"
	case TargetDiscovery:
		return "/apis/stable.example.com/v1"
	}
	return ""
}

// TestNegotiateUpstream replays TestNegotiate's table against upstream
// (KUBEWIRE_UPSTREAM set): the status, the Content-Type, and for a 406
// its message and how the Status is encoded. /apis is skipped (the
// standalone apiextensions-apiserver serves none).
func TestNegotiateUpstream(t *testing.T) {
	u := upstreamFromEnv(t)
	setupUpstream(t, u)
	for _, tc := range negotiateCases() {
		path := targetPath(tc.target, tc.watch)
		if path == "" {
			continue
		}
		if strings.Contains(tc.name, " list ") && !tc.watch {
			if tc.target == TargetCustomResource {
				path = crsPath
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.accept != "" {
				h["Accept"] = tc.accept
			}
			r := u.do(t, "GET", path, h, nil)
			if tc.message == "" {
				want := tc.mediaType
				if tc.watch {
					want = Output{MediaType: tc.mediaType}.WatchContentType()
				}
				if r.code != 200 || r.contentType != want {
					t.Fatalf("upstream: %s; want 200 %s", r, want)
				}
				return
			}
			eo := tc.errorOut
			if r.code != 406 || r.contentType != eo.MediaType {
				t.Fatalf("upstream: %s; want 406 in %s", r, eo.MediaType)
			}
			var msg string
			switch eo.MediaType {
			case ContentTypeProtobuf:
				var st metav1.Status
				unk := runtime.Unknown{}
				if err := unk.Unmarshal(r.body[4:]); err != nil {
					t.Fatal(err)
				}
				if err := st.Unmarshal(unk.Raw); err != nil {
					t.Fatal(err)
				}
				msg = st.Message
			case ContentTypeYAML:
				var st metav1.Status
				if err := yaml.Unmarshal(r.body, &st); err != nil {
					t.Fatal(err)
				}
				msg = st.Message
			default:
				var st metav1.Status
				if err := json.Unmarshal(r.body, &st); err != nil {
					t.Fatal(err)
				}
				msg = st.Message
				indented := bytes.HasPrefix(r.body, []byte("{\n  "))
				if indented != eo.Raw || eo.Raw == bytes.HasSuffix(r.body, []byte("\n")) {
					t.Fatalf("upstream's Status rendering %q; want Raw=%v", r.body, eo.Raw)
				}
			}
			if msg != tc.message {
				t.Fatalf("upstream's message %q, want %q", msg, tc.message)
			}
		})
	}
}

// TestDecodeBodyUpstream replays TestDecodeBody's table against upstream
// (KUBEWIRE_UPSTREAM set): a create of customresourcedefinitions or
// crontabs with the body; a decoded CRD is created (201, or 409 when an
// earlier run created it), an error is upstream's status and message,
// an abort a connection closed without a response. The aborting cases
// run last.
func TestDecodeBodyUpstream(t *testing.T) {
	u := upstreamFromEnv(t)
	setupUpstream(t, u)
	cases := decodeCases(t)
	slices.SortStableFunc(cases, func(a, b decodeCase) int {
		switch {
		case a.abort == b.abort:
			return 0
		case a.abort:
			return 1
		}
		return -1
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := crdsPath
			if tc.target == TargetCustomResource {
				path = crsPath
			}
			if tc.validation != "" {
				path += "?fieldValidation=" + tc.validation
			}
			req, err := http.NewRequest("POST", u.url+path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+u.token)
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("Accept", "application/json")
			resp, err := u.client.Do(req)
			if tc.abort {
				if err == nil {
					_ = resp.Body.Close()
					t.Fatalf("upstream answered %d; want the connection closed", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var st struct{ Message string }
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if tc.code == 0 {
				if resp.StatusCode != 201 && resp.StatusCode != 409 {
					t.Fatalf("upstream: %d %q", resp.StatusCode, st.Message)
				}
				return
			}
			if int32(resp.StatusCode) != tc.code || st.Message != tc.message {
				t.Fatalf("upstream: %d %q\nwant %d %q", resp.StatusCode, st.Message, tc.code, tc.message)
			}
		})
	}
}
