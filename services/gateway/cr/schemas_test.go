package cr

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestReadDefaultsAtObjectVersion: a stored object is defaulted (and
// pruned) with the schema of the version it was stored at, as upstream's
// storage decoder (unstructuredDefaulter at the object's GVK) before the
// conversion to the request version; not with the current storage
// version's, which may have moved since the object was written. An
// apiVersion naming no version of the CRD falls back to the storage
// version.
func TestReadDefaultsAtObjectVersion(t *testing.T) {
	intDefault := func(d string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte(d)}}
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	version := func(name string, storage bool, props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage, Schema: &apiextensionsv1.CustomResourceValidation{
			OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: props},
			}},
		}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name, crd.UID, crd.Generation = "robots.example.com", "uid-1", 1
	crd.Spec.Group = "example.com"
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "robots", Kind: "Robot"}
	crd.Spec.Scope = apiextensionsv1.NamespaceScoped
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		// v1 was the storage version; v2 is now.
		version("v1", false, map[string]apiextensionsv1.JSONSchemaProps{"name": str, "arms": intDefault("2")}),
		version("v2", true, map[string]apiextensionsv1.JSONSchemaProps{"name": str, "arms": intDefault("4"), "legs": intDefault("2")}),
		version("v3", false, map[string]apiextensionsv1.JSONSchemaProps{"name": str}),
	}
	r, err := newResource(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stored, want string
	}{
		{"stored at the old storage version: its own defaults only",
			`{"apiVersion":"example.com/v1","kind":"Robot","metadata":{"name":"a"},"spec":{"name":"x"}}`,
			`{"apiVersion":"example.com/v1","kind":"Robot","metadata":{"name":"a"},"spec":{"arms":2,"name":"x"}}`},
		{"stored at the old storage version, defaulted when written",
			`{"apiVersion":"example.com/v1","kind":"Robot","metadata":{"name":"a"},"spec":{"arms":4,"name":"x"}}`,
			`{"apiVersion":"example.com/v1","kind":"Robot","metadata":{"name":"a"},"spec":{"arms":4,"name":"x"}}`},
		{"stored at the storage version",
			`{"apiVersion":"example.com/v2","kind":"Robot","metadata":{"name":"a"},"spec":{"name":"x","stale":"pruned"}}`,
			`{"apiVersion":"example.com/v2","kind":"Robot","metadata":{"name":"a"},"spec":{"arms":4,"legs":2,"name":"x"}}`},
		{"stored at a version without defaults: as it is",
			`{"apiVersion":"example.com/v3","kind":"Robot","metadata":{"name":"a"},"spec":{"name":"x","stale":"kept"}}`,
			`{"apiVersion":"example.com/v3","kind":"Robot","metadata":{"name":"a"},"spec":{"name":"x","stale":"kept"}}`},
		{"a version the CRD does not have: the storage version's",
			`{"apiVersion":"example.com/v9","kind":"Robot","metadata":{"name":"a"},"spec":{"name":"x"}}`,
			`{"apiVersion":"example.com/v9","kind":"Robot","metadata":{"name":"a"},"spec":{"arms":4,"legs":2,"name":"x"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSchemaCache(0)
			// Alone and in a list with objects of the other versions.
			others := [][]byte{
				[]byte(`{"apiVersion":"example.com/v3","kind":"Robot","metadata":{"name":"o"},"spec":{}}`),
				[]byte(`{"apiVersion":"example.com/v2","kind":"Robot","metadata":{"name":"o"},"spec":{}}`),
			}
			for _, objs := range [][][]byte{{[]byte(tc.stored)}, append(others, []byte(tc.stored))} {
				out, err := c.readDefaults(r, objs)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(objs) {
					t.Fatalf("%d objects for %d", len(out), len(objs))
				}
				if got := out[len(out)-1]; !jsonEqual(t, got, []byte(tc.want)) {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
