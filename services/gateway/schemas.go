package gateway

import (
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/services/validator/schema"
)

// schemaCache keeps the compiled structural schema of every CRD version
// the gateway needs one for, keyed by CRD uid, generation and version (a
// new generation compiles afresh; old entries of a CRD are dropped then).
type schemaCache struct {
	mu sync.Mutex
	m  map[schemaKey]*schema.Schema
}

type schemaKey struct {
	uid        string
	generation int64
	version    string
}

// get returns the compiled schema of r's CRD at version.
func (c *schemaCache) get(r *resource, version string) (*schema.Schema, error) {
	k := schemaKey{uid: string(r.crd.UID), generation: r.crd.Generation, version: version}
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	v, err := apihelpers.GetSchemaForVersion(r.crd, version)
	if err != nil {
		return nil, fmt.Errorf("CRD %s version %s: %w", r.crd.Name, version, err)
	}
	var props *apiextensionsv1.JSONSchemaProps
	if v != nil {
		props = v.OpenAPIV3Schema
	}
	s, err = schema.Compile(props, schema.WithPreserveUnknownFields(r.crd.Spec.PreserveUnknownFields))
	if err != nil {
		return nil, fmt.Errorf("CRD %s version %s: %w", r.crd.Name, version, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[schemaKey]*schema.Schema{}
	}
	for old := range c.m {
		if old.uid == k.uid && old.generation < k.generation {
			delete(c.m, old)
		}
	}
	c.m[k] = s
	return s, nil
}

// asDecoded applies to an object read from storage (at r's request
// version) what upstream's storage decoder applies: metadata normalised
// (malformed fields dropped), unknown fields pruned, defaults set. It
// works on obj in place.
func (c *schemaCache) asDecoded(r *resource, obj object) error {
	s, err := c.get(r, r.version)
	if err != nil {
		return err
	}
	if _, err := schema.Normalize(obj, s, true); err != nil {
		return err
	}
	schema.Default(obj, s)
	return nil
}
