package kubewire

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// upstream is a client of a running bin/apiextensions-upstream, from
// KUBEWIRE_UPSTREAM ({"url":...,"token":...}, the line it prints).
type upstream struct {
	url, token string
	client     *http.Client
}

func upstreamFromEnv(t testing.TB) *upstream {
	t.Helper()
	line := os.Getenv("KUBEWIRE_UPSTREAM")
	if line == "" {
		t.Skip("KUBEWIRE_UPSTREAM (the line bin/apiextensions-upstream prints) not set")
	}
	var u struct{ URL, Token string }
	if err := json.Unmarshal([]byte(line), &u); err != nil {
		t.Fatalf("KUBEWIRE_UPSTREAM: %v", err)
	}
	return &upstream{url: u.URL, token: u.Token, client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the local upstream's self-signed certificate
	}}
}

type upstreamReply struct {
	code        int
	contentType string
	body        []byte
}

func (u *upstream) do(t testing.TB, method, path string, header map[string]string, body []byte) upstreamReply {
	t.Helper()
	req, err := http.NewRequest(method, u.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("User-Agent", "kubewire-test")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !strings.Contains(err.Error(), "timeout") {
		t.Fatal(err)
	}
	return upstreamReply{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}

func (r upstreamReply) String() string {
	b := r.body
	if len(b) > 600 {
		b = b[:600]
	}
	return fmt.Sprintf("%d %s %q", r.code, r.contentType, b)
}

func waitABit() { time.Sleep(200 * time.Millisecond) }
