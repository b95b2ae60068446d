package cr

import (
	"encoding/json"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"math"
	"strconv"
)

// encodeForAdmission encodes an object for the validator keeping each
// number's kind: a float64 that holds an integer (the body's 1.0, 2e3) is
// written with a fraction ("1.0"), so that the validator decodes it as a
// float64 again, as upstream's decoder did from the body. listing.EncodeObject
// would write 1, which decodes as an int64: then a list-type set [1, 1.0]
// would hold a duplicate, where upstream compares int64 1 and float64 1 as
// different values (and reports none).
func encodeForAdmission(obj object) ([]byte, error) {
	if v, changed := markIntegralFloats(obj); changed {
		return listing.EncodeObject(v.(object))
	}
	return listing.EncodeObject(obj)
}

// markIntegralFloats returns v with every integral float64 below 1e21 (the
// ones encoding/json writes without fraction or exponent) replaced by a
// json.Number with a fraction, copying only the maps and slices on the way
// to one; changed reports whether there was any.
func markIntegralFloats(v any) (any, bool) {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			return json.Number(strconv.FormatFloat(x, 'f', -1, 64) + ".0"), true
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			if ne, changed := markIntegralFloats(e); changed {
				if out == nil {
					out = make(map[string]any, len(x))
					for k2, e2 := range x {
						out[k2] = e2
					}
				}
				out[k] = ne
			}
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, e := range x {
			if ne, changed := markIntegralFloats(e); changed {
				if out == nil {
					out = append([]any(nil), x...)
				}
				out[i] = ne
			}
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}
