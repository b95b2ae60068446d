package validator

import (
	"fmt"
	"maps"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// prepare prepares the object of a CREATE, UPDATE or PATCH as upstream's
// strategies and rest.BeforeUpdate do before validation
// (AdmitRequest.prepare): obj is the object to admit (decoded, not yet
// pruned or defaulted), reqObj the request's object when the preparation
// dropped part of it (its unknown fields are the request's; on a status
// write the field manager records it), metaErrs rest.BeforeUpdate's
// common metadata errors of an update.
//
// On CREATE .status is dropped when the version has a status subresource
// (the caller set the system metadata). On UPDATE and PATCH the object is
// prepared against the stored one (objmeta.PrepareUpdate: its immutable
// metadata, .status kept on writes of the main resource and of scale,
// everything but .status kept on status writes), then its metadata is
// checked against the stored one (metavalidation.ValidateCommonUpdate).
func (a *admission) prepare(req *validatorv1.AdmitRequest) (obj, reqObj map[string]any, metaErrs field.ErrorList, err error) {
	if obj, err = a.unmarshal(req.GetObject()); err != nil {
		return nil, nil, nil, err
	}
	ignore := req.GetFieldValidation() == metav1.FieldValidationIgnore
	if !a.update {
		if _, ok := obj["status"]; ok && a.cv.hasStatus {
			// The status a create drops still counts for unknown fields.
			if !ignore {
				reqObj = obj
			}
			obj = maps.Clone(obj)
			delete(obj, "status")
		}
		return obj, reqObj, nil, nil
	}
	old, err := a.unmarshal(req.GetOldObject())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("old object: %w", err)
	}
	sub := req.GetSubresource()
	in := maps.Clone(obj)
	// old is this call's own (admit decodes the stored object again for
	// validation): obj may share its values.
	obj = objmeta.PrepareUpdate(obj, old, a.cv.hasStatus, sub)
	metaErrs = metavalidation.ValidateCommonUpdate(obj, old, a.cv.namespaced)
	// The request as carried: its unknown fields (unless Ignore), and on
	// /status what the field manager records (upstream's runs before the
	// status strategy drops the rest).
	if (!ignore || sub == "status") && droppedByPreparation(in, obj, sub == "status") {
		reqObj = in
	}
	return obj, reqObj, metaErrs, nil
}

// droppedByPreparation reports whether preparing an update replaced part
// of what the request carried (in, its top level as it came) in prepared:
// .status on a main-resource write (of a CRD with a status subresource;
// otherwise it is kept), everything but .status on a status write. Then
// the unknown fields of the request are not all in prepared: upstream's
// decoder finds them in the whole request, before its strategies.
func droppedByPreparation(in, prepared map[string]any, status bool) bool {
	if !status {
		st, ok := in["status"]
		pst, pok := prepared["status"]
		return ok != pok || (ok && !reflect.DeepEqual(st, pst))
	}
	for k, v := range in {
		if k == "status" {
			continue
		}
		if pv, ok := prepared[k]; !ok || !reflect.DeepEqual(v, pv) {
			return true
		}
	}
	for k := range prepared {
		if _, ok := in[k]; !ok && k != "status" {
			return true
		}
	}
	return false
}
