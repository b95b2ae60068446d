package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const (
	betaAPIVersion = "example.com/v1beta1"
	v1APIVersion   = "example.com/v1"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		name, in, to, want, wantErr string
	}{
		{"reference example", `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"local-crontab"},"hostPort":"localhost:1234"}`, v1APIVersion,
			`{"apiVersion":"example.com/v1","host":"localhost","kind":"CronTab","metadata":{"name":"local-crontab"},"port":"1234"}`, ""},
		{"back to v1beta1", `{"apiVersion":"example.com/v1","kind":"CronTab","host":"example.com","port":"2345","spec":{"replicas":9007199254740993}}`, betaAPIVersion,
			`{"apiVersion":"example.com/v1beta1","hostPort":"example.com:2345","kind":"CronTab","spec":{"replicas":9007199254740993}}`, ""},
		{"ipv6 host", `{"apiVersion":"example.com/v1beta1","hostPort":"[::1]:80"}`, v1APIVersion, `{"apiVersion":"example.com/v1","host":"[::1]","port":"80"}`, ""},
		{"no hostPort", `{"apiVersion":"example.com/v1beta1","spec":{}}`, v1APIVersion, `{"apiVersion":"example.com/v1","spec":{}}`, ""},
		{"no host or port", `{"apiVersion":"example.com/v1"}`, betaAPIVersion, `{"apiVersion":"example.com/v1beta1"}`, ""},
		{"same version", `{"apiVersion":"example.com/v1","host":"h"}`, v1APIVersion, `{"apiVersion":"example.com/v1","host":"h"}`, ""},
		{"no port", `{"apiVersion":"example.com/v1beta1","hostPort":"localhost"}`, v1APIVersion, "", "hostPort could not be parsed into a separate host and port"},
		{"not a string", `{"apiVersion":"example.com/v1beta1","hostPort":1234}`, v1APIVersion, "", "hostPort must be a string, not json.Number"},
		{"colon in port", `{"apiVersion":"example.com/v1","host":"a","port":"1:2"}`, betaAPIVersion, "", `port "1:2" must not contain a colon`},
		{"unknown version", `{"apiVersion":"example.com/v2","hostPort":"a:1"}`, v1APIVersion, "", `unexpected conversion from "example.com/v2" to "example.com/v1"`},
		{"other group", `{"apiVersion":"other.com/v1beta1"}`, v1APIVersion, "", "not the same group"},
		{"not an object", `[1]`, v1APIVersion, "", "invalid object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ConvertJSON([]byte(tt.in), tt.to)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %s, %v; want error %q", out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Fatalf("got  %s\nwant %s", out, tt.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	h := &Handler{}
	srv := httptest.NewServer(h.Mux("/convert"))
	defer srv.Close()
	post := func(t *testing.T, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/convert", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, version := range []string{"v1", "v1beta1"} {
		t.Run(version, func(t *testing.T) {
			code, out := post(t, `{"apiVersion":"apiextensions.k8s.io/`+version+`","kind":"ConversionReview","request":{"uid":"705ab4f5","desiredAPIVersion":"example.com/v1","objects":[
				{"kind":"CronTab","apiVersion":"example.com/v1beta1","metadata":{"name":"local-crontab","namespace":"default"},"hostPort":"localhost:1234"},
				{"kind":"CronTab","apiVersion":"example.com/v1beta1","metadata":{"name":"remote-crontab"},"hostPort":"example.com:2345"}]}}`)
			if code != http.StatusOK || out["apiVersion"] != "apiextensions.k8s.io/"+version || out["kind"] != "ConversionReview" {
				t.Fatalf("HTTP %d: %v", code, out)
			}
			resp := out["response"].(map[string]any)
			if resp["uid"] != "705ab4f5" || resp["result"].(map[string]any)["status"] != "Success" {
				t.Fatalf("response %v", resp)
			}
			objs := resp["convertedObjects"].([]any)
			if len(objs) != 2 || objs[0].(map[string]any)["host"] != "localhost" || objs[1].(map[string]any)["port"] != "2345" {
				t.Fatalf("converted %v", objs)
			}
		})
	}
	t.Run("failure", func(t *testing.T) {
		code, out := post(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[{"kind":"CronTab","apiVersion":"example.com/v1beta1","hostPort":"nocolon"}]}}`)
		result := out["response"].(map[string]any)["result"].(map[string]any)
		if code != http.StatusOK || result["status"] != "Failure" || result["message"] != "hostPort could not be parsed into a separate host and port" {
			t.Fatalf("HTTP %d: %v", code, out)
		}
	})
	t.Run("not a review", func(t *testing.T) {
		if code, _ := post(t, `{"apiVersion":"v1","kind":"Status"}`); code != http.StatusBadRequest {
			t.Fatalf("HTTP %d", code)
		}
	})
	if h.Reviews() != 3 || h.Objects() != 5 || h.Failures() != 1 {
		t.Fatalf("counters: %d reviews, %d objects, %d failures", h.Reviews(), h.Objects(), h.Failures())
	}
	var m bytes.Buffer
	h.WriteMetrics(&m)
	if !strings.Contains(m.String(), "conversion_reviews_total 3\n") {
		t.Fatalf("metrics:\n%s", m.String())
	}
}

// FuzzRoundTrip checks that v1beta1 → v1 → v1beta1 gives back the object
// it started from (the reference's round-trip rule), and that a hostPort
// is refused only when it has no port. Its seed corpus runs with go test;
// explore with
//
//	go test -run '^$' -fuzz FuzzRoundTrip ./examples/crontab-conversion-webhook/conversion
func FuzzRoundTrip(f *testing.F) {
	f.Add("localhost:1234", true, "my-awesome-cron-image", int64(3), "app")
	f.Add("example.com:2345", true, "", int64(9007199254740993), "")
	f.Add("[::1]:80", true, "img", int64(-1), "x")
	f.Add(":", true, "", int64(0), "")
	f.Add("a:b:c", true, "", int64(1), "")
	f.Add("", true, "", int64(1), "")
	f.Add("nocolon", true, "", int64(1), "")
	f.Add("", false, "img", int64(2), "label")
	f.Fuzz(func(t *testing.T, hostPort string, withHostPort bool, image string, replicas int64, label string) {
		obj := map[string]any{
			"apiVersion": betaAPIVersion,
			"kind":       "CronTab",
			"metadata":   map[string]any{"name": "c", "namespace": "default", "labels": map[string]any{"app": label}},
			"spec":       map[string]any{"cronSpec": "* * * * */5", "image": image, "replicas": replicas},
		}
		if withHostPort {
			obj["hostPort"] = hostPort
		}
		in, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := ConvertJSON(in, v1APIVersion)
		if err != nil {
			if withHostPort && !strings.Contains(hostPort, ":") && err == errHostPort {
				return
			}
			t.Fatalf("v1beta1 → v1 of %s: %v", in, err)
		}
		if withHostPort && !strings.Contains(hostPort, ":") {
			t.Fatalf("hostPort %q without a port converted: %s", hostPort, v1)
		}
		back, err := ConvertJSON(v1, betaAPIVersion)
		if err != nil {
			t.Fatalf("v1 → v1beta1 of %s: %v", v1, err)
		}
		if want, got := decode(t, in), decode(t, back); !reflect.DeepEqual(want, got) {
			t.Fatalf("round trip lost information:\n in  %s\n v1  %s\n out %s", in, v1, back)
		}
	})
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
