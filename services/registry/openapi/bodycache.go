package openapi

import "container/list"

// DefaultDocumentCacheBytes bounds the rendered v3 group-version documents
// a Builder keeps (NewWithCache). A document not kept is rendered again
// from its parts when it is asked for: its hash, which the index lists,
// is kept for every group-version.
const DefaultDocumentCacheBytes = 64 << 20

// bodyCache keeps the most recently used rendered documents up to a total
// of max bytes. It is not safe for concurrent use: the Builder's mutex
// guards it.
type bodyCache struct {
	max, size int
	order     *list.List // of *cachedDoc, most recent first
	byGV      map[string]*list.Element
}

type cachedDoc struct {
	gv  string
	doc *Document
}

func newBodyCache(maxBytes int) *bodyCache {
	return &bodyCache{max: maxBytes, order: list.New(), byGV: map[string]*list.Element{}}
}

// get returns gv's document if it is kept and its hash is hash.
func (c *bodyCache) get(gv, hash string) *Document {
	e, ok := c.byGV[gv]
	if !ok {
		return nil
	}
	d := e.Value.(*cachedDoc).doc
	if d.Hash != hash {
		c.remove(gv)
		return nil
	}
	c.order.MoveToFront(e)
	return d
}

// put keeps d as gv's document, evicting the least recently used ones
// beyond the bound (a document larger than the bound is not kept).
func (c *bodyCache) put(gv string, d *Document) {
	c.remove(gv)
	if len(d.Body) > c.max {
		return
	}
	c.byGV[gv] = c.order.PushFront(&cachedDoc{gv: gv, doc: d})
	c.size += len(d.Body)
	for c.size > c.max {
		c.remove(c.order.Back().Value.(*cachedDoc).gv)
	}
}

func (c *bodyCache) remove(gv string) {
	e, ok := c.byGV[gv]
	if !ok {
		return
	}
	c.size -= len(e.Value.(*cachedDoc).doc.Body)
	c.order.Remove(e)
	delete(c.byGV, gv)
}
