package kubewire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// protoPrefix is the 4 bytes every Kubernetes protobuf message starts
// with ("k8s" and a zero byte).
var protoPrefix = []byte{'k', '8', 's', 0}

// Default bounds of an Encoder's item cache.
const (
	DefaultCacheEntries = 16384
	DefaultCacheBytes   = 256 << 20
)

// EncoderConfig configures an Encoder.
type EncoderConfig struct {
	// CacheEntries bounds the number of cached item encodings
	// (0: DefaultCacheEntries; negative: no cache).
	CacheEntries int
	// CacheBytes bounds their total size (0: DefaultCacheBytes).
	CacheBytes int64
	// Workers bounds the goroutines that encode a list's uncached items
	// (0: GOMAXPROCS).
	Workers int
}

// Encoder encodes the JSON documents of built-in kinds (as the registry
// and storage return them) in Kubernetes protobuf, byte for byte as
// upstream's protobuf serializer encodes the typed objects: each document
// is decoded into its generated type (k8s.io/api,
// k8s.io/apiextensions-apiserver, k8s.io/apimachinery meta) and marshaled
// by the generated code. The encoding of an object with a uid and a
// resourceVersion is cached (bounded), keyed by kind, uid,
// resourceVersion and document length: a list of objects that did not
// change since the last read is assembled from cached encodings. An
// Encoder is safe for concurrent use.
type Encoder struct {
	cache   *itemCache
	workers int
}

// NewEncoder returns an Encoder.
func NewEncoder(cfg EncoderConfig) *Encoder {
	e := &Encoder{workers: cfg.Workers}
	if e.workers <= 0 {
		e.workers = runtime.GOMAXPROCS(0)
	}
	if cfg.CacheEntries >= 0 {
		n, b := cfg.CacheEntries, cfg.CacheBytes
		if n == 0 {
			n = DefaultCacheEntries
		}
		if b <= 0 {
			b = DefaultCacheBytes
		}
		e.cache = newItemCache(n, b)
	}
	return e
}

// Object encodes the JSON document of one object of a built-in kind, named
// by the document's apiVersion and kind (a custom resource is upstream's
// 406 not-marshalable error): the k8s\x00 prefix and a runtime.Unknown
// whose raw bytes are the generated message.
func (e *Encoder) Object(doc []byte) ([]byte, error) {
	h, err := scanHead(doc)
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(h.apiVersion)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	gvk := gv.WithKind(h.kind)
	wt, err := lookupWireType(gvk)
	if err != nil {
		return nil, err
	}
	if wt.item != "" {
		// a list document: its items through List (cached, and encoded
		// as their kind is)
		var l struct {
			Metadata metav1.ListMeta  `json:"metadata"`
			Items    []sigsjsonRawMsg `json:"items"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(doc, &l); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("decode %s: %w", h.kind, err))
		}
		items := make([][]byte, len(l.Items))
		for i, it := range l.Items {
			items[i] = it
		}
		return e.List(h.apiVersion, h.kind, ListMeta{ResourceVersion: l.Metadata.ResourceVersion, Continue: l.Metadata.Continue, RemainingItemCount: l.Metadata.RemainingItemCount}, items)
	}
	msg, err := e.item(gvk, wt, doc, h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, envelopeSize(h.apiVersion, h.kind, len(msg)))
	out = appendEnvelopeHead(out, h.apiVersion, h.kind, len(msg))
	out = append(out, msg...)
	return appendEnvelopeTail(out), nil
}

// ListMeta is the metadata of a list response.
type ListMeta struct {
	ResourceVersion    string
	Continue           string
	RemainingItemCount *int64
}

// List encodes a list of a built-in kind (CustomResourceDefinitionList,
// PartialObjectMetadataList) from the JSON documents of its items (with or
// without their apiVersion and kind), as upstream's serializer encodes the
// typed list: the list message is the ListMeta (field 1) followed by the
// items (field 2, repeated), each item the generated encoding of its
// object, from the cache when it has it.
func (e *Encoder) List(apiVersion, kind string, meta ListMeta, items [][]byte) ([]byte, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	wt, err := lookupWireType(gv.WithKind(kind))
	if err != nil {
		return nil, err
	}
	if wt.item == "" {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s %s is not a list kind", apiVersion, kind))
	}
	itemGVK := gv.WithKind(wt.item)
	itemType, err := lookupWireType(itemGVK)
	if err != nil {
		return nil, err
	}
	msgs, err := e.items(itemGVK, itemType, items)
	if err != nil {
		return nil, err
	}
	lm := metav1.ListMeta{ResourceVersion: meta.ResourceVersion, Continue: meta.Continue, RemainingItemCount: meta.RemainingItemCount}
	lmBytes, err := lm.Marshal()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	raw := fieldSize(len(lmBytes))
	for _, m := range msgs {
		raw += fieldSize(len(m))
	}
	out := make([]byte, 0, envelopeSize(apiVersion, kind, raw))
	out = appendEnvelopeHead(out, apiVersion, kind, raw)
	out = appendField(out, 1, lmBytes)
	for _, m := range msgs {
		out = appendField(out, 2, m)
	}
	return appendEnvelopeTail(out), nil
}

// WatchEvent encodes one watch event as upstream streams it in protobuf:
// a metav1.WatchEvent (type, and the object's protobuf encoding as the
// RawExtension) encoded raw (no prefix or envelope), in a frame of a
// 4-byte big-endian length. object is the event's JSON object: a
// built-in kind (for a BOOKMARK, the object with only apiVersion, kind
// and metadata) or, for an ERROR, the Status.
func (e *Encoder) WatchEvent(eventType string, object []byte) ([]byte, error) {
	obj, err := e.Object(object)
	if err != nil {
		return nil, err
	}
	ev := metav1.WatchEvent{Type: eventType}
	ev.Object.Raw = obj
	n := ev.Size()
	if int64(n) > math.MaxUint32 {
		return nil, apierrors.NewInternalError(fmt.Errorf("watch event of %d bytes", n))
	}
	out := make([]byte, 4+n)
	binary.BigEndian.PutUint32(out, uint32(n)) //nolint:gosec // G115: checked above
	if _, err := ev.MarshalToSizedBuffer(out[4:]); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// item returns the generated encoding of one object (cached).
func (e *Encoder) item(gvk schema.GroupVersionKind, wt wireType, doc []byte, h head) ([]byte, error) {
	var key itemKey
	cacheable := e.cache != nil && h.uid != "" && h.resourceVersion != ""
	if cacheable {
		key = itemKey{gvk: gvk, uid: h.uid, rv: h.resourceVersion, n: len(doc)}
		if b, ok := e.cache.get(key); ok {
			return b, nil
		}
	}
	b, err := marshalJSON(wt, doc)
	if err != nil {
		return nil, err
	}
	if cacheable {
		e.cache.put(key, b)
	}
	return b, nil
}

// items encodes a list's items: cached ones from the cache, the others
// decoded and marshaled by up to e.workers goroutines.
func (e *Encoder) items(gvk schema.GroupVersionKind, wt wireType, docs [][]byte) ([][]byte, error) {
	out := make([][]byte, len(docs))
	keys := make([]itemKey, len(docs))
	var miss []int
	for i, doc := range docs {
		if e.cache != nil {
			if h, err := scanHead(doc); err == nil && h.uid != "" && h.resourceVersion != "" {
				keys[i] = itemKey{gvk: gvk, uid: h.uid, rv: h.resourceVersion, n: len(doc)}
				if b, ok := e.cache.get(keys[i]); ok {
					out[i] = b
					continue
				}
			}
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return out, nil
	}
	workers := min(e.workers, (len(miss)+31)/32)
	errs := make([]error, len(docs))
	encode := func(part []int) {
		for _, i := range part {
			out[i], errs[i] = marshalJSON(wt, docs[i])
		}
	}
	if workers <= 1 {
		encode(miss)
	} else {
		var wg sync.WaitGroup
		per := (len(miss) + workers - 1) / workers
		for start := 0; start < len(miss); start += per {
			part := miss[start:min(start+per, len(miss))]
			wg.Go(func() { encode(part) })
		}
		wg.Wait()
	}
	for _, i := range miss {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if e.cache != nil && keys[i].uid != "" {
			e.cache.put(keys[i], out[i])
		}
	}
	return out, nil
}

// marshalJSON decodes a JSON document into the kind's generated type (as
// upstream's JSON serializer decodes: case-sensitively, integers kept) and
// returns the generated protobuf encoding.
func marshalJSON(wt wireType, doc []byte) ([]byte, error) {
	obj := wt.newObject()
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(doc, obj); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode %T: %w", obj, err))
	}
	if wt.marshal != nil {
		return wt.marshal(obj)
	}
	b := make([]byte, obj.Size())
	n, err := obj.MarshalToSizedBuffer(b)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return b[len(b)-n:], nil
}

// sigsjsonRawMsg is a raw JSON value.
type sigsjsonRawMsg = json.RawMessage

// marshalCRDv133 encodes a CustomResourceDefinition as v1.33's generated
// code does: the v0.37 types add status.observedGeneration (field 4) and
// status.conditions[].observedGeneration (field 6), which their marshaler
// always writes (last, being the highest field numbers); v1.33 has
// neither. The metadata and spec are the generated encodings; the status
// is the generated encoding of each part without those fields.
func marshalCRDv133(o protoObject) ([]byte, error) {
	crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("marshal %T as a CustomResourceDefinition", o))
	}
	md, err := crd.ObjectMeta.Marshal()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	spec, err := crd.Spec.Marshal()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var status []byte
	for i := range crd.Status.Conditions {
		c := crd.Status.Conditions[i]
		og := c.ObservedGeneration
		b, err := c.Marshal()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		status = appendField(status, 1, withoutTrailingVarint(b, 6, og))
	}
	names, err := crd.Status.AcceptedNames.Marshal()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	status = appendField(status, 2, names)
	for _, v := range crd.Status.StoredVersions {
		status = appendField(status, 3, []byte(v))
	}
	out := make([]byte, 0, fieldSize(len(md))+fieldSize(len(spec))+fieldSize(len(status)))
	out = appendField(out, 1, md)
	out = appendField(out, 2, spec)
	return appendField(out, 3, status), nil
}

// withoutTrailingVarint drops the varint field num = v a generated
// marshaler wrote last.
func withoutTrailingVarint(b []byte, num protowire.Number, v int64) []byte {
	n := protowire.SizeTag(num) + protowire.SizeVarint(uint64(v)) //nolint:gosec // G115: an int64 field's varint is its two's complement, as the generated code writes it
	if len(b) < n {
		return b
	}
	return b[:len(b)-n]
}

// envelope: prefix, runtime.Unknown{typeMeta (1), raw (2), contentEncoding
// (3) "", contentType (4) ""} as runtime.Unknown's generated marshaler
// writes it (the empty strings included).

func typeMetaSize(apiVersion, kind string) int {
	return fieldSize(len(apiVersion)) + fieldSize(len(kind))
}

func envelopeSize(apiVersion, kind string, raw int) int {
	return len(protoPrefix) + fieldSize(typeMetaSize(apiVersion, kind)) + fieldSize(raw) + 2 + 2
}

// appendEnvelopeHead appends the prefix, the TypeMeta and the raw field's
// tag and length; the raw bytes follow, then appendEnvelopeTail.
func appendEnvelopeHead(b []byte, apiVersion, kind string, raw int) []byte {
	b = append(b, protoPrefix...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, length(typeMetaSize(apiVersion, kind)))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, apiVersion)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, kind)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendVarint(b, length(raw))
}

func appendEnvelopeTail(b []byte) []byte {
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendVarint(b, 0)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendVarint(b, 0)
}

// fieldSize is the size of a length-delimited field of n bytes (one-byte
// tag).
func fieldSize(n int) int { return 1 + protowire.SizeVarint(length(n)) + n }

// length is a length (of bytes in memory, never negative) as a varint.
func length(n int) uint64 { return uint64(n) } //nolint:gosec // G115: lengths are not negative

func appendField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// head is what the encoder reads of a document without decoding it.
type head struct {
	apiVersion, kind     string
	uid, resourceVersion string
}

// scanHead reads apiVersion, kind, metadata.uid and
// metadata.resourceVersion, stopping at the first member after them
// that it does not need (objects from storage put them first).
func scanHead(doc []byte) (head, error) {
	var h head
	var md []byte
	err := eachMember(doc, func(key, val []byte) bool {
		switch string(key) {
		case "apiVersion":
			h.apiVersion, _ = jsonscan.String(val)
		case "kind":
			h.kind, _ = jsonscan.String(val)
		case "metadata":
			md = val
		}
		return h.apiVersion == "" || h.kind == "" || md == nil
	})
	if err != nil {
		return head{}, apierrors.NewInternalError(fmt.Errorf("read object: %w", err))
	}
	if len(md) > 0 && md[0] == '{' {
		_ = eachMember(md, func(key, val []byte) bool {
			switch string(key) {
			case "uid":
				h.uid, _ = jsonscan.String(val)
			case "resourceVersion":
				h.resourceVersion, _ = jsonscan.String(val)
			}
			return h.uid == "" || h.resourceVersion == ""
		})
	}
	return h, nil
}

// eachMember calls fn with the raw key (between its quotes, escapes not
// resolved) and raw value of the members of the JSON object doc, in
// order, until fn returns false.
func eachMember(doc []byte, fn func(key, val []byte) bool) error {
	i := jsonscan.SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return jsonscan.ErrNotObject
	}
	i = jsonscan.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return nil
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return jsonscan.ErrMalformed
		}
		end, err := jsonscan.SkipString(doc, i)
		if err != nil {
			return err
		}
		key := doc[i+1 : end-1]
		i = jsonscan.SkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return jsonscan.ErrMalformed
		}
		vs := jsonscan.SkipSpace(doc, i+1)
		ve, err := jsonscan.SkipValue(doc, vs)
		if err != nil {
			return err
		}
		if !fn(key, doc[vs:ve]) {
			return nil
		}
		i = jsonscan.SkipSpace(doc, ve)
		switch {
		case i < len(doc) && doc[i] == ',':
			i = jsonscan.SkipSpace(doc, i+1)
		case i < len(doc) && doc[i] == '}':
			return nil
		default:
			return jsonscan.ErrMalformed
		}
	}
}

// itemKey identifies an object's encoding: the same object at the same
// resourceVersion, rendered to the same length, encodes the same.
type itemKey struct {
	gvk     schema.GroupVersionKind
	uid, rv string
	n       int
}

// itemCache is a bounded map of item encodings with CLOCK (second chance)
// eviction.
type itemCache struct {
	mu       sync.Mutex
	entries  map[itemKey]*cacheEntry
	ring     []*cacheEntry
	hand     int
	maxItems int
	maxBytes int64
	bytes    int64
}

type cacheEntry struct {
	key  itemKey
	val  []byte
	used bool
}

func newItemCache(maxItems int, maxBytes int64) *itemCache {
	return &itemCache{entries: make(map[itemKey]*cacheEntry), maxItems: maxItems, maxBytes: maxBytes}
}

func (c *itemCache) get(k itemKey) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok {
		e.used = true
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return e.val, true
}

func (c *itemCache) put(k itemKey, v []byte) {
	if int64(len(v)) > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	for len(c.ring) > 0 && (len(c.entries) >= c.maxItems || c.bytes+int64(len(v)) > c.maxBytes) {
		c.evictOne()
	}
	e := &cacheEntry{key: k, val: v}
	c.entries[k] = e
	c.ring = append(c.ring, e)
	c.bytes += int64(len(v))
}

// evictOne removes the first entry under the hand not used since the hand
// last passed it.
func (c *itemCache) evictOne() {
	for {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		e := c.ring[c.hand]
		if e.used {
			e.used = false
			c.hand++
			continue
		}
		delete(c.entries, e.key)
		c.bytes -= int64(len(e.val))
		last := len(c.ring) - 1
		c.ring[c.hand] = c.ring[last]
		c.ring[last] = nil
		c.ring = c.ring[:last]
		return
	}
}

// Len reports the number of cached item encodings.
func (e *Encoder) Len() int {
	if e.cache == nil {
		return 0
	}
	e.cache.mu.Lock()
	defer e.cache.mu.Unlock()
	return len(e.cache.entries)
}
