package storage

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/kstatus"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Create stores a new object; AlreadyExists when the key exists.
func (s *Service) Create(ctx context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	obj, rev, err := s.create(ctx, req.GetKey(), req.GetObject())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &storagev1.CreateResponse{Object: obj, ResourceVersion: rev}, nil
}

func (s *Service) create(ctx context.Context, key string, object []byte) ([]byte, int64, error) {
	k, err := parseKey(key)
	if err != nil {
		return nil, 0, err
	}
	data, err := stripResourceVersion(object)
	if err != nil {
		return nil, 0, errBadObject(err)
	}
	if err := checkWrite(k, data); err != nil {
		return nil, 0, err
	}
	resp, err := s.etcdFor(k.resource).Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return nil, 0, etcdErr(ctx, err)
	}
	if !resp.Succeeded {
		return nil, 0, errAlreadyExists(k)
	}
	rev := resp.Header.Revision
	out, err := withResourceVersion(data, rev)
	if err != nil {
		return nil, 0, storedObjectErr([]byte(key), err)
	}
	return out, rev, nil
}

// Get reads one object (with min_resource_version, as of a revision not
// older than it: waitRevision); NotFound when absent; a corrupt object is
// upstream's plain 500 with its decoder's error (corruptGetError).
func (s *Service) Get(ctx context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	k, err := parseKey(req.GetKey())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	resp, err := s.etcdFor(k.resource).Get(ctx, k.raw)
	if err != nil {
		return nil, kstatus.ToGRPC(etcdErr(ctx, err))
	}
	if min := req.GetMinResourceVersion(); min > 0 && resp.Header.Revision < clampRevision(min) {
		// "Not older than" a revision etcd has not reached: wait for it,
		// then read again.
		if _, err := s.waitRevision(ctx, s.etcdFor(k.resource), min); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if resp, err = s.etcdFor(k.resource).Get(ctx, k.raw); err != nil {
			return nil, kstatus.ToGRPC(etcdErr(ctx, err))
		}
	}
	if len(resp.Kvs) == 0 {
		return nil, kstatus.ToGRPC(errNotFound(k))
	}
	kv := resp.Kvs[0]
	out, err := readObject(kv.Value, kv.ModRevision)
	if err != nil {
		s.reportCorrupt(kv.Key, err)
		return nil, kstatus.ToGRPC(corruptGetError(kv.Key, kv.Value, err))
	}
	return &storagev1.GetResponse{Object: out, ResourceVersion: kv.ModRevision}, nil
}

// Update replaces an object. With expected_resource_version it succeeds only
// while the object is at that revision (Conflict otherwise); without, it
// only needs the object to exist (NotFound otherwise).
func (s *Service) Update(ctx context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	obj, rev, err := s.update(ctx, req.GetKey(), req.GetObject(), req.GetExpectedResourceVersion())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &storagev1.UpdateResponse{Object: obj, ResourceVersion: rev}, nil
}

func (s *Service) update(ctx context.Context, key string, object []byte, expected int64) ([]byte, int64, error) {
	k, err := parseKey(key)
	if err != nil {
		return nil, 0, err
	}
	data, err := stripResourceVersion(object)
	if err != nil {
		return nil, 0, errBadObject(err)
	}
	if err := checkWrite(k, data); err != nil {
		return nil, 0, err
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "!=", 0)
	if expected > 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", expected)
	}
	resp, err := s.etcdFor(k.resource).Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return nil, 0, etcdErr(ctx, err)
	}
	if !resp.Succeeded {
		if get := resp.Responses[0].GetResponseRange(); get != nil && get.Count > 0 {
			return nil, 0, errConflict(k)
		}
		return nil, 0, errNotFound(k)
	}
	rev := resp.Header.Revision
	out, err := withResourceVersion(data, rev)
	if err != nil {
		return nil, 0, storedObjectErr([]byte(key), err)
	}
	return out, rev, nil
}

// Delete removes one object and returns its last state with the revision of
// the deletion. A uid or resourceVersion precondition that the object does
// not meet is a Conflict, worded as upstream's.
func (s *Service) Delete(ctx context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	obj, rev, err := s.delete(ctx, req)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &storagev1.DeleteResponse{Object: obj, ResourceVersion: rev}, nil
}

func (s *Service) delete(ctx context.Context, req *storagev1.DeleteRequest) ([]byte, int64, error) {
	k, err := parseKey(req.GetKey())
	if err != nil {
		return nil, 0, err
	}
	if req.GetPreconditionUid() == "" && req.GetPreconditionResourceVersion() == 0 {
		resp, err := s.etcdFor(k.resource).Delete(ctx, k.raw, clientv3.WithPrevKV())
		if err != nil {
			return nil, 0, etcdErr(ctx, err)
		}
		if len(resp.PrevKvs) == 0 {
			return nil, 0, errNotFound(k)
		}
		return deletedObject(resp.PrevKvs[0].Key, resp.PrevKvs[0].Value, resp.Header.Revision)
	}
	for {
		get, err := s.etcdFor(k.resource).Get(ctx, k.raw)
		if err != nil {
			return nil, 0, etcdErr(ctx, err)
		}
		if len(get.Kvs) == 0 {
			return nil, 0, errNotFound(k)
		}
		kv := get.Kvs[0]
		if err := checkPreconditions(k, kv.Value, kv.ModRevision, req); err != nil {
			return nil, 0, err
		}
		resp, err := s.etcdFor(k.resource).Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k.raw), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(k.raw)).
			Commit()
		if err != nil {
			return nil, 0, etcdErr(ctx, err)
		}
		if resp.Succeeded {
			return deletedObject(kv.Key, kv.Value, resp.Header.Revision)
		}
		// The object changed between the read and the delete: check the
		// preconditions again against its new state.
	}
}

// checkPreconditions applies a delete's preconditions to the stored object,
// with upstream's rest.BeforeDelete messages.
func checkPreconditions(k objectKey, value []byte, modRev int64, req *storagev1.DeleteRequest) error {
	kindRaw, _, _ := jsonscan.Lookup(value, "kind")
	kind, _ := jsonscan.String(kindRaw)
	if want := req.GetPreconditionUid(); want != "" {
		uidRaw, _, err := jsonscan.Lookup(value, "metadata", "uid")
		if err != nil {
			return storedObjectErr([]byte(k.raw), err)
		}
		if got, _ := jsonscan.String(uidRaw); got != want {
			return errPrecondition(k, kind, fmt.Sprintf(
				"the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", want, got))
		}
	}
	if want := req.GetPreconditionResourceVersion(); want != 0 && want != modRev {
		return errPrecondition(k, kind, fmt.Sprintf(
			"the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified",
			strconv.FormatInt(want, 10), strconv.FormatInt(modRev, 10)))
	}
	return nil
}

func deletedObject(key, value []byte, rev int64) ([]byte, int64, error) {
	out, err := withResourceVersion(value, rev)
	if err != nil {
		return nil, 0, storedObjectErr(key, err)
	}
	return out, rev, nil
}
