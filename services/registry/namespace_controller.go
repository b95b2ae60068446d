package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// systemNamespaces are the namespaces kube-apiserver's system namespaces
// controller keeps (created when missing).
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// nsControllerManager is the field manager of the namespace controller's
// writes (upstream's runs in kube-controller-manager).
const nsControllerManager = "kube-controller-manager"

// nsController is kube-controller-manager's namespace controller for what
// crdplane serves, plus kube-apiserver's system namespaces controller: on
// the leader, it creates the system namespaces when missing and empties
// every terminating namespace (the namespaced custom resources in it, as
// DeleteCollection takes them: objects with finalizers only get a
// deletionTimestamp), reports its progress in the namespace's deletion
// conditions, then removes the kubernetes spec finalizer (finalize), which
// deletes the namespace once no other finalizer holds it.
type nsController struct {
	log  *slog.Logger
	st   *nsStore
	inf  *informer // the CRDs: which resources are namespaced
	poll time.Duration
}

func newNSController(log *slog.Logger, st *nsStore, inf *informer) *nsController {
	return &nsController{log: log, st: st, inf: inf, poll: 100 * time.Millisecond}
}

// lead runs the controller until ctx ends.
func (c *nsController) lead(ctx context.Context) {
	if err := c.inf.waitSynced(ctx); err != nil {
		return
	}
	c.ensureSystemNamespaces(ctx)
	q := newQueue()
	waits := &cleanupWaits{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			key, ok := q.get()
			if !ok {
				return
			}
			requeue, err := c.sync(ctx, key)
			switch {
			case err != nil && ctx.Err() == nil:
				if !apierrors.IsConflict(err) {
					c.log.Warn("namespace controller sync failed", "namespace", key, "err", err)
				}
				q.retry(key)
			case requeue:
				wait, _ := waits.next(key, cleanupConfig{timeout: time.Hour, poll: c.poll})
				q.forget(key)
				q.addAfter(key, wait)
			default:
				waits.forget(key)
				q.forget(key)
			}
			q.done(key)
		}
	})
	c.follow(ctx, q)
	q.stop()
	wg.Wait()
}

// follow queues every namespace being deleted, from a list and then a
// watch, listing again when the watch ends, until ctx ends.
func (c *nsController) follow(ctx context.Context, q *queue) {
	for ctx.Err() == nil {
		rv, err := c.listTerminating(ctx, q)
		if err == nil {
			err = c.watch(ctx, q, rv)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("namespace controller watch failed", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *nsController) listTerminating(ctx context.Context, q *queue) (int64, error) {
	token := ""
	var rv int64
	for {
		resp, err := c.st.client.List(ctx, &storagev1.ListRequest{Prefix: nsPrefix, Options: &commonv1.ListOptions{Limit: cleanupListPage, ContinueToken: token}})
		if err != nil {
			return 0, err
		}
		if rv == 0 {
			rv = resp.GetResourceVersion()
		}
		for _, obj := range resp.GetObjects() {
			if ns, err := decodeStoredNamespace(obj, 0); err == nil && ns.DeletionTimestamp != nil {
				q.add(ns.Name)
			}
		}
		if token = resp.GetContinueToken(); token == "" {
			return rv, nil
		}
	}
}

func (c *nsController) watch(ctx context.Context, q *queue, rv int64) error {
	ws, err := c.st.client.Watch(ctx, &storagev1.WatchRequest{Prefix: nsPrefix, ResourceVersion: rv})
	if err != nil {
		return err
	}
	for {
		ev, err := ws.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ev.GetType() == commonv1.EventType_EVENT_TYPE_DELETED {
			continue
		}
		if ns, err := decodeStoredNamespace(ev.GetObject(), 0); err == nil && ns.DeletionTimestamp != nil {
			q.add(ns.Name)
		}
	}
}

// ensureSystemNamespaces creates the system namespaces that are missing,
// retrying until it succeeds or ctx ends.
func (c *nsController) ensureSystemNamespaces(ctx context.Context) {
	for _, name := range systemNamespaces {
		for ctx.Err() == nil {
			err := c.ensureNamespace(ctx, name)
			if err == nil {
				break
			}
			c.log.Warn("creating a system namespace", "namespace", name, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (c *nsController) ensureNamespace(ctx context.Context, name string) error {
	if _, err := c.st.get(ctx, name); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	ns := &Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	defaultNamespace(ns)
	if err := prepareNamespaceCreate(ns); err != nil {
		return err
	}
	tracked, err := trackNamespaceUpdate(nil, ns, "", controllerManager)
	if err != nil {
		return err
	}
	if _, err := c.st.create(ctx, tracked); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// sync is the namespace deleter's pass over one namespace; requeue asks to
// look again later (content remains).
func (c *nsController) sync(ctx context.Context, name string) (requeue bool, err error) {
	ns, err := c.st.get(ctx, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil || ns.DeletionTimestamp == nil {
		return false, err
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return false, nil // not ours (any more): other finalizers decide
	}
	remaining, fins, delErr := c.deleteContent(ctx, name)
	if err := c.updateConditions(ctx, name, remaining, fins, delErr); err != nil {
		return false, err
	}
	if delErr != nil {
		return false, delErr
	}
	if len(remaining) > 0 {
		return true, nil
	}
	// finalize: the kubernetes finalizer goes; with no finalizer left the
	// namespace goes too (ShouldDeleteNamespaceDuringUpdate)
	_, err = c.st.guaranteedUpdate(ctx, name, func(cur *Namespace) (*Namespace, error) {
		if !slices.Contains(cur.Spec.Finalizers, corev1.FinalizerKubernetes) {
			return nil, nil
		}
		live := cur.DeepCopy()
		cur.Spec.Finalizers = slices.DeleteFunc(cur.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		return trackNamespaceUpdate(live, cur, "finalize", nsControllerManager)
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// deleteContent deletes the namespaced custom resources in namespace and
// counts what remains: by resource (<plural>.<group>) and by finalizer.
func (c *nsController) deleteContent(ctx context.Context, namespace string) (remaining, finalizers map[string]int, err error) {
	remaining, finalizers = map[string]int{}, map[string]int{}
	var errs []error
	for _, crd := range c.inf.list() {
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			continue
		}
		prefix := objectsPrefix(crd)
		token := ""
		for {
			resp, err := c.st.client.List(ctx, &storagev1.ListRequest{Prefix: prefix + namespace + "/", Options: &commonv1.ListOptions{Limit: cleanupListPage, ContinueToken: token}})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s", crd.Name, kstatus.FromError(err).Message))
				break
			}
			for _, obj := range resp.GetObjects() {
				kept, err := deleteInstance(ctx, c.st.client, prefix, obj)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if kept {
					remaining[crd.Spec.Names.Plural+"."+crd.Spec.Group]++
					if m, err := objectFinalizers(obj); err == nil {
						for _, f := range m {
							finalizers[f]++
						}
					}
				}
			}
			if token = resp.GetContinueToken(); token == "" {
				break
			}
		}
	}
	return remaining, finalizers, errors.Join(errs...)
}

func objectFinalizers(obj []byte) ([]string, error) {
	var o struct {
		Metadata struct {
			Finalizers []string `json:"finalizers"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return nil, err
	}
	return o.Metadata.Finalizers, nil
}

// The namespace deleter's conditions, with upstream's reasons and
// messages.
var nsOKConditions = []struct {
	typ             corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// namespaceConditions are the deletion conditions of a pass that left
// remaining objects (by resource) holding finalizers (by name).
func namespaceConditions(remaining, finalizers map[string]int, delErr error) []corev1.NamespaceCondition {
	counts := func(m map[string]int, format string) string {
		parts := make([]string, 0, len(m))
		for k, n := range m {
			parts = append(parts, fmt.Sprintf(format, k, n))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
	out := make([]corev1.NamespaceCondition, 0, len(nsOKConditions))
	for _, ok := range nsOKConditions {
		cond := corev1.NamespaceCondition{Type: ok.typ, Status: corev1.ConditionFalse, Reason: ok.reason, Message: ok.message}
		switch {
		case ok.typ == corev1.NamespaceDeletionContentFailure && delErr != nil:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, "ContentDeletionFailed", "Failed to delete all resource types, "+delErr.Error()
		case ok.typ == corev1.NamespaceContentRemaining && len(remaining) > 0:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, "SomeResourcesRemain", "Some resources are remaining: "+counts(remaining, "%s has %d resource instances")
		case ok.typ == corev1.NamespaceFinalizersRemaining && len(finalizers) > 0:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+counts(finalizers, "%s in %d resource instances")
		}
		out = append(out, cond)
	}
	return out
}

// updateConditions writes the deletion conditions to the namespace's
// status when they changed (transition times move only with a change).
func (c *nsController) updateConditions(ctx context.Context, name string, remaining, finalizers map[string]int, delErr error) error {
	want := namespaceConditions(remaining, finalizers, delErr)
	_, err := c.st.guaranteedUpdate(ctx, name, func(cur *Namespace) (*Namespace, error) {
		live := cur.DeepCopy()
		changed := cur.Status.Phase != corev1.NamespaceTerminating
		cur.Status.Phase = corev1.NamespaceTerminating
		t := now()
		for _, w := range want {
			i := slices.IndexFunc(cur.Status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == w.Type })
			if i >= 0 {
				have := cur.Status.Conditions[i]
				if have.Status == w.Status && have.Reason == w.Reason && have.Message == w.Message {
					continue
				}
				if have.Status == w.Status {
					w.LastTransitionTime = have.LastTransitionTime
				} else {
					w.LastTransitionTime = t
				}
				cur.Status.Conditions[i] = w
			} else {
				w.LastTransitionTime = t
				cur.Status.Conditions = append(cur.Status.Conditions, w)
			}
			changed = true
		}
		if !changed {
			return nil, nil
		}
		return trackNamespaceUpdate(live, cur, "status", nsControllerManager)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
