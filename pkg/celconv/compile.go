package celconv

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

const (
	// PerCallLimit is the runtime cost limit of one expression's
	// evaluation (upstream's limit for one validation rule call).
	PerCallLimit = celconfig.PerCallLimit
	// StaticEstimatedCostLimit is the largest estimated cost of one
	// expression a CRD write accepts (upstream's limit for one
	// x-kubernetes-validations rule).
	StaticEstimatedCostLimit = 10000000
)

// Rules are the compiled conversion rules of one CRD generation. They are
// immutable and safe for concurrent use.
type Rules struct {
	group string
	kind  string
	pairs map[[2]string]*pair
}

// pair is the compiled rule of one version pair.
type pair struct {
	from, to string
	// fromSchema converts source objects to CEL values (the source
	// version's schema with apiVersion, kind and metadata).
	fromSchema common.Schema
	fields     []*compiledField
}

type compiledField struct {
	path    []string
	pathStr string
	expr    string
	prog    cel.Program
	// reads are the paths of self the expression selects ("spec.host").
	reads   [][]string
	maxCost uint64
}

// baseEnvSet is the validator tier's CEL environment (every library of
// this Kubernetes version, compatibility version as upstream's default).
var baseEnvSet = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

var typeNameSeq atomic.Uint64

// Compile compiles the conversion rules of crd. It returns nil rules and
// no errors when crd declares none. Errors name the annotation's fields:
// a rule between versions the CRD does not have, a target field the
// target version's schema lacks, an expression that does not compile
// (upstream's "compilation failed: ..." wording, which names a missing
// source field: "undefined field 'x'"), whose type does not fit the
// target field, or whose estimated cost exceeds the per-expression limit
// (upstream's "estimated rule cost exceeds budget by factor of ..."). Rules
// need spec.conversion.strategy None (the strategy upstream tools see).
func Compile(crd *apiextensionsv1.CustomResourceDefinition) (*Rules, field.ErrorList) {
	rules, ferr := Parse(crd)
	if ferr != nil {
		return nil, field.ErrorList{ferr}
	}
	if rules == nil {
		return nil, nil
	}
	var errs field.ErrorList
	if c := crd.Spec.Conversion; c != nil && c.Strategy != "" && c.Strategy != apiextensionsv1.NoneConverter {
		errs = append(errs, field.Forbidden(annotationPath, fmt.Sprintf("conversion rules require spec.conversion.strategy %s, not %s", apiextensionsv1.NoneConverter, c.Strategy)))
		return nil, errs
	}
	schemas := map[string]*schema.Structural{}
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		s, err := structuralOf(v.Schema.OpenAPIV3Schema)
		if err != nil {
			// the registry reports what is wrong with the schema
			continue
		}
		schemas[v.Name] = s
	}
	out := &Rules{group: crd.Spec.Group, kind: crd.Spec.Names.Kind, pairs: map[[2]string]*pair{}}
	for i, r := range rules {
		rp := annotationPath.Index(i)
		ok := true
		for _, ft := range []struct{ name, v string }{{"from", r.From}, {"to", r.To}} {
			if !slices.Contains(versions, ft.v) {
				errs = append(errs, field.NotSupported(rp.Child(ft.name), ft.v, versions))
				ok = false
			}
		}
		if !ok {
			continue
		}
		if r.From == r.To {
			errs = append(errs, field.Invalid(rp.Child("to"), r.To, "must not be the same version as from"))
			continue
		}
		key := [2]string{r.From, r.To}
		if _, dup := out.pairs[key]; dup {
			errs = append(errs, field.Duplicate(rp, r.From+" to "+r.To))
			continue
		}
		fromS, toS := schemas[r.From], schemas[r.To]
		if fromS == nil || toS == nil {
			errs = append(errs, field.Invalid(rp, r.From+" to "+r.To, "both versions need a structural schema"))
			continue
		}
		p, perrs := compilePair(rp, r, fromS, toS)
		errs = append(errs, perrs...)
		if p != nil {
			out.pairs[key] = p
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func structuralOf(props *apiextensionsv1.JSONSchemaProps) (*schema.Structural, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		return nil, err
	}
	return schema.NewStructural(internal)
}

func compilePair(rp *field.Path, r Rule, fromS, toS *schema.Structural) (*pair, field.ErrorList) {
	var errs field.ErrorList
	withMeta := model.WithTypeAndObjectMeta(fromS)
	declType := model.SchemaDeclType(withMeta, true)
	if declType == nil {
		return nil, field.ErrorList{field.Invalid(rp.Child("from"), r.From, "the schema of this version has no CEL type")}
	}
	declType = declType.MaybeAssignTypeName(fmt.Sprintf("__conversion_%s_%d", r.From, typeNameSeq.Add(1)))
	envSet, err := baseEnvSet.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("self", declType.CelType())},
		DeclTypes:         []*apiservercel.DeclType{declType},
	})
	if err != nil {
		return nil, field.ErrorList{field.InternalError(rp, err)}
	}
	env, err := envSet.Env(environment.NewExpressions)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(rp, err)}
	}
	estimator := &library.CostEstimator{SizeEstimator: &sizeEstimator{root: declType}}
	p := &pair{from: r.From, to: r.To, fromSchema: newCachedSchema(&model.Structural{Structural: withMeta})}
	targets := map[string]bool{}
	for j, f := range r.Fields {
		fp := rp.Child("fields").Index(j)
		path := splitPath(f.Path)
		target, terr := targetSchema(toS, path)
		switch {
		case path == nil:
			errs = append(errs, field.Invalid(fp.Child("path"), f.Path, "must be a dot-separated field path"))
			continue
		case path[0] == "apiVersion" || path[0] == "kind" || path[0] == "metadata":
			errs = append(errs, field.Forbidden(fp.Child("path"), "apiVersion, kind and metadata are not converted by rules"))
			continue
		case terr != "":
			errs = append(errs, field.Invalid(fp.Child("path"), f.Path, fmt.Sprintf("no such field in the schema of version %s: %s", r.To, terr)))
			continue
		case targets[f.Path]:
			errs = append(errs, field.Duplicate(fp.Child("path"), f.Path))
			continue
		}
		targets[f.Path] = true
		ep := fp.Child("expression")
		if strings.TrimSpace(f.Expression) == "" {
			errs = append(errs, field.Required(ep, ""))
			continue
		}
		ast, issues := env.Compile(f.Expression)
		if issues != nil && issues.Err() != nil {
			errs = append(errs, field.Invalid(ep, f.Expression, "compilation failed: "+issues.String()))
			continue
		}
		if msg := typeMismatch(target, ast.OutputType()); msg != "" {
			errs = append(errs, field.Invalid(ep, f.Expression, fmt.Sprintf("must evaluate to %s (the type of %s in version %s), not %s", msg, f.Path, r.To, ast.OutputType())))
			continue
		}
		est, err := env.EstimateCost(ast, estimator)
		if err != nil {
			errs = append(errs, field.InternalError(ep, fmt.Errorf("cost estimation failed: %w", err)))
			continue
		}
		if est.Max > StaticEstimatedCostLimit {
			errs = append(errs, field.Forbidden(ep, CostErrorMessage("estimated rule cost", est.Max, StaticEstimatedCostLimit)))
			continue
		}
		prog, err := env.Program(ast,
			cel.CostLimit(PerCallLimit),
			cel.CostTracking(estimator),
			cel.InterruptCheckFrequency(celconfig.CheckFrequency),
		)
		if err != nil {
			errs = append(errs, field.Invalid(ep, f.Expression, "program instantiation failed: "+err.Error()))
			continue
		}
		p.fields = append(p.fields, &compiledField{
			path: path, pathStr: f.Path, expr: f.Expression, prog: prog,
			reads: selfReads(ast.NativeRep().Expr()), maxCost: est.Max,
		})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// targetSchema walks path through the properties of s; it returns the
// field's schema, or why there is none.
func targetSchema(s *schema.Structural, path []string) (*schema.Structural, string) {
	cur := s
	for i, name := range path {
		if cur.XPreserveUnknownFields {
			if p, ok := cur.Properties[name]; ok {
				cur = &p
				continue
			}
			return nil, ""
		}
		p, ok := cur.Properties[name]
		if !ok {
			return nil, fmt.Sprintf("%s has no property %q", strings.Join(append([]string{"<root>"}, path[:i]...), "."), name)
		}
		cur = &p
	}
	return cur, ""
}

// typeMismatch says which type the target field needs when out cannot
// fit it ("" when it can, or when either side is not known).
func typeMismatch(target *schema.Structural, out *cel.Type) string {
	if target == nil || target.XIntOrString || target.XPreserveUnknownFields || target.XEmbeddedResource {
		return ""
	}
	k := out.Kind()
	switch k {
	case types.DynKind, types.AnyKind, types.NullTypeKind, types.OpaqueKind, types.ErrorKind:
		return ""
	}
	ok := false
	switch target.Type {
	case "string":
		ok = k == types.StringKind
	case "integer":
		ok = k == types.IntKind || k == types.UintKind
	case "number":
		ok = k == types.IntKind || k == types.UintKind || k == types.DoubleKind
	case "boolean":
		ok = k == types.BoolKind
	case "array":
		ok = k == types.ListKind
	case "object":
		ok = k == types.MapKind || k == types.StructKind
	default:
		return ""
	}
	if ok {
		return ""
	}
	return target.Type
}

// selfReads collects the field paths of self an expression selects
// (self.spec.host gives spec.host, and spec).
func selfReads(e celast.Expr) [][]string {
	var out [][]string
	celast.PostOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() != celast.SelectKind {
			return
		}
		var rev []string
		cur := x
		for cur.Kind() == celast.SelectKind {
			rev = append(rev, cur.AsSelect().FieldName())
			cur = cur.AsSelect().Operand()
		}
		if cur.Kind() != celast.IdentKind || cur.AsIdent() != "self" {
			return
		}
		path := make([]string, len(rev))
		for i := range rev {
			path[i] = rev[len(rev)-1-i]
		}
		out = append(out, path)
	}))
	return out
}

// CostErrorMessage is upstream's wording for an expression whose
// estimated cost exceeds its limit (costName: "estimated rule cost", ...);
// the validator's x-kubernetes-validations checks use it too.
func CostErrorMessage(costName string, cost, limit uint64) string {
	f := float64(cost) / float64(limit)
	var factor string
	switch {
	case f > 100.0:
		factor = "more than 100x"
	case f < 1.5:
		factor = fmt.Sprintf("%fx", f)
	default:
		factor = fmt.Sprintf("%.1fx", f)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", costName, factor)
}

// sizeEstimator bounds the sizes of self's lists, maps and strings from
// the schema (maxItems, maxProperties, maxLength, else what fits in a
// request), as upstream estimates rule costs.
type sizeEstimator struct {
	root *apiservercel.DeclType
}

func (c *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 {
		return nil
	}
	cur := c.root
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			cur = cur.ElemType
		case "@keys":
			cur = cur.KeyType
		default:
			f, ok := cur.Fields[name]
			if !ok {
				return nil
			}
			cur = f.Type
		}
		if cur == nil {
			return nil
		}
	}
	if cur.MaxElements < 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(cur.MaxElements)} //nolint:gosec // G115: not negative, checked above
}

func (c *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
