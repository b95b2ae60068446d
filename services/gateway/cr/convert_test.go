package cr

import (
	"strings"
	"testing"
)

func TestObjectAPIVersion(t *testing.T) {
	tests := []struct {
		name, obj, want string
	}{
		{"first", `{"apiVersion":"g/v1","kind":"K"}`, "g/v1"},
		{"last", `{"kind":"K","metadata":{"name":"a"},"apiVersion":"g/v1"}`, "g/v1"},
		{"spaces", " { \"kind\" : \"K\" ,\n \"apiVersion\" : \"g/v1\" } ", "g/v1"},
		{"nested ones ignored", `{"spec":{"apiVersion":"x/v1","a":["apiVersion"]},"metadata":{"ownerReferences":[{"apiVersion":"y/v1"}]},"apiVersion":"g/v1"}`, "g/v1"},
		{"in a string", `{"s":"\"apiVersion\":\"x/v1\"","apiVersion":"g/v1"}`, "g/v1"},
		{"duplicate: last wins", `{"apiVersion":"a/v1","apiVersion":"b/v1"}`, "b/v1"},
		{"escaped key", `{"\u0061piVersion":"g/v1"}`, "g/v1"},
		{"escaped value", `{"apiVersion":"g\/v1"}`, "g/v1"},
		{"missing", `{"kind":"K"}`, ""},
		{"empty object", `{}`, ""},
		{"not a string", `{"apiVersion":1}`, ""},
		{"null", `{"apiVersion":null}`, ""},
		{"not an object", `["apiVersion","g/v1"]`, ""},
		{"empty", ``, ""},
		{"unterminated", `{"apiVersion":"g/v1"`, ""},
		{"malformed after", `{"apiVersion":"g/v1",}`, ""},
	}
	for _, tt := range tests {
		if got := objectAPIVersion([]byte(tt.obj)); got != tt.want {
			t.Errorf("%s: objectAPIVersion(%s) = %q, want %q", tt.name, tt.obj, got, tt.want)
		}
	}
}

// benchObject is a ~700-byte custom resource with its apiVersion first
// (as crdplane stores objects: sorted keys) or last.
func benchObject(apiVersionFirst bool) []byte {
	const apiVersion = `"apiVersion":"stable.example.com/v1"`
	body := `"kind":"CronTab","metadata":{"annotations":{"note":"` + strings.Repeat("an ordinary annotation value ", 4) + `"},` +
		`"creationTimestamp":"2026-01-01T00:00:00Z","generation":1,"labels":{"app":"bench","team":"gateway","tier":"backend"},` +
		`"name":"bench","namespace":"default","resourceVersion":"123456","uid":"6f1b4a8e-6c1e-4b8f-9d55-2f6a7c1e9b10"},` +
		`"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/cron-image:1.2.3","replicas":3,` +
		`"template":{"containers":[{"args":["--a","--b","--c"],"image":"x","name":"c"}]},"schedule":"` + strings.Repeat("0 ", 60) + `"},` +
		`"status":{"lastScheduleTime":"2026-01-01T00:05:00Z","phase":"Ready"}`
	if apiVersionFirst {
		return []byte("{" + apiVersion + "," + body + "}")
	}
	return []byte("{" + body + "," + apiVersion + "}")
}

func BenchmarkObjectAPIVersion(b *testing.B) {
	for _, bc := range []struct {
		name  string
		first bool
	}{{"first", true}, {"last", false}} {
		obj := benchObject(bc.first)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(obj)))
			for b.Loop() {
				if objectAPIVersion(obj) != "stable.example.com/v1" {
					b.Fatal("wrong apiVersion")
				}
			}
		})
	}
}

func BenchmarkSetAPIVersion(b *testing.B) {
	for _, bc := range []struct {
		name  string
		first bool
		want  string
	}{
		{"same/first", true, "stable.example.com/v1"},
		{"same/last", false, "stable.example.com/v1"},
		{"other/first", true, "stable.example.com/v2"},
		{"other/last", false, "stable.example.com/v2"},
	} {
		obj := benchObject(bc.first)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(obj)))
			for b.Loop() {
				if _, ok := setAPIVersion(obj, bc.want); !ok {
					b.Fatal("slow path")
				}
			}
		})
	}
}
