package cr

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/convcache"
	"github.com/crdplane/crdplane/pkg/convert"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/jsonscan"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
)

// convertObjects converts custom resources of r to apiVersion: None
// conversion is an in-process apiVersion rewrite; Webhook conversion, and
// None conversion of a CRD with CEL conversion rules (the annotation
// conversion.crdplane.dev/rules, run by the converter in its process, see
// pkg/celconv), is one call to the converter service for every object not
// already there (a list in one call, unless it is over gRPC's request size limit: then in
// calls of up to 15 MiB; the converter coalesces concurrent calls and
// chunks large lists itself). The converter's errors (a Status: 500 InternalError
// "conversion webhook for <gvk> failed: ..." as upstream) pass through
// unchanged; an unreachable converter is 503.
//
// A converted object is then coerced to the target version's schema, as
// upstream's schemaCoercingConverter does after every conversion (reads at
// another version than the stored one, writes to the storage version):
// what that schema does not specify is pruned. Under None conversion an
// object converted from a version with the very same schema is left as it
// is (it has nothing to prune).
func (a *Server) convertObjects(ctx context.Context, r *resource, apiVersion string, objs [][]byte) ([][]byte, error) {
	if len(objs) == 0 {
		return objs, nil
	}
	pr, err := a.schemas.pruner(r, versionOf(apiVersion))
	if err != nil {
		return nil, internalError(err)
	}
	if !r.webhookConversion() && !celconv.HasRules(r.crd) {
		out := make([][]byte, len(objs))
		for i, o := range objs {
			if atVersion(o, apiVersion) {
				out[i] = o // nothing to rewrite, nothing to prune
				continue
			}
			from := versionOf(objectAPIVersion(o))
			c, ok := setAPIVersion(o, apiVersion)
			if !ok {
				if c, err = convert.None(o, apiVersion); err != nil {
					return nil, apierrors.NewInternalError(fmt.Errorf("convert to %s: %w", apiVersion, err))
				}
			}
			if pr.needed(from) {
				if c, err = pr.apply(c); err != nil {
					return nil, apierrors.NewInternalError(err)
				}
			}
			out[i] = c
		}
		return out, nil
	}
	out := make([][]byte, len(objs))
	var idx []int
	var pending [][]byte
	// Webhook conversions served before (package convcache: by CRD uid and
	// generation, object uid and resourceVersion, apiVersion) are not asked
	// again. CEL rules live in an annotation, outside the generation: not
	// cached.
	cache := a.converted
	if !r.webhookConversion() {
		cache = nil
	}
	cacheKey := func(in convcache.Input) convcache.Key {
		return in.KeyFor(string(r.crd.UID), r.crd.Generation, apiVersion)
	}
	for i, o := range objs {
		if atVersion(o, apiVersion) || objectAPIVersion(o) == apiVersion {
			out[i] = o
			continue
		}
		if in, ok := cache.Inspect(o); ok {
			if c, hit := cache.Get(cacheKey(in), in); hit {
				out[i] = c
				continue
			}
		}
		idx = append(idx, i)
		pending = append(pending, o)
	}
	if len(pending) == 0 {
		return out, nil
	}
	if a.converter == nil {
		return nil, apierrors.NewServiceUnavailable("webhook conversion is not available: no converter service configured")
	}
	// A list goes in requests within the gRPC request size limit.
	for _, b := range convertBatches(pending, convertBatchBytes) {
		resp, err := a.converter.Convert(ctx, &converterv1.ConvertRequest{Crd: r.crdRef(), DesiredApiVersion: apiVersion, Objects: pending[b[0]:b[1]]})
		if err != nil {
			return nil, err
		}
		if len(resp.GetObjects()) != b[1]-b[0] {
			return nil, apierrors.NewInternalError(fmt.Errorf("converter returned %d objects for %d", len(resp.GetObjects()), b[1]-b[0]))
		}
		for j, i := range idx[b[0]:b[1]] {
			// What a webhook returns is coerced whatever the versions' schemas.
			if out[i], err = pr.apply(resp.GetObjects()[j]); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			if in, ok := cache.Inspect(pending[b[0]+j]); ok {
				cache.Put(cacheKey(in), in, out[i])
			}
		}
	}
	return out, nil
}

// convertBatchBytes bounds the objects of one ConvertRequest: the gRPC
// request limit less room for the rest of the request.
const convertBatchBytes = grpcx.MaxRequestMessageSize - 1<<20

// convertBatches splits objs into runs [start, end) of at most max bytes
// (counting each object's few bytes of protobuf framing); an object larger
// than max goes alone.
func convertBatches(objs [][]byte, max int) [][2]int {
	var out [][2]int
	start, size := 0, 0
	for i, o := range objs {
		n := len(o) + 10
		if i > start && size+n > max {
			out = append(out, [2]int{start, i})
			start, size = i, 0
		}
		size += n
	}
	if start < len(objs) {
		out = append(out, [2]int{start, len(objs)})
	}
	return out
}

// versionOf is the version of an apiVersion ("stable.example.com/v1" ->
// "v1").
func versionOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[i+1:]
	}
	return apiVersion
}

// readObjects turns objects read from storage into what the client reads:
// defaulted with the storage version's schema (when it has defaults), then
// converted to the request version.
func (a *Server) readObjects(ctx context.Context, r *resource, objs [][]byte) ([][]byte, error) {
	objs, err := a.schemas.readDefaults(r, objs)
	if err != nil {
		return nil, internalError(err)
	}
	return a.convertObjects(ctx, r, r.apiVersion(), objs)
}

// readObject is readObjects of one object.
func (a *Server) readObject(ctx context.Context, r *resource, obj []byte) ([]byte, error) {
	out, err := a.readObjects(ctx, r, [][]byte{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// convertOne converts one object.
func (a *Server) convertOne(ctx context.Context, r *resource, apiVersion string, obj []byte) ([]byte, error) {
	out, err := a.convertObjects(ctx, r, apiVersion, [][]byte{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// atVersion reports whether obj starts with apiVersion want
// (`{"apiVersion":"<want>",`), reading no further: the usual stored
// object, written by crdplane (a JSON encoding of a map: sorted keys, no
// duplicates, no whitespace), starts with its only apiVersion member.
// setAPIVersion's fastest path, and lists read at the version they are
// stored at; false says nothing.
func atVersion(obj []byte, want string) bool {
	if len(obj) <= len(apiVersionPrefix)+len(want)+2 || !bytes.HasPrefix(obj, apiVersionPrefix) {
		return false
	}
	v := obj[len(apiVersionPrefix):]
	return string(v[:len(want)]) == want && v[len(want)] == '"' && v[len(want)+1] == ','
}

// objectAPIVersion reads an object's apiVersion without decoding the rest
// ("" when it has none that is a string, or is not a JSON object).
func objectAPIVersion(obj []byte) string {
	raw, _, _ := jsonscan.Lookup(obj, "apiVersion")
	v, _ := jsonscan.String(raw)
	return v
}

var apiVersionPrefix = []byte(`{"apiVersion":"`)

// setAPIVersion returns obj with its top-level apiVersion set to want,
// without decoding it: as is when it already says so, else with the value
// spliced in. ok is false when the fast path does not apply (no single
// plain apiVersion member); the caller then converts the slow way.
func setAPIVersion(obj []byte, want string) (out []byte, ok bool) {
	if atVersion(obj, want) {
		return obj, true
	}
	return spliceAPIVersion(obj, want)
}

// spliceAPIVersion is setAPIVersion past its fastest path: it finds the
// apiVersion member wherever it is.
func spliceAPIVersion(obj []byte, want string) (out []byte, ok bool) {
	var m jsonscan.Member
	found, plain := 0, true
	_, err := jsonscan.ScanObject(obj, jsonscan.SkipSpace(obj, 0), func(mm jsonscan.Member) {
		plain = plain && mm.Plain
		if mm.KeyIs(obj, "apiVersion") {
			m = mm
			found++
		}
	})
	if err != nil || !plain || found != 1 {
		return nil, false
	}
	val := m.Value(obj)
	if len(val) == len(want)+2 && val[0] == '"' && string(val[1:len(val)-1]) == want {
		return obj, true
	}
	if strings.ContainsAny(want, `"\`) {
		return nil, false
	}
	var buf [64]byte
	quoted := append(append(append(buf[:0], '"'), want...), '"')
	return jsonscan.ApplyEdits(obj, jsonscan.Edit{Start: m.ValStart, End: m.ValEnd, Repl: quoted}), true
}
