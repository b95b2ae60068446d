package celconv

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/common"
)

// HasPair reports whether a rule converts from to to.
func (r *Rules) HasPair(from, to string) bool {
	_, ok := r.pairs[[2]string{from, to}]
	return ok
}

// Convert converts obj, a decoded object of the CRD (JSON numbers as
// int64 or float64), to the version of desiredAPIVersion: it returns a
// new object (obj is not changed) with apiVersion set and the pair's
// fields computed. Without a rule for the pair only apiVersion changes.
// Errors are the expression's, naming the target field.
func (r *Rules) Convert(ctx context.Context, obj map[string]any, desiredAPIVersion string) (map[string]any, error) {
	from := versionOf(apiVersionOf(obj))
	to := versionOf(desiredAPIVersion)
	out := make(map[string]any, len(obj)+2)
	for k, v := range obj {
		out[k] = v
	}
	out["apiVersion"] = desiredAPIVersion
	p := r.pairs[[2]string{from, to}]
	if p == nil || from == to {
		return out, nil
	}
	self := common.UnstructuredToVal(obj, p.fromSchema)
	act := map[string]any{"self": self}
	for _, f := range p.fields {
		v, _, err := f.prog.ContextEval(ctx, act)
		if err != nil {
			if isNoSuchKey(err) {
				unset(out, f.path)
				continue
			}
			return nil, fmt.Errorf("%s: %v", f.pathStr, err)
		}
		native, set, err := toNative(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f.pathStr, err)
		}
		if !set {
			unset(out, f.path)
			continue
		}
		setPath(out, f.path, native)
	}
	return out, nil
}

// GroupVersionKind names the source of a conversion in errors
// ("example.com/v1beta1, Kind=CronTab", as upstream's webhook errors).
func (r *Rules) GroupVersionKind(apiVersion string) string {
	return fmt.Sprintf("%s, Kind=%s", apiVersion, r.kind)
}

func isNoSuchKey(err error) bool {
	return strings.Contains(err.Error(), "no such key")
}

// toNative turns a CEL result into a JSON value; set is false for null
// and for an empty optional.
func toNative(v ref.Val) (any, bool, error) {
	switch x := v.(type) {
	case *types.Optional:
		if !x.HasValue() {
			return nil, false, nil
		}
		return toNative(x.GetValue())
	case types.Null:
		return nil, false, nil
	case types.String:
		return string(x), true, nil
	case types.Int:
		return int64(x), true, nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return float64(x), true, nil
		}
		return int64(x), true, nil //nolint:gosec // G115: in range, checked above
	case types.Double:
		return float64(x), true, nil
	case types.Bool:
		return bool(x), true, nil
	case types.Bytes:
		return string(x), true, nil
	case types.Duration:
		return x.Duration.String(), true, nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339), true, nil
	}
	if types.IsError(v) {
		return nil, false, fmt.Errorf("%v", v)
	}
	switch x := v.(type) {
	case traits.Mapper:
		m := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, false, fmt.Errorf("map key %v is not a string", k)
			}
			val, set, err := toNative(x.Get(k))
			if err != nil {
				return nil, false, err
			}
			if set {
				m[string(ks)] = val
			}
		}
		return m, true, nil
	case traits.Lister:
		n, _ := x.Size().(types.Int)
		l := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			val, _, err := toNative(x.Get(i))
			if err != nil {
				return nil, false, err
			}
			l = append(l, val)
		}
		return l, true, nil
	}
	return nil, false, fmt.Errorf("unsupported result type %s", v.Type())
}

// setPath sets path in obj, copying the maps on the way (obj's nested
// maps may be shared with the source object).
func setPath(obj map[string]any, path []string, v any) {
	cur := obj
	for _, name := range path[:len(path)-1] {
		next, _ := cur[name].(map[string]any)
		cp := make(map[string]any, len(next)+1)
		for k, x := range next {
			cp[k] = x
		}
		cur[name] = cp
		cur = cp
	}
	cur[path[len(path)-1]] = v
}

// unset removes path from obj (copying the maps on the way).
func unset(obj map[string]any, path []string) {
	cur := obj
	for _, name := range path[:len(path)-1] {
		next, ok := cur[name].(map[string]any)
		if !ok {
			return
		}
		cp := make(map[string]any, len(next))
		for k, x := range next {
			cp[k] = x
		}
		cur[name] = cp
		cur = cp
	}
	delete(cur, path[len(path)-1])
}

func apiVersionOf(obj map[string]any) string {
	s, _ := obj["apiVersion"].(string)
	return s
}

func versionOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[i+1:]
	}
	return apiVersion
}
