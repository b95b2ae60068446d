package structural

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultRulesFunc validates a default value against the
// x-kubernetes-validations of its schema node (and the nodes below it)
// within budget, returning the errors and the remaining budget (negative
// when it ran out). isResourceRoot: the node is a resource root (the CRD's
// root or an embedded resource).
type DefaultRulesFunc func(ctx context.Context, fldPath *field.Path, node *apiextensionsv1.JSONSchemaProps, isResourceRoot bool, value any, budget int64) (field.ErrorList, int64)

// ValidateDefaults checks the default values of a CRD version's
// openAPIV3Schema at CRD write time, as upstream's ValidateDefaults (fldPath
// is the path of openAPIV3Schema): each default, under properties and
// items (not additionalProperties),
//
//   - outside resource metadata: must be pruned ("must not have unknown
//     fields", with requirePruned), must have valid embedded resource type
//     and object metadata, must validate against its node's schema
//     (ValidateSchema, errors under "<node>.default"), then against its
//     node's rules (rules);
//   - inside the metadata of the root or of an embedded resource: placed in
//     an otherwise empty resource at its path, it "must result in valid
//     metadata", then validates as above.
//
// The rules share budget. It fails only when the schema does not compile
// or a metadata default cannot be placed (upstream reports that as an
// Invalid openAPIV3Schema).
func ValidateDefaults(ctx context.Context, fldPath *field.Path, props *apiextensionsv1.JSONSchemaProps, requirePruned bool, budget int64, rules DefaultRulesFunc) (field.ErrorList, error) {
	if props == nil {
		return nil, nil
	}
	compiled, err := Compile(props)
	if err != nil {
		return nil, err
	}
	// The root is a resource root.
	root := *compiled
	root.embeddedResource, root.embeddedBelow = true, true
	d := defaultsChecker{ctx: ctx, requirePruned: requirePruned, budget: budget, rules: rules}
	if err := d.walk(fldPath, props, &root, &root, nil, false); err != nil {
		return nil, err
	}
	return d.errs, nil
}

type defaultsChecker struct {
	ctx           context.Context
	requirePruned bool
	budget        int64
	rules         DefaultRulesFunc
	errs          field.ErrorList
}

// walk checks the defaults at and below p (compiled as s); resRoot is the
// nearest resource root and path the way from it to s.
func (d *defaultsChecker) walk(pth *field.Path, p *apiextensionsv1.JSONSchemaProps, s, resRoot *Schema, path []step, insideMeta bool) error {
	if p == nil || s == nil {
		return nil
	}
	if s.embeddedResource {
		insideMeta, resRoot, path = false, s, nil
	}
	if p.Default != nil {
		def, err := decodeJSON(p.Default.Raw)
		if err != nil {
			return fmt.Errorf("default: %w", err)
		}
		if def != nil {
			if err := d.check(pth, p, s, resRoot, path, insideMeta, def); err != nil {
				return err
			}
			if d.budget < 0 {
				return nil
			}
		}
	}
	n := len(path)
	if p.Items != nil && p.Items.Schema != nil && s.items != nil {
		if err := d.walk(pth.Child("items"), p.Items.Schema, s.items, resRoot, append(path[:n:n], step{index: true}), insideMeta); err != nil {
			return err
		}
		if d.budget < 0 {
			return nil
		}
	}
	names := make([]string, 0, len(p.Properties))
	for k := range p.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		prop := p.Properties[k]
		sub := insideMeta || (s.embeddedResource && isMetaField(k))
		if err := d.walk(pth.Child("properties").Key(k), &prop, s.properties[k], resRoot, append(path[:n:n], step{key: k}), sub); err != nil {
			return err
		}
		if d.budget < 0 {
			return nil
		}
	}
	return nil
}

func (d *defaultsChecker) check(pth *field.Path, p *apiextensionsv1.JSONSchemaProps, s, resRoot *Schema, path []step, insideMeta bool, def any) error {
	defPath := pth.Child("default")
	isResourceRoot := s == resRoot
	if insideMeta {
		obj, err := surround(def, path)
		if err != nil {
			return fmt.Errorf("failed to validate default value inside metadata: %w", err)
		}
		if _, found := obj["kind"]; !found {
			obj["kind"] = "Validation"
		}
		if _, found := obj["apiVersion"]; !found {
			obj["apiVersion"] = "validation/v1"
		}
		c := coercer{}
		if err := c.coerceRoot(obj, resRoot); err != nil {
			d.errs = append(d.errs, field.Invalid(defPath, def, fmt.Sprintf("must result in valid metadata: %v", err)))
			return nil
		}
		if errs := embedded(d.ctx, nil, obj, resRoot); len(errs) > 0 {
			d.errs = append(d.errs, field.Invalid(defPath, def, fmt.Sprintf("must result in valid metadata: %v", errs.ToAggregate())))
			return nil
		}
	} else {
		if d.requirePruned {
			pruned := deepCopyJSON(def)
			var pr pruner
			pr.prune(pruned, s)
			if !reflect.DeepEqual(pruned, def) {
				d.errs = append(d.errs, field.Invalid(defPath, def, "must not have unknown fields"))
			}
		}
		// Metadata is coerced in place (as upstream), before the checks
		// below see the value.
		def = deepCopyJSON(def)
		c := coercer{base: defPath}
		if err := c.coerce(def, s); err != nil {
			var fe *field.Error
			if !errors.As(err, &fe) {
				fe = field.Invalid(defPath, def, err.Error())
			}
			d.errs = append(d.errs, fe)
			return nil
		}
		if errs := embedded(d.ctx, defPath, def, s); len(errs) > 0 {
			d.errs = append(d.errs, errs...)
			return nil
		}
	}
	if errs := ValidateSchema(defPath, def, s); len(errs) > 0 {
		d.errs = append(d.errs, errs...)
		return nil
	}
	if d.rules != nil {
		var errs field.ErrorList
		errs, d.budget = d.rules(d.ctx, defPath, p, isResourceRoot, def, d.budget)
		d.errs = append(d.errs, errs...)
	}
	return nil
}

// HasUnprunedDefaults reports whether a schema has a default that pruning
// changes (upstream then stops requiring pruned defaults on updates of the
// CRD, so that stored CRDs stay updatable).
func HasUnprunedDefaults(props *apiextensionsv1.JSONSchemaProps) (bool, error) {
	if props == nil {
		return false, nil
	}
	compiled, err := Compile(props)
	if err != nil {
		return false, err
	}
	return unpruned(props, compiled)
}

func unpruned(p *apiextensionsv1.JSONSchemaProps, s *Schema) (bool, error) {
	if p == nil || s == nil {
		return false, nil
	}
	if p.Default != nil {
		raw, err := decodeJSON(p.Default.Raw)
		if err != nil {
			return false, err
		}
		if raw != nil && (!s.hasDefault || !reflect.DeepEqual(raw, s.def)) {
			return true, nil
		}
	}
	if p.Items != nil {
		if u, err := unpruned(p.Items.Schema, s.items); u || err != nil {
			return u, err
		}
	}
	if p.AdditionalProperties != nil {
		if u, err := unpruned(p.AdditionalProperties.Schema, s.additionalProperties); u || err != nil {
			return u, err
		}
	}
	for k := range p.Properties {
		prop := p.Properties[k]
		if u, err := unpruned(&prop, s.properties[k]); u || err != nil {
			return u, err
		}
	}
	return false, nil
}
