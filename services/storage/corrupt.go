package storage

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// Corrupt objects: values in etcd that upstream's storage decoder
// (k8s.io/apiserver's etcd3 store with apiextensions-apiserver's
// unstructured codec) cannot decode. Writes through the service never
// store one (checkWrite); one written to etcd behind its back (or by an
// older, laxer writer) is found on reads by readEdit.
//
// Upstream v1.33 (AllowUnsafeMalformedObjectDeletion is alpha, off by
// default) fails a whole LIST on the first corrupt object, a watch ends
// with an error, and a GET answers the decoder's error as a plain 500.
// crdplane keeps the GET (decodeError gives the same message) but serves
// lists and watches without the corrupt object: it is logged with its key
// and counted in crdplane_storage_decode_errors_total{resource} (upstream's
// apiserver_storage_decode_errors_total, which it also bumps on every
// failed decode). A watch that saw the object before it went corrupt gets
// a DELETED event for it (lists no longer show it either).

// errCorrupt marks the error of a stored value that cannot be served.
var errCorrupt = errors.New("corrupt object")

// corrupt wraps why a stored value cannot be served.
func corrupt(why error) error { return fmt.Errorf("%w: %w", errCorrupt, why) }

var decodeErrors = metrics.NewCounterVec("storage", "decode_errors_total",
	"Stored objects that could not be decoded (corrupt: skipped by lists and watches), by resource (<plural>.<group>), as upstream's apiserver_storage_decode_errors_total.", "resource")

// reportCorrupt counts a corrupt object a read met and logs it (a key at
// most once a minute: a corrupt object that every list meets does not
// flood the log).
func (s *Service) reportCorrupt(key []byte, err error) {
	resource := keyResource(string(key))
	decodeErrors.WithLabelValues(resource).Inc()
	if s.corruptLog.due(string(key), time.Now()) {
		s.log.Warn("skipping a stored object that cannot be decoded (lists and watches leave it out; a GET answers 500)",
			"key", string(key), "resource", resource, "err", err)
	}
}

// corruptLogEvery is how often a corrupt key is logged.
const corruptLogEvery = time.Minute

// corruptLog remembers when corrupt keys were last logged.
type corruptLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due reports whether key is to be logged now.
func (l *corruptLog) due(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < corruptLogEvery {
		return false
	}
	if l.last == nil || len(l.last) >= 4096 {
		l.last = map[string]time.Time{}
	}
	l.last[key] = now
	return true
}

// keyResource is the <plural>.<group> of a key (as upstream labels its
// metric: the group resource's String()).
func keyResource(key string) string {
	parts := strings.SplitN(strings.TrimPrefix(key, keyRoot), "/", 3)
	if gr, ok := coreResources[parts[0]]; ok {
		return schema.GroupResource{Group: gr.group, Resource: parts[0]}.String()
	}
	if len(parts) < 2 {
		return ""
	}
	return schema.GroupResource{Group: parts[0], Resource: parts[1]}.String()
}

// corruptGetError is upstream's answer to a GET of a corrupt object: the
// storage decoder's error, returned as it is (not a Status), which upstream
// renders as a 500 without a reason carrying the error's text.
func corruptGetError(key, value []byte, readErr error) error {
	err := decodeError(value)
	if err == nil {
		// readEdit is stricter than the decoder here: say why.
		return storedObjectErr(key, readErr)
	}
	return plainStatus(err)
}

// decodeError is the error upstream's storage decoder gives for a stored
// value (nil when it decodes): the unstructured JSON codec first (not JSON:
// the JSON error; no kind, or an apiVersion that names no group version:
// "Object 'Kind' is missing in '<value>'"), then apiextensions-apiserver's
// schemaCoercingDecoder (an apiVersion that is not a string:
// ".apiVersion accessor error: ..."; a metadata that is not an object:
// "invalid metadata: expected object, got <type>").
func decodeError(value []byte) error {
	u := &unstructured.Unstructured{}
	if _, _, err := unstructured.UnstructuredJSONScheme.Decode(value, nil, u); err != nil {
		return err
	}
	if _, _, err := unstructured.NestedString(u.Object, "kind"); err != nil {
		return err
	}
	apiVersion, _, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return err
	}
	if md, ok := u.Object["metadata"]; ok && md != nil {
		if _, isMap := md.(map[string]any); !isMap {
			return fmt.Errorf("invalid metadata: expected object, got %T", md)
		}
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return err
	}
	return nil
}
