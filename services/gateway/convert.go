package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	"github.com/crdplane/crdplane/services/converter/convert"
)

// convertObjects converts custom resources of r to apiVersion: None
// conversion is an in-process apiVersion rewrite; Webhook conversion is one
// call to the converter service for every object not already there (a
// list in one call: the converter coalesces concurrent calls and chunks
// large lists itself). The converter's errors (a Status: 500 InternalError
// "conversion webhook for <gvk> failed: ..." as upstream) pass through
// unchanged; an unreachable converter is 503.
func (a *kubeAPI) convertObjects(ctx context.Context, r *resource, apiVersion string, objs [][]byte) ([][]byte, error) {
	if len(objs) == 0 {
		return objs, nil
	}
	if !r.webhookConversion() {
		out := make([][]byte, len(objs))
		for i, o := range objs {
			if c, ok := setAPIVersion(o, apiVersion); ok {
				out[i] = c
				continue
			}
			c, err := convert.None(o, apiVersion)
			if err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("convert to %s: %w", apiVersion, err))
			}
			out[i] = c
		}
		return out, nil
	}
	out := make([][]byte, len(objs))
	var idx []int
	var pending [][]byte
	for i, o := range objs {
		if objectAPIVersion(o) == apiVersion {
			out[i] = o
			continue
		}
		idx = append(idx, i)
		pending = append(pending, o)
	}
	if len(pending) == 0 {
		return out, nil
	}
	if a.converter == nil {
		return nil, apierrors.NewServiceUnavailable("webhook conversion is not available: no converter service configured")
	}
	resp, err := a.converter.Convert(ctx, &converterv1.ConvertRequest{Crd: r.crdRef(), DesiredApiVersion: apiVersion, Objects: pending})
	if err != nil {
		return nil, err
	}
	if len(resp.GetObjects()) != len(pending) {
		return nil, apierrors.NewInternalError(fmt.Errorf("converter returned %d objects for %d", len(resp.GetObjects()), len(pending)))
	}
	for j, i := range idx {
		out[i] = resp.GetObjects()[j]
	}
	return out, nil
}

// readObjects turns objects read from storage into what the client reads:
// defaulted with the storage version's schema (when it has defaults), then
// converted to the request version.
func (a *kubeAPI) readObjects(ctx context.Context, r *resource, objs [][]byte) ([][]byte, error) {
	objs, err := a.schemas.readDefaults(r, objs)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return a.convertObjects(ctx, r, r.apiVersion(), objs)
}

// readObject is readObjects of one object.
func (a *kubeAPI) readObject(ctx context.Context, r *resource, obj []byte) ([]byte, error) {
	out, err := a.readObjects(ctx, r, [][]byte{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// convertOne converts one object.
func (a *kubeAPI) convertOne(ctx context.Context, r *resource, apiVersion string, obj []byte) ([]byte, error) {
	out, err := a.convertObjects(ctx, r, apiVersion, [][]byte{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// objectAPIVersion reads an object's apiVersion without decoding the rest.
func objectAPIVersion(obj []byte) string {
	var tm struct {
		APIVersion string `json:"apiVersion"`
	}
	_ = json.Unmarshal(obj, &tm)
	return tm.APIVersion
}
