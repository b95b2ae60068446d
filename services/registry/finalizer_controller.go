package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// cleanupConfig tunes how the finalizer waits for a CRD's objects to go.
type cleanupConfig struct {
	// timeout bounds the wait for the objects to be gone before the
	// finalizer reports InstanceDeletionCheck and starts over (upstream:
	// 1 minute).
	timeout time.Duration
	// poll is the first interval between checks; it doubles up to
	// maxCleanupPoll (upstream polls every 5 seconds) or a fifth of
	// timeout.
	poll time.Duration
}

// maxCleanupPoll is the longest interval between two checks of a CRD's
// remaining objects (upstream's poll interval).
const maxCleanupPoll = 5 * time.Second

// cleanupListPage bounds the objects read at once while deleting a CRD's
// objects.
const cleanupListPage = 500

// syncFinalizer runs the cleanup finalizer of a CRD marked for deletion, as
// upstream's CRDFinalizer: Terminating "InstanceDeletionInProgress", then
// delete every object of the CRD as a DeleteCollection of the custom
// resources does (objects with finalizers are only marked and stay until
// their finalizers are gone), wait until none is left, then drop the
// finalizer (which deletes the CRD once no other finalizer holds it).
//
// Upstream's worker waits in place (5s polls, up to a minute); here the
// CRD comes back to the queue instead, so that a CRD whose objects wait for
// their finalizers holds no worker.
func (c *controllers) syncFinalizer(ctx context.Context, name string) error {
	cached, ok := c.inf.get(name)
	if !ok || cached.DeletionTimestamp == nil || !hasFinalizer(cached, cleanupFinalizer) {
		c.cleanups.forget(name)
		return nil
	}
	crd, err := c.st.guaranteedUpdate(ctx, name, func(cur *CRD) (*CRD, error) {
		if cur.DeletionTimestamp == nil || !hasFinalizer(cur, cleanupFinalizer) {
			return nil, nil
		}
		inProgress := condition{
			Type:    condTerminating,
			Status:  apiextensionsv1.ConditionTrue,
			Reason:  "InstanceDeletionInProgress",
			Message: "CustomResource deletion is in progress",
		}
		if conditionEquivalent(&inProgress, findCondition(cur, condTerminating)) {
			return nil, nil
		}
		return statusTracked(cur, func(crd *CRD) { setCondition(crd, inProgress) })
	})
	if err != nil {
		return ignoreNotFound(err)
	}
	if crd.DeletionTimestamp == nil || !hasFinalizer(crd, cleanupFinalizer) {
		c.cleanups.forget(name)
		return nil
	}
	c.inf.observe(crd)

	var final condition
	if conditionTrue(crd, condEstablished) {
		cond, done, delErr := c.deleteInstances(ctx, crd)
		if delErr != nil {
			// report why, keep the finalizer, try again later
			c.cleanups.forget(name)
			c.setTerminating(ctx, name, cond)
			return delErr
		}
		if !done {
			wait, timedOut := c.cleanups.next(name, c.cleanup)
			if timedOut {
				c.setTerminating(ctx, name, condition{
					Type: condTerminating, Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionCheck",
					Message: fmt.Sprintf("could not confirm zero CustomResources remaining: %v", context.DeadlineExceeded),
				})
				return fmt.Errorf("%s: could not confirm zero CustomResources remaining: %w", name, context.DeadlineExceeded)
			}
			c.enqueueAfter("finalizer", name, wait)
			return nil
		}
		c.cleanups.forget(name)
		final = cond
	} else {
		final = condition{Type: condTerminating, Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"}
	}
	_, err = c.st.guaranteedUpdate(ctx, name, func(cur *CRD) (*CRD, error) {
		if !hasFinalizer(cur, cleanupFinalizer) {
			return nil, nil
		}
		done, err := statusTracked(cur, func(crd *CRD) { setCondition(crd, final) })
		if err != nil {
			return nil, err
		}
		removeFinalizer(done, cleanupFinalizer)
		return done, nil
	})
	return ignoreNotFound(err)
}

// setTerminating records cond on the CRD (best effort: the sync that
// failed is retried anyway).
func (c *controllers) setTerminating(ctx context.Context, name string, cond condition) {
	_, _ = c.st.guaranteedUpdate(ctx, name, func(cur *CRD) (*CRD, error) {
		if !hasFinalizer(cur, cleanupFinalizer) || conditionEquivalent(&cond, findCondition(cur, condTerminating)) {
			return nil, nil
		}
		return statusTracked(cur, func(crd *CRD) { setCondition(crd, cond) })
	})
}

// statusTracked applies a status change to cur and records it in
// managedFields as upstream's finalizer does, an UpdateStatus through the
// loopback client: kube-apiserver's entry on the status subresource.
func statusTracked(cur *CRD, change func(*CRD)) (*CRD, error) {
	live := cur.DeepCopy()
	change(cur)
	return trackUpdate(live, cur, "status", controllerManager)
}

// deleteInstances makes one pass over the objects of crd, deleting them as
// kube-apiserver's DeleteCollection of custom resources does: an object
// without finalizers is removed, one with finalizers gets its
// deletionTimestamp (and deletionGracePeriodSeconds 0, generation+1) and
// stays until its finalizers are gone. done says whether no object is left;
// on failure the Terminating condition to report comes with the error.
// Objects written meanwhile (by a gateway that has not seen the deletion
// yet) are caught by the next pass.
func (c *controllers) deleteInstances(ctx context.Context, crd *CRD) (cond condition, done bool, err error) {
	prefix := objectsPrefix(crd)
	failed := func(reason, format string, err error) (condition, bool, error) {
		return condition{Type: condTerminating, Status: apiextensionsv1.ConditionTrue, Reason: reason, Message: fmt.Sprintf(format, err)}, false, err
	}
	remaining := 0
	token := ""
	for {
		resp, err := c.st.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: cleanupListPage, ContinueToken: token}})
		if err != nil {
			return failed("InstanceDeletionFailed", "could not list instances: %v", errors.New(kstatus.FromError(err).Message))
		}
		for _, obj := range resp.GetObjects() {
			kept, err := deleteInstance(ctx, c.st.client, prefix, obj)
			if err != nil {
				return failed("InstanceDeletionFailed", "could not issue all deletes: %v", err)
			}
			if kept {
				remaining++
			}
		}
		if token = resp.GetContinueToken(); token == "" {
			break
		}
	}
	if remaining > 0 {
		return condition{}, false, nil
	}
	return condition{Type: condTerminating, Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}, true, nil
}

// instanceMeta is what deleting one object needs from its metadata.
type instanceMeta struct {
	Name              string   `json:"name"`
	Namespace         string   `json:"namespace"`
	UID               string   `json:"uid"`
	ResourceVersion   string   `json:"resourceVersion"`
	Finalizers        []string `json:"finalizers"`
	DeletionTimestamp *string  `json:"deletionTimestamp"`
	Generation        int64    `json:"generation"`
}

// deleteInstance deletes one stored object (obj, as listed under prefix):
// removed when it has no finalizers, else marked for deletion. kept says
// whether it is still there. A lost compare-and-swap or an object already
// gone is no error: the next pass looks again.
func deleteInstance(ctx context.Context, client storagev1.StorageServiceClient, prefix string, obj []byte) (kept bool, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return false, fmt.Errorf("decode object: %w", err)
	}
	var m instanceMeta
	if err := json.Unmarshal(top["metadata"], &m); err != nil {
		return false, fmt.Errorf("decode object metadata: %w", err)
	}
	key := prefix + m.Name
	if m.Namespace != "" {
		key = prefix + m.Namespace + "/" + m.Name
	}
	rv, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return false, fmt.Errorf("%s: resourceVersion %q: %w", key, m.ResourceVersion, err)
	}
	ignore := func(err error) error {
		if err == nil {
			return nil
		}
		if s := kstatus.FromError(err); s.Code == 404 || s.Code == 409 {
			return nil
		}
		return fmt.Errorf("%s: %s", key, kstatus.FromError(err).Message)
	}
	if len(m.Finalizers) == 0 {
		_, err := client.Delete(ctx, &storagev1.DeleteRequest{Key: key, PreconditionUid: m.UID, PreconditionResourceVersion: rv})
		if err := ignore(err); err != nil {
			return false, err
		}
		return false, nil
	}
	if m.DeletionTimestamp != nil {
		return true, nil // marked already: its finalizers decide
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(top["metadata"], &meta); err != nil {
		return false, fmt.Errorf("decode object metadata: %w", err)
	}
	ts, _ := json.Marshal(now())
	meta["deletionTimestamp"] = ts
	meta["deletionGracePeriodSeconds"] = json.RawMessage("0")
	if m.Generation > 0 {
		meta["generation"] = json.RawMessage(strconv.FormatInt(m.Generation+1, 10))
	}
	if top["metadata"], err = json.Marshal(meta); err != nil {
		return false, err
	}
	data, err := json.Marshal(top)
	if err != nil {
		return false, err
	}
	_, err = client.Update(ctx, &storagev1.UpdateRequest{Key: key, Object: data, ExpectedResourceVersion: rv})
	if err := ignore(err); err != nil {
		return false, err
	}
	return true, nil
}

// cleanupWaits tracks, per CRD, how long the finalizer has been waiting for
// its objects to go and when to look again.
type cleanupWaits struct {
	mu    sync.Mutex
	waits map[string]*cleanupWait
}

type cleanupWait struct {
	start time.Time
	poll  time.Duration
}

// next returns how long to wait before the next pass over name's objects,
// or timedOut when the wait has lasted cfg.timeout (the wait then starts
// over).
func (w *cleanupWaits) next(name string, cfg cleanupConfig) (wait time.Duration, timedOut bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waits == nil {
		w.waits = map[string]*cleanupWait{}
	}
	cur := w.waits[name]
	if cur == nil {
		cur = &cleanupWait{start: time.Now(), poll: max(cfg.poll, time.Millisecond)}
		w.waits[name] = cur
	} else {
		// at least five checks within the timeout
		cur.poll = max(min(2*cur.poll, maxCleanupPoll, cfg.timeout/5), time.Millisecond)
	}
	if time.Since(cur.start) >= cfg.timeout {
		delete(w.waits, name)
		return 0, true
	}
	return cur.poll, false
}

// forget ends name's wait.
func (w *cleanupWaits) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waits, name)
}
