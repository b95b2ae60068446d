package patch

import (
	"encoding/json"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestApply(t *testing.T) {
	orig := []byte(`{"spec":{"a":1,"b":2},"metadata":{"name":"x"}}`)
	tests := []struct {
		name     string
		typ      string
		patch    string
		want     string
		wantCode int32
	}{
		{"merge", "application/merge-patch+json", `{"spec":{"a":null,"c":3}}`, `{"spec":{"b":2,"c":3},"metadata":{"name":"x"}}`, 0},
		{"merge with charset", "application/merge-patch+json; charset=utf-8", `{"spec":{"b":5}}`, `{"spec":{"a":1,"b":5},"metadata":{"name":"x"}}`, 0},
		{"json patch", "application/json-patch+json", `[{"op":"replace","path":"/spec/a","value":9}]`, `{"spec":{"a":9,"b":2},"metadata":{"name":"x"}}`, 0},
		{"json patch test fails", "application/json-patch+json", `[{"op":"test","path":"/spec/a","value":7}]`, "", 422},
		{"json patch malformed", "application/json-patch+json", `{"op":"x"}`, "", 400},
		{"merge malformed", "application/merge-patch+json", `{bad`, "", 400},
		{"strategic", "application/strategic-merge-patch+json", `{}`, "", 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Apply(orig, tt.typ, []byte(tt.patch))
			if tt.wantCode != 0 {
				var se *apierrors.StatusError
				if err == nil {
					t.Fatalf("want error %d, got %s", tt.wantCode, out)
				}
				se, ok := err.(*apierrors.StatusError)
				if !ok || se.ErrStatus.Code != tt.wantCode {
					t.Fatalf("want %d, got %v", tt.wantCode, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			_ = json.Unmarshal(out, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %s want %s", out, tt.want)
			}
		})
	}
}
