package convert

import (
	"encoding/json"
	"testing"
)

func TestNone(t *testing.T) {
	tests := []struct {
		name, in, apiVersion, want string
		wantErr                    bool
	}{
		{"rewrite", `{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab","spec":{"apiVersion":"nested"}}`, "stable.example.com/v1",
			`{"apiVersion":"stable.example.com/v1","kind":"CronTab","spec":{"apiVersion":"nested"}}`, false},
		{"already there", `{"apiVersion":"stable.example.com/v1","kind":"CronTab"}`, "stable.example.com/v1", `{"apiVersion":"stable.example.com/v1","kind":"CronTab"}`, false},
		{"missing apiVersion", `{"kind":"CronTab"}`, "g/v1", `{"apiVersion":"g/v1","kind":"CronTab"}`, false},
		{"large int kept", `{"apiVersion":"a/v1","spec":{"n":9007199254740993}}`, "a/v2", `{"apiVersion":"a/v2","spec":{"n":9007199254740993}}`, false},
		{"not an object", `[1,2]`, "a/v1", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := None([]byte(tt.in), tt.apiVersion)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want error, got %s", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, out, []byte(tt.want)) {
				t.Fatalf("got %s want %s", out, tt.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	da := json.NewDecoder(bytesReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytesReader(b))
	db.UseNumber()
	if err := da.Decode(&x); err != nil {
		t.Fatal(err)
	}
	if err := db.Decode(&y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func BenchmarkNone(b *testing.B) {
	obj := []byte(`{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab","metadata":{"name":"my-new-cron-object","namespace":"default","uid":"e14d79e7-91f9-11e7-a598-f0761cb232d1","resourceVersion":"12345","generation":1,"creationTimestamp":"2017-09-05T05:20:07Z","labels":{"app":"x"}},"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image","replicas":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := None(obj, "stable.example.com/v1"); err != nil {
			b.Fatal(err)
		}
	}
}
