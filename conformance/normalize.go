package conformance

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// What legitimately differs between two servers given the same requests,
// and is replaced by a placeholder in both answers before they are compared.
var (
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// timeRE finds RFC 3339 timestamps; only those within a day of now are
	// replaced (set by the servers, not by the cases, which use fixed dates).
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// pointerRE finds the address of a pointer rendered with %#v, as in
	// upstream's "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...
	// Schema:(*apiextensions.CustomResourceValidation)(0xc000a1b2c8) ...}":
	// an address of the reference's heap, different on every run.
	pointerRE = regexp.MustCompile(`(\(\*[A-Za-z0-9_.]+\))\(0x[0-9a-f]+\)`)
	// metaRVRE finds the server's own resourceVersion quoted in a failed
	// precondition ("... ResourceVersion in object meta: 16").
	metaRVRE = regexp.MustCompile(`(?i)(ResourceVersion in object meta: )\d+`)
)

// normalizer rewrites one server's answers.
type normalizer struct {
	host string // the server's host:port, replaced by <server>
	now  time.Time
	// generateName is the request's metadata.generateName: a name generated
	// from it is replaced wherever it appears (an error about the object
	// names it in details.name and in its messages), not only in metadata.
	generateName string
}

// generatedSuffix is what a server appends to a generateName (five
// characters of names.SimpleNameGenerator's alphabet).
const generatedSuffix = `[bcdfghjklmnpqrstvwxz2456789]{5}`

// randomUUIDRE finds a random (version 4) UUID inside a longer string, such
// as the object's uid an upstream precondition error quotes.
var randomUUIDRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// embeddedRVRE finds a resourceVersion inside an object rendered as JSON
// within a message (upstream's patch errors quote the patched object).
var embeddedRVRE = regexp.MustCompile(`("resourceVersion\\?":\\?")[0-9]+(\\?")`)

// forRequest returns n for the answer to a request with this body.
func (n normalizer) forRequest(body []byte) normalizer {
	v, ok := decodeJSON(body)
	if !ok {
		return n
	}
	n.generateName = lookup(v, "metadata.generateName")
	return n
}

// JSON decodes b, normalises it and returns it indented with sorted keys.
// ok is false when b is not JSON.
func (n normalizer) JSON(b []byte, ignore []string, unorderedErrors bool) (string, bool) {
	v, ok := decodeJSON(b)
	if !ok {
		return "", false
	}
	for _, p := range ignore {
		deletePath(v, p)
	}
	v = n.value("", v)
	if unorderedErrors {
		sortCauses(v)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	return strings.TrimSuffix(out.String(), "\n"), true
}

// YAML normalises a YAML answer as JSON does (the same placeholders, the
// same dropped fields) and renders it back as YAML with sorted keys. ok is
// false when b is not YAML.
func (n normalizer) YAML(b []byte, ignore []string, unorderedErrors bool) (string, bool) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return "", false
	}
	s, ok := n.JSON(j, ignore, unorderedErrors)
	if !ok {
		return "", false
	}
	y, err := yaml.JSONToYAML([]byte(s))
	if err != nil {
		return "", false
	}
	return strings.TrimSuffix(string(y), "\n"), true
}

func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

// value normalises v found under the key parent.
func (n normalizer) value(key string, v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			t[k] = n.value(k, c)
		}
		if md, ok := t["metadata"].(map[string]any); ok {
			n.metadata(md)
		}
		if t["kind"] == "CustomResourceDefinition" {
			sortConditions(t)
		}
		if t["kind"] == "CustomResourceDefinitionList" {
			// upstream's items carry no kind: sort their conditions here
			items, _ := t["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					sortConditions(m)
				}
			}
		}
		if t["kind"] == "APIResourceList" {
			sortAPIResources(t)
		}
		tableAges(t)
		return t
	case []any:
		for i, c := range t {
			t[i] = n.value(key, c)
		}
		return t
	case string:
		return n.String(key, t)
	}
	return v
}

// metadata normalises an object's (or a list's) metadata.
func (n normalizer) metadata(md map[string]any) {
	if _, ok := md["resourceVersion"]; ok {
		md["resourceVersion"] = "<resourceVersion>"
	}
	if c, ok := md["continue"].(string); ok && c != "" {
		md["continue"] = "<continue>"
	}
	if gn, ok := md["generateName"].(string); ok {
		if name, ok := md["name"].(string); ok && strings.HasPrefix(name, gn) {
			md["name"] = gn + "<generated>"
		}
	}
	// metadata.managedFields are compared; their time is a timestamp of
	// the write (normalised as any recent time in String). The library
	// orders entries by operation, then the second of their time, then
	// manager: two servers writing a second apart order them differently,
	// and the reference names its controllers' manager differently (see
	// upstreamLoopbackManager), so entries are compared in one order that
	// leaves the time out.
	mf, _ := md["managedFields"].([]any)
	for _, e := range mf {
		if m, ok := e.(map[string]any); ok && m["manager"] == upstreamLoopbackManager {
			m["manager"] = "kube-apiserver"
		}
	}
	sort.SliceStable(mf, func(i, j int) bool { return entryKey(mf[i]) < entryKey(mf[j]) })
}

// entryKey is the order managedFields entries are compared in: operation,
// manager, apiVersion, subresource.
func entryKey(e any) string {
	m, _ := e.(map[string]any)
	s := func(k string) string { v, _ := m[k].(string); return v }
	return s("operation") + "\x00" + s("manager") + "\x00" + s("apiVersion") + "\x00" + s("subresource")
}

// upstreamLoopbackManager is the field manager of the reference server's
// own controllers (the CRD status updates of its naming and establishing
// controllers): upstream names its loopback client's manager after the
// binary (rest.DefaultKubernetesUserAgent: os.Args[0]), which is
// "kube-apiserver" in a cluster and the reference binary's name here.
// crdplane's registry controllers record kube-apiserver's.
const upstreamLoopbackManager = "apiextensions-upstream"

// String normalises one string value (or header) found under key.
func (n normalizer) String(key, s string) string {
	if n.host != "" && strings.Contains(s, n.host) {
		s = strings.ReplaceAll(s, n.host, "<server>")
	}
	if key == "uid" && uuidRE.MatchString(s) {
		return "<uid>"
	}
	if key == "resourceVersion" && s != "" {
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return "<resourceVersion>"
		}
	}
	if n.generateName != "" && strings.Contains(s, n.generateName) {
		re := regexp.MustCompile(regexp.QuoteMeta(n.generateName) + generatedSuffix + `\b`)
		s = re.ReplaceAllLiteralString(s, n.generateName+"<generated>")
	}
	if key != "uid" && randomUUIDRE.MatchString(s) && len(s) > 36 {
		s = randomUUIDRE.ReplaceAllString(s, "<uid>")
	}
	if len(s) > 36 && strings.Contains(s, `resourceVersion`) {
		s = embeddedRVRE.ReplaceAllString(s, "${1}<resourceVersion>${2}")
	}
	if strings.Contains(s, "esource") {
		s = messageRVs(s)
	}
	if strings.Contains(s, "in object meta: ") {
		s = metaRVRE.ReplaceAllString(s, "${1}<resourceVersion>")
	}
	if strings.Contains(s, ")(0x") {
		s = pointerRE.ReplaceAllString(s, "${1}(<pointer>)")
	}
	return timeRE.ReplaceAllStringFunc(s, func(ts string) string {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return ts
		}
		if d := n.now.Sub(t); d < 24*time.Hour && d > -24*time.Hour {
			return "<time>"
		}
		return ts
	})
}

// deletePath removes a dotted path (a.b.c; a "*" segment matches every
// element of a list or every key of an object).
func deletePath(v any, path string) {
	parts := strings.Split(path, ".")
	var walk func(v any, parts []string)
	walk = func(v any, parts []string) {
		if len(parts) == 0 {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			if parts[0] == "*" {
				for k := range t {
					if len(parts) == 1 {
						delete(t, k)
					} else {
						walk(t[k], parts[1:])
					}
				}
				return
			}
			if len(parts) == 1 {
				delete(t, parts[0])
				return
			}
			walk(t[parts[0]], parts[1:])
		case []any:
			if parts[0] == "*" {
				for _, c := range t {
					walk(c, parts[1:])
				}
				return
			}
			if i, err := strconv.Atoi(parts[0]); err == nil && i >= 0 && i < len(t) {
				walk(t[i], parts[1:])
			}
		}
	}
	walk(v, parts)
}

// sortCauses orders the causes of every Status in v and the list of errors
// in its message ("...: [a, b]") the same way, so that two servers that
// report the same errors in different orders compare equal.
func sortCauses(v any) {
	switch t := v.(type) {
	case map[string]any:
		if t["kind"] == "Status" {
			sortStatus(t)
		}
		for _, c := range t {
			sortCauses(c)
		}
	case []any:
		for _, c := range t {
			sortCauses(c)
		}
	}
}

func sortStatus(st map[string]any) {
	details, _ := st["details"].(map[string]any)
	causes, _ := details["causes"].([]any)
	if len(causes) < 2 {
		return
	}
	rendered := make([]string, len(causes))
	for i, c := range causes {
		m, _ := c.(map[string]any)
		field, _ := m["field"].(string)
		msg, _ := m["message"].(string)
		rendered[i] = msg
		if field != "" {
			rendered[i] = field + ": " + msg
		}
	}
	key := func(c any) string { b, _ := json.Marshal(c); return string(b) }
	sort.SliceStable(causes, func(i, j int) bool { return key(causes[i]) < key(causes[j]) })
	msg, _ := st["message"].(string)
	open := strings.Index(msg, ": [")
	if open < 0 || !strings.HasSuffix(msg, "]") {
		return
	}
	inner := msg[open+3 : len(msg)-1]
	total := 2 * (len(rendered) - 1)
	for _, r := range rendered {
		if !strings.Contains(inner, r) {
			return
		}
		total += len(r)
	}
	if total != len(inner) {
		return
	}
	sort.Strings(rendered)
	st["message"] = msg[:open+3] + strings.Join(rendered, ", ") + "]"
}

// sortConditions orders a CRD's status conditions by type: upstream's
// controllers (names, establishing, API approval, non-structural) each add
// their condition when they first run, concurrently, so the order of the
// list is a race.
func sortConditions(crd map[string]any) {
	st, _ := crd["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	typ := func(c any) string { m, _ := c.(map[string]any); s, _ := m["type"].(string); return s }
	sort.SliceStable(conds, func(i, j int) bool { return typ(conds[i]) < typ(conds[j]) })
}

// sortAPIResources orders the resources of a discovery APIResourceList by
// name: upstream's discovery controller appends each CRD's resources in the
// order its informer cache lists the CRDs (map order), so with two CRDs in
// one group version the order of the list is a race. A CRD's subresources
// keep following it ("flows", "flows/scale", "flows/status").
func sortAPIResources(l map[string]any) {
	res, _ := l["resources"].([]any)
	name := func(r any) string { m, _ := r.(map[string]any); s, _ := m["name"].(string); return s }
	sort.SliceStable(res, func(i, j int) bool { return name(res[i]) < name(res[j]) })
}
