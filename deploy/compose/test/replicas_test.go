package composetest

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestComposeReplicas: storage runs more than one replica (stateless over
// etcd), as the validator and converter do, and its clients dial it by the
// service name through gRPC's DNS resolver (dns:///storage:7001), which
// returns every replica's address for round-robin balancing.
func TestComposeReplicas(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw = interpolation.ReplaceAll(raw, []byte("$2"))
	var file struct {
		Services map[string]struct {
			Scale   int      `json:"scale"`
			Command []string `json:"command"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"storage", "validator", "converter"} {
		if file.Services[svc].Scale < 2 {
			t.Errorf("%s: scale %d, want at least 2", svc, file.Services[svc].Scale)
		}
	}
	for _, client := range []string{"gateway", "registry"} {
		if !slices.Contains(file.Services[client].Command, "--storage-addr=dns:///storage:7001") {
			t.Errorf("%s does not dial dns:///storage:7001: %v", client, file.Services[client].Command)
		}
	}
}
