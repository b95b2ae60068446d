package gateway

import (
	"flag"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/egress/egresstest"
)

// TestEgressFlag: --egress-selector-config-file is read with
// kube-apiserver's checks; the selections it names dial through their
// proxy (the webhooks' controlplane, the aggregator's cluster), the others
// directly.
func TestEgressFlag(t *testing.T) {
	good := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: controlplane
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: http://127.0.0.1:8131
`)
	bad := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: Telepathy
`)
	for _, tc := range []struct {
		name, file, wantErr string
		proxied             map[egress.Name]bool
	}{
		{"none", "", "", map[egress.Name]bool{}},
		{"controlplane", good, "", map[egress.Name]bool{egress.ControlPlane: true}},
		{"invalid", bad, `--egress-selector-config-file: failed to validate egress selector configuration: service.connection.protocol: Unsupported value: "Telepathy": supported values: "Direct", "HTTPConnect", "GRPC"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
			c.RegisterFlags(fs)
			args := []string{"--registry-addr=r:1", "--validator-addr=v:1", "--converter-addr=c:1", "--storage-addr=s:1"}
			if tc.file != "" {
				args = append(args, "--egress-selector-config-file="+tc.file)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q…", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, sel := range []egress.Name{egress.Cluster, egress.ControlPlane} {
				if got := c.egressDial(sel) != nil; got != tc.proxied[sel] {
					t.Errorf("%s proxied = %v, want %v", sel, got, tc.proxied[sel])
				}
			}
		})
	}
}
