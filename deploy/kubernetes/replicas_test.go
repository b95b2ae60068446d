package kubernetes

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStorageReplicas: in every overlay storage runs more than one replica
// (it is stateless over etcd; each replica keeps its own watch cache),
// behind a headless Service, and every client dials it by DNS name
// (dns:///: gRPC resolves every ready replica and balances round robin).
func TestStorageReplicas(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			cmd := exec.Command(kubectlBinary(), "kustomize", dir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
			}
			objs := decode(t, out)
			var storage bool
			for _, d := range objs.deployments {
				if d.Name == "crdplane-storage" {
					storage = true
					if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
						t.Errorf("Deployment/%s: replicas %v, want at least 2", d.Name, d.Spec.Replicas)
					}
				}
			}
			if !storage {
				t.Fatal("no crdplane-storage Deployment")
			}
			for _, s := range objs.services {
				if s.Name == "crdplane-storage" && s.Spec.ClusterIP != "None" {
					t.Errorf("Service/%s is not headless (clusterIP %q): clients would see one address", s.Name, s.Spec.ClusterIP)
				}
			}
			for _, client := range []string{"Deployment/crdplane-gateway", "Deployment/crdplane-registry"} {
				var args []string
				for _, c := range objs.containers(client) {
					args = append(args, c.Args...)
				}
				if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--storage-addr=dns:///crdplane-storage:") }) {
					t.Errorf("%s does not dial storage as dns:///crdplane-storage: %v", client, args)
				}
			}
		})
	}
}
