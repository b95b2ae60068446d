package composetest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/deploy/internal/flagcheck"
)

// interpolation is compose's ${NAME}, ${NAME:-default} and ${NAME-default}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

var serviceImage = regexp.MustCompile(`/(gateway|registry|validator|converter|storage|etcd):[^/]*$`)

// TestComposeFlags runs every crdplane and etcd container's command line of
// docker-compose.yaml (variables at their defaults) through the binary's
// parse-only mode. It needs no docker (make test runs it).
func TestComposeFlags(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw = interpolation.ReplaceAll(raw, []byte("$2"))
	var file struct {
		Services map[string]struct {
			Image      string   `json:"image"`
			Entrypoint []string `json:"entrypoint"`
			Command    []string `json:"command"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	bins := flagcheck.New(t)
	checked := 0
	for name, svc := range file.Services {
		m := serviceImage.FindStringSubmatch(svc.Image)
		if m == nil {
			continue // not ours (jaeger)
		}
		binary := "crdplane-" + m[1]
		if m[1] == "etcd" {
			binary = "etcd"
		}
		args := svc.Command
		if len(svc.Entrypoint) > 0 {
			binary = filepath.Base(svc.Entrypoint[0])
			args = append(svc.Entrypoint[1:len(svc.Entrypoint):len(svc.Entrypoint)], args...)
		}
		if binary == "crdplane-pki" {
			continue // an init step, not a service
		}
		bins.Check(t, "compose service "+name, binary, args)
		checked++
	}
	if checked < 8 { // 3 etcd members and the five services
		t.Fatalf("checked %d services of docker-compose.yaml", checked)
	}
}
