package registry

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// cleanupConfig tunes how the finalizer waits for a CRD's objects to go.
type cleanupConfig struct {
	timeout time.Duration
	poll    time.Duration
}

// syncFinalizer runs the cleanup finalizer of a CRD marked for deletion:
// Terminating "InstanceDeletionInProgress", delete every object of the CRD,
// check that none remain, then drop the finalizer (which deletes the CRD
// once no other finalizer holds it).
func (c *controllers) syncFinalizer(ctx context.Context, name string) error {
	cached, ok := c.inf.get(name)
	if !ok || cached.DeletionTimestamp == nil || !hasFinalizer(cached, cleanupFinalizer) {
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
		setCondition(cur, inProgress)
		return cur, nil
	})
	if err != nil {
		return ignoreNotFound(err)
	}
	if crd.DeletionTimestamp == nil || !hasFinalizer(crd, cleanupFinalizer) {
		return nil
	}
	c.inf.observe(crd)

	var final condition
	if conditionTrue(crd, condEstablished) {
		cond, delErr := c.deleteInstances(ctx, crd)
		if delErr != nil {
			// report why, keep the finalizer, try again later
			_, _ = c.st.guaranteedUpdate(ctx, name, func(cur *CRD) (*CRD, error) {
				setCondition(cur, cond)
				return cur, nil
			})
			return delErr
		}
		final = cond
	} else {
		final = condition{Type: condTerminating, Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"}
	}
	_, err = c.st.guaranteedUpdate(ctx, name, func(cur *CRD) (*CRD, error) {
		if !hasFinalizer(cur, cleanupFinalizer) {
			return nil, nil
		}
		setCondition(cur, final)
		removeFinalizer(cur, cleanupFinalizer)
		return cur, nil
	})
	return ignoreNotFound(err)
}

// deleteInstances removes every object of crd and waits until none is
// left, returning the Terminating condition to report.
func (c *controllers) deleteInstances(ctx context.Context, crd *CRD) (condition, error) {
	prefix := objectsPrefix(crd)
	failed := func(reason, format string, err error) (condition, error) {
		return condition{Type: condTerminating, Status: apiextensionsv1.ConditionTrue, Reason: reason, Message: fmt.Sprintf(format, err)}, err
	}
	if _, err := c.st.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix, Options: &commonv1.ListOptions{}}); err != nil {
		return failed("InstanceDeletionFailed", "could not issue all deletes: %v", err)
	}
	deadline := time.Now().Add(c.cleanup.timeout)
	for {
		resp, err := c.st.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: 1}})
		if err != nil {
			return failed("InstanceDeletionFailed", "could not list instances: %v", err)
		}
		if len(resp.GetObjects()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return failed("InstanceDeletionCheck", "could not confirm zero CustomResources remaining: %v", fmt.Errorf("%d or more objects remain", len(resp.GetObjects())))
		}
		// objects written meanwhile (a gateway that has not seen the
		// deletion yet): delete again
		if _, err := c.st.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix, Options: &commonv1.ListOptions{}}); err != nil {
			return failed("InstanceDeletionFailed", "could not issue all deletes: %v", err)
		}
		select {
		case <-ctx.Done():
			return failed("InstanceDeletionCheck", "could not confirm zero CustomResources remaining: %v", ctx.Err())
		case <-time.After(c.cleanup.poll):
		}
	}
	return condition{Type: condTerminating, Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}, nil
}
