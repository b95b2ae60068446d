package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// maxPageSize bounds one etcd range read of a filtered, paginated list.
const maxPageSize = 10000

// unpagedChunk is the etcd range read of a list without a limit: about
// 5 MiB of 1 KiB objects a read. Smaller chunks cost time (each read
// counts the rest of the range: BenchmarkListUnpaged, 20,000 objects:
// 1,000 a read 1.5× the time of one read, 5,000 1.1×). A variable for that
// benchmark.
var unpagedChunk int64 = 5000

// listItemSlack bounds what setting metadata.resourceVersion adds to a
// stored object (`"metadata":{"resourceVersion":"<int64>"},`).
const listItemSlack = 64

// List reads the objects under a prefix: filtered by label and field
// selectors, paginated with limit/continue (every page read at the first
// page's revision), at the latest revision or at resource_version.
func (s *Service) List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	res, err := s.list(ctx, req.GetPrefix(), req.GetOptions())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if min := req.GetMinResourceVersion(); min > 0 && res.rev < clampRevision(min) {
		// "Not older than" a revision etcd has not reached: wait for it,
		// then read again.
		if _, err := s.waitRevision(ctx, s.etcdForPrefix(req.GetPrefix()), min); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if res, err = s.list(ctx, req.GetPrefix(), req.GetOptions()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
	}
	out := &storagev1.ListResponse{
		Objects:            make([][]byte, len(res.kvs)),
		ResourceVersion:    res.rev,
		ContinueToken:      res.cont,
		RemainingItemCount: res.remaining,
	}
	// One buffer for every item: a resourceVersion adds at most
	// listItemSlack bytes to an object.
	size := 0
	for _, kv := range res.kvs {
		size += len(kv.Value) + listItemSlack
	}
	buf := make([]byte, 0, size)
	for i, kv := range res.kvs {
		start := len(buf)
		next := jsonscan.AppendEdits(buf, kv.Value, res.edits[i])
		if cap(next) != cap(buf) {
			// Grew past the estimate (cannot happen): keep the item on its own.
			out.Objects[i] = next[start:]
			buf = buf[:start]
			continue
		}
		buf = next
		out.Objects[i] = buf[start:len(buf):len(buf)]
	}
	return out, nil
}

type listResult struct {
	kvs       []*mvccpb.KeyValue
	edits     []jsonscan.Edit // of each kv: its metadata.resourceVersion
	rev       int64
	cont      string
	remaining *int64
	sel       *selector
}

func (s *Service) list(ctx context.Context, prefix string, opts *commonv1.ListOptions) (*listResult, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	sel, err := newSelector(opts.GetLabelSelector(), opts.GetFieldSelector(), opts.GetSelectableFields())
	if err != nil {
		return nil, err
	}
	cli := s.etcdForPrefix(prefix)
	limit := max(opts.GetLimit(), 0)
	paging := limit > 0

	from := prefix
	var withRev int64
	continuing := opts.GetContinueToken() != ""
	if continuing {
		if opts.GetResourceVersion() != 0 {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		key, rv, err := decodeContinue(opts.GetContinueToken(), prefix)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		from = key
		if rv > 0 {
			withRev = rv
		}
	} else if rv := opts.GetResourceVersion(); rv > 0 {
		withRev = rv
	}

	end := clientv3.GetPrefixRangeEnd(prefix)
	// An unpaginated list reads etcd in chunks too, all at the first
	// chunk's revision: one range of every object would hold the whole
	// collection several times over in etcd and its client at once.
	pageSize := limit
	if !paging {
		pageSize = unpagedChunk
	}
	res := &listResult{sel: sel}
	var lastKey []byte
	hasMore := false
	var count int64
	for first := true; ; first = false {
		ops := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if withRev > 0 {
			ops = append(ops, clientv3.WithRev(withRev))
		}
		resp, err := cli.Get(ctx, from, ops...)
		if err != nil {
			return nil, s.readErr(ctx, err, withRev, continuing)
		}
		if withRev == 0 {
			// Later pages read at the same revision: one consistent snapshot.
			withRev = resp.Header.Revision
		}
		if first {
			count = resp.Count
		}
		hasMore = resp.More
		for _, kv := range resp.Kvs {
			if paging && int64(len(res.kvs)) >= limit {
				hasMore = true
				break
			}
			lastKey = kv.Key
			// A corrupt object fails no list: it is left out (before it
			// counts against the limit), and reported.
			e, err := readEdit(kv.Value, kv.ModRevision)
			if err != nil {
				s.reportCorrupt(kv.Key, err)
				continue
			}
			ok, err := sel.matches(kv.Value)
			if err != nil {
				s.reportCorrupt(kv.Key, corrupt(err))
				continue
			}
			if ok {
				res.kvs = append(res.kvs, kv)
				res.edits = append(res.edits, e)
			}
		}
		if !hasMore || paging && int64(len(res.kvs)) >= limit {
			break
		}
		if len(resp.Kvs) == 0 {
			return nil, apierrors.NewInternalError(errors.New("etcd returned no keys but reported more"))
		}
		if paging {
			// The selector filtered some out: read on, in growing pages.
			pageSize = min(pageSize*2, maxPageSize)
		}
		from = string(lastKey) + "\x00"
	}
	res.rev = withRev
	if hasMore {
		token, err := encodeContinue(string(lastKey)+"\x00", prefix, withRev)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		res.cont = token
		if sel == nil {
			remaining := count - int64(len(res.kvs))
			res.remaining = &remaining
		}
	}
	return res, nil
}

// readErr maps the error of a read at revision rev (0: latest). A
// revision etcd has not reached is etcd's own error, which upstream's etcd3
// store returns as it is for an exact read (a plain 500, "etcdserver:
// mvcc: required revision is a future revision"); reads that may wait for
// a revision ("not older than") wait first (waitRevision).
func (s *Service) readErr(ctx context.Context, err error, rev int64, continuing bool) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		if continuing {
			return apierrors.NewResourceExpired(msgContinueExpired)
		}
		return apierrors.NewResourceExpired(msgListExpired)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return plainStatus(err)
	}
	return etcdErr(ctx, err)
}

// revisionWait is how long a read that needs a revision waits for the
// store to reach it: upstream's watch cache blockTimeout (3s).
const revisionWait = 3 * time.Second

// waitRevision waits (at most revisionWait) until etcd has reached
// revision asked (a resourceVersion: any uint64, one past the largest etcd
// revision waits for that revision) and returns the current revision;
// upstream's 504 "Too large resource version" (retry after 1s, as its
// watch cache answers) when it does not. Reads "not older than" a
// revision (Get, List with min_resource_version) and watches with initial
// events wait here; a watch from a revision still to come waits in etcd.
func (s *Service) waitRevision(ctx context.Context, cli *clientv3.Client, asked uint64) (int64, error) {
	rev := clampRevision(asked)
	deadline := time.Now().Add(revisionWait)
	pause := 10 * time.Millisecond
	for {
		resp, err := cli.Get(ctx, keyRoot, clientv3.WithCountOnly())
		if err != nil {
			return 0, etcdErr(ctx, err)
		}
		current := resp.Header.Revision
		if current >= rev {
			return current, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return current, errTooLarge(asked, current)
		}
		select {
		case <-ctx.Done():
			return current, etcdErr(ctx, ctx.Err())
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// clampRevision is resourceVersion rv as an etcd revision: past the largest
// (MaxInt64), that revision.
func clampRevision(rv uint64) int64 {
	if rv > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(rv)
}

// compactRevision finds etcd's compaction revision: a watch from revision 1
// of a key nobody writes answers with it at once when history is compacted.
func (s *Service) compactRevision(ctx context.Context, cli *clientv3.Client) int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for wr := range cli.Watch(ctx, keyRoot+"\x00compaction-probe", clientv3.WithRev(1)) {
		if wr.CompactRevision != 0 {
			return wr.CompactRevision
		}
		if wr.Err() != nil {
			break
		}
	}
	return 0
}

// DeleteCollection deletes every object under a prefix that matches the
// options and returns them (each with its deletion revision).
func (s *Service) DeleteCollection(ctx context.Context, req *storagev1.DeleteCollectionRequest) (*storagev1.DeleteCollectionResponse, error) {
	resp, err := s.deleteCollection(ctx, req.GetPrefix(), req.GetOptions())
	return resp, kstatus.ToGRPC(err)
}

func (s *Service) deleteCollection(ctx context.Context, prefix string, opts *commonv1.ListOptions) (*storagev1.DeleteCollectionResponse, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	plain := opts.GetLabelSelector() == "" && opts.GetFieldSelector() == "" && opts.GetLimit() == 0 &&
		opts.GetContinueToken() == "" && opts.GetResourceVersion() == 0
	if plain {
		resp, err := s.etcdForPrefix(prefix).Delete(ctx, prefix, clientv3.WithPrefix(), clientv3.WithPrevKV())
		if err != nil {
			return nil, etcdErr(ctx, err)
		}
		out := &storagev1.DeleteCollectionResponse{Objects: make([][]byte, 0, len(resp.PrevKvs)), ResourceVersion: resp.Header.Revision}
		for _, kv := range resp.PrevKvs {
			obj, err := readObject(kv.Value, resp.Header.Revision)
			if err != nil {
				// Deleted, but not an object to return.
				s.reportCorrupt(kv.Key, err)
				continue
			}
			out.Objects = append(out.Objects, obj)
		}
		return out, nil
	}

	res, err := s.list(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	// (Corrupt objects are not listed, so not deleted either.)
	// Delete the listed objects concurrently (as upstream does), each only
	// while it still matches.
	type result struct {
		obj []byte
		rev int64
		err error
	}
	cli := s.etcdForPrefix(prefix)
	results := make([]result, len(res.kvs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(16, len(res.kvs)) {
		wg.Go(func() {
			for i := range work {
				results[i].obj, results[i].rev, results[i].err = s.deleteIfMatches(ctx, cli, res.kvs[i], res.sel)
			}
		})
	}
	for i := range res.kvs {
		work <- i
	}
	close(work)
	wg.Wait()

	out := &storagev1.DeleteCollectionResponse{ResourceVersion: res.rev}
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.obj != nil {
			out.Objects = append(out.Objects, r.obj)
			out.ResourceVersion = max(out.ResourceVersion, r.rev)
		}
	}
	return out, nil
}

// deleteIfMatches deletes kv's key if the object there is still kv or still
// matches sel. It returns nil when there was nothing to delete.
func (s *Service) deleteIfMatches(ctx context.Context, cli *clientv3.Client, kv *mvccpb.KeyValue, sel *selector) ([]byte, int64, error) {
	key := string(kv.Key)
	for {
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return nil, 0, etcdErr(ctx, err)
		}
		if resp.Succeeded {
			obj, err := readObject(kv.Value, resp.Header.Revision)
			if err != nil {
				s.reportCorrupt(kv.Key, err)
				return nil, 0, nil
			}
			return obj, resp.Header.Revision, nil
		}
		get := resp.Responses[0].GetResponseRange()
		if get == nil || len(get.Kvs) == 0 {
			return nil, 0, nil // already gone
		}
		kv = get.Kvs[0]
		ok, err := sel.matches(kv.Value)
		if err != nil {
			// It went corrupt meanwhile: not one the selector picks.
			s.reportCorrupt(kv.Key, corrupt(err))
			return nil, 0, nil
		}
		if !ok {
			return nil, 0, nil
		}
	}
}
