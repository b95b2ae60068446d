package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/kubewire"
)

const apiRegV1 = "/apis/apiregistration.k8s.io/v1"

// TestAPIServices: apiregistration.k8s.io/v1 through the gateway: create,
// get (JSON, protobuf), the Table of kubectl get apiservices, the status
// subresource, a 422 in upstream's words, discovery, delete.
func TestAPIServices(t *testing.T) {
	g := newTestGateway(t)
	body := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1alpha1.wardle.example.com"},"spec":{"group":"wardle.example.com","version":"v1alpha1","groupPriorityMinimum":1000,"versionPriority":15,"service":{"namespace":"wardle","name":"api"},"insecureSkipTLSVerify":true}}`
	resp, data := g.do(http.MethodPost, apiRegV1+"/apiservices", body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	resp, data = g.do(http.MethodGet, apiRegV1+"/apiservices/v1alpha1.wardle.example.com", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table struct {
		ColumnDefinitions []struct{ Name string } `json:"columnDefinitions"`
		Rows              []struct{ Cells []any } `json:"rows"`
	}
	if err := json.Unmarshal(data, &table); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table: %d %s", resp.StatusCode, data)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	// Available: Unknown until the availability controller's first
	// check, which may already have written False (no such Service)
	if strings.Join(cols, ",") != "Name,Service,Available,Age" || len(table.Rows) != 1 || table.Rows[0].Cells[1] != "wardle/api" || !availableCell(table.Rows[0].Cells[2]) {
		t.Errorf("table %s", data)
	}
	// the status subresource (what the availability controller writes)
	resp, data = g.do(http.MethodPatch, apiRegV1+"/apiservices/v1alpha1.wardle.example.com/status",
		`{"status":{"conditions":[{"type":"Available","status":"False","reason":"FailedDiscoveryCheck","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
		"Content-Type", "application/merge-patch+json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status patch: %d %s", resp.StatusCode, data)
	}
	_, data = g.do(http.MethodGet, apiRegV1+"/apiservices", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if !strings.Contains(string(data), `"False (FailedDiscoveryCheck)"`) {
		t.Errorf("table after status: %s", data)
	}
	resp, data = g.do(http.MethodGet, apiRegV1+"/apiservices/v1alpha1.wardle.example.com", nil, "Accept", kubewire.ContentTypeProtobuf)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != kubewire.ContentTypeProtobuf || !strings.Contains(string(data), "APIService") {
		t.Errorf("protobuf: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	resp, data = g.do(http.MethodPost, apiRegV1+"/apiservices", strings.Replace(body, `"metadata":{"name":"v1alpha1.wardle.example.com"}`, `"metadata":{"name":"v1.wardle.example.com"}`, 1))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(data), "metadata.name: Invalid value: \\\"v1.wardle.example.com\\\": must be `spec.version+\\\".\\\"+spec.group`: \\\"v1alpha1.wardle.example.com\\\"") {
		t.Errorf("invalid name: %d %s", resp.StatusCode, data)
	}
	resp, data = g.do(http.MethodGet, apiRegV1, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `{"name":"apiservices","singularName":"apiservice","namespaced":false,"kind":"APIService","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"categories":["api-extensions"]`) ||
		!strings.Contains(string(data), `{"name":"apiservices/status","singularName":"","namespaced":false,"kind":"APIService","verbs":["get","patch","update"]}`) {
		t.Errorf("discovery: %d %s", resp.StatusCode, data)
	}
	// the proxy serves the group: /apis lists it, its requests are 503
	// while it is not Available
	// (the aggregator follows the APIServices by watch)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, data = g.do(http.MethodGet, "/apis", nil, "Accept", "application/json")
		if resp.StatusCode == http.StatusOK && strings.Contains(string(data), `{"name":"wardle.example.com","versions":[{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}]`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/apis: %d %s", resp.StatusCode, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, data = g.do(http.MethodGet, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || string(data) != "service unavailable\n" {
		t.Errorf("unavailable: %d %q", resp.StatusCode, data)
	}
	resp, data = g.do(http.MethodDelete, apiRegV1+"/apiservices/v1alpha1.wardle.example.com", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("delete: %d %s", resp.StatusCode, data)
	}
}

// availableCell reports whether an Available cell of a new APIService
// whose Service does not exist is one of the values it can have: Unknown
// before the first check, False with the check's reason after it.
func availableCell(c any) bool {
	s, _ := c.(string)
	return s == "Unknown" || (strings.HasPrefix(s, "False (") && strings.HasSuffix(s, ")"))
}
