package gateway

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Reads at a resourceVersion the store has not reached, as upstream v1.33
// answers them (read back from upstream's apiextensions-apiserver):
//
//   - a list "not older than" it (resourceVersionMatch NotOlderThan, or
//     unset without a limit) and a get: upstream's watch cache waits 3s for
//     the revision, then 504 "Timeout: Too large resource version: <asked>,
//     current: <current>" (cause ResourceVersionTooLarge, retry after 1s);
//     a get of a missing object too;
//   - an exact list (Exact, or a limit with a resourceVersion): etcd's own
//     error, a plain 500 "etcdserver: mvcc: required revision is a future
//     revision" (the storage service answers it); past the largest etcd
//     revision (MaxInt64) the etcd3 store reads a negative revision, the
//     latest, and answers the 504 at once and without a retry hint;
//   - a watch: it waits silently (with sendInitialEvents, the storage
//     service waits 3s, then the 504 is the stream's ERROR event).
//
// A resourceVersion is any uint64 to upstream; past MaxInt64 it is the
// largest revision here (no revision gets there either), and messages say
// it as the client wrote it.

// revisionWait is how long a read "not older than" a revision waits for
// the store to reach it: upstream's watch cache blockTimeout (3s).
const revisionWait = 3 * time.Second

// waitForRevision waits, at most revisionWait, until the store has reached
// revision rv, and reports whether it had to wait; 504 "Too large resource
// version" (asked is the revision as the client wrote it) when the store
// does not get there.
func (a *kubeAPI) waitForRevision(ctx context.Context, r *resource, rv int64, asked string) (bool, error) {
	deadline := time.Now().Add(revisionWait)
	pause := 10 * time.Millisecond
	for waited := false; ; waited = true {
		current, err := a.currentRevision(ctx, r)
		if err != nil {
			return waited, err
		}
		if current >= rv {
			return waited, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return waited, errTooLargeRV(asked, current, 1)
		}
		select {
		case <-ctx.Done():
			return waited, ctx.Err()
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// currentRevision is the store's current revision (the revision a list of
// r's collection reads at).
func (a *kubeAPI) currentRevision(ctx context.Context, r *resource) (int64, error) {
	resp, err := a.storage.List(ctx, &storagev1.ListRequest{Prefix: r.collectionKey(""), Options: &commonv1.ListOptions{Limit: 1}})
	if err != nil {
		return 0, err
	}
	return resp.GetResourceVersion(), nil
}

// errTooLargeRV is upstream's answer for a read at a revision the store
// has not reached (k8s.io/apiserver/pkg/storage
// NewTooLargeResourceVersionError): asked as the client wrote it, retry
// after retry seconds (the watch cache's 1; 0, no hint, from the etcd3
// store).
func errTooLargeRV(asked string, current int64, retry int) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %d", asked, current), retry)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// rvBeyondRevisions reports a resourceVersion past the largest etcd
// revision (a uint64 above MaxInt64).
func rvBeyondRevisions(rv string) bool {
	n, err := strconv.ParseUint(rv, 10, 64)
	return err == nil && n > math.MaxInt64
}

// clampRV is a parsed resourceVersion rv, written raw, with one past the
// largest etcd revision read as that revision.
func clampRV(rv int64, raw string) int64 {
	if rvBeyondRevisions(raw) {
		return math.MaxInt64
	}
	return rv
}
