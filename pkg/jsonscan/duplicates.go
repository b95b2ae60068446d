package jsonscan

import "strconv"

// maxDuplicates is how many duplicate fields sigs.k8s.io/json's strict
// decoding reports at most.
const maxDuplicates = 100

// DuplicateFields returns the paths of the repeated keys in the objects of
// the JSON value that starts at b[i] (white space allowed before it), as
// sigs.k8s.io/json's strict decoding into a map[string]any reports them in
// `duplicate field "<path>"` errors (what kube-apiserver's decoder says of
// a request body under fieldValidation Strict or Warn): keys joined with
// ".", array indexes as "[i]" ("spec.list[0].name"), each key compared after
// unescaping; in document order of the repeats (a repeated key is reported
// before the repeats inside its value), a path once, at most 100. An error
// reports malformed input (then the decoder fails anyway).
func DuplicateFields(b []byte, i int) ([]string, error) {
	d := dupScanner{b: b}
	if _, err := d.value(SkipSpace(b, i), ""); err != nil {
		return nil, err
	}
	return d.out, nil
}

type dupScanner struct {
	b    []byte
	out  []string
	seen map[string]struct{}
}

func (d *dupScanner) report(path string) {
	if len(d.out) >= maxDuplicates {
		return
	}
	if _, dup := d.seen[path]; dup {
		return
	}
	if d.seen == nil {
		d.seen = map[string]struct{}{}
	}
	d.seen[path] = struct{}{}
	d.out = append(d.out, path)
}

// value scans the value at b[i] (not white space) at path and returns the
// offset after it.
func (d *dupScanner) value(i int, path string) (int, error) {
	if uint(i) >= uint(len(d.b)) {
		return 0, ErrMalformed
	}
	switch d.b[i] {
	case '{':
		return d.object(i, path)
	case '[':
		return d.array(i, path)
	}
	return SkipValue(d.b, i)
}

func (d *dupScanner) object(i int, path string) (int, error) {
	var (
		keys  []string // a few keys: a slice beats a map
		set   map[string]struct{}
		inner error
	)
	end, err := ScanObject(d.b, i, func(m Member) {
		if inner != nil {
			return
		}
		name, ok := m.Name(d.b)
		if !ok {
			inner = ErrMalformed
			return
		}
		child := func() string {
			if path == "" {
				return name
			}
			return path + "." + name
		}
		repeated := false
		if set != nil {
			_, repeated = set[name]
		} else {
			for _, k := range keys {
				if k == name {
					repeated = true
					break
				}
			}
		}
		if repeated {
			d.report(child())
		} else if set != nil {
			set[name] = struct{}{}
		} else if keys = append(keys, name); len(keys) > 16 {
			set = make(map[string]struct{}, 2*len(keys))
			for _, k := range keys {
				set[k] = struct{}{}
			}
		}
		if c := d.b[m.ValStart]; c == '{' || c == '[' {
			_, inner = d.value(m.ValStart, child())
		}
	})
	if err != nil {
		return 0, err
	}
	return end, inner
}

func (d *dupScanner) array(i int, path string) (int, error) {
	j := SkipSpace(d.b, i+1)
	if j < len(d.b) && d.b[j] == ']' {
		return j + 1, nil
	}
	for n := 0; ; n++ {
		var err error
		if j < len(d.b) && (d.b[j] == '{' || d.b[j] == '[') {
			j, err = d.value(j, path+"["+strconv.Itoa(n)+"]")
		} else {
			j, err = SkipValue(d.b, j)
		}
		if err != nil {
			return 0, err
		}
		j = SkipSpace(d.b, j)
		if j >= len(d.b) {
			return 0, ErrMalformed
		}
		switch d.b[j] {
		case ',':
			j = SkipSpace(d.b, j+1)
		case ']':
			return j + 1, nil
		default:
			return 0, ErrMalformed
		}
	}
}
