package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const migrateUsage = `Usage:
  crdplane migrate-storage --kubeconfig <path> [--crd <name>] [--page-size 500] [--force]

Rewrites every stored custom resource of a CRD (of every CRD without --crd)
at the CRD's current storage version, then sets status.storedVersions to
that version alone, so older versions can be removed from spec.versions.
It works against any Kubernetes API (crdplane or kube-apiserver), through
the API only: a paginated list at the storage version, and an update of
each object as read, which the server writes at the storage version (an
object already there is left alone: no new revision). Safe to interrupt
and to run again: storedVersions is trimmed only once every object has
been rewritten, and only if the storage version did not change meanwhile.
A CRD whose storedVersions holds only its storage version is skipped
(nothing can be stored at another version), unless --force.
`

// migrateStorage runs `crdplane migrate-storage`.
func migrateStorage(args []string) error {
	fs := flag.NewFlagSet("crdplane migrate-storage", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), migrateUsage+"\nFlags:\n"); fs.PrintDefaults() }
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default $KUBECONFIG)")
	crdName := fs.String("crd", "", "migrate only this CRD (<plural>.<group>)")
	pageSize := fs.Int64("page-size", 500, "objects per list page")
	qps := fs.Float64("qps", 200, "client requests per second (negative: no limit)")
	force := fs.Bool("force", false, "rewrite the objects even of CRDs whose storedVersions is only the storage version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *kubeconfig == "" {
		fs.Usage()
		return errors.New("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = max(int(2**qps), 1)
	cfg.UserAgent = "crdplane-migrate-storage"
	// JSON bodies: the apiextensions clientset would send protobuf, which
	// crdplane does not accept (kube-apiserver accepts either).
	cfg.ContentType = "application/json"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return (&migrator{cfg: cfg, pageSize: *pageSize, force: *force, out: os.Stdout}).run(ctx, *crdName)
}

// migrator moves stored objects to their CRD's storage version.
type migrator struct {
	cfg      *rest.Config
	pageSize int64
	force    bool
	out      io.Writer
}

func (m *migrator) run(ctx context.Context, crdName string) error {
	crds, err := apiextensionsclient.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	client := crds.ApiextensionsV1().CustomResourceDefinitions()
	var names []string
	if crdName != "" {
		names = []string{crdName}
	} else {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, crd := range list.Items {
			names = append(names, crd.Name)
		}
	}
	var errs []error
	for _, name := range names {
		if err := m.migrateCRD(ctx, client, dc, name); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: interrupted (run again to finish): %w", name, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

type crdClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	UpdateStatus(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func (m *migrator) migrateCRD(ctx context.Context, client crdClient, dc dynamic.Interface, name string) error {
	crd, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sv := storageVersion(crd)
	if sv == "" {
		return errors.New("the CRD has no storage version")
	}
	if crd.DeletionTimestamp != nil {
		fmt.Fprintf(m.out, "%s: being deleted, skipped\n", name)
		return nil
	}
	if slices.Equal(crd.Status.StoredVersions, []string{sv}) && !m.force {
		fmt.Fprintf(m.out, "%s: every object is stored at %s already\n", name, sv)
		return nil
	}
	fmt.Fprintf(m.out, "%s: storedVersions %v, migrating to %s\n", name, crd.Status.StoredVersions, sv)
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: sv, Resource: crd.Spec.Names.Plural}
	n, err := m.rewriteAll(ctx, dc.Resource(gvr))
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "%s: %d objects rewritten at %s\n", name, n, sv)

	// Trim storedVersions, unless the storage version moved meanwhile
	// (objects may then be stored at sv: another run is needed).
	for {
		crd, err = client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if now := storageVersion(crd); now != sv {
			return fmt.Errorf("the storage version changed from %s to %s during the migration; run again", sv, now)
		}
		before := crd.Status.StoredVersions
		crd.Status.StoredVersions = []string{sv}
		_, err = client.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("updating status.storedVersions: %w", err)
		}
		fmt.Fprintf(m.out, "%s: storedVersions %v → [%s]\n", name, before, sv)
		return nil
	}
}

// rewriteAll updates every object of r as read, page by page; it returns
// how many it went through. A list continuation that expired restarts the
// list (objects done already are no-ops the second time).
func (m *migrator) rewriteAll(ctx context.Context, r dynamic.NamespaceableResourceInterface) (int, error) {
	n := 0
	cont := ""
	for {
		list, err := r.List(ctx, metav1.ListOptions{Limit: m.pageSize, Continue: cont})
		if apierrors.IsResourceExpired(err) && cont != "" {
			fmt.Fprintln(m.out, "  list continuation expired; listing again")
			cont = ""
			continue
		}
		if err != nil {
			return n, fmt.Errorf("list: %w", err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, r, &list.Items[i]); err != nil {
				return n, err
			}
			n++
		}
		if cont = list.GetContinue(); cont == "" {
			return n, nil
		}
	}
}

// rewrite updates obj unchanged, so the server stores it at the storage
// version. An object changed meanwhile is read again (a write after the
// storage version change may already have moved it, but the retry is
// cheap); one deleted meanwhile is done.
func rewrite(ctx context.Context, r dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) error {
	ri := r.Namespace(obj.GetNamespace())
	for range 10 {
		_, err := ri.Update(ctx, obj, metav1.UpdateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("update %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return fmt.Errorf("update %s/%s: still conflicting after 10 attempts", obj.GetNamespace(), obj.GetName())
}
