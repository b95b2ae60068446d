package registry

import (
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// nsFieldManagers maintain metadata.managedFields of namespaces and merge
// their server-side applies, as kube-apiserver's field managers for the
// namespaces resource and its subresources: core/v1's schema (client-go's
// apply configurations carry it), and the namespace strategies' reset
// fields (status and spec.finalizers on the main resource, spec on
// status, status on finalize).
type nsFieldManagers struct {
	once                   sync.Once
	err                    error
	main, status, finalize *managedfields.FieldManager
}

var namespaceFieldManagers nsFieldManagers

func (m *nsFieldManagers) managers() (*nsFieldManagers, error) {
	m.once.Do(func() { m.err = m.build() })
	return m, m.err
}

func (m *nsFieldManagers) build() error {
	tc := applyconfigurations.NewTypeConverter(nsScheme)
	v1 := fieldpath.APIVersion(nsGV.String())
	reset := func(paths ...string) map[fieldpath.APIVersion]fieldpath.Filter {
		set := fieldpath.NewSet()
		for _, p := range paths {
			set.Insert(fieldpath.MakePathOrDie(splitPath(p)...))
		}
		return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{v1: set})
	}
	var err error
	if m.main, err = managedfields.NewDefaultFieldManager(tc, nsScheme, nsScheme, nsScheme, nsGVK, nsGV, "", reset("status", "spec.finalizers")); err != nil {
		return fmt.Errorf("Namespace field manager: %w", err)
	}
	if m.status, err = managedfields.NewDefaultFieldManager(tc, nsScheme, nsScheme, nsScheme, nsGVK, nsGV, "status", reset("spec")); err != nil {
		return fmt.Errorf("Namespace status field manager: %w", err)
	}
	if m.finalize, err = managedfields.NewDefaultFieldManager(tc, nsScheme, nsScheme, nsScheme, nsGVK, nsGV, "finalize", reset("status")); err != nil {
		return fmt.Errorf("Namespace finalize field manager: %w", err)
	}
	return nil
}

func splitPath(p string) []any {
	var out []any
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

func nsFieldManagerFor(subresource string) (*managedfields.FieldManager, error) {
	m, err := namespaceFieldManagers.managers()
	if err != nil {
		return nil, err
	}
	switch subresource {
	case "status":
		return m.status, nil
	case "finalize":
		return m.finalize, nil
	}
	return m.main, nil
}

func emptyNamespace() *Namespace {
	return &Namespace{TypeMeta: metav1.TypeMeta{APIVersion: nsGV.String(), Kind: nsKind}}
}

// trackNamespaceUpdate records manager's "Update" of ns over live (nil on
// create) in ns's managedFields; as upstream, a failure keeps live's.
func trackNamespaceUpdate(live, ns *Namespace, subresource, manager string) (*Namespace, error) {
	fm, err := nsFieldManagerFor(subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if live == nil {
		live = emptyNamespace()
	}
	out := fm.UpdateNoErrors(live.DeepCopy(), ns, manager)
	res, ok := out.(*Namespace)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager returned %T", out))
	}
	res.APIVersion, res.Kind = nsGV.String(), nsKind
	return res, nil
}

// applyNamespace merges a server-side apply into live (nil: the apply
// creates), worded as applyCRD.
func applyNamespace(live *Namespace, body []byte, subresource, manager string, force bool, directive string) (*Namespace, []string, error) {
	if live == nil {
		live = emptyNamespace()
	}
	ns, warnings, err := applyWithManager(func() (*managedfields.FieldManager, error) { return nsFieldManagerFor(subresource) },
		live, body, manager, force, directive)
	if err != nil {
		return nil, nil, err
	}
	defaultNamespace(ns)
	return ns, warnings, nil
}
