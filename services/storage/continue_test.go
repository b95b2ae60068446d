package storage

import (
	"encoding/base64"
	"errors"
	"testing"
)

func TestContinueToken(t *testing.T) {
	const prefix = "/registry/g/p/"
	tok, err := encodeContinue(prefix+"ns/b\x00", prefix, 42)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":"meta.k8s.io/v1","rv":42,"start":"ns/b\u0000"}`; string(raw) != want {
		t.Fatalf("token JSON %s, want %s", raw, want)
	}
	key, rv, err := decodeContinue(tok, prefix)
	if err != nil || key != prefix+"ns/b\x00" || rv != 42 {
		t.Fatalf("decode: %q %d %v", key, rv, err)
	}
	if _, err := encodeContinue("/registry/other/x", prefix, 1); err == nil {
		t.Fatal("a key outside the prefix must not encode")
	}
}

func TestDecodeContinueErrors(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		token string
		want  error
		msg   string
	}{
		{"!!!", errGenericInvalidKey, ""},
		{enc(`not json`), errGenericInvalidKey, ""},
		{enc(`{"v":"meta.k8s.io/v2","rv":1,"start":"a"}`), errUnrecognizedVersion, "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2"},
		{enc(`{"v":"meta.k8s.io/v1","rv":0,"start":"a"}`), errInvalidStartRV, "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":""}`), errEmptyStartKey, "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../x"}`), errGenericInvalidKey, "continue key is not valid: ../../x"},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"a//b"}`), errGenericInvalidKey, ""},
	}
	for _, tt := range tests {
		_, _, err := decodeContinue(tt.token, "/registry/g/p/")
		if !errors.Is(err, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.token, err, tt.want)
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("%q: message %q, want %q", tt.token, err.Error(), tt.msg)
		}
	}
	// rv -1 (upstream's "continue at the latest revision") is accepted.
	if _, rv, err := decodeContinue(enc(`{"v":"meta.k8s.io/v1","rv":-1,"start":"a"}`), "/registry/g/p/"); err != nil || rv != -1 {
		t.Errorf("rv -1: %d %v", rv, err)
	}
}
