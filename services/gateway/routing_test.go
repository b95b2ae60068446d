package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/services/gateway/httpx"
	"sigs.k8s.io/yaml"
)

// routeCRD is a CRD of the routing tests: route.example.com, v1 with the
// status and scale subresources (deprecated when asked).
func routeCRD(plural, kind, scope string, deprecated bool) map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + ".route.example.com"},
		"spec": map[string]any{
			"group": "route.example.com",
			"scope": scope,
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true, "deprecated": deprecated,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				"subresources": map[string]any{
					"status": map[string]any{},
					"scale":  map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
				},
			}},
		},
	}
}

// TestRoutingAsUpstream sends, in order, the requests whose answers were
// recorded from upstream's apiextensions-apiserver v1.33 (with the same
// CRDs): methods and paths upstream routes by verb (HEAD, POST on an
// object, PUT and PATCH on a collection, OPTIONS and unknown methods,
// verbs a subresource does not serve), an update's name, Scale and
// DeleteOptions bodies, query parameters, and errors negotiated as YAML.
func TestRoutingAsUpstream(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(routeCRD("widgets", "Widget", "Namespaced", false))
	g.createCRD(routeCRD("globals", "Global", "Cluster", false))
	const ns, cl = "/apis/route.example.com/v1/namespaces/default/widgets", "/apis/route.example.com/v1/globals"
	tests := []struct {
		name, method, path, body, contentType, accept string
		code                                          int
		wantContentType, message                      string
	}{
		{"put collection", "PUT", ns, `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 400, "application/json", "name must be provided"},
		{"patch collection", "PATCH", ns, `{"metadata":{"labels":{"x":"y"}}}`, "application/merge-patch+json", "", 400, "application/json", "name must be provided"},
		{"put cluster collection", "PUT", cl, `{"apiVersion":"route.example.com/v1","kind":"Global","metadata":{"name":"g0"},"spec":{"replicas":1}}`, "", "", 400, "application/json", "name must be provided"},
		{"patch cluster collection", "PATCH", cl, `{}`, "application/merge-patch+json", "", 400, "application/json", "name must be provided"},
		{"post object path", "POST", ns + "/a", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 201, "application/json", ""},
		{"post object path again", "POST", ns + "/a", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 409, "application/json", "widgets.route.example.com \"a\" already exists"},
		{"post object path other name", "POST", ns + "/zzz", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"replicas":1}}`, "", "", 201, "application/json", ""},
		{"post cluster object path", "POST", cl + "/g1", `{"apiVersion":"route.example.com/v1","kind":"Global","metadata":{"name":"g1"},"spec":{"replicas":1}}`, "", "", 201, "application/json", ""},
		{"post status", "POST", ns + "/a/status", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 405, "application/json", "create is not supported on resources of kind \"widgets.route.example.com\""},
		{"post scale", "POST", ns + "/a/scale", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 405, "application/json", "create is not supported on resources of kind \"widgets.route.example.com\""},
		{"post unknown subresource", "POST", ns + "/a/foo", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":1}}`, "", "", 404, "application/json", "widgets.route.example.com \"a\" not found"},
		{"delete status", "DELETE", ns + "/a/status", "", "", "", 405, "application/json", "delete is not supported on resources of kind \"widgets.route.example.com\""},
		{"delete scale", "DELETE", cl + "/g1/scale", "", "", "", 405, "application/json", "delete is not supported on resources of kind \"globals.route.example.com\""},
		{"delete unknown subresource", "DELETE", ns + "/a/foo", "", "", "", 404, "application/json", "widgets.route.example.com \"a\" not found"},
		{"options object", "OPTIONS", ns + "/a", "", "", "", 405, "application/json", " is not supported on resources of kind \"widgets.route.example.com\""},
		{"options collection", "OPTIONS", ns, "", "", "", 405, "application/json", " is not supported on resources of kind \"widgets.route.example.com\""},
		{"foo status", "FOO", ns + "/a/status", "", "", "", 405, "application/json", " is not supported on resources of kind \"widgets.route.example.com\""},
		{"foo unknown subresource", "FOO", ns + "/a/foo", "", "", "", 404, "application/json", "widgets.route.example.com \"a\" not found"},
		{"options cluster object", "OPTIONS", cl + "/g1", "", "", "", 405, "application/json", " is not supported on resources of kind \"globals.route.example.com\""},
		{"head object", "HEAD", ns + "/a", "", "", "", 200, "application/json", ""},
		{"head missing object", "HEAD", ns + "/nope", "", "", "", 404, "application/json", ""},
		{"head collection", "HEAD", ns, "", "", "", 200, "application/json", ""},
		{"get missing as yaml", "GET", ns + "/nope", "", "", "application/yaml", 404, "application/yaml", "widgets.route.example.com \"nope\" not found"},
		{"get missing table or yaml", "GET", ns + "/nope", "", "", "application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml", 404, "application/yaml", "widgets.route.example.com \"nope\" not found"},
		{"get missing json or yaml", "GET", ns + "/nope", "", "", "application/json, application/yaml", 404, "application/json", "widgets.route.example.com \"nope\" not found"},
		{"put unnamed", "PUT", ns + "/a", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"resourceVersion":"1"}}`, "", "", 400, "application/json", "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{"put other name", "PUT", ns + "/a", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"replicas":1}}`, "", "", 400, "application/json", "the name of the object (b) does not match the name on the URL (a)"},
		{"put other namespace", "PUT", ns + "/a", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"b","namespace":"x"}}`, "", "", 400, "application/json", "the namespace of the provided object does not match the namespace sent on the request"},
		{"json patch removing metadata", "PATCH", ns + "/a", `[{"op":"remove","path":"/metadata"}]`, "application/json-patch+json", "", 400, "application/json", "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{"merge patch kind", "PATCH", ns + "/a", `{"kind":"Other"}`, "application/merge-patch+json", "", 422, "application/json", "Other.route.example.com \"a\" is invalid: kind: Invalid value: \"Other\": must be Widget"},
		{"merge patch apiVersion", "PATCH", ns + "/a", `{"apiVersion":"other.example.com/v1"}`, "application/merge-patch+json", "", 422, "application/json", "Widget.other.example.com \"a\" is invalid: apiVersion: Invalid value: \"other.example.com/v1\": must be route.example.com/v1"},
		{"scale bad replicas", "PUT", ns + "/a/scale", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"a"},"spec":{"replicas":"five"}}`, "", "", 400, "application/json", "no kind is registered for the type v1.Scale in scheme \"pkg/runtime/scheme.go:110\""},
		{"scale wrong kind", "PUT", ns + "/a/scale", `{"apiVersion":"route.example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":2}}`, "", "", 400, "application/json", "no kind is registered for the type v1.Scale in scheme \"pkg/runtime/scheme.go:110\""},
		{"scale extensions", "PUT", ns + "/a/scale", `{"apiVersion":"extensions/v1beta1","kind":"Scale","metadata":{"name":"a"},"spec":{"replicas":2}}`, "", "", 400, "application/json", "no kind is registered for the type v1.Scale in scheme \"pkg/runtime/scheme.go:110\""},
		{"scale malformed", "PUT", ns + "/a/scale", `{"spec":`, "", "", 400, "application/json", "no kind is registered for the type v1.Scale in scheme \"pkg/runtime/scheme.go:110\""},
		{"scale yaml malformed", "PUT", ns + "/a/scale", `spec: [`, "application/yaml", "", 400, "application/json", "no kind is registered for the type v1.Scale in scheme \"pkg/runtime/scheme.go:110\""},
		{"scale no name", "PUT", ns + "/a/scale", `{"spec":{"replicas":2}}`, "", "", 400, "application/json", "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{"scale other namespace", "PUT", ns + "/a/scale", `{"metadata":{"name":"b","namespace":"x"},"spec":{"replicas":2}}`, "", "", 400, "application/json", "the namespace of the provided object does not match the namespace sent on the request"},
		{"scale other name", "PUT", ns + "/a/scale", `{"metadata":{"name":"b"},"spec":{"replicas":2}}`, "", "", 400, "application/json", "the name of the object (b) does not match the name on the URL (a)"},
		{"scale Spec key", "PUT", ns + "/a/scale", `{"metadata":{"name":"a"},"Spec":{"replicas":2}}`, "", "", 200, "application/json", ""},
		{"delete malformed options", "DELETE", ns + "/zz", `{"preconditions": `, "", "", 500, "application/json", "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		{"delete options of another kind", "DELETE", ns + "/zz", `{"apiVersion":"route.example.com/v1","kind":"Widget"}`, "", "", 500, "application/json", "no kind \"Widget\" is registered for version \"route.example.com/v1\" in scheme \"pkg/runtime/scheme.go:110\""},
		{"delete options bad grace", "DELETE", ns + "/zz", `{"gracePeriodSeconds":"x"}`, "", "", 500, "application/json", "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"},
		{"delete options other group", "DELETE", ns + "/zz", `{"apiVersion":"x.example.com/v9","kind":"DeleteOptions"}`, "", "", 404, "application/json", "widgets.route.example.com \"zz\" not found"},
		{"delete options bad apiVersion", "DELETE", ns + "/zz", `{"apiVersion":"a/b/c"}`, "", "", 500, "application/json", "unexpected GroupVersion string: a/b/c"},
		{"delete options array", "DELETE", ns + "/zz", `[]`, "", "", 500, "application/json", "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }"},
		{"delete options with bad query", "DELETE", ns + "/zz?gracePeriodSeconds=soon", `{}`, "", "", 404, "application/json", "widgets.route.example.com \"zz\" not found"},
		{"deletecollection malformed options", "DELETE", ns, `{"preconditions": `, "", "", 500, "application/json", "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		{"limit many", "GET", ns + "?limit=many", "", "", "", 400, "application/json", "strconv.ParseInt: parsing \"many\": invalid syntax"},
		{"limit twice", "GET", ns + "?limit=1&limit=many", "", "", "", 200, "application/json", ""},
		{"limit empty", "GET", ns + "?limit=", "", "", "", 400, "application/json", "strconv.ParseInt: parsing \"\": invalid syntax"},
		{"timeout and limit", "GET", ns + "?limit=many&timeoutSeconds=x", "", "", "", 400, "application/json", "strconv.ParseInt: parsing \"x\": invalid syntax"},
		{"grace soon", "DELETE", ns + "/zz?gracePeriodSeconds=soon", "", "", "", 400, "application/json", "strconv.ParseInt: parsing \"soon\": invalid syntax"},
		{"pretty maybe", "GET", ns + "?pretty=maybe", "", "", "", 200, "application/json", ""},
		{"bookmarks maybe", "GET", ns + "?allowWatchBookmarks=maybe", "", "", "", 200, "application/json", ""},
		{"snake case limit", "GET", ns + "?limit=1&resource_version=zzz", "", "", "", 200, "application/json", ""},
	}
	for _, tt := range tests {
		var body any
		if tt.body != "" {
			body = tt.body
		}
		header := []string{}
		if tt.contentType != "" {
			header = append(header, "Content-Type", tt.contentType)
		}
		if tt.accept != "" {
			header = append(header, "Accept", tt.accept)
		}
		resp, data := g.do(tt.method, tt.path, body, header...)
		if resp.StatusCode != tt.code || resp.Header.Get("Content-Type") != tt.wantContentType {
			t.Errorf("%s: got %d %s, want %d %s: %s", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), tt.code, tt.wantContentType, data)
			continue
		}
		if tt.method == http.MethodHead {
			if len(data) != 0 {
				t.Errorf("%s: a body: %s", tt.name, data)
			}
			continue
		}
		if tt.message == "" {
			continue
		}
		var st struct {
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		}
		var err error
		if tt.wantContentType == httpx.ContentTypeYAML {
			err = yaml.Unmarshal(data, &st)
		} else {
			err = json.Unmarshal(data, &st)
		}
		if err != nil || st.Message != tt.message {
			t.Errorf("%s: got message %q (%v), want %q", tt.name, st.Message, err, tt.message)
		}
		// 405s name the resource, 422s the object's kind and group.
		group, _ := st.Details["group"].(string)
		kind, _ := st.Details["kind"].(string)
		if (tt.code == http.StatusMethodNotAllowed || tt.code == http.StatusUnprocessableEntity) && (kind == "" || !strings.Contains(tt.message, kind+"."+group)) {
			t.Errorf("%s: details %v", tt.name, st.Details)
		}
	}
}

// TestRoutingWarnsDeprecated checks that what the router refuses carries
// the version's deprecation warning, as upstream's handler adds it first.
func TestRoutingWarnsDeprecated(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(routeCRD("olds", "Old", "Namespaced", true))
	const warning = `299 - "route.example.com/v1 Old is deprecated"`
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"OPTIONS", "/apis/route.example.com/v1/namespaces/default/olds/x", http.StatusMethodNotAllowed},
		{"PUT", "/apis/route.example.com/v1/namespaces/default/olds", http.StatusBadRequest},
		{"DELETE", "/apis/route.example.com/v1/namespaces/default/olds/x/status", http.StatusMethodNotAllowed},
		{"DELETE", "/apis/route.example.com/v1/namespaces/default/olds/x/foo", http.StatusNotFound},
	} {
		var body any
		if tc.method == "PUT" {
			body = "{}"
		}
		resp, data := g.do(tc.method, tc.path, body)
		if resp.StatusCode != tc.code || resp.Header.Get("Warning") != warning {
			t.Errorf("%s %s: got %d, Warning %q: %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Warning"), data)
		}
	}
}

func TestParseRequestInfo(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		ok           bool
		want         requestInfo
	}{
		{"GET", "/apis/g/v/widgets", true, requestInfo{group: "g", version: "v", resource: "widgets", verb: "list"}},
		{"HEAD", "/apis/g/v/namespaces/ns/widgets/a", true, requestInfo{group: "g", version: "v", namespace: "ns", resource: "widgets", name: "a", verb: "get"}},
		{"POST", "/apis/g/v/namespaces/ns/widgets/a/status", true, requestInfo{group: "g", version: "v", namespace: "ns", resource: "widgets", name: "a", subresource: "status", verb: "create"}},
		{"PUT", "/apis/g/v/widgets", true, requestInfo{group: "g", version: "v", resource: "widgets", verb: "update"}},
		{"PATCH", "/apis/g/v/widgets/a/scale/", true, requestInfo{group: "g", version: "v", resource: "widgets", name: "a", subresource: "scale", verb: "patch"}},
		{"DELETE", "/apis/g/v/namespaces/ns/widgets", true, requestInfo{group: "g", version: "v", namespace: "ns", resource: "widgets", verb: "deletecollection"}},
		{"DELETE", "/apis/g/v/widgets/a", true, requestInfo{group: "g", version: "v", resource: "widgets", name: "a", verb: "delete"}},
		{"OPTIONS", "/apis/g/v/widgets/a", true, requestInfo{group: "g", version: "v", resource: "widgets", name: "a"}},
		// A namespace's own subresources, and the namespace as an object.
		{"PUT", "/apis/g/v/namespaces/ns/status", true, requestInfo{group: "g", version: "v", namespace: "ns", resource: "namespaces", name: "ns", subresource: "status", verb: "update"}},
		{"POST", "/apis/g/v/namespaces/ns", true, requestInfo{group: "g", version: "v", namespace: "ns", resource: "namespaces", name: "ns", verb: "create"}},
		{"GET", "/apis/g/v", false, requestInfo{}},
		{"GET", "/apis/g/v/watch/widgets", false, requestInfo{}},
		{"GET", "/api/v1/pods", false, requestInfo{}},
		{"GET", "/apis/g/v/widgets//a", false, requestInfo{}},
	} {
		got, ok := parseRequestInfo(tc.method, tc.path)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s %s: got %+v %v, want %+v %v", tc.method, tc.path, got, ok, tc.want, tc.ok)
		}
	}
	ri, _ := parseRequestInfo("POST", "/apis/g/v/namespaces/ns/widgets/a")
	if got := ri.collectionPath(); got != "/apis/g/v/namespaces/ns/widgets" {
		t.Errorf("collection path %s", got)
	}
}

func TestStatusAsYAML(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                   false,
		"application/yaml":                   true,
		"application/json, application/yaml": false,
		"application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml": true,
		"application/vnd.kubernetes.protobuf, application/yaml":          true,
		"*/*":       false,
		"text/html": false,
		"application/json;q=0.5, application/yaml": true,
	} {
		if got := httpx.StatusAsYAML(accept); got != want {
			t.Errorf("%q: got %v, want %v", accept, got, want)
		}
	}
}
