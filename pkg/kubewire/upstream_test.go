package kubewire

import (
	"bytes"
	"strings"
	"testing"
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
		// last: upstream's handler panics (no strict protobuf decoder) and
		// the connection is closed without a response
		{name: "cr create protobuf", method: "POST", path: crsPath, contentType: pb, body: func(t testing.TB) []byte { return crdProto(t, "crs") }},
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
