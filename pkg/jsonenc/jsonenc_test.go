package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func TestMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", "quote\" back\\slash", "<html> & co", "ctl\x00\x01\x1f\b\f\n\r\t",
		"bad utf8 \xff\xfe", "line\u2028sep\u2029", "ünïcødé ✓ 𝄞", int64(0), int64(-9223372036854775808),
		int64(9007199254740993), 0.0, math.Copysign(0, -1), 1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, -2.5e-10, 3.0,
		map[string]any{}, []any{}, map[string]any{"b": int64(1), "a": []any{"x", nil, map[string]any{"<": ">"}}},
		map[string]any(nil), []any(nil),
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		values = append(values, random(r, 0))
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v)\n got %s\nwant %s", v, got, want)
		}
	}
}

func random(r *rand.Rand, depth int) any {
	n := 6
	if depth > 3 {
		n = 4
	}
	switch r.IntN(n) {
	case 0:
		return r.Int64() >> r.IntN(64)
	case 1:
		return r.NormFloat64() * float64(int64(1)<<r.IntN(80)) / float64(int64(1)<<r.IntN(60))
	case 2:
		return randomString(r)
	case 3:
		return r.IntN(2) == 0
	case 4:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = random(r, depth+1)
		}
		return m
	}
	l := make([]any, r.IntN(4))
	for i := range l {
		l[i] = random(r, depth+1)
	}
	return l
}

func randomString(r *rand.Rand) string {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	if r.IntN(2) == 0 {
		return string(b) + "\u2028✓"
	}
	return string(b)
}
