package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestSkipSpace(t *testing.T) {
	tests := []struct {
		in   string
		i    int
		want int
	}{
		{"", 0, 0},
		{"x", 0, 0},
		{" \t\r\nx", 0, 4},
		{"  ", 0, 2},
		{"a  b", 1, 3},
		{"\v x", 0, 0}, // not JSON white space
		{"abc", 5, 5},
		{"abc", -1, -1},
	}
	for _, tt := range tests {
		if got := SkipSpace([]byte(tt.in), tt.i); got != tt.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", tt.in, tt.i, got, tt.want)
		}
	}
}

func TestSkipString(t *testing.T) {
	tests := []struct {
		in   string
		i    int
		want int // -1: ErrMalformed
	}{
		{`"abc"`, 0, 5},
		{`""`, 0, 2},
		{`"abc",1`, 0, 5},
		{`x"abc"`, 1, 6},
		{`"a\"b"`, 0, 6},
		{`"a\\"b"`, 0, 5},
		{`"a\\\"b"`, 0, 8},
		{`"\\\\"`, 0, 6},
		{`"\u0022"`, 0, 8},
		{`"\"`, 0, -1},
		{`"abc`, 0, -1},
		{`"`, 0, -1},
		{`abc`, 0, -1},
		{``, 0, -1},
		{`"a"`, 3, -1},
		{`"a"`, -1, -1},
		// Contents are not validated.
		{"\"\x01\\q\"", 0, 5},
	}
	for _, tt := range tests {
		got, err := SkipString([]byte(tt.in), tt.i)
		if tt.want < 0 {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("SkipString(%q, %d) = %d, %v; want ErrMalformed", tt.in, tt.i, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SkipString(%q, %d) = %d, %v; want %d", tt.in, tt.i, got, err, tt.want)
		}
	}
}

func TestSkipValue(t *testing.T) {
	tests := []struct {
		in   string
		want int // -1: ErrMalformed
	}{
		{`"s"`, 3},
		{`"s",`, 3},
		{`0`, 1},
		{`-0`, 2},
		{`12,`, 2},
		{`-1.5e+3}`, 7},
		{`1E9]`, 3},
		{`2.0 `, 3},
		{`01`, 1}, // the number is 0; what follows is the caller's to judge
		{`true`, 4},
		{`false,`, 5},
		{`null}`, 4},
		{`{}`, 2},
		{`[]`, 2},
		{`{"a":[1,{"b":"]}"}],"c":"\"}"}x`, 30},
		{`[[[]],[]] ,`, 9},
		{`-`, -1},
		{`+1`, -1},
		{`.5`, -1},
		{`1.`, -1},
		{`1.e3`, -1},
		{`1e`, -1},
		{`1e+`, -1},
		{`tru`, -1},
		{`nul`, -1},
		{`True`, -1},
		{`x`, -1},
		{`}`, -1},
		{`]`, -1},
		{`,`, -1},
		{` 1`, -1}, // starts at white space
		{``, -1},
		{`"abc`, -1},
		{`{"a":1`, -1},
		{`[1,[2]`, -1},
		{`{"a":"}`, -1},
		// Inside an object or array only brackets are counted.
		{`[1 2}`, 5},
		{`{x}`, 3},
	}
	for _, tt := range tests {
		got, err := SkipValue([]byte(tt.in), 0)
		if tt.want < 0 {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("SkipValue(%q) = %d, %v; want ErrMalformed", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SkipValue(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	if _, err := SkipValue([]byte(`1`), 1); err == nil {
		t.Error("SkipValue past the end: no error")
	}
	if _, err := SkipValue([]byte(`1`), -1); err == nil {
		t.Error("SkipValue before the start: no error")
	}
}

// scanned is a member as text: its raw key and raw value.
type scanned struct{ key, val string }

func scanAll(doc []byte, i int) ([]scanned, int, error) {
	var got []scanned
	end, err := ScanObject(doc, i, func(m Member) {
		got = append(got, scanned{string(doc[m.KeyStart:m.KeyEnd]), string(m.Value(doc))})
	})
	return got, end, err
}

func TestScanObject(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []scanned
	}{
		{"empty", `{}`, nil},
		{"empty with spaces", "{ \n\t}", nil},
		{"one", `{"a":1}`, []scanned{{`"a"`, `1`}}},
		{"kinds", `{"s":"x","n":-1.5e3,"t":true,"f":false,"z":null,"o":{"a":[1]},"l":[{},[]]}`, []scanned{
			{`"s"`, `"x"`}, {`"n"`, `-1.5e3`}, {`"t"`, `true`}, {`"f"`, `false`}, {`"z"`, `null`}, {`"o"`, `{"a":[1]}`}, {`"l"`, `[{},[]]`},
		}},
		{"white space", " {\n \"a\" :\t\"b\" ,\r\n \"c\" : [ 1 , 2 ] } ", []scanned{{`"a"`, `"b"`}, {`"c"`, `[ 1 , 2 ]`}}},
		{"duplicates in order", `{"a":1,"a":2}`, []scanned{{`"a"`, `1`}, {`"a"`, `2`}}},
		{"brackets and quotes in strings", `{"a\"}":"}{][\\\"","b":["{","}"]}`, []scanned{{`"a\"}"`, `"}{][\\\""`}, {`"b"`, `["{","}"]`}}},
		{"nested members not listed", `{"spec":{"metadata":{"name":"x"}},"metadata":{}}`, []scanned{{`"spec"`, `{"metadata":{"name":"x"}}`}, {`"metadata"`, `{}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := []byte(tt.in)
			start := SkipSpace(doc, 0)
			got, end, err := scanAll(doc, start)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("members %q, want %q", got, tt.want)
			}
			if SkipSpace(doc, end) != len(doc) || doc[end-1] != '}' {
				t.Errorf("end %d of %q", end, tt.in)
			}
		})
	}
}

func TestScanObjectRejects(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{``, ErrNotObject},
		{`[]`, ErrNotObject},
		{`"x"`, ErrNotObject},
		{`1`, ErrNotObject},
		{`null`, ErrNotObject},
		{`{`, ErrMalformed},
		{`{ `, ErrMalformed},
		{`{"a"`, ErrMalformed},
		{`{"a":`, ErrMalformed},
		{`{"a":}`, ErrMalformed},
		{`{"a":1`, ErrMalformed},
		{`{"a":1,`, ErrMalformed},
		{`{"a":1,}`, ErrMalformed},
		{`{,"a":1}`, ErrMalformed},
		{`{"a":1,,"b":2}`, ErrMalformed},
		{`{"a":1 "b":2}`, ErrMalformed},
		{`{"a" 1}`, ErrMalformed},
		{`{"a"::1}`, ErrMalformed},
		{`{a:1}`, ErrMalformed},
		{`{1:1}`, ErrMalformed},
		{`{"a":1]`, ErrMalformed},
		{`{"a":tru}`, ErrMalformed},
		{`{"a":01}`, ErrMalformed},
		{`{"a":1x}`, ErrMalformed},
		{`{"a":"b"c}`, ErrMalformed},
		{`{"a":"b}`, ErrMalformed},
		{`{"a":{"b":1}`, ErrMalformed},
		{`{"a\":1}`, ErrMalformed},
	}
	for _, tt := range tests {
		_, err := ScanObject([]byte(tt.in), 0, func(Member) {})
		if !errors.Is(err, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.in, err, tt.want)
		}
	}
	for _, i := range []int{-1, 2, 3} {
		if _, err := ScanObject([]byte(`{}`), i, func(Member) {}); !errors.Is(err, ErrNotObject) {
			t.Errorf("offset %d: got %v", i, err)
		}
	}
}

func TestKeyIsAndName(t *testing.T) {
	tests := []struct {
		key      string // raw, with quotes
		name     string
		is, ok   bool
		wantName string
	}{
		{`"apiVersion"`, "apiVersion", true, true, "apiVersion"},
		{`"apiVersion"`, "apiversion", false, true, "apiVersion"}, // case-sensitive
		{`"APIVERSION"`, "apiVersion", false, true, "APIVERSION"},
		{`"apiVersion"`, "apiVersio", false, true, "apiVersion"},
		{`"\u0061piVersion"`, "apiVersion", true, true, "apiVersion"},
		{`"apiV\u0065rsion"`, "apiVersion", true, true, "apiVersion"},
		{`"a\"b"`, `a"b`, true, true, `a"b`},
		{`"a\\b"`, `a\b`, true, true, `a\b`},
		{`"\/"`, `/`, true, true, `/`},
		{`"\ud83d\ude00"`, "😀", true, true, "😀"},
		{`"日本"`, "日本", true, true, "日本"},
		{`""`, "", true, true, ""},
		// Not decoding to themselves, as encoding/json reads them.
		{"\"\xff\"", "\xff", false, true, "\ufffd"},
		{"\"\xff\"", "\ufffd", true, true, "\ufffd"},
		{`"\ud800"`, "\ufffd", true, true, "\ufffd"},
		// Invalid strings match nothing.
		{"\"a\x01\"", "a\x01", false, false, ""},
		{`"\q"`, `\q`, false, false, ""},
		{`"\u00"`, `\u00`, false, false, ""},
	}
	for _, tt := range tests {
		doc := []byte(`{` + tt.key + `:1}`)
		var ms []Member
		if _, err := ScanObject(doc, 0, func(m Member) { ms = append(ms, m) }); err != nil || len(ms) != 1 {
			t.Fatalf("%s: %v", doc, err)
		}
		m := ms[0]
		if got := m.KeyIs(doc, tt.name); got != tt.is {
			t.Errorf("%s KeyIs(%q) = %v, want %v", tt.key, tt.name, got, tt.is)
		}
		if name, ok := m.Name(doc); name != tt.wantName || ok != tt.ok {
			t.Errorf("%s Name() = %q, %v; want %q, %v", tt.key, name, ok, tt.wantName, tt.ok)
		}
	}
	if (Member{}).KeyIs([]byte(`{}`), "") {
		t.Error("the zero Member has a key")
	}
}

func TestFindAndLookup(t *testing.T) {
	doc := []byte(` {"metadata":{"name":"n","uid":"u-1"},"spec":{"color":"bl\u0075e","size":3,"none":null,"metadata":{"name":"inner"}},` +
		`"kind":"CronTab","dup":1,"dup":{"x":2},"m\u0065ta":"esc"}`)
	tests := []struct {
		path  []string
		want  string
		found bool
	}{
		{[]string{"metadata", "name"}, `"n"`, true},
		{[]string{"metadata", "uid"}, `"u-1"`, true},
		{[]string{"metadata"}, `{"name":"n","uid":"u-1"}`, true},
		{[]string{"kind"}, `"CronTab"`, true},
		{[]string{"spec", "color"}, `"bl\u0075e"`, true},
		{[]string{"spec", "size"}, `3`, true},
		{[]string{"spec", "none"}, `null`, true},
		{[]string{"spec", "metadata", "name"}, `"inner"`, true},
		{[]string{"dup"}, `{"x":2}`, true},
		{[]string{"dup", "x"}, `2`, true},
		{[]string{"meta"}, `"esc"`, true},
		{[]string{"Kind"}, ``, false},
		{[]string{"spec", "missing"}, ``, false},
		{[]string{"spec", "color", "deeper"}, ``, false},
		{[]string{"status", "x"}, ``, false},
		{nil, ``, false},
	}
	for _, tt := range tests {
		raw, found, err := Lookup(doc, tt.path...)
		if err != nil || found != tt.found || string(raw) != tt.want {
			t.Errorf("Lookup(%q) = %s, %v, %v; want %s, %v", tt.path, raw, found, err, tt.want, tt.found)
		}
	}

	m, found, err := Find(doc, 1, "dup")
	if err != nil || !found || string(m.Value(doc)) != `{"x":2}` || string(doc[m.KeyStart:m.KeyEnd]) != `"dup"` {
		t.Errorf("Find: %+v %v %v", m, found, err)
	}
	if _, found, err := Find(doc, 1, "nope"); err != nil || found {
		t.Errorf("Find of a missing member: %v %v", found, err)
	}

	names := []string{"kind", "dup", "meta", "missing", "metadata"}
	out := make([]Member, len(names)+1)
	out[len(names)] = m // beyond names: untouched
	if err := FindEach(doc, 1, names, out); err != nil {
		t.Fatalf("FindEach: %v", err)
	}
	for k, want := range []string{`"CronTab"`, `{"x":2}`, `"esc"`, ``, `{"name":"n","uid":"u-1"}`} {
		if got := string(out[k].Value(doc)); got != want {
			t.Errorf("FindEach: %s = %s, want %s", names[k], got, want)
		}
	}
	if out[3] != (Member{}) || out[len(names)] != m {
		t.Errorf("FindEach: %+v", out)
	}
	if err := FindEach([]byte(`{"kind":"K",}`), 0, names, out); !errors.Is(err, ErrMalformed) || out[0] != (Member{}) {
		t.Errorf("FindEach in a malformed object: %v %+v", err, out[0])
	}

	// A malformed object is reported, even after the member.
	if _, _, err := Find([]byte(`{"a":1,"b":}`), 0, "a"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Find in a malformed object: %v", err)
	}
	for _, bad := range []string{`{"a":1,"b":}`, `{"a":{"b":1,}}`} {
		if _, _, err := Lookup([]byte(bad), "a", "b"); !errors.Is(err, ErrMalformed) {
			t.Errorf("Lookup in %s: %v", bad, err)
		}
	}
	for _, notObj := range []string{``, `[{"a":1}]`, `"a"`, `null`} {
		if raw, found, err := Lookup([]byte(notObj), "a"); raw != nil || found || err != nil {
			t.Errorf("Lookup in %q: %s %v %v", notObj, raw, found, err)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		raw  string
		want string
		ok   bool
	}{
		{`""`, "", true},
		{`"abc"`, "abc", true},
		{`"ä 日本"`, "ä 日本", true},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", true},
		{`"\u00e4\u65e5"`, "ä日", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\ud83d"`, "\ufffd", true},
		{"\"\xff\xfe\"", "\ufffd\ufffd", true},
		{"\"a\x1fb\"", "", false},
		{"\"a\tb\"", "", false},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{`"a"b"`, "", false},
		{`"\"`, "", false},
		{`"`, "", false},
		{``, "", false},
		{`abc`, "", false},
		{`null`, "", false},
		{`1`, "", false},
		{` "a"`, "", false},
		{`"a" `, "", false},
	}
	for _, tt := range tests {
		if got, ok := String([]byte(tt.raw)); got != tt.want || ok != tt.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

// TestPlain checks the fast path of String, eight bytes at a time, at
// every position of a longer string.
func TestPlain(t *testing.T) {
	base := []byte("abcdefghijklmnopqrstu")
	for pos := range base {
		for _, c := range []byte{0x00, 0x01, 0x1f, '"', '\\', 0x7f, 0x80, 0xc3, 0xff, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x5e} {
			s := bytes.Clone(base)
			s[pos] = c
			want := c >= 0x20 && c != '"' && c != '\\' && c < 0x80
			if got := plain(s); got != want {
				t.Errorf("plain(%q) = %v, want %v", s, got, want)
			}
		}
		s := append(bytes.Clone(base[:pos]), "ä日😀"...)
		if s = append(s, base[pos:]...); !plain(s) {
			t.Errorf("plain(%q) = false", s)
		}
	}
}

func TestEdits(t *testing.T) {
	b := []byte(`{"a":1,"b":2}`)
	tests := []struct {
		name  string
		edits []Edit
		want  string
	}{
		{"none", nil, `{"a":1,"b":2}`},
		{"replace", []Edit{{5, 6, []byte(`"x"`)}}, `{"a":"x","b":2}`},
		{"insert", []Edit{{1, 1, []byte(`"z":0,`)}}, `{"z":0,"a":1,"b":2}`},
		{"delete", []Edit{{6, 12, nil}}, `{"a":1}`},
		{"several", []Edit{{1, 1, []byte(`"z":0,`)}, {5, 6, []byte(`10`)}, {11, 12, []byte(`[]`)}}, `{"z":0,"a":10,"b":[]}`},
		{"at the end", []Edit{{13, 13, []byte(` `)}}, `{"a":1,"b":2} `},
	}
	for _, tt := range tests {
		if got := ApplyEdits(b, tt.edits...); string(got) != tt.want {
			t.Errorf("%s: ApplyEdits = %s, want %s", tt.name, got, tt.want)
		} else if cap(got) != len(got) {
			t.Errorf("%s: ApplyEdits allocated %d for %d", tt.name, cap(got), len(got))
		}
		if got := AppendEdits([]byte("pre"), b, tt.edits...); string(got) != "pre"+tt.want {
			t.Errorf("%s: AppendEdits = %s, want pre%s", tt.name, got, tt.want)
		}
	}
	if string(b) != `{"a":1,"b":2}` {
		t.Errorf("the input changed: %s", b)
	}
}

// FuzzScanObject checks the scanner against encoding/json. On a valid JSON
// object, the members found are those encoding/json decodes, with the same
// values. On anything else the scanner must not panic, and where it
// accepts what encoding/json rejects, the fault must lie where the package
// documentation says the scanner does not look: inside a string or inside
// a nested object or array.
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"n","labels":{"a":"b"}}}`,
		"\t{ \"a\" : [ 1 , {\"]\":\"}\"} ] ,\n\"b\" : \"q\\\"}\" }\r\n",
		`{"spec":{"metadata":{"name":"inner"}},"metadata":null,"n":-1.5E+3}`,
		`{"k":1,"k":[2]}`,
		`{"\u006b":"escaped key","K":"other case"}`,
		`{"s":"a\\","t":"\\\"","u":[true,false,null]}`,
		`{"metadata":{"resourceVersion":"1","name":"a","resourceVersion":"2"}}`,
		`{"metadata":{"name":"a","annotations":{"x":"}{][\\\"","y":"\u007b"}},"spec":["{","}"]}`,
		`{"n":-0.5E-7,"m":0,"o":12345678901234567890}`,
		`{"s":"\ud83d\ude00\ud800"}`,
		"{\"\xff\":\"\xfe\"}",
		`{"a":[1 2}}`,
		`{"a":"\q"}`,
		"{\"a\":\"\x01\"}",
		`{"a":01}`,
		`{"a":1,}`,
		`{"a":1`,
		`[{"a":1}]`,
		`"\u0041"`,
		`-1.5e3`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkString(t, doc)
		start := SkipSpace(doc, 0)
		if json.Valid(doc) {
			// Any valid value is skipped whole.
			if end, err := SkipValue(doc, start); err != nil || SkipSpace(doc, end) != len(doc) {
				t.Fatalf("SkipValue(%q) = %d, %v", doc, end, err)
			}
		} else {
			_, _ = SkipValue(doc, start)
		}

		var members []Member
		end, err := ScanObject(doc, start, func(m Member) { members = append(members, m) })
		var want map[string]json.RawMessage
		if json.Valid(doc) && doc[start] == '{' && json.Unmarshal(doc, &want) == nil {
			if err != nil || SkipSpace(doc, end) != len(doc) {
				t.Fatalf("ScanObject(%q) = %d, %v", doc, end, err)
			}
			checkMembers(t, doc, start, members, want)
			return
		}
		if json.Valid(doc) && !errors.Is(err, ErrNotObject) {
			t.Fatalf("ScanObject(%q) = %v, want ErrNotObject", doc, err)
		}
		if err != nil {
			return
		}
		checkSkeleton(t, doc[start:end], start, members)
		for _, m := range members {
			checkString(t, doc[m.KeyStart:m.KeyEnd])
			checkString(t, m.Value(doc))
		}
	})
}

// checkMembers checks the members scanned in a valid object against what
// encoding/json decodes.
func checkMembers(t *testing.T, doc []byte, start int, members []Member, want map[string]json.RawMessage) {
	t.Helper()
	got := map[string]json.RawMessage{}
	for _, m := range members {
		name, ok := m.Name(doc)
		if !ok || !m.KeyIs(doc, name) {
			t.Fatalf("%q: key %s: Name %q, %v", doc, doc[m.KeyStart:m.KeyEnd], name, ok)
		}
		got[name] = m.Value(doc)
	}
	if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		t.Fatalf("%q: members\n got %q\nwant %q", doc, got, want)
	}
	names := slices.Collect(maps.Keys(want))
	each := make([]Member, len(names))
	if err := FindEach(doc, start, names, each); err != nil {
		t.Fatalf("%q: FindEach: %v", doc, err)
	}
	for k, name := range names {
		if !bytes.Equal(each[k].Value(doc), want[name]) {
			t.Fatalf("%q: FindEach: %q = %q, want %q", doc, name, each[k].Value(doc), want[name])
		}
	}
	for name, v := range want {
		m, found, err := Find(doc, start, name)
		if err != nil || !found || !bytes.Equal(m.Value(doc), v) {
			t.Fatalf("%q: Find(%q) = %q, %v, %v; want %q", doc, name, m.Value(doc), found, err, v)
		}
		if raw, found, err := Lookup(doc, name); err != nil || !found || !bytes.Equal(raw, v) {
			t.Fatalf("%q: Lookup(%q) = %q, %v, %v; want %q", doc, name, raw, found, err, v)
		}
		checkString(t, v)
	}
}

// checkSkeleton checks an object that ScanObject accepted (obj, at offset
// start of the document the members were scanned in): with every string
// and every nested object or array emptied, which the scanner does not
// look into, it must be valid JSON.
func checkSkeleton(t *testing.T, obj []byte, start int, members []Member) {
	t.Helper()
	var edits []Edit
	empty := map[byte][]byte{'"': []byte(`""`), '{': []byte(`{}`), '[': []byte(`[]`)}
	for _, m := range members {
		key := obj[m.KeyStart-start : m.KeyEnd-start]
		edits = append(edits, Edit{m.KeyStart - start, m.KeyEnd - start, empty['"']})
		if key[0] != '"' || key[len(key)-1] != '"' {
			t.Fatalf("%q: key %q", obj, key)
		}
		v := obj[m.ValStart-start : m.ValEnd-start]
		if e, ok := empty[v[0]]; ok {
			// Which bracket closes a nested object or array is not
			// checked.
			if c := v[len(v)-1]; c != '"' && c != '}' && c != ']' || (v[0] == '"') != (c == '"') || len(v) < 2 {
				t.Fatalf("%q: value %q", obj, v)
			}
			edits = append(edits, Edit{m.ValStart - start, m.ValEnd - start, e})
		}
	}
	if skel := ApplyEdits(obj, edits...); !json.Valid(skel) {
		t.Fatalf("ScanObject accepted %q, whose skeleton %q is not valid JSON", obj, skel)
	}
}

// checkString checks String against encoding/json on raw.
func checkString(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := String(raw)
	var want string
	err := json.Unmarshal(raw, &want)
	isString := len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"'
	switch {
	case ok && (err != nil || got != want):
		t.Fatalf("String(%q) = %q; encoding/json: %q, %v", raw, got, want, err)
	case !ok && err == nil && isString:
		t.Fatalf("String(%q) failed; encoding/json: %q", raw, want)
	}
}
