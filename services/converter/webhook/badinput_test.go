package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// rawWebhook answers every review with body (and contentType, when set).
func rawWebhook(contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = w.Write([]byte(body))
	})
}

// TestBadBodies: answers that are not a ConversionReview fail with the
// wording of upstream's REST client and JSON serializer.
func TestBadBodies(t *testing.T) {
	const prefix = "conversion webhook for example.com/v1beta1, Kind=CronTab failed: "
	tests := []struct {
		name, contentType, body, want string
	}{
		{"empty", "application/json", "", prefix + "0-length response with status code: 200 and content type: application/json"},
		{"empty without content type", "", "", prefix + "0-length response with status code: 200 and content type: application/json"},
		{"truncated", "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":`,
			prefix + "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		// Not starting with '{': read as YAML (a string here), as the client does.
		{"not JSON", "application/json", "this is not JSON", prefix + `couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caPEM, srv := startWebhook(t, rawWebhook(tt.contentType, tt.body))
			c := New(Config{})
			defer c.Close()
			_, err := c.Convert(context.Background(), urlCRD(srv, caPEM, "v1"), v1, [][]byte{cronTab(beta, "a")})
			if s := statusOf(t, err); s.Code != 500 || s.Message != tt.want {
				t.Fatalf("got  %d %q\nwant %q", s.Code, s.Message, tt.want)
			}
		})
	}
}

// TestYAMLAnswer: a review in YAML is read as upstream's client reads it.
func TestYAMLAnswer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Request struct {
				UID     string           `json:"uid"`
				Objects []map[string]any `json:"objects"`
			} `json:"request"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		o := in.Request.Objects[0]
		o["apiVersion"] = v1
		b, _ := json.Marshal(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
			"response": map[string]any{"uid": in.Request.UID, "result": map[string]any{"status": "Success"}, "convertedObjects": []any{o}}})
		y, _ := yaml.JSONToYAML(b)
		_, _ = w.Write(y)
	})
	caPEM, srv := startWebhook(t, h)
	c := New(Config{})
	defer c.Close()
	out, err := c.Convert(context.Background(), urlCRD(srv, caPEM, "v1"), v1, [][]byte{cronTab(beta, "a")})
	if err != nil || !strings.Contains(string(out[0]), `"apiVersion":"example.com/v1"`) {
		t.Fatalf("%s, %v", out, err)
	}
}

// TestHugeAnswer: a 10 MiB answer is read whole and converted (as
// upstream's client, which has no size limit on webhook answers).
func TestHugeAnswer(t *testing.T) {
	pad := strings.Repeat("x", 10<<20)
	fw := &fakeWebhook{mutate: func(o map[string]any) { o["padding"] = pad }}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{})
	defer c.Close()
	out, err := c.Convert(context.Background(), urlCRD(srv, caPEM), v1, [][]byte{cronTab(beta, "a")})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out[0], &m); err != nil || len(m["padding"].(string)) != 10<<20 {
		t.Fatalf("converted object of %d bytes: %v", len(out[0]), err)
	}
}

// TestWrongCABundle: a webhook whose certificate the CRD's caBundle does
// not verify fails as upstream's client does.
func TestWrongCABundle(t *testing.T) {
	_, srv := startWebhook(t, &fakeWebhook{})
	otherCA, _ := servingCert(t)
	c := New(Config{})
	defer c.Close()
	_, err := c.Convert(context.Background(), urlCRD(srv, otherCA), v1, [][]byte{cronTab(beta, "a")})
	want := `conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "` + srv.URL + `/convert?timeout=30s": tls: failed to verify certificate: x509: certificate signed by unknown authority`
	if s := statusOf(t, err); s.Code != 500 || !strings.HasPrefix(s.Message, want) {
		t.Fatalf("got  %d %q\nwant %q", s.Code, s.Message, want)
	}
}
