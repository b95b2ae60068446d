package celconv

import (
	"sync"

	"k8s.io/apiserver/pkg/cel/common"
)

// cachedSchema memoizes the schema walk that turning an object into a CEL
// value does on every field access: model.Structural builds a new map of
// wrapped properties on each Properties call, a third of a conversion's
// time. A cachedSchema answers from the maps built once per compiled rule.
type cachedSchema struct {
	common.Schema

	once       sync.Once
	props      map[string]common.Schema
	items      common.Schema
	additional common.SchemaOrBool

	metaOnce sync.Once
	withMeta common.Schema
}

func newCachedSchema(s common.Schema) *cachedSchema {
	return &cachedSchema{Schema: s}
}

func (c *cachedSchema) init() {
	c.once.Do(func() {
		if p := c.Schema.Properties(); p != nil {
			c.props = make(map[string]common.Schema, len(p))
			for k, v := range p {
				c.props[k] = newCachedSchema(v)
			}
		}
		if it := c.Schema.Items(); it != nil {
			c.items = newCachedSchema(it)
		}
		if ap := c.Schema.AdditionalProperties(); ap != nil {
			sob := &cachedSchemaOrBool{SchemaOrBool: ap}
			if s := ap.Schema(); s != nil {
				sob.schema = newCachedSchema(s)
			}
			c.additional = sob
		}
	})
}

// Properties implements common.Schema.
func (c *cachedSchema) Properties() map[string]common.Schema {
	c.init()
	return c.props
}

// Items implements common.Schema.
func (c *cachedSchema) Items() common.Schema {
	c.init()
	return c.items
}

// AdditionalProperties implements common.Schema.
func (c *cachedSchema) AdditionalProperties() common.SchemaOrBool {
	c.init()
	return c.additional
}

// WithTypeAndObjectMeta implements common.Schema.
func (c *cachedSchema) WithTypeAndObjectMeta() common.Schema {
	c.metaOnce.Do(func() { c.withMeta = newCachedSchema(c.Schema.WithTypeAndObjectMeta()) })
	return c.withMeta
}

type cachedSchemaOrBool struct {
	common.SchemaOrBool
	schema common.Schema
}

// Schema implements common.SchemaOrBool.
func (c *cachedSchemaOrBool) Schema() common.Schema {
	if c.schema == nil {
		return nil
	}
	return c.schema
}
