package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Operator is one operator's published CRDs and examples, inside its Go
// module at a pinned version.
type Operator struct {
	Name     string   `json:"name"`
	Module   string   `json:"module"`
	Version  string   `json:"version"`
	Sum      string   `json:"sum"`
	License  string   `json:"license"`
	CRDs     []string `json:"crds"`
	Examples []string `json:"examples"`
}

// LoadOperators reads the manifest.
func LoadOperators(path string) ([]Operator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m struct {
		Operators []Operator `json:"operators"`
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m.Operators, nil
}

// ModuleDir downloads the operator's module (the Go module cache keeps it)
// and returns its directory, after checking the module's hash.
func (o Operator) ModuleDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", o.Module+"@"+o.Version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var info struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v %v", o.Module, o.Version, err, jerr)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", o.Module, o.Version, info.Error)
	}
	if info.Sum != o.Sum {
		return "", fmt.Errorf("%s@%s: module hash %s, the manifest pins %s", o.Module, o.Version, info.Sum, o.Sum)
	}
	return info.Dir, nil
}

// yamlDocs reads the YAML documents of the files matching the globs.
func yamlDocs(dir string, globs []string) ([]doc, error) {
	var docs []doc
	for _, g := range globs {
		paths, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s: no file matches %s", dir, g)
		}
		sort.Strings(paths)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			rel, _ := filepath.Rel(dir, p)
			for _, part := range splitYAML(b) {
				j, err := yaml.YAMLToJSON(part)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", rel, err)
				}
				var obj map[string]any
				if json.Unmarshal(j, &obj) != nil || obj == nil {
					continue
				}
				docs = append(docs, doc{file: rel, obj: obj})
			}
		}
	}
	return docs, nil
}

type doc struct {
	file string
	obj  map[string]any
}

func splitYAML(b []byte) [][]byte {
	var out [][]byte
	for _, part := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		if len(bytes.TrimSpace(part)) > 0 {
			out = append(out, part)
		}
	}
	return out
}

// crdInfo is what the generator needs of a CRD.
type crdInfo struct {
	name, group, plural, kind string
	namespaced                bool
	storage                   string
	schemas                   map[string]map[string]any // version → openAPIV3Schema
}

func parseCRD(obj map[string]any) crdInfo {
	c := crdInfo{
		name:       lookup(obj, "metadata.name"),
		group:      lookup(obj, "spec.group"),
		plural:     lookup(obj, "spec.names.plural"),
		kind:       lookup(obj, "spec.names.kind"),
		namespaced: lookup(obj, "spec.scope") == "Namespaced",
		schemas:    map[string]map[string]any{},
	}
	spec, _ := obj["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		name, _ := vm["name"].(string)
		if st, _ := vm["storage"].(bool); st {
			c.storage = name
		}
		if sch, ok := vm["schema"].(map[string]any); ok {
			if s, ok := sch["openAPIV3Schema"].(map[string]any); ok {
				c.schemas[name] = s
			}
		}
	}
	return c
}

func (c crdInfo) path(version, namespace, name string) string {
	p := "/apis/" + c.group + "/" + version + "/"
	if c.namespaced {
		if namespace == "" {
			namespace = "default"
		}
		p += "namespaces/" + namespace + "/"
	}
	p += c.plural
	if name != "" {
		p += "/" + name
	}
	return p
}

// OperatorFile builds the case file of one operator: its CRDs, its examples,
// one object generated from each CRD's schema, and variants of each object
// (variants per object, from seed).
func OperatorFile(o Operator, dir string, seed int64, variants int) (*File, error) {
	crdDocs, err := yamlDocs(dir, o.CRDs)
	if err != nil {
		return nil, err
	}
	exDocs, err := yamlDocs(dir, o.Examples)
	if err != nil {
		return nil, err
	}
	f := &File{Path: "operators/" + o.Name + ".yaml", Description: o.Module + "@" + o.Version}
	byKind := map[string]crdInfo{} // group/kind
	var crds []crdInfo
	for _, d := range crdDocs {
		if d.obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		c := parseCRD(d.obj)
		crds = append(crds, c)
		byKind[c.group+"/"+c.kind] = c
		body, _ := json.Marshal(d.obj)
		f.Steps = append(f.Steps, Step{Name: "create CRD " + c.name + " (" + d.file + ")", Request: &Request{
			Method: "POST", Path: crdCollection, Body: body, Status: 201,
			// Conditions arrive asynchronously; the CRD is read again below.
			Ignore: []string{"status"},
		}})
	}
	for _, c := range crds {
		f.Steps = append(f.Steps, Step{WaitEstablished: c.name},
			Step{Name: "get CRD " + c.name, Request: &Request{Method: "GET", Path: crdCollection + "/" + c.name, Status: 200}})
	}

	rnd := rand.New(rand.NewSource(seed))
	type object struct {
		crd     crdInfo
		version string
		obj     map[string]any
		origin  string
	}
	var objects []object
	for _, d := range exDocs {
		apiVersion, _ := d.obj["apiVersion"].(string)
		kind, _ := d.obj["kind"].(string)
		group, version, _ := strings.Cut(apiVersion, "/")
		c, ok := byKind[group+"/"+kind]
		if !ok {
			continue // a Namespace, a Deployment, or a CRD not in the list
		}
		objects = append(objects, object{crd: c, version: version, obj: d.obj, origin: d.file})
	}
	for _, c := range crds {
		if s := c.schemas[c.storage]; s != nil {
			obj := generate(s, rnd, 0)
			m, _ := obj.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			m["apiVersion"] = c.group + "/" + c.storage
			m["kind"] = c.kind
			m["metadata"] = map[string]any{"name": "gen-" + strings.ToLower(c.kind)}
			objects = append(objects, object{crd: c, version: c.storage, obj: m, origin: "generated from the schema"})
		}
	}
	for i, ob := range objects {
		ns, _ := lookupAny(ob.obj, "metadata", "namespace").(string)
		name, _ := lookupAny(ob.obj, "metadata", "name").(string)
		if name == "" {
			name = fmt.Sprintf("obj-%d", i)
			setAny(ob.obj, name, "metadata", "name")
		}
		rv := fmt.Sprintf("rv%d", i)
		body, _ := json.Marshal(ob.obj)
		f.Steps = append(f.Steps, Step{Name: fmt.Sprintf("create %s %s (%s)", ob.crd.kind, name, ob.origin), Request: &Request{
			Method: "POST", Path: ob.crd.path(ob.version, ns, ""), Body: body, Capture: map[string]string{rv: "metadata.resourceVersion"}, UnorderedErrors: true,
		}})
		schema := ob.crd.schemas[ob.version]
		for v := 0; v < variants; v++ {
			m := mutate(ob.obj, schema, rnd)
			if m == nil {
				continue
			}
			mutated := m.obj
			vname := fmt.Sprintf("%s-v%d", name, v)
			path := ob.crd.path(ob.version, ns, "")
			method := "POST"
			if m.update {
				// An update of the object created above: transition rules
				// and ratcheting see an old object.
				setAny(mutated, name, "metadata", "name")
				setAny(mutated, "${"+rv+"}", "metadata", "resourceVersion")
				path = ob.crd.path(ob.version, ns, name)
				method = "PUT"
			} else {
				setAny(mutated, vname, "metadata", "name")
			}
			if m.strict {
				path += "?fieldValidation=Strict"
			}
			b, _ := json.Marshal(mutated)
			f.Steps = append(f.Steps, Step{Name: fmt.Sprintf("%s %s %s: %s", strings.ToLower(method), ob.crd.kind, name, m.what), Request: &Request{
				Method: method, Path: path, Body: b, UnorderedErrors: true, SkipUnresolved: m.update,
				Capture: map[string]string{rv: "metadata.resourceVersion"},
			}})
		}
	}
	return f, nil
}

func lookupAny(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func setAny(m map[string]any, val any, keys ...string) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = val
}

// generate makes a value that the schema's required fields, types, enums
// and bounds accept where it can tell (patterns and CEL rules it does not
// solve: a generated object may be invalid, and both servers must say so
// the same way).
func generate(s map[string]any, rnd *rand.Rand, depth int) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[rnd.Intn(len(enum))]
	}
	if d, ok := s["default"]; ok {
		return d
	}
	switch s["type"] {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			if ps, ok := props[name].(map[string]any); ok && depth < 12 {
				out[name] = generate(ps, rnd, depth+1)
			}
		}
		return out
	case "array":
		n := 0
		if mi, ok := s["minItems"].(float64); ok {
			n = int(mi)
		}
		var out []any
		if items, ok := s["items"].(map[string]any); ok {
			for i := 0; i < n; i++ {
				out = append(out, generate(items, rnd, depth+1))
			}
		}
		if out == nil {
			return []any{}
		}
		return out
	case "integer":
		if mi, ok := s["minimum"].(float64); ok {
			return int64(mi)
		}
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
	case "string":
		switch s["format"] {
		case "date-time":
			return "2024-01-02T03:04:05Z"
		case "duration":
			return "30s"
		}
		n := 1
		if ml, ok := s["minLength"].(float64); ok {
			n = int(ml)
		}
		return strings.Repeat("a", n)
	}
	if s["x-kubernetes-int-or-string"] == true {
		return "1"
	}
	return map[string]any{}
}

// mutation is one broken variant of an object.
type mutation struct {
	obj    map[string]any
	what   string
	update bool // sent as an update of the original
	strict bool // sent with fieldValidation=Strict
}

// leaf is a value inside an object with the schema that covers it.
type leaf struct {
	path   []any // string keys and int indexes
	value  any
	schema map[string]any
}

func leaves(v any, s map[string]any, path []any, out *[]leaf) {
	if s == nil {
		return
	}
	*out = append(*out, leaf{path: append([]any(nil), path...), value: v, schema: s})
	switch t := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		addl, _ := s["additionalProperties"].(map[string]any)
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(path) == 0 && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			cs, _ := props[k].(map[string]any)
			if cs == nil {
				cs = addl
			}
			leaves(t[k], cs, append(path, k), out)
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for i, c := range t {
			leaves(c, items, append(path, i), out)
		}
	}
}

func deepCopy(v map[string]any) map[string]any {
	b, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func setPath(root map[string]any, path []any, val any, remove bool) {
	var cur any = root
	for i, p := range path {
		last := i == len(path)-1
		switch t := cur.(type) {
		case map[string]any:
			k := p.(string)
			if last {
				if remove {
					delete(t, k)
				} else {
					t[k] = val
				}
				return
			}
			cur = t[k]
		case []any:
			idx := p.(int)
			if last {
				t[idx] = val
				return
			}
			cur = t[idx]
		}
	}
}

// mutate picks one way to break the object that its schema allows for.
func mutate(obj, schema map[string]any, rnd *rand.Rand) *mutation {
	if schema == nil {
		return nil
	}
	var ls []leaf
	leaves(obj, schema, nil, &ls)
	kinds := []string{"wrong type", "drop required", "enum", "bound", "unknown field", "update"}
	for try := 0; try < 20; try++ {
		kind := kinds[rnd.Intn(len(kinds))]
		cp := deepCopy(obj)
		switch kind {
		case "wrong type":
			l := ls[rnd.Intn(len(ls))]
			if len(l.path) == 0 {
				continue
			}
			setPath(cp, l.path, wrongType(l.schema), false)
			return &mutation{obj: cp, what: fmt.Sprintf("wrong type at %s", render(l.path))}
		case "drop required":
			var cands []leaf
			for _, l := range ls {
				if req, ok := l.schema["required"].([]any); ok && len(req) > 0 {
					if m, ok := l.value.(map[string]any); ok {
						for _, r := range req {
							if _, ok := m[r.(string)]; ok {
								cands = append(cands, leaf{path: append(append([]any(nil), l.path...), r.(string))})
							}
						}
					}
				}
			}
			if len(cands) == 0 {
				continue
			}
			l := cands[rnd.Intn(len(cands))]
			setPath(cp, l.path, nil, true)
			return &mutation{obj: cp, what: "without required " + render(l.path)}
		case "enum":
			var cands []leaf
			for _, l := range ls {
				if _, ok := l.schema["enum"]; ok && len(l.path) > 0 {
					cands = append(cands, l)
				}
			}
			if len(cands) == 0 {
				continue
			}
			l := cands[rnd.Intn(len(cands))]
			setPath(cp, l.path, "NotInTheEnum", false)
			return &mutation{obj: cp, what: "value outside the enum at " + render(l.path)}
		case "bound":
			var cands []leaf
			for _, l := range ls {
				for _, k := range []string{"maxLength", "maximum", "minimum", "maxItems", "pattern", "minLength"} {
					if _, ok := l.schema[k]; ok && len(l.path) > 0 {
						cands = append(cands, l)
						break
					}
				}
			}
			if len(cands) == 0 {
				continue
			}
			l := cands[rnd.Intn(len(cands))]
			setPath(cp, l.path, breakBound(l.schema), false)
			return &mutation{obj: cp, what: "value outside a bound at " + render(l.path)}
		case "unknown field":
			var cands []leaf
			for _, l := range ls {
				if _, ok := l.value.(map[string]any); ok && l.schema["x-kubernetes-preserve-unknown-fields"] != true {
					if _, ok := l.schema["properties"]; ok {
						cands = append(cands, l)
					}
				}
			}
			if len(cands) == 0 {
				continue
			}
			l := cands[rnd.Intn(len(cands))]
			setPath(cp, append(append([]any(nil), l.path...), "unknownField"), "x", false)
			return &mutation{obj: cp, what: "unknown field under " + render(l.path), strict: true}
		case "update":
			var cands []leaf
			for _, l := range ls {
				switch l.value.(type) {
				case string, float64, bool:
					if len(l.path) > 0 {
						cands = append(cands, l)
					}
				}
			}
			if len(cands) == 0 {
				continue
			}
			l := cands[rnd.Intn(len(cands))]
			setPath(cp, l.path, changed(l.value), false)
			return &mutation{obj: cp, what: "update changing " + render(l.path), update: true}
		}
	}
	return nil
}

func render(path []any) string {
	var sb strings.Builder
	for _, p := range path {
		switch t := p.(type) {
		case string:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(t)
		case int:
			fmt.Fprintf(&sb, "[%d]", t)
		}
	}
	return sb.String()
}

func wrongType(s map[string]any) any {
	switch s["type"] {
	case "string":
		return 42
	case "integer", "number":
		return "not-a-number"
	case "boolean":
		return "yes"
	case "array":
		return map[string]any{"a": 1}
	case "object":
		return "a string"
	}
	if s["x-kubernetes-int-or-string"] == true {
		return true
	}
	return []any{1}
}

func breakBound(s map[string]any) any {
	switch {
	case s["maxLength"] != nil:
		n, _ := s["maxLength"].(float64)
		return strings.Repeat("x", int(n)+1)
	case s["maximum"] != nil:
		n, _ := s["maximum"].(float64)
		return n + 1
	case s["minimum"] != nil:
		n, _ := s["minimum"].(float64)
		return n - 1
	case s["maxItems"] != nil:
		n, _ := s["maxItems"].(float64)
		items, _ := s["items"].(map[string]any)
		var out []any
		for i := 0; i <= int(n); i++ {
			out = append(out, generate(items, rand.New(rand.NewSource(int64(i))), 0))
		}
		return out
	case s["pattern"] != nil:
		return "!! does not match !!"
	}
	return ""
}

func changed(v any) any {
	switch t := v.(type) {
	case string:
		return t + "-changed"
	case float64:
		return t + 1
	case bool:
		return !t
	}
	return v
}
