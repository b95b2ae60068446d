package listing

import (
	"fmt"
	"math"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reads at a resourceVersion the store has not reached, as upstream v1.33
// answers them (read back from upstream's apiextensions-apiserver):
//
//   - a list "not older than" it (resourceVersionMatch NotOlderThan, or
//     unset without a limit) and a get: upstream's watch cache waits 3s for
//     the revision, then 504 "Timeout: Too large resource version: <asked>,
//     current: <current>" (cause ResourceVersionTooLarge, retry after 1s);
//     a get of a missing object too. The gateway asks storage for a read
//     not older than the revision (min_resource_version), and storage
//     waits;
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
// it as the uint64 it is (upstream's NewTooLargeResourceVersionError).

// ErrTooLargeRV is upstream's answer for a read at a revision the store
// has not reached (k8s.io/apiserver/pkg/storage
// NewTooLargeResourceVersionError): asked as the client wrote it, retry
// after retry seconds (the watch cache's 1; 0, no hint, from the etcd3
// store).
func ErrTooLargeRV(asked string, current int64, retry int) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %d", asked, current), retry)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// RVBeyondRevisions reports a resourceVersion past the largest etcd
// revision (a uint64 above MaxInt64).
func RVBeyondRevisions(rv string) bool {
	n, err := strconv.ParseUint(rv, 10, 64)
	return err == nil && n > math.MaxInt64
}

// ClampRV is a parsed resourceVersion rv, written raw, with one past the
// largest etcd revision read as that revision.
func ClampRV(rv int64, raw string) int64 {
	if RVBeyondRevisions(raw) {
		return math.MaxInt64
	}
	return rv
}
