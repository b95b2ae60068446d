package webhook

import "sync"

// flights shares conversions of the same object in progress: an object,
// byte for byte, that is being converted between the same versions of the
// same CRD generation is not sent again; later callers wait for its result
// (the watches of a resource converting the same event cost one
// conversion, as upstream's watch cache converts an event once for all its
// watchers). A flight is forgotten once it lands (successes go on in the
// cache, keyed by uid and resourceVersion; failures are not kept), so a
// request whose object is not cached reaches the webhook or fails with it.
type flights struct {
	mu sync.Mutex
	m  map[batchKey]map[string]*flight
}

// flight is one object's conversion in progress.
type flight struct {
	done chan struct{}
	res  []byte // the converted object, when ok
	ok   bool
}

// claim is what flights says about one object: the flight converting it,
// led by this caller (lead: convert it and land the flight) or by another
// (wait for it).
type claim struct {
	f    *flight
	lead bool
}

func newFlights() *flights { return &flights{m: map[batchKey]map[string]*flight{}} }

// claim finds the flights of objs (of key), starting one, led by the
// caller, for each object nobody converts.
func (fs *flights) claim(key batchKey, objs [][]byte) []claim {
	out := make([]claim, len(objs))
	fs.mu.Lock()
	defer fs.mu.Unlock()
	m := fs.m[key]
	for i, o := range objs {
		if f, ok := m[string(o)]; ok {
			out[i] = claim{f: f}
			continue
		}
		if m == nil {
			m = map[string]*flight{}
			fs.m[key] = m
		}
		f := &flight{done: make(chan struct{})}
		m[string(o)] = f
		out[i] = claim{f: f, lead: true}
	}
	return out
}

// land ends the flight f of obj: res is its result, or err why there is
// none (the callers waiting then convert the object themselves).
func (fs *flights) land(key batchKey, obj []byte, f *flight, res []byte, err error) {
	fs.mu.Lock()
	if m := fs.m[key]; m[string(obj)] == f {
		delete(m, string(obj))
		if len(m) == 0 {
			delete(fs.m, key)
		}
	}
	fs.mu.Unlock()
	if err == nil {
		f.res, f.ok = res, true
	}
	close(f.done)
}
