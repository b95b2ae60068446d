// Package controllerruntime drives a running API server with
// controller-runtime as operators use it: a manager whose controller installs
// its own CRD through the typed client, reconciles custom resources and
// writes their status, and envtest pointed at an existing cluster. go.mod is
// the newest controller-runtime, cr018.mod the v0.18 generation (go test
// -modfile=cr018.mod). KUBECONFIG names the server.
package controllerruntime

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const runLabel = "crdplane.io/clients-run"

// Gadget is the custom resource the tests' controller owns.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetSpec   `json:"spec,omitempty"`
	Status            GadgetStatus `json:"status,omitempty"`
}

// GadgetSpec is what a user asks for.
type GadgetSpec struct {
	Size  int64  `json:"size"`
	Color string `json:"color,omitempty"`
}

// GadgetStatus is what the controller writes.
type GadgetStatus struct {
	Phase              string `json:"phase,omitempty"`
	Doubled            int64  `json:"doubled,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// GadgetList is a list of Gadgets.
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gadget) DeepCopyObject() runtime.Object { return g.DeepCopy() }

// DeepCopy copies g.
func (g *Gadget) DeepCopy() *Gadget {
	if g == nil {
		return nil
	}
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *GadgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Gadget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopy()
	}
	return &out
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// scheme knows apiextensions v1 and Gadgets of group.
func newScheme(t *testing.T, group string) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := apiextv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	s.AddKnownTypes(gv, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

func gadgetCRD(group, suffix string) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group, Labels: map[string]string{runLabel: suffix}},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group:      group,
			Names:      apiextv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope:      apiextv1.NamespaceScoped,
			Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"size"}, Properties: map[string]apiextv1.JSONSchemaProps{
							"size":  {Type: "integer"},
							"color": {Type: "string"},
						}},
						"status": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
							"phase":              {Type: "string"},
							"doubled":            {Type: "integer"},
							"observedGeneration": {Type: "integer"},
						}},
					},
				}},
				Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}
