package structural

import (
	"fmt"
	"reflect"
	"strings"
)

// Correlation correlates a new value with its old value for ratcheting, as
// upstream's CorrelatedObject: object fields correlate by name (when the
// schema specifies them), items of x-kubernetes-list-type=map lists by
// their keys; nothing else correlates.
type Correlation struct {
	old, cur any
	s        *Schema

	eq       int8 // 0 unknown, 1 equal, 2 different
	keys     map[string]*Correlation
	indices  map[int]*Correlation
	list     *mapList
	listInit bool
}

// NewCorrelation correlates cur, validated against s, with old.
func NewCorrelation(cur, old any, s *Schema) *Correlation {
	return &Correlation{old: old, cur: cur, s: s}
}

// Key returns the correlation of field k, or nil when it does not
// correlate (absent in either value, or not specified by the schema). It
// is nil-safe.
func (c *Correlation) Key(k string) *Correlation {
	if c == nil || c.s == nil {
		return nil
	}
	if ch, ok := c.keys[k]; ok {
		return ch
	}
	oldMap, ok1 := c.old.(map[string]any)
	curMap, ok2 := c.cur.(map[string]any)
	if !ok1 || !ok2 {
		return nil
	}
	ov, ok1 := oldMap[k]
	cv, ok2 := curMap[k]
	if !ok1 || !ok2 {
		return nil
	}
	fs, isProp := c.s.properties[k]
	if !isProp {
		fs = c.s.additionalProperties
	}
	if fs == nil {
		return nil
	}
	if c.keys == nil {
		c.keys = make(map[string]*Correlation, len(curMap))
	}
	ch := &Correlation{old: ov, cur: cv, s: fs}
	c.keys[k] = ch
	return ch
}

// Index returns the correlation of the list item at index i of the new
// value, or nil when it does not correlate (only items of
// x-kubernetes-list-type=map lists correlate, by their keys). It is
// nil-safe.
func (c *Correlation) Index(i int) *Correlation {
	if c == nil || c.s == nil {
		return nil
	}
	if ch, ok := c.indices[i]; ok {
		return ch
	}
	curList, ok := c.cur.([]any)
	if !ok || len(curList) <= i {
		return nil
	}
	ov := c.correlateIndex(curList, i)
	if ov == nil || c.s.items == nil {
		return nil
	}
	if c.indices == nil {
		c.indices = make(map[int]*Correlation, len(curList))
	}
	ch := &Correlation{old: ov, cur: curList[i], s: c.s.items}
	c.indices[i] = ch
	return ch
}

func (c *Correlation) correlateIndex(curList []any, i int) any {
	oldList, ok := c.old.([]any)
	if !ok || c.s.listType != "map" {
		return nil
	}
	if !c.listInit {
		c.listInit = true
		c.list = newMapList(c.s, oldList)
	}
	return c.list.get(curList[i])
}

// Equal reports whether the new value equals the old one, as upstream's
// CachedDeepEqual (which compares through the correlation, so a field
// without a schema never compares equal).
func (c *Correlation) Equal() bool {
	if c == nil {
		return false
	}
	if c.eq != 0 {
		return c.eq == 1
	}
	res := c.computeEqual()
	if res {
		c.eq = 1
	} else {
		c.eq = 2
	}
	return res
}

func (c *Correlation) computeEqual() bool {
	if c.cur == nil && c.old == nil {
		return true
	}
	if c.cur == nil || c.old == nil {
		return false
	}
	oldList, oldIsList := c.old.([]any)
	curList, curIsList := c.cur.([]any)
	oldMap, oldIsMap := c.old.(map[string]any)
	curMap, curIsMap := c.cur.(map[string]any)
	if oldIsList != curIsList || oldIsMap != curIsMap {
		return false
	}
	switch {
	case oldIsList:
		if len(oldList) != len(curList) {
			return false
		}
		for i := range curList {
			ch := c.Index(i)
			if ch == nil {
				if !c.listInit {
					return reflect.DeepEqual(oldList, curList)
				}
				return false
			}
			if !ch.Equal() {
				return false
			}
		}
		return true
	case oldIsMap:
		if len(oldMap) != len(curMap) {
			return false
		}
		for k := range curMap {
			ch := c.Key(k)
			if ch == nil || !ch.Equal() {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(c.old, c.cur)
}

// mapList finds the old item of a list-type map list with the same keys.
type mapList struct {
	keys  []string
	items map[any]any
}

// newMapList indexes old items by their key; nil when the list does not
// correlate (not a map list, no keys, no items). The first item with a key
// wins.
func newMapList(s *Schema, old []any) *mapList {
	if s.typ != "array" || s.listType != "map" || len(s.listMapKeys) == 0 || len(old) == 0 {
		return nil
	}
	ml := &mapList{keys: s.listMapKeys, items: make(map[any]any, len(old))}
	for _, item := range old {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		k, ok := ml.keyFor(m)
		if !ok {
			continue
		}
		if _, exists := ml.items[k]; !exists {
			ml.items[k] = m
		}
	}
	return ml
}

func (ml *mapList) get(item any) any {
	if ml == nil {
		return nil
	}
	m, ok := item.(map[string]any)
	if !ok {
		return nil
	}
	k, ok := ml.keyFor(m)
	if !ok {
		return nil
	}
	return ml.items[k]
}

func (ml *mapList) keyFor(m map[string]any) (any, bool) {
	if len(ml.keys) == 1 {
		v, ok := m[ml.keys[0]]
		if !ok {
			return nil, false
		}
		switch v.(type) {
		case bool, float64, int64, string:
			return v, true
		}
		return nil, false
	}
	var b strings.Builder
	for _, key := range ml.keys {
		v, ok := m[key]
		if !ok {
			return nil, false
		}
		switch v := v.(type) {
		case bool:
			fmt.Fprintf(&b, "\x00%t", v)
		case float64:
			fmt.Fprintf(&b, "\x00%f", v)
		case int64:
			fmt.Fprintf(&b, "\x00%d", v)
		case string:
			fmt.Fprintf(&b, "\x00%q", v)
		default:
			return nil, false
		}
	}
	return b.String(), true
}
