package validator

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/celconv"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// conversionCRD is a two-version CRD (v1: hostPort; v2: host and port,
// spec.replicas in both) with the given conversion rules.
func conversionCRD(rules string) string {
	crd := crdWith(`type: object
properties:
  hostPort: {type: string}
  spec:
    type: object
    properties:
      replicas: {type: integer}`, `type: object
properties:
  host: {type: string}
  port: {type: string}
  spec:
    type: object
    properties:
      replicas: {type: integer}`)
	var b strings.Builder
	b.WriteString("  annotations:\n    conversion.crdplane.dev/rules: |\n")
	for _, l := range strings.Split(strings.Trim(rules, "\n"), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return strings.Replace(crd, "  resourceVersion: \"1\"\n", "  resourceVersion: \"1\"\n"+b.String(), 1)
}

// TestValidateCRDConversionRules: ValidateCRD compiles the conversion rules
// (errors refuse the write) and reports what may not round-trip (warnings).
func TestValidateCRDConversionRules(t *testing.T) {
	const split = `- from: v1
  to: v2
  fields:
  - {path: host, expression: "self.hostPort.substring(0, self.hostPort.lastIndexOf(':'))"}
  - {path: port, expression: "self.hostPort.substring(self.hostPort.lastIndexOf(':') + 1)"}`
	const join = `
- from: v2
  to: v1
  fields:
  - {path: hostPort, expression: "self.host + ':' + self.port"}`
	const ann = "metadata.annotations[conversion.crdplane.dev/rules]"
	tests := []struct {
		name         string
		rules        string
		wantCauses   []string
		wantWarnings []string
	}{
		{"both ways", split + join, nil, nil},
		{"one way", split, nil, []string{
			celconv.Annotation + ": v1 field hostPort does not round-trip through v2: no rule converts v2 back to v1",
			celconv.Annotation + ": v2 field host does not round-trip through v1: v1 has no such field and no rule converts to v1",
			celconv.Annotation + ": v2 field port does not round-trip through v1: v1 has no such field and no rule converts to v1",
		}},
		{"missing field", strings.Replace(split, "self.hostPort.substring(0", "self.hostport.substring(0", 1) + join,
			[]string{ann + "[0].fields[0].expression: Invalid value: \"self.hostport.substring(0, self.hostPort.lastIndexOf(':'))\": compilation failed: ERROR: <input>:1:5: undefined field 'hostport'\n | self.hostport.substring(0, self.hostPort.lastIndexOf(':'))\n | ....^"}, nil},
		{"cost", `- from: v1
  to: v2
  fields:
  - {path: host, expression: "self.hostPort.split('').map(a, self.hostPort.split('').map(b, a + b)).size() > 0 ? 'x' : 'y'"}` + join,
			[]string{ann + "[0].fields[0].expression: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"}, nil},
	}
	client := serve(t, newDirService(t))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.ValidateCRD(context.Background(), &validatorv1.ValidateCRDRequest{Crd: crdJSON(t, conversionCRD(tt.rules))})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.GetCauses() {
				got = append(got, c.GetField()+": "+c.GetMessage())
			}
			if !slices.Equal(got, tt.wantCauses) {
				t.Errorf("causes:\n\t%q\nwant\n\t%q", got, tt.wantCauses)
			}
			if !slices.Equal(resp.GetWarnings(), tt.wantWarnings) {
				t.Errorf("warnings:\n\t%q\nwant\n\t%q", resp.GetWarnings(), tt.wantWarnings)
			}
		})
	}
}
