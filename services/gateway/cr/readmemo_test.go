package cr

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/structural"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// memoCRD is a CRD whose v1 (storage) schema defaults spec.replicas and
// spec.ports[].protocol, keeps spec.labels as a map and spec.extra as
// preserved unknown fields; generation 2 also defaults spec.mode and no
// longer knows spec.schedule.
func memoCRD(generation int64) *apiextensionsv1.CustomResourceDefinition {
	def := func(raw string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(raw)} }
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	preserve := true
	spec := map[string]apiextensionsv1.JSONSchemaProps{
		"replicas": {Type: "integer", Default: def("1")},
		"image":    str,
		"mode":     str,
		"ratio":    {Type: "number"},
		"schedule": str,
		"ports": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"name": str, "port": {Type: "integer"}, "protocol": {Type: "string", Default: def(`"TCP"`)},
			}}}},
		"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}},
		"extra":  {Type: "object", XPreserveUnknownFields: &preserve},
	}
	if generation > 1 {
		spec["mode"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: def(`"Safe"`)}
		delete(spec, "schedule")
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name, crd.UID, crd.Generation = "widgets.example.com", "uid-1", generation
	crd.Spec.Group = "example.com"
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}
	crd.Spec.Scope = apiextensionsv1.NamespaceScoped
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   {Type: "object", Properties: spec},
				"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": str}},
			}}}}}
	return crd
}

// slowRead is readDefaults' slow path, written out: decode, normalise,
// default, encode.
func slowRead(t *testing.T, s *structural.Schema, data []byte) []byte {
	t.Helper()
	obj, err := listing.DecodeObject(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if _, err := structural.Normalize(obj, s, true); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	structural.Default(obj, s)
	out, err := listing.EncodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const managedFields = `"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:image":{},"f:replicas":{}}},"manager":"kubectl","operation":"Apply","time":"2026-01-02T03:04:05Z"},` +
	`{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:note":{}}}},"manager":"patcher","operation":"Update","time":"2026-01-02T03:04:06Z"}]`

// memoCases are stored objects as crdplane writes them (canonical: sorted
// keys, Go's escaping, numbers as encoding/json writes them) and as it
// does not (other key orders, 1e3 and 1.0, escaped or raw unicode and
// HTML characters, spaces, missing defaults, fields to prune, nulls,
// malformed metadata).
var memoCases = []string{
	// Canonical, managedFields included.
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"2026-01-02T03:04:05Z","generation":1,` + managedFields + `,"name":"a","namespace":"default","resourceVersion":"12","uid":"u-1"},"spec":{"image":"x","ports":[{"name":"http","port":80,"protocol":"TCP"}],"replicas":3}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"image":"café 日本 🚀 \u003cb\u003e \u0026 \u2028","ratio":1.5,"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"c"},"spec":{"extra":{"big":1e+21,"f":0.1,"n":-7,"z":0},"replicas":1000}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"annotations":{"note":"patched"},"labels":{"app":"bench"},"name":"d"},"spec":{"labels":{"k":"v"},"mode":"Safe","replicas":0,"schedule":"*/5 * * * *"},"status":{"phase":"Ready"}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"t"},"spec":{"replicas":9007199254740993}}`,
	// Not canonical.
	`{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"e"},"spec":{"replicas":3}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"f"},"spec":{"replicas":1e3}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"g"},"spec":{"ratio":1.0,"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"h"},"spec":{"image":"<b> & é","replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"i"},"spec":{"image":"caf\u00E9","replicas":1}}`,
	`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "j"}, "spec": {"replicas": 1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"k"},"spec":{"image":"x"}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"l"},"spec":{"ports":[{"name":"http"}],"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"m"},"spec":{"replicas":1,"stale":true}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"n"},"spec":{"image":null,"replicas":null}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"bogus":1,"name":"o"},"spec":{"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"p","labels":{"b":"1","a":"2"}},"spec":{"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"q"},"spec":{"extra":{"f":1.0e0,"n":-0},"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"r"},"spec":{"replicas":1,"replicas":2}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"s"},"spec":{"replicas":1}}` + "\n",
	`{"apiVersion":"example.com/v1","apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"v"},"spec":{"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":1},"apiVersion":"example.com/v1"}`,
	`{"apiVersion":"example.com\/v1","kind":"Widget","metadata":{"name":"x"},"spec":{"replicas":1}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"u"},"spec":{"replicas":12345678901234567890}}`,
}

// randomObject is a stored object of random content in a random JSON form
// (raw) and that object as crdplane writes it (the slow path's output).
func randomObject(t *testing.T, rng *rand.Rand, s *structural.Schema, i int) (raw, canonical []byte) {
	runes := []string{"a", "Z", "é", "日", "🚀", "<", ">", "&", `\"`, `\\`, "\\u00e9", "\\u003c", "\\n", " ", "\u2028"}
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(runes[rng.IntN(len(runes))])
		}
		b.WriteByte('"')
		return b.String()
	}
	num := func() string {
		switch rng.IntN(7) {
		case 0:
			return "1e3"
		case 1:
			return "1.0"
		case 2:
			return strconv.FormatFloat(rng.Float64()*1e6, 'g', -1, 64)
		case 3:
			return strconv.FormatFloat(rng.NormFloat64()*1e25, 'e', -1, 64)
		case 4:
			return "-0"
		}
		return strconv.Itoa(rng.IntN(1 << 20))
	}
	members := []string{`"image":` + str(), `"mode":` + str(), `"ratio":` + num(), `"extra":{"x":` + num() + `,"y":[` + num() + `,` + str() + `]}`,
		`"labels":{` + str() + `:` + str() + `}`, `"ports":[{"name":` + str() + `,"port":` + strconv.Itoa(rng.IntN(65536)) + `}]`}
	if rng.IntN(4) > 0 {
		members = append(members, `"replicas":`+strconv.Itoa(rng.IntN(50)))
	}
	if rng.IntN(8) == 0 {
		members = append(members, `"unknown":1`)
	}
	rng.Shuffle(len(members), func(a, b int) { members[a], members[b] = members[b], members[a] })
	sep := ","
	if rng.IntN(4) == 0 {
		sep = ", "
	}
	raw = []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"resourceVersion":"%d","name":"r%d","namespace":"default",%s,"uid":"u-%d"},"spec":{%s}}`,
		100+i, i, managedFields, i, strings.Join(members, sep)))
	return raw, slowRead(t, s, raw)
}

// TestReadMemoMatchesSlowPath: a list read through readDefaults, its memo
// empty and then filled by earlier reads, is byte for byte what the slow
// path gives for every object; only objects the slow path leaves as they
// are get remembered.
func TestReadMemoMatchesSlowPath(t *testing.T) {
	r, err := newResource(memoCRD(1), "v1")
	if err != nil {
		t.Fatal(err)
	}
	c := newSchemaCache(0)
	s, err := c.get(r, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var objs [][]byte
	for _, o := range memoCases {
		objs = append(objs, []byte(o))
	}
	rng := rand.New(rand.NewPCG(14, 2026))
	// Objects as the storage service returns them: resourceVersion first.
	var stored []string
	for _, o := range memoCases[:5] {
		if sf := storageForm(o); sf != o {
			stored = append(stored, sf)
			objs = append(objs, []byte(sf))
		}
	}
	if len(stored) != 1 {
		t.Fatalf("%d canonical cases with a resourceVersion, want 1", len(stored))
	}
	for i := range 500 {
		raw, canonical := randomObject(t, rng, s, i)
		sf := storageForm(string(canonical))
		if sf == string(canonical) {
			t.Fatalf("no resourceVersion to move: %s", canonical)
		}
		stored = append(stored, sf)
		objs = append(objs, raw, canonical, []byte(sf))
	}
	want := make([][]byte, len(objs))
	unchanged := map[string]bool{}
	for _, o := range stored {
		unchanged[o] = true
	}
	for i, o := range objs {
		want[i] = slowRead(t, s, o)
		if bytes.Equal(want[i], o) {
			unchanged[string(o)] = true
		}
	}
	for _, o := range stored {
		if !bytes.Equal(slowRead(t, s, []byte(o)), []byte(canonicalForm(o))) {
			t.Fatalf("storage form %s does not read as its canonical form", o)
		}
	}
	if len(unchanged) < 1000 || len(unchanged) == len(objs) {
		t.Fatalf("%d of %d objects unchanged by reading: the cases do not test both paths", len(unchanged), len(objs))
	}
	for _, c := range memoCases[:5] {
		if !unchanged[c] {
			t.Errorf("canonical case changed by reading: %s\n-> %s", c, slowRead(t, s, []byte(c)))
		}
	}
	for _, c := range memoCases[5:] {
		if unchanged[c] {
			t.Errorf("non-canonical case left as it is by reading: %s", c)
		}
	}
	for pass := range 3 {
		in := make([][]byte, len(objs))
		copy(in, objs)
		got, err := c.readDefaults(r, in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range objs {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("pass %d, object %d: got\n%s\nwant\n%s", pass, i, got[i], want[i])
			}
		}
		if n := c.memo.size(); n != len(unchanged) {
			t.Errorf("pass %d: %d objects remembered, want %d", pass, n, len(unchanged))
		}
		// One at a time, as a GET or a watch event reads them.
		for i, o := range objs {
			got, err := c.readDefaults(r, [][]byte{o})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[0], want[i]) {
				t.Errorf("pass %d, object %d alone: got\n%s\nwant\n%s", pass, i, got[0], want[i])
			}
		}
	}
}

var rvMember = regexp.MustCompile(`,"resourceVersion":"[0-9]+"`)

// storageForm is a canonical object as the storage service returns it:
// metadata.resourceVersion moved to metadata's first member.
func storageForm(canonical string) string {
	m := rvMember.FindString(canonical)
	if m == "" {
		return canonical
	}
	s := strings.Replace(canonical, m, "", 1)
	return strings.Replace(s, `"metadata":{`, `"metadata":{`+m[1:]+",", 1)
}

// canonicalForm undoes storageForm, by hand.
func canonicalForm(stored string) string {
	i := strings.Index(stored, `"metadata":{"resourceVersion":"`)
	j := strings.Index(stored[i+len(`"metadata":{`):], ",")
	m := stored[i+len(`"metadata":{`):][:j]
	s := strings.Replace(stored, m+",", "", 1)
	for _, next := range []string{`,"selfLink"`, `,"uid"`, `},"spec"`} {
		if k := strings.Index(s, next); k >= 0 {
			return s[:k] + "," + m + s[k:]
		}
	}
	return s
}

func TestSortResourceVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata":{"resourceVersion":"1","name":"a","uid":"u"}}`, `{"metadata":{"name":"a","resourceVersion":"1","uid":"u"}}`},
		{`{"apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"resourceVersion":"x"},"name":"a"},"spec":{}}`,
			`{"apiVersion":"v1","metadata":{"annotations":{"resourceVersion":"x"},"name":"a","resourceVersion":"12"},"spec":{}}`},
		{`{"metadata":{"resourceVersion":"1","resource":"a","resourceVersionZ":"b"}}`, `{"metadata":{"resource":"a","resourceVersion":"1","resourceVersionZ":"b"}}`},
		{`{"metadata":{"resourceVersion":"1","uid":"u"}}`, `{"metadata":{"resourceVersion":"1","uid":"u"}}`},
		{`{"metadata":{"resourceVersion":"1"}}`, `{"metadata":{"resourceVersion":"1"}}`},
		{`{"metadata":{"name":"a","resourceVersion":"1"}}`, `{"metadata":{"name":"a","resourceVersion":"1"}}`},
		{`{"metadata":{"resourceVersion":"1", "name":"a"}}`, `{"metadata":{"resourceVersion":"1", "name":"a"}}`},
		{`{"metadata":{"resourceVersion":"1","n\u0061me":"a"}}`, `{"metadata":{"resourceVersion":"1","n\u0061me":"a"}}`},
		{`{"metadata":null}`, `{"metadata":null}`},
		{`{"kind":"x"}`, `{"kind":"x"}`},
		{`{"metadata":{"resourceVersion":"1","name":`, `{"metadata":{"resourceVersion":"1","name":`},
	} {
		if got := sortResourceVersion([]byte(tc.in)); string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestReadMemoNewGeneration: objects remembered as unchanged under one
// CRD generation are read with the next generation's schema (its new
// default set, a field it no longer has pruned).
func TestReadMemoNewGeneration(t *testing.T) {
	c := newSchemaCache(0)
	stored := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"replicas":2,"schedule":"* * * * *"}}`)
	r1, err := newResource(memoCRD(1), "v1")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := c.readDefaults(r1, [][]byte{stored})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], stored) {
			t.Fatalf("generation 1: got %s", got[0])
		}
	}
	if c.memo.size() != 1 {
		t.Fatalf("%d remembered, want 1", c.memo.size())
	}
	r2, err := newResource(memoCRD(2), "v1")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"mode":"Safe","replicas":2}}`
	for range 2 {
		got, err := c.readDefaults(r2, [][]byte{stored})
		if err != nil {
			t.Fatal(err)
		}
		if string(got[0]) != want {
			t.Errorf("generation 2: got %s, want %s", got[0], want)
		}
	}
}

// TestReadMemoBounded: the memo keeps at most two generations of max
// entries, and an entry of the previous generation found again moves to
// the current one.
func TestReadMemoBounded(t *testing.T) {
	m := newReadMemo(4)
	keys := make([]memoKey, 10)
	for i := range keys {
		keys[i] = m.key(1, []byte(strconv.Itoa(i)))
	}
	for _, k := range keys[:4] {
		m.add(k)
	}
	m.add(keys[4]) // keys 0-3 are now the previous generation
	if !m.unchanged(keys[0]) {
		t.Fatal("key 0 forgotten too early")
	}
	for _, k := range keys[5:8] {
		m.add(k) // current: 4, 0, 5, 6; then 7 rotates
	}
	if m.size() > 8 {
		t.Fatalf("%d entries, want at most 8", m.size())
	}
	if m.unchanged(keys[1]) {
		t.Error("key 1 still remembered after two rotations")
	}
	if !m.unchanged(keys[0]) || !m.unchanged(keys[7]) {
		t.Error("keys 0 and 7 forgotten")
	}
	if m.unchanged(m.key(2, []byte("7"))) {
		t.Error("another schema's key found")
	}
}

// BenchmarkReadDefaults2000 reads a list of 2,000 stored objects of about
// 1.5 KiB with managedFields whose schema has defaults, as the storage
// service returns them (resourceVersion first): as crdplane wrote them
// (remembered: spliced with resourceVersion moved) and needing defaults
// (decoded, defaulted, encoded every time).
func BenchmarkReadDefaults2000(b *testing.B) {
	r, err := newResource(memoCRD(1), "v1")
	if err != nil {
		b.Fatal(err)
	}
	labels := make([]string, 8)
	for i := range labels {
		labels[i] = fmt.Sprintf(`"label-%d":"%s"`, i, strings.Repeat("v", 40))
	}
	for _, tc := range []struct {
		name, replicas string
	}{{"unchanged", `,"replicas":3`}, {"defaulted", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			c := newSchemaCache(0)
			objs := make([][]byte, 2000)
			for i := range objs {
				objs[i] = []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"resourceVersion":"%[3]d","annotations":{"note":"patched"},"labels":{"app":"bench"},%[1]s,"name":"o%04[2]d","namespace":"default","uid":"u-%[2]d"},"spec":{"image":"registry.example.com/team/app:%[4]s","labels":{%[5]s},"mode":"Safe","ports":[{"name":"http","port":80,"protocol":"TCP"},{"name":"https","port":443,"protocol":"TCP"}]%[6]s,"schedule":"*/5 * * * *"}}`,
					managedFields, i, 1000+i, strings.Repeat("1", 64), strings.Join(labels, ","), tc.replicas))
			}
			if _, err := c.readDefaults(r, objs); err != nil {
				b.Fatal(err)
			}
			if want := tc.name == "unchanged"; (c.memo.size() == len(objs)) != want {
				b.Fatalf("%d of %d remembered", c.memo.size(), len(objs))
			}
			b.SetBytes(int64(totalBytes(objs)))
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.readDefaults(r, objs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func totalBytes(objs [][]byte) int {
	n := 0
	for _, o := range objs {
		n += len(o)
	}
	return n
}

func TestLeadingAPIVersion(t *testing.T) {
	for _, tc := range []struct {
		obj, want string
		ok        bool
	}{
		{`{"apiVersion":"example.com/v1","kind":"W"}`, "example.com/v1", true},
		{`{"apiVersion":"v1","kind":"W","apiVersion":"v2"}`, "v1", true},
		{`{"apiVersion":"example.com\/v1","kind":"W"}`, "", false},
		{`{"apiVersion":"example.com/v1"}`, "", false},
		{`{"apiVersion":"example.com/v1`, "", false},
		{`{"kind":"W","apiVersion":"example.com/v1"}`, "", false},
		{` {"apiVersion":"example.com/v1","kind":"W"}`, "", false},
		{`{"apiVersion":1,"kind":"W"}`, "", false},
	} {
		got, ok := leadingAPIVersion([]byte(tc.obj))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %q %v, want %q %v", tc.obj, got, ok, tc.want, tc.ok)
		}
	}
}

func TestResourceVersionFirst(t *testing.T) {
	for _, tc := range []struct {
		in           string
		first, known bool
	}{
		{`{"apiVersion":"g/v1","kind":"K","metadata":{"resourceVersion":"1","name":"a"}}`, true, true},
		{`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"1"}}`, false, true},
		{`{"apiVersion":"g/v1","kind":"K","metadata":{}}`, false, true},
		{`{"apiVersion":"g/v1","kind":"K","metadata":{"resourceVersionX":"1"}}`, false, true},
		// any other form: not known
		{`{"apiVersion":"g/v1","kind":"K","list":1,"metadata":{"resourceVersion":"1"}}`, false, false},
		{`{"apiVersion":"g/v1","kind":"K\"","metadata":{"resourceVersion":"1"}}`, false, false},
		{`{"apiVersion":"g/\u00761","kind":"K","metadata":{"resourceVersion":"1"}}`, false, false},
		{`{"kind":"K","metadata":{"resourceVersion":"1"}}`, false, false},
		{`{"apiVersion":"g/v1","kind":"K","metadata":null}`, false, false},
		{`{"apiVersion":"g/v1","kind":"K"}`, false, false},
		{`{"apiVersion":"g/v1","kind":"K`, false, false},
		{` {"apiVersion":"g/v1","kind":"K","metadata":{"resourceVersion":"1"}}`, false, false},
	} {
		var first, known bool
		if lead, ok := leadingAPIVersion([]byte(tc.in)); ok {
			first, known = resourceVersionFirst([]byte(tc.in), lead)
		}
		if first != tc.first || known != tc.known {
			t.Errorf("%s: first %v known %v, want %v %v", tc.in, first, known, tc.first, tc.known)
		}
		// What it knows is what sortResourceVersion would do.
		if known && !first && string(sortResourceVersion([]byte(tc.in))) != tc.in {
			t.Errorf("%s: sortResourceVersion moves it", tc.in)
		}
	}
}
