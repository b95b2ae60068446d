package registry

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// controller is one reconcile loop: a queue of CRD names and a sync
// function run by a few workers.
type controller struct {
	name  string
	sync  func(ctx context.Context, name string) error
	queue *queue
	// single: one worker only (the names controller decides conflicts
	// between CRDs, which must not be decided concurrently)
	single bool
}

// controllers runs the CRD controllers while this replica leads. The
// informer feeds them in every replica; only the leader's queues exist.
type controllers struct {
	log      *slog.Logger
	inf      *informer
	st       *store
	workers  int
	cleanup  cleanupConfig
	cleanups cleanupWaits // the finalizer's waits for objects to go
	mu       sync.Mutex
	sessions map[string]*controller // by controller name, nil when not leading
}

func newControllers(log *slog.Logger, inf *informer, st *store, workers int, cleanup cleanupConfig) *controllers {
	c := &controllers{log: log, inf: inf, st: st, workers: workers, cleanup: cleanup}
	inf.addHandler(c.onChange)
	return c
}

// lead runs the controllers until ctx ends (leadership lost or shutdown).
func (c *controllers) lead(ctx context.Context) {
	if err := c.inf.waitSynced(ctx); err != nil {
		return
	}
	c.log.Info("running CRD controllers")
	defs := []*controller{
		{name: "names", sync: c.syncNames, single: true},
		{name: "establishing", sync: c.syncEstablished},
		{name: "apiapproval", sync: c.syncAPIApproval},
		{name: "nonstructural", sync: c.syncNonStructural},
		{name: "finalizer", sync: c.syncFinalizer},
	}
	c.mu.Lock()
	c.sessions = map[string]*controller{}
	for _, d := range defs {
		d.queue = newQueue()
		c.sessions[d.name] = d
	}
	c.mu.Unlock()
	// start from everything there is
	for _, crd := range c.inf.list() {
		c.onChange(nil, crd)
	}
	var wg sync.WaitGroup
	for _, d := range defs {
		n := c.workers
		if d.single {
			n = 1
		}
		for range n {
			wg.Go(func() { c.work(ctx, d) })
		}
	}
	<-ctx.Done()
	c.mu.Lock()
	c.sessions = nil
	c.mu.Unlock()
	for _, d := range defs {
		d.queue.stop()
	}
	wg.Wait()
	c.log.Info("stopped CRD controllers")
}

func (c *controllers) work(ctx context.Context, d *controller) {
	for {
		key, ok := d.queue.get()
		if !ok {
			return
		}
		err := d.sync(ctx, key)
		switch {
		case err == nil:
			d.queue.forget(key)
		case ctx.Err() != nil:
		default:
			if !apierrors.IsConflict(err) {
				c.log.Warn("CRD controller sync failed", "controller", d.name, "crd", key, "err", err)
			}
			d.queue.retry(key)
		}
		d.queue.done(key)
	}
}

func (c *controllers) enqueue(controller, name string) {
	c.mu.Lock()
	d := c.sessions[controller]
	c.mu.Unlock()
	if d != nil {
		d.queue.add(name)
	}
}

// enqueueAfter queues name for controller after d.
func (c *controllers) enqueueAfter(controller, name string, d time.Duration) {
	c.mu.Lock()
	q := c.sessions[controller]
	c.mu.Unlock()
	if q != nil {
		q.queue.addAfter(name, d)
	}
}

// onChange routes an informer change to the controllers that care.
func (c *controllers) onChange(old, crd *CRD) {
	if crd == nil {
		c.enqueue("names", old.Name)
		return
	}
	c.enqueue("names", crd.Name)
	c.enqueue("apiapproval", crd.Name)
	c.enqueue("nonstructural", crd.Name)
	if conditionTrue(crd, condNamesAccepted) && !conditionTrue(crd, condEstablished) {
		c.enqueue("establishing", crd.Name)
	}
	if crd.DeletionTimestamp != nil && hasFinalizer(crd, cleanupFinalizer) && finalizerRelevantChange(old, crd) {
		c.enqueue("finalizer", crd.Name)
	}
}

// finalizerRelevantChange ignores updates that only moved the Terminating
// condition (the finalizer's own progress reports).
func finalizerRelevantChange(old, crd *CRD) bool {
	if old == nil || old.ResourceVersion == crd.ResourceVersion {
		return true
	}
	a, b := old.DeepCopy(), crd.DeepCopy()
	a.ResourceVersion, b.ResourceVersion = "", ""
	a.ManagedFields, b.ManagedFields = nil, nil // moved by the finalizer's own writes too
	removeCondition(a, condTerminating)
	removeCondition(b, condTerminating)
	return !semanticEqual(a, b)
}

// controllerManager is the field manager of the registry's controllers
// (upstream's are kube-apiserver's loopback client: "kube-apiserver"; the
// standalone apiextensions-apiserver is named after its binary).
const controllerManager = "kube-apiserver"

// compareWrite reports whether crd differs from cur at most in its status,
// and whether it does not differ at all (semantic equality, as the whole
// CRD's, in parts: the spec, its schemas and most of a CRD, is compared
// once for both questions).
func compareWrite(crd, cur *CRD) (statusOnly, unchanged bool) {
	statusOnly = crd.TypeMeta == cur.TypeMeta && semanticEqual(crd.Spec, cur.Spec) && semanticEqual(crd.ObjectMeta, cur.ObjectMeta)
	return statusOnly, statusOnly && semanticEqual(crd.Status, cur.Status)
}

// writeStatus stores crd (a modified copy of the informer's cur) with
// compare-and-swap, when it differs from cur, and records the result in
// the informer. A lost race is
// not an error: the winner's change brings the CRD back to the queue.
func (c *controllers) writeStatus(ctx context.Context, crd, cur *CRD) error {
	statusOnly, unchanged := compareWrite(crd, cur)
	if unchanged {
		// as upstream's storage, an update that changes nothing writes
		// nothing (and so triggers no further sync)
		return nil
	}
	// The controllers' writes carry managedFields as upstream's, which
	// write through the loopback client: kube-apiserver's manager, on
	// the status subresource when only the status changed.
	sub := "status"
	if !statusOnly {
		sub = ""
	}
	tracked, err := trackUpdate(cur, crd, sub, controllerManager)
	if err != nil {
		return err
	}
	out, err := c.st.write(ctx, tracked, cur)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if out != nil && out.ResourceVersion != "" {
		c.inf.observe(out)
	}
	return nil
}

// groupOf returns the group part of a CRD name (<plural>.<group>).
func groupOf(name string) string {
	_, g, _ := strings.Cut(name, ".")
	return g
}
