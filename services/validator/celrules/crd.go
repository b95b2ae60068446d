package celrules

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/crdplane/crdplane/pkg/celconv"
)

const (
	// StaticEstimatedCostLimit is the largest estimated cost allowed for
	// one expression (times the cardinality of its node).
	StaticEstimatedCostLimit = 10000000
	// StaticEstimatedCRDCostLimit is the largest estimated total cost of
	// the rules of one schema.
	StaticEstimatedCRDCostLimit = 100000000
)

// CheckOptions tune CheckRules for an update.
type CheckOptions struct {
	// PreexistingRule and PreexistingMessageExpression report whether an
	// expression was in the old CRD: those compile in the
	// stored-expressions environment (every library), new ones in the
	// new-expressions environment (the compatibility version's).
	PreexistingRule, PreexistingMessageExpression func(expr string) bool
	// SuppressPerExpressionCost skips the per-expression cost limit (the
	// version's schema did not change).
	SuppressPerExpressionCost bool
}

// CheckRules performs the CRD write-time checks of the
// x-kubernetes-validations of a structural openAPIV3Schema, as upstream's
// CRD validation: every rule and messageExpression compiles, transition
// rules sit on correlatable nodes, optionalOldSelf only with oldSelf, and
// the estimated costs (per expression times the node's cardinality, and in
// total) stay within the limits. fldPath is the path of openAPIV3Schema;
// errors carry upstream's paths and messages, in upstream's order (a
// node's own rules after its children; properties in sorted order).
func CheckRules(fldPath *field.Path, props *apiextensionsv1.JSONSchemaProps, o CheckOptions) field.ErrorList {
	if props == nil {
		return nil
	}
	one := uint64(1)
	root := &checkContext{props: props, within: len(props.XValidations) > 0, maxCardinality: &one, total: &totalCost{}}
	c := ruleChecker{opts: o}
	c.walk(fldPath, props, root, nil)
	var errs field.ErrorList
	errs = append(errs, c.errs...)
	if t := root.total; t.total > StaticEstimatedCRDCostLimit {
		for _, e := range t.mostExpensive {
			errs = append(errs, field.Forbidden(e.path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
		}
		errs = append(errs, field.Forbidden(fldPath, celconv.CostErrorMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", t.total, StaticEstimatedCRDCostLimit)))
	}
	return errs
}

type ruleChecker struct {
	opts CheckOptions
	errs field.ErrorList
}

// walk visits the schema as upstream's ValidateCustomResourceDefinitionOpenAPISchema:
// additionalProperties, properties, items, then the node's own rules.
// uncorrelatable is the highest ancestor under which oldSelf cannot be
// correlated (nil: none).
func (c *ruleChecker) walk(pth *field.Path, p *apiextensionsv1.JSONSchemaProps, ctx *checkContext, uncorrelatable *field.Path) {
	if p == nil {
		return
	}
	if ap := p.AdditionalProperties; ap != nil && ap.Schema != nil {
		c.walk(pth.Child("additionalProperties"), ap.Schema, ctx.child(ap.Schema, additionalAccess), uncorrelatable)
	}
	names := make([]string, 0, len(p.Properties))
	for k := range p.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		prop := p.Properties[k]
		sub := uncorrelatable
		if sub == nil && p.XMapType != nil && *p.XMapType != "granular" && *p.XMapType != "atomic" {
			sub = pth
		}
		c.walk(pth.Child("properties").Key(k), &prop, ctx.child(&prop, propertyAccess(k)), sub)
	}
	if p.Items != nil && p.Items.Schema != nil {
		sub := uncorrelatable
		if sub == nil && (p.XListType == nil || *p.XListType != "map") {
			sub = pth
		}
		c.walk(pth.Child("items"), p.Items.Schema, ctx.child(p.Items.Schema, itemsAccess), sub)
	}
	if len(p.XValidations) > 0 {
		c.rules(pth, p, ctx, uncorrelatable)
	}
}

func (c *ruleChecker) rules(pth *field.Path, p *apiextensionsv1.JSONSchemaProps, ctx *checkContext, uncorrelatable *field.Path) {
	vpath := pth.Child("x-kubernetes-validations")
	ti, err := ctx.typeInfo()
	switch {
	case err != nil:
		c.errs = append(c.errs, field.InternalError(vpath, fmt.Errorf("internal error: failed to construct type information for x-kubernetes-validations rules: %s", err)))
		return
	case ti == nil:
		c.errs = append(c.errs, field.InternalError(vpath, errors.New("internal error: failed to retrieve type information for x-kubernetes-validations")))
		return
	}
	opts := compileOptions{perCallLimit: PerCallLimit, estimate: true, envFor: c.envFor}
	v, err := compileNode(ti.n, ctx.isRoot(), ti.decl, opts)
	if err == nil && v.compileErr != nil {
		err = v.compileErr
	}
	if err != nil {
		c.errs = append(c.errs, field.InternalError(vpath, err))
		return
	}
	for i, r := range v.rules {
		rpath := vpath.Index(i).Child("rule")
		cost := ctx.expressionCost(r.MaxCost, r.MaxCardinality)
		if !c.opts.SuppressPerExpressionCost && cost > StaticEstimatedCostLimit {
			c.errs = append(c.errs, field.Forbidden(rpath, celconv.CostErrorMessage("estimated rule cost", cost, StaticEstimatedCostLimit)))
		}
		ctx.total.observe(rpath, cost)
		if r.Error != nil {
			if r.Error.Type == apiservercel.ErrorTypeRequired {
				c.errs = append(c.errs, field.Required(rpath, r.Error.Detail))
			} else {
				c.errs = append(c.errs, field.Invalid(rpath, internalRule(r.Source), r.Error.Detail))
			}
		}
		mpath := vpath.Index(i).Child("messageExpression")
		if r.MessageError != nil {
			c.errs = append(c.errs, field.Invalid(mpath, internalRule(r.Source), r.MessageError.Detail))
		} else if r.MessageProgram != nil {
			// As upstream, the messageExpression's cost is not multiplied
			// by the node's cardinality.
			if !c.opts.SuppressPerExpressionCost && r.MessageMaxCost > StaticEstimatedCostLimit {
				c.errs = append(c.errs, field.Forbidden(mpath, celconv.CostErrorMessage("estimated messageExpression cost", r.MessageMaxCost, StaticEstimatedCostLimit)))
			}
			ctx.total.observe(mpath, r.MessageMaxCost)
		}
		if r.UsesOldSelf {
			if uncorrelatable != nil {
				c.errs = append(c.errs, field.Invalid(rpath, r.Source.Rule, fmt.Sprintf("oldSelf cannot be used on the uncorrelatable portion of the schema within %v", uncorrelatable)))
			}
		} else if r.Source.OptionalOldSelf != nil {
			c.errs = append(c.errs, field.Invalid(vpath.Index(i).Child("optionalOldSelf"), *r.Source.OptionalOldSelf, "may not be set if oldSelf is not used in rule"))
		}
	}
}

func (c *ruleChecker) envFor(expr string, messageExpression bool) EnvType {
	pre := c.opts.PreexistingRule
	if messageExpression {
		pre = c.opts.PreexistingMessageExpression
	}
	if pre != nil && pre(expr) {
		return StoredExpressions
	}
	return NewExpressions
}

// internalRule is the rule as upstream's (internal) CRD validation renders
// it in error values.
func internalRule(r apiextensionsv1.ValidationRule) apiextensionsinternal.ValidationRule {
	var out apiextensionsinternal.ValidationRule
	if err := apiextensionsv1.Convert_v1_ValidationRule_To_apiextensions_ValidationRule(&r, &out, nil); err != nil {
		out.Rule, out.Message = r.Rule, r.Message
	}
	return out
}

// checkContext is upstream's CELSchemaContext: the CEL type of a node
// (derived from its parent's when the parent is in a rule's scope,
// otherwise computed from the node), the node's cardinality and the
// schema's running total cost.
type checkContext struct {
	parent *checkContext
	access func(parent *typeInfo) *typeInfo
	props  *apiextensionsv1.JSONSchemaProps
	within bool // a rule applies here or above

	ti       *typeInfo
	tiErr    error
	computed bool

	maxCardinality *uint64 // nil: unbounded
	total          *totalCost
}

type typeInfo struct {
	n    *node
	decl *apiservercel.DeclType
}

func (c *checkContext) isRoot() bool {
	return c.parent == nil || c.props.XEmbeddedResource
}

func (c *checkContext) typeInfo() (*typeInfo, error) {
	if c == nil || !c.within {
		return nil, nil
	}
	if c.computed {
		return c.ti, c.tiErr
	}
	c.computed = true
	if c.parent != nil {
		pti, err := c.parent.typeInfo()
		if err != nil {
			c.tiErr = err
			return nil, err
		}
		if pti != nil && c.access != nil {
			if c.ti = c.access(pti); c.ti != nil {
				return c.ti, nil
			}
		}
	}
	isRoot := c.isRoot()
	n := newNode(c.props)
	if isRoot {
		n.withMeta = n.typeAndObjectMeta()
	}
	decl := common.SchemaDeclType(n, isRoot)
	if decl == nil {
		c.tiErr = errors.New("unable to convert structural schema to CEL declarations")
		return nil, c.tiErr
	}
	c.ti = &typeInfo{n: n, decl: decl}
	return c.ti, nil
}

func propertyAccess(name string) func(*typeInfo) *typeInfo {
	return func(p *typeInfo) *typeInfo {
		if p.n.properties == nil {
			return nil
		}
		escaped, ok := apiservercel.Escape(name)
		if !ok {
			return nil
		}
		f, ok := p.decl.Fields[escaped]
		if !ok {
			return nil // fields of unknown type are left out
		}
		return &typeInfo{n: p.n.prop(name), decl: f.Type}
	}
}

func itemsAccess(p *typeInfo) *typeInfo {
	if p.n.items == nil {
		return nil
	}
	return &typeInfo{n: p.n.items, decl: p.decl.ElemType}
}

func additionalAccess(p *typeInfo) *typeInfo {
	if p.n.additional == nil || p.n.additional.schema == nil {
		return nil
	}
	return &typeInfo{n: p.n.additional.schema, decl: p.decl.ElemType}
}

func (c *checkContext) child(props *apiextensionsv1.JSONSchemaProps, access func(*typeInfo) *typeInfo) *checkContext {
	out := &checkContext{parent: c, access: access, props: props, within: c.within || len(props.XValidations) > 0, total: c.total}
	if c.maxCardinality == nil {
		return out
	}
	if m := maxElements(c.props); m != nil {
		card := multiplyWithOverflowGuard(*c.maxCardinality, *m)
		out.maxCardinality = &card
	}
	return out
}

// maxElements is how many children a value of the schema has at most (nil:
// unbounded).
func maxElements(p *apiextensionsv1.JSONSchemaProps) *uint64 {
	one := uint64(1)
	bound := func(v *int64) *uint64 {
		if v == nil {
			return nil
		}
		n := uint64(max(*v, 0))
		return &n
	}
	switch p.Type {
	case "object":
		if p.AdditionalProperties != nil {
			return bound(p.MaxProperties)
		}
		return &one
	case "array":
		return bound(p.MaxItems)
	}
	return &one
}

// expressionCost is an expression's estimated cost times the number of
// times it can run: the node's cardinality when bounded, else how often
// the node fits in a request.
func (c *checkContext) expressionCost(maxCost, ruleCardinality uint64) uint64 {
	if c.maxCardinality != nil {
		return multiplyWithOverflowGuard(maxCost, *c.maxCardinality)
	}
	return multiplyWithOverflowGuard(maxCost, ruleCardinality)
}

func multiplyWithOverflowGuard(base, cardinality uint64) uint64 {
	if base == 0 {
		return 0
	}
	if math.MaxUint64/base < cardinality {
		return math.MaxUint64
	}
	return base * cardinality
}

type ruleCost struct {
	path *field.Path
	cost uint64
}

// totalCost is a schema's running total estimated cost and its (at most
// four) most expensive expressions of at least 1% of the limit.
type totalCost struct {
	total         uint64
	mostExpensive []ruleCost
}

func (t *totalCost) observe(path *field.Path, cost uint64) {
	if math.MaxUint64-t.total < cost {
		t.total = math.MaxUint64
	} else {
		t.total += cost
	}
	if cost < StaticEstimatedCRDCostLimit/100 {
		return
	}
	t.mostExpensive = append(t.mostExpensive, ruleCost{path: path, cost: cost})
	sort.SliceStable(t.mostExpensive, func(i, j int) bool { return t.mostExpensive[i].cost > t.mostExpensive[j].cost })
	if len(t.mostExpensive) > 4 {
		t.mostExpensive = t.mostExpensive[:4]
	}
}
