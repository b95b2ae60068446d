package kubewire

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The v0.37 types of CustomResourceDefinition encode two fields v1.33 does
// not have: status.observedGeneration (4) and
// status.conditions[].observedGeneration (6). v133 turns the v0.37
// serializer's encoding of a CRD, a CRD list or a watch event of one into
// v1.33's by parsing the message and dropping them: a reference
// independent of the Encoder's (which marshals the status without them),
// checked itself against upstream's bytes in golden_test.go.

type wireRule struct {
	drop []protowire.Number
	sub  map[protowire.Number]*wireRule
}

var (
	crdRule     = &wireRule{sub: map[protowire.Number]*wireRule{3: {drop: []protowire.Number{4}, sub: map[protowire.Number]*wireRule{1: {drop: []protowire.Number{6}}}}}}
	crdListRule = &wireRule{sub: map[protowire.Number]*wireRule{2: crdRule}}
)

func rewriteMessage(t testing.TB, m []byte, r *wireRule) []byte {
	t.Helper()
	var out []byte
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		vn := protowire.ConsumeFieldValue(num, typ, m[n:])
		if vn < 0 {
			t.Fatalf("bad field %d: %v", num, protowire.ParseError(vn))
		}
		field := m[:n+vn]
		m = m[n+vn:]
		if slices.Contains(r.drop, num) {
			continue
		}
		if sub, ok := r.sub[num]; ok && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(field[n:])
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendBytes(out, rewriteMessage(t, v, sub))
			continue
		}
		out = append(out, field...)
	}
	return out
}

// v133 rewrites an encoding (k8s\x00 envelope) of a CRD or CRD list.
func v133(t testing.TB, b []byte, list bool) []byte {
	t.Helper()
	if !bytes.HasPrefix(b, protoPrefix) {
		t.Fatal("no protobuf prefix")
	}
	r := crdRule
	if list {
		r = crdListRule
	}
	unknown := &wireRule{sub: map[protowire.Number]*wireRule{2: r}}
	return append(slices.Clone(protoPrefix), rewriteMessage(t, b[len(protoPrefix):], unknown)...)
}
