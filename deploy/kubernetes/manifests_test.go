// Package kubernetes holds the tests of the kustomize manifests next to it:
// every overlay builds, every object decodes strictly into its Kubernetes
// API type, the workloads follow the deployment rules (probes, resources,
// non-root read-only containers) and every container's arguments are
// accepted by the binary it runs.
package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/deploy/internal/flagcheck"
)

// kubectlBinary is the pinned kubectl 1.33 (its kustomize); KUBECTL
// overrides it.
func kubectlBinary() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	for _, p := range []string{"/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/local/bin/kubectl.1.33", "/usr/bin/kubectl.1.33"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

// kustomizations are base and every overlay.
func kustomizations(t *testing.T) []string {
	dirs := []string{"base"}
	overlays, err := filepath.Glob("overlays/*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range overlays {
		dirs = append(dirs, filepath.Dir(k))
	}
	if len(dirs) < 2 {
		t.Fatal("no overlays found")
	}
	return dirs
}

// objects is the decoded output of one kustomization.
type objects struct {
	namespaces   []*corev1.Namespace
	configMaps   map[string]*corev1.ConfigMap
	services     []*corev1.Service
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	pdbs         []*policyv1.PodDisruptionBudget
	policies     []*networkingv1.NetworkPolicy
	certificates []*cmCertificate
	issuers      []*cmIssuer
}

func TestKustomizations(t *testing.T) {
	bins := flagcheck.New(t)
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
			checkWorkloads(t, objs)
			checkReferences(t, objs)
			checkInternalTLS(t, objs)
			for _, w := range objs.workloads() {
				for _, c := range w.pod.Spec.Containers {
					name, args := commandOf(t, w.name, c)
					bins.Check(t, w.name+"/"+c.Name, name, expandArgs(t, w.name, c, args, objs.configMaps))
				}
			}
		})
	}
}

// decode decodes every document strictly (unknown, duplicate or miscased
// fields fail) into its API type.
func decode(t *testing.T, stream []byte) *objects {
	t.Helper()
	objs := &objects{configMaps: map[string]*corev1.ConfigMap{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	seen := map[string]bool{}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		var obj interface{ GetName() string }
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/Namespace":
			o := &corev1.Namespace{}
			objs.namespaces, obj = append(objs.namespaces, o), o
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			obj = o
			defer func() { objs.configMaps[o.Name] = o }()
		case "v1/Service":
			o := &corev1.Service{}
			objs.services, obj = append(objs.services, o), o
		case "apps/v1/Deployment":
			o := &appsv1.Deployment{}
			objs.deployments, obj = append(objs.deployments, o), o
		case "apps/v1/StatefulSet":
			o := &appsv1.StatefulSet{}
			objs.statefulSets, obj = append(objs.statefulSets, o), o
		case "autoscaling/v2/HorizontalPodAutoscaler":
			o := &autoscalingv2.HorizontalPodAutoscaler{}
			objs.hpas, obj = append(objs.hpas, o), o
		case "policy/v1/PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			objs.pdbs, obj = append(objs.pdbs, o), o
		case "networking.k8s.io/v1/NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			objs.policies, obj = append(objs.policies, o), o
		case "cert-manager.io/v1/Certificate":
			o := &cmCertificate{}
			objs.certificates, obj = append(objs.certificates, o), o
		case "cert-manager.io/v1/Issuer":
			o := &cmIssuer{}
			objs.issuers, obj = append(objs.issuers, o), o
		default:
			t.Fatalf("unexpected object %s %s:\n%s", tm.APIVersion, tm.Kind, doc)
		}
		// As the apiserver's strict field validation: case-sensitive
		// field names, no unknown or duplicate fields.
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
		}
		strictErrs, err := kjson.UnmarshalStrict(j, obj)
		if err = errors.Join(append(strictErrs, err)...); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", tm.Kind, err, doc)
		}
		key := tm.Kind + "/" + obj.GetName()
		if seen[key] {
			t.Errorf("%s twice", key)
		}
		seen[key] = true
	}
	return objs
}

type workload struct {
	name     string
	selector *metav1.LabelSelector
	pod      corev1.PodTemplateSpec
}

func (o *objects) workloads() []workload {
	var ws []workload
	for _, d := range o.deployments {
		ws = append(ws, workload{"Deployment/" + d.Name, d.Spec.Selector, d.Spec.Template})
	}
	for _, s := range o.statefulSets {
		ws = append(ws, workload{"StatefulSet/" + s.Name, s.Spec.Selector, s.Spec.Template})
	}
	return ws
}

// checkWorkloads enforces the deployment rules on every pod template.
func checkWorkloads(t *testing.T, objs *objects) {
	t.Helper()
	if len(objs.workloads()) == 0 {
		t.Fatal("no workloads")
	}
	for _, w := range objs.workloads() {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: selector %v does not select its pods (%v)", w.name, w.selector, err)
		}
		spec := w.pod.Spec
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: the pod must run as a non-root numeric user with the RuntimeDefault seccomp profile", w.name)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: no crdplane service talks to the Kubernetes API: automountServiceAccountToken must be false", w.name)
		}
		for _, c := range spec.Containers {
			where := w.name + "/" + c.Name
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s: containers must have a read-only root, no privilege escalation and drop ALL capabilities", where)
			}
			if c.ReadinessProbe == nil || c.LivenessProbe == nil {
				t.Errorf("%s: readiness and liveness probes are required", where)
			}
			for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
				if p == nil {
					continue
				}
				if p.HTTPGet == nil || !hasPort(c, p.HTTPGet.Port.String()) {
					t.Errorf("%s: a probe must GET a declared container port: %+v", where, p.ProbeHandler)
				}
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", where, r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("%s: no %s limit", where, r)
				}
			}
		}
	}
}

// hasPort: the container declares port (a name or a number).
func hasPort(c corev1.Container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || port == strconv.Itoa(int(p.ContainerPort)) {
			return true
		}
	}
	return false
}

// podsMatching lists the workloads whose pods sel selects.
func (o *objects) podsMatching(sel labels.Selector) []string {
	var names []string
	for _, w := range o.workloads() {
		if sel.Matches(labels.Set(w.pod.Labels)) {
			names = append(names, w.name)
		}
	}
	return names
}

// checkReferences checks that Services, PodDisruptionBudgets,
// NetworkPolicies and autoscalers point at workloads that exist, on ports
// their pods declare, and that every workload has a budget.
func checkReferences(t *testing.T, objs *objects) {
	t.Helper()
	for _, s := range objs.services {
		pods := objs.podsMatching(labels.SelectorFromSet(s.Spec.Selector))
		if len(s.Spec.Selector) == 0 || len(pods) == 0 {
			t.Errorf("Service/%s selects no workload", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() != "" && !objs.declaresPort(pods, p.TargetPort.String()) {
				t.Errorf("Service/%s: target port %s is not a port of %v", s.Name, p.TargetPort.String(), pods)
			}
		}
	}
	budgeted := map[string]bool{}
	for _, p := range objs.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		pods := objs.podsMatching(sel)
		if len(pods) != 1 {
			t.Errorf("PodDisruptionBudget/%s selects %v, want one workload", p.Name, pods)
		}
		for _, w := range pods {
			budgeted[w] = true
		}
	}
	for _, w := range objs.workloads() {
		if !budgeted[w.name] {
			t.Errorf("%s has no PodDisruptionBudget", w.name)
		}
	}
	for _, np := range objs.policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		targets := objs.podsMatching(sel)
		if len(targets) == 0 {
			t.Errorf("NetworkPolicy/%s selects no workload", np.Name)
		}
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil {
					psel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
					if err != nil {
						t.Fatal(err)
					}
					if len(objs.podsMatching(psel)) == 0 {
						t.Errorf("NetworkPolicy/%s admits pods %v, which no workload has", np.Name, peer.PodSelector.MatchLabels)
					}
				}
			}
			for _, p := range rule.Ports {
				if p.Port != nil && !objs.anyDeclaresPort(targets, p.Port.String()) {
					t.Errorf("NetworkPolicy/%s: port %s is not a port of %v", np.Name, p.Port.String(), targets)
				}
			}
		}
	}
	for _, h := range objs.hpas {
		ref := h.Spec.ScaleTargetRef
		found := false
		for _, d := range objs.deployments {
			if ref.Kind == "Deployment" && ref.APIVersion == "apps/v1" && ref.Name == d.Name {
				found = true
				if d.Spec.Replicas != nil {
					t.Errorf("Deployment/%s sets replicas although HorizontalPodAutoscaler/%s sizes it", d.Name, h.Name)
				}
			}
		}
		if !found {
			t.Errorf("HorizontalPodAutoscaler/%s scales %s/%s, which does not exist", h.Name, ref.Kind, ref.Name)
		}
	}
}

func (o *objects) containers(workload string) []corev1.Container {
	for _, w := range o.workloads() {
		if w.name == workload {
			return w.pod.Spec.Containers
		}
	}
	return nil
}

// declaresPort: every workload of names has the port (by name or number).
func (o *objects) declaresPort(names []string, port string) bool {
	for _, n := range names {
		if !o.anyDeclaresPort([]string{n}, port) {
			return false
		}
	}
	return true
}

// anyDeclaresPort: some workload of names has the port.
func (o *objects) anyDeclaresPort(names []string, port string) bool {
	for _, n := range names {
		for _, c := range o.containers(n) {
			if hasPort(c, port) {
				return true
			}
		}
	}
	return false
}

// imageBinary maps an image to the binary it runs (its entrypoint).
var imageBinary = regexp.MustCompile(`(?:^|/)(gateway|registry|validator|converter|storage|etcd)(?::[^/]*)?$`)

// commandOf is the binary a container runs and its arguments.
func commandOf(t *testing.T, workload string, c corev1.Container) (string, []string) {
	t.Helper()
	if len(c.Command) > 0 {
		return filepath.Base(c.Command[0]), append(slices.Clone(c.Command[1:]), c.Args...)
	}
	m := imageBinary.FindStringSubmatch(c.Image)
	if m == nil {
		t.Fatalf("%s/%s: unknown image %q", workload, c.Name, c.Image)
	}
	if m[1] == "etcd" {
		return "etcd", c.Args
	}
	return "crdplane-" + m[1], c.Args
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs expands $(VAR) references as the kubelet does, from the
// container's env (values, ConfigMap keys; field references become a
// placeholder). A reference to an undefined variable fails the test: the
// kubelet would pass it through literally.
func expandArgs(t *testing.T, workload string, c corev1.Container, args []string, configMaps map[string]*corev1.ConfigMap) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := env[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := configMaps[ref.Name]
			if !ok {
				t.Errorf("%s/%s: env %s: no ConfigMap %s", workload, c.Name, e.Name, ref.Name)
				continue
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				t.Errorf("%s/%s: env %s: ConfigMap %s has no key %s", workload, c.Name, e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "field-" + strings.ToLower(strings.ReplaceAll(e.ValueFrom.FieldRef.FieldPath, ".", "-"))
		default:
			env[e.Name] = "value-of-" + strings.ToLower(e.Name)
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = varRef.ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := env[ref[2:len(ref)-1]]
			if !ok {
				t.Errorf("%s/%s: argument %q refers to %s, which the container's env does not define", workload, c.Name, a, ref)
				return ref
			}
			return v
		})
	}
	return out
}
