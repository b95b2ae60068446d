package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// crdPrefix is the storage collection of CRDs.
const crdPrefix = "/registry/" + groupName + "/" + crdResource + "/"

func crdKey(name string) string { return crdPrefix + name }

// objectsPrefix is the storage collection of a CRD's objects.
func objectsPrefix(crd *CRD) string {
	return "/registry/" + crd.Spec.Group + "/" + crd.Spec.Names.Plural + "/"
}

// store reads and writes CRDs through the StorageService.
type store struct {
	client storagev1.StorageServiceClient
}

// errConflict is the 409 of a compare-and-swap that lost.
func errConflict(name string) error {
	return apierrors.NewConflict(crdGR, name, errors.New(registryModifiedMsg))
}

const registryModifiedMsg = "the object has been modified; please apply your changes to the latest version and try again"

// storageError turns a StorageService error about CRD name into the Status
// kube-apiserver returns for CRDs.
func storageError(err error, name string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st := kstatus.FromError(err)
	switch st.Reason {
	case metav1.StatusReasonNotFound:
		return apierrors.NewNotFound(crdGR, name)
	case metav1.StatusReasonAlreadyExists:
		return apierrors.NewAlreadyExists(crdGR, name)
	case metav1.StatusReasonConflict:
		return &apierrors.StatusError{ErrStatus: *st}
	}
	if st.Code == http.StatusInternalServerError {
		return apierrors.NewInternalError(fmt.Errorf("storage: %s", st.Message))
	}
	return &apierrors.StatusError{ErrStatus: *st}
}

func (s *store) get(ctx context.Context, name string) (*CRD, error) {
	resp, err := s.client.Get(ctx, &storagev1.GetRequest{Key: crdKey(name)})
	if err != nil {
		return nil, storageError(err, name)
	}
	return decodeWithRV(resp.GetObject(), resp.GetResourceVersion())
}

func (s *store) create(ctx context.Context, crd *CRD) (*CRD, error) {
	data, err := encodeForStorage(crd)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Create(ctx, &storagev1.CreateRequest{Key: crdKey(crd.Name), Object: data})
	if err != nil {
		return nil, storageError(err, crd.Name)
	}
	return decodeWithRV(resp.GetObject(), resp.GetResourceVersion())
}

// update writes crd if the stored object is still at resourceVersion rv; a
// Conflict (409) when it moved on.
func (s *store) update(ctx context.Context, crd *CRD, rv int64) (*CRD, error) {
	data, err := encodeForStorage(crd)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Update(ctx, &storagev1.UpdateRequest{Key: crdKey(crd.Name), Object: data, ExpectedResourceVersion: rv})
	if err != nil {
		if apierrors.IsConflict(storageError(err, crd.Name)) {
			return nil, errConflict(crd.Name)
		}
		return nil, storageError(err, crd.Name)
	}
	return decodeWithRV(resp.GetObject(), resp.GetResourceVersion())
}

// remove deletes the CRD if it is still at resourceVersion rv.
func (s *store) remove(ctx context.Context, crd *CRD, rv int64) (*CRD, error) {
	resp, err := s.client.Delete(ctx, &storagev1.DeleteRequest{Key: crdKey(crd.Name), PreconditionUid: string(crd.UID), PreconditionResourceVersion: rv})
	if err != nil {
		if apierrors.IsConflict(storageError(err, crd.Name)) {
			return nil, errConflict(crd.Name)
		}
		return nil, storageError(err, crd.Name)
	}
	out, err := decodeStored(resp.GetObject())
	if err != nil {
		return nil, err
	}
	return out, nil
}

// write stores updated in place of current (CAS on current's
// resourceVersion), or deletes it when the update leaves a CRD marked for
// deletion without finalizers.
func (s *store) write(ctx context.Context, updated, current *CRD) (*CRD, error) {
	rv, err := resourceVersion(current)
	if err != nil {
		return nil, err
	}
	if shouldDeleteOnUpdate(updated, current) {
		if _, err := s.remove(ctx, current, rv); err != nil {
			return nil, err
		}
		return updated, nil
	}
	return s.update(ctx, updated, rv)
}

// maxCASRetries bounds the read-modify-write loops of the controllers and
// of patches.
const maxCASRetries = 16

// guaranteedUpdate reads the CRD, applies mutate and writes the result with
// compare-and-swap, starting over from a fresh read when another writer got
// in first. mutate returns (nil, nil) when there is nothing to write.
func (s *store) guaranteedUpdate(ctx context.Context, name string, mutate func(cur *CRD) (*CRD, error)) (*CRD, error) {
	for attempt := 0; ; attempt++ {
		cur, err := s.get(ctx, name)
		if err != nil {
			return nil, err
		}
		updated, err := mutate(cur.DeepCopy())
		if err != nil || updated == nil {
			return cur, err
		}
		out, err := s.write(ctx, updated, cur)
		if apierrors.IsConflict(err) && attempt < maxCASRetries {
			continue
		}
		return out, err
	}
}

func decodeWithRV(data []byte, rv int64) (*CRD, error) {
	crd, err := decodeStored(data)
	if err != nil {
		return nil, err
	}
	if crd.ResourceVersion == "" && rv != 0 {
		crd.ResourceVersion = strconv.FormatInt(rv, 10)
	}
	return crd, nil
}

func resourceVersion(crd *CRD) (int64, error) {
	rv, err := strconv.ParseInt(crd.ResourceVersion, 10, 64)
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("stored CRD %s has resourceVersion %q: %w", crd.Name, crd.ResourceVersion, err))
	}
	return rv, nil
}
