package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubectlCronTab walks the scenario with kubectl 1.33 against
// `crdplane run`: the reference's CronTab CRD, valid, invalid, pruned and
// defaulted objects, a stale update, deletes, and the CRD's cascade delete.
func TestKubectlCronTab(t *testing.T) {
	s := startServer(t, "")

	t.Run("version", func(t *testing.T) {
		out := s.must(t, "version", "-o", "json")
		var v struct {
			ServerVersion struct{ GitVersion, Major, Minor string } `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !strings.HasPrefix(v.ServerVersion.GitVersion, "v1.33.") || v.ServerVersion.Minor != "33" {
			t.Fatalf("server version %+v", v.ServerVersion)
		}
	})

	t.Run("apply CRD and wait Established", func(t *testing.T) {
		out := s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
		if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created") {
			t.Fatalf("apply: %s", out)
		}
		s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	})

	t.Run("api-resources", func(t *testing.T) {
		out := s.must(t, "api-resources", "--api-group", "stable.example.com")
		if !regexp.MustCompile(`(?m)^crontabs\s+ct\s+stable\.example\.com/v1\s+true\s+CronTab\s*$`).MatchString(out) {
			t.Fatalf("api-resources:\n%s", out)
		}
		out = s.must(t, "api-resources")
		if !regexp.MustCompile(`(?m)^customresourcedefinitions\s+crd,crds\s+apiextensions\.k8s\.io/v1\s+false\s+CustomResourceDefinition\s*$`).MatchString(out) {
			t.Fatalf("api-resources:\n%s", out)
		}
	})

	t.Run("create valid and get", func(t *testing.T) {
		out := s.must(t, "apply", "-f", testdata("crontab-valid.yaml"))
		if !strings.Contains(out, "crontab.stable.example.com/my-new-cron-object created") {
			t.Fatalf("apply: %s", out)
		}
		out = s.must(t, "get", "ct")
		if !regexp.MustCompile(`(?m)^NAME\s+AGE\s*$`).MatchString(out) || !regexp.MustCompile(`(?m)^my-new-cron-object\s+\d+s\s*$`).MatchString(out) {
			t.Fatalf("get ct:\n%s", out)
		}
	})

	var firstRV string
	t.Run("yaml shows server metadata", func(t *testing.T) {
		obj := getJSON(t, s, "ct", "my-new-cron-object")
		md := obj["metadata"].(map[string]any)
		for _, k := range []string{"uid", "resourceVersion", "creationTimestamp"} {
			if v, _ := md[k].(string); v == "" {
				t.Fatalf("metadata.%s missing: %v", k, md)
			}
		}
		if md["generation"] != float64(1) || md["namespace"] != "default" {
			t.Fatalf("metadata: %v", md)
		}
		if _, err := time.Parse(time.RFC3339, md["creationTimestamp"].(string)); err != nil {
			t.Fatal(err)
		}
		firstRV = md["resourceVersion"].(string)
		out := s.must(t, "get", "ct", "my-new-cron-object", "-o", "yaml")
		for _, want := range []string{"uid: ", "resourceVersion: ", "creationTimestamp: ", "generation: 1", "cronSpec: '* * * * */5'", "replicas: 5"} {
			if !strings.Contains(out, want) {
				t.Fatalf("-o yaml lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("invalid object reports both field errors", func(t *testing.T) {
		errOut := s.fails(t, "apply", "-f", testdata("crontab-invalid.yaml"))
		for _, want := range []string{
			`The CronTab "my-invalid-cron-object" is invalid:`,
			`spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'`,
			`spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10`,
		} {
			if !strings.Contains(errOut, want) {
				t.Fatalf("error lacks %q:\n%s", want, errOut)
			}
		}
		if _, errOut, err := s.kubectl(t, "", "get", "ct", "my-invalid-cron-object"); err == nil || !strings.Contains(errOut, "NotFound") {
			t.Fatalf("invalid object was stored: %v %s", err, errOut)
		}
	})

	t.Run("unknown field pruned", func(t *testing.T) {
		s.must(t, "create", "--validate=false", "-f", testdata("crontab-unknown-field.yaml"))
		obj := getJSON(t, s, "ct", "my-pruned-cron-object")
		spec := obj["spec"].(map[string]any)
		if _, ok := spec["someRandomField"]; ok {
			t.Fatalf("someRandomField was not pruned: %v", spec)
		}
		if spec["image"] != "my-awesome-cron-image" {
			t.Fatalf("spec: %v", spec)
		}
	})

	t.Run("defaults applied after the CRD gains them", func(t *testing.T) {
		out := s.must(t, "apply", "-f", testdata("crontab-crd-defaults.yaml"))
		if !strings.Contains(out, "configured") {
			t.Fatalf("apply: %s", out)
		}
		s.must(t, "create", "-f", testdata("crontab-defaulted.yaml"))
		spec := getJSON(t, s, "ct", "my-defaulted-cron-object")["spec"].(map[string]any)
		if spec["cronSpec"] != "5 0 * * *" || spec["replicas"] != float64(1) {
			t.Fatalf("defaults not applied: %v", spec)
		}
	})

	t.Run("update with stale resourceVersion conflicts", func(t *testing.T) {
		// Move the object on, then replace it with the first resourceVersion.
		s.must(t, "patch", "ct", "my-new-cron-object", "--type=merge", "-p", `{"spec":{"replicas":6}}`)
		obj := getJSON(t, s, "ct", "my-new-cron-object")
		if obj["metadata"].(map[string]any)["generation"] != float64(2) {
			t.Fatalf("generation after a spec change: %v", obj["metadata"])
		}
		obj["metadata"].(map[string]any)["resourceVersion"] = firstRV
		obj["spec"].(map[string]any)["replicas"] = 7
		b, _ := json.Marshal(obj)
		_, errOut, err := s.kubectl(t, string(b), "replace", "-f", "-")
		if err == nil {
			t.Fatal("replace with a stale resourceVersion succeeded")
		}
		want := `Operation cannot be fulfilled on crontabs.stable.example.com "my-new-cron-object": the object has been modified; please apply your changes to the latest version and try again`
		if !strings.Contains(errOut, want) {
			t.Fatalf("error lacks %q:\n%s", want, errOut)
		}
	})

	t.Run("delete", func(t *testing.T) {
		out := s.must(t, "delete", "ct", "my-pruned-cron-object")
		if !strings.Contains(out, `crontab.stable.example.com "my-pruned-cron-object" deleted`) {
			t.Fatalf("delete: %s", out)
		}
		errOut := s.fails(t, "get", "ct", "my-pruned-cron-object")
		if !strings.Contains(errOut, `crontabs.stable.example.com "my-pruned-cron-object" not found`) {
			t.Fatalf("get after delete: %s", errOut)
		}
	})

	t.Run("deleting the CRD removes its objects", func(t *testing.T) {
		s.must(t, "delete", "crd", "crontabs.stable.example.com", "--timeout=60s")
		// kubectl answers from its discovery cache or asks again; either
		// way the resource is gone (the reference shows the first form).
		errOut := s.fails(t, "get", "ct")
		if !strings.Contains(errOut, `Error from server (NotFound): Unable to list "stable.example.com/v1, Resource=crontabs": the server could not find the requested resource`) &&
			!strings.Contains(errOut, `the server doesn't have a resource type "ct"`) {
			t.Fatalf("get ct after CRD delete: %s", errOut)
		}
		s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
		s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
		out, errOut, err := s.kubectl(t, "", "get", "ct", "-A", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("recreated CRD is not empty: %q %s %v", out, errOut, err)
		}
	})
}

func getJSON(t *testing.T, s *server, args ...string) map[string]any {
	t.Helper()
	out := s.must(t, append([]string{"get", "-o", "json"}, args...)...)
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return obj
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
