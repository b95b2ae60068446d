package celrules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

const (
	// ScopedVarName is the variable bound to the value a rule is scoped to.
	ScopedVarName = "self"
	// OldScopedVarName is the variable bound to its old value on update.
	OldScopedVarName = "oldSelf"

	// PerCallLimit is the runtime cost limit of one rule evaluation.
	PerCallLimit = celconfig.PerCallLimit
	// RuntimeCostBudget is the runtime cost budget of all rules of one
	// custom resource.
	RuntimeCostBudget = celconfig.RuntimeCELCostBudget
)

// EnvType selects the CEL environment an expression compiles in.
type EnvType int

const (
	// StoredExpressions has every library of this Kubernetes version: for
	// expressions already persisted (admission, rules an old CRD had).
	StoredExpressions EnvType = iota
	// NewExpressions has the libraries of the compatibility version only:
	// for expressions a CRD write introduces.
	NewExpressions
)

// CompileOption changes how Compile compiles.
type CompileOption func(*compileOptions)

type compileOptions struct {
	perCallLimit uint64
	estimate     bool
	envFor       func(expr string, messageExpression bool) EnvType
	notRoot      bool
}

// WithResourceRoot tells whether the compiled schema is a resource root
// (a CRD's root or an embedded resource, where apiVersion, kind,
// metadata.name and metadata.generateName are accessible); default true.
// Schemas of other nodes are compiled on their own to validate default
// values.
func WithResourceRoot(isResourceRoot bool) CompileOption {
	return func(o *compileOptions) { o.notRoot = !isResourceRoot }
}

// WithPerCallLimit overrides the per-evaluation cost limit (tests).
func WithPerCallLimit(limit uint64) CompileOption {
	return func(o *compileOptions) { o.perCallLimit = limit }
}

// WithCostEstimates also estimates each expression's worst-case cost
// (CRD write-time checks).
func WithCostEstimates() CompileOption {
	return func(o *compileOptions) { o.estimate = true }
}

// WithEnvironments chooses the environment of each rule and
// messageExpression (default: StoredExpressions for all).
func WithEnvironments(envFor func(expr string, messageExpression bool) EnvType) CompileOption {
	return func(o *compileOptions) { o.envFor = envFor }
}

// Validator is the compiled x-kubernetes-validations of one CRD version's
// schema: a tree parallel to the schema holding only the nodes that have
// rules or descendants with rules. It is immutable and safe for concurrent
// use; compile it once per CRD generation and version.
type Validator struct {
	root *validator
	// schema is the root of the schema tree (for Rules and tests).
	schema *node
}

// validator is one schema node with rules below or at it.
type validator struct {
	schema *node
	// valSchema converts values for rules at this node: the node, or at a
	// resource root the node with apiVersion, kind and metadata declared.
	valSchema      common.Schema
	isResourceRoot bool
	rules          []*Rule
	// compileErr is a failure to set the node's rules up at all (no CEL
	// type for the node).
	compileErr  error
	usesOldSelf bool

	items      *validator
	props      []propValidator // sorted by name
	additional *validator
	// mapCorrelatable: children of this object correlate with their old
	// values for transition rules (x-kubernetes-map-type unset, granular
	// or atomic).
	mapCorrelatable bool
}

type propValidator struct {
	name string
	v    *validator
}

// Rule is one compiled x-kubernetes-validations entry.
type Rule struct {
	// Source is the rule as written in the CRD.
	Source apiextensionsv1.ValidationRule
	// Program is nil for an empty rule or when Error is set.
	Program cel.Program
	// Error is the rule's compile error, if any.
	Error *apiservercel.Error
	// UsesOldSelf: the rule refers to oldSelf (a transition rule).
	UsesOldSelf bool
	// OptionalOldSelf: the rule sees oldSelf as an optional and also runs
	// on create and on values without an old value.
	OptionalOldSelf bool
	// MaxCost is the estimated worst-case cost of one evaluation (with
	// WithCostEstimates).
	MaxCost uint64
	// MaxCardinality is the worst-case number of evaluations in an object
	// of the maximum request size, from the node's minimum serialized size.
	MaxCardinality uint64

	MessageProgram cel.Program
	MessageError   *apiservercel.Error
	MessageMaxCost uint64

	// folds and messageFolds: the expression has comprehensions, the only
	// place where evaluation checks for cancellation; expressions without
	// them run without a context (the same result, less overhead).
	folds, messageFolds bool

	// FieldPath is the normalized fieldPath ("" when unset or invalid).
	FieldPath string

	errString      string // the message, else the rule (trimmed)
	defaultMessage string // the message, else "failed rule: <rule>"
}

// HasRules reports whether the schema has any x-kubernetes-validations.
func HasRules(props *apiextensionsv1.JSONSchemaProps) bool {
	if props == nil {
		return false
	}
	if len(props.XValidations) > 0 {
		return true
	}
	if props.Items != nil && HasRules(props.Items.Schema) {
		return true
	}
	if props.AdditionalProperties != nil && HasRules(props.AdditionalProperties.Schema) {
		return true
	}
	for k := range props.Properties {
		p := props.Properties[k]
		if HasRules(&p) {
			return true
		}
	}
	return false
}

// Compile compiles the x-kubernetes-validations of a CRD version's
// openAPIV3Schema (structural; junctors carry no rules in a structural
// schema). It returns nil when the schema has no rules. Per-rule compile
// errors are kept in the rules (admission reports them as upstream does,
// "rule compile error: ..."); Compile itself fails only on an internal
// error.
func Compile(props *apiextensionsv1.JSONSchemaProps, opts ...CompileOption) (*Validator, error) {
	if !HasRules(props) {
		return nil, nil
	}
	o := compileOptions{perCallLimit: PerCallLimit}
	for _, opt := range opts {
		opt(&o)
	}
	root := newNode(props)
	isRoot := !o.notRoot || root.embedded
	if isRoot {
		root.withMeta = root.typeAndObjectMeta()
	}
	c := compiler{opts: o}
	v, err := c.validator(root, isRoot, common.SchemaDeclType(root, isRoot))
	if err != nil {
		return nil, err
	}
	return &Validator{root: v, schema: root}, nil
}

// compileNode compiles the rules of one schema node (not those below it)
// with the given CEL type, for the CRD write-time checks, which see each
// node on its own.
func compileNode(n *node, isResourceRoot bool, declType *apiservercel.DeclType, o compileOptions) (*validator, error) {
	c := compiler{opts: o, shallow: true}
	return c.validator(n, isResourceRoot, declType)
}

type compiler struct {
	opts    compileOptions
	shallow bool // only the node's own rules
}

// validator mirrors upstream's NewValidator walk: properties take their
// CEL type from the parent's type (fields of unknown type are left out,
// properties with names CEL cannot express get a type of their own),
// items and additionalProperties from the element type.
func (c *compiler) validator(n *node, isResourceRoot bool, declType *apiservercel.DeclType) (*validator, error) {
	v := &validator{
		schema:          n,
		valSchema:       n,
		isResourceRoot:  isResourceRoot,
		mapCorrelatable: n.mapType == "" || n.mapType == "granular" || n.mapType == "atomic",
	}
	if isResourceRoot {
		v.valSchema = n.WithTypeAndObjectMeta()
	}
	if len(n.xValidations) > 0 {
		if declType == nil {
			v.compileErr = errors.New("failed to convert to declType for CEL validation rules")
		} else if err := c.compileRules(v, declType); err != nil {
			return nil, err
		}
	}
	if c.shallow {
		return v, nil
	}
	var elemType *apiservercel.DeclType
	if declType != nil {
		elemType = declType.ElemType
	}
	var err error
	if n.items != nil {
		if v.items, err = c.validator(n.items, n.items.embedded, elemType); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(n.properties))
	for name := range n.properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		prop := n.prop(name)
		if !prop.hasRules() {
			continue
		}
		var fieldType *apiservercel.DeclType
		if escaped, ok := apiservercel.Escape(name); ok {
			if declType == nil {
				continue
			}
			f, ok := declType.Fields[escaped]
			if !ok {
				continue // fields of unknown type are not accessible to CEL
			}
			fieldType = f.Type
		} else if fieldType = common.SchemaDeclType(prop, prop.embedded); fieldType == nil {
			continue
		}
		pv, err := c.validator(prop, prop.embedded, fieldType)
		if err != nil {
			return nil, err
		}
		if pv != nil {
			v.props = append(v.props, propValidator{name, pv})
		}
	}
	if ap := n.additional; ap != nil && ap.schema != nil {
		if v.additional, err = c.validator(ap.schema, ap.schema.embedded, elemType); err != nil {
			return nil, err
		}
	}
	if len(v.rules) == 0 && v.compileErr == nil && v.items == nil && v.additional == nil && len(v.props) == 0 {
		return nil, nil
	}
	return v, nil
}

// hasRules reports whether n or a node below it has rules.
func (n *node) hasRules() bool {
	if n == nil {
		return false
	}
	if len(n.xValidations) > 0 {
		return true
	}
	if n.items.hasRules() {
		return true
	}
	if n.additional != nil && n.additional.schema.hasRules() {
		return true
	}
	for _, p := range n.properties {
		if p.(*node).hasRules() {
			return true
		}
	}
	return false
}

// selfTypeCounter makes the name of each node's self type unique, as
// upstream's (which it derives from the clock so that rules cannot come to
// depend on it).
var selfTypeCounter atomic.Uint64

func uniqueSelfTypeName() string {
	return fmt.Sprintf("selfType%d", uint64(time.Now().Nanosecond())+selfTypeCounter.Add(1))
}

// baseEnvSet is Kubernetes' CEL base environment at the default
// compatibility version (all libraries for stored expressions).
var baseEnvSet = sync.OnceValue(func() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
})

// nodeEnvs builds the environments a node's rules compile in, on demand:
// self typed as the node, oldSelf as the node or (optionalOldSelf) as an
// optional of it, in the stored- or new-expressions base environment.
type nodeEnvs struct {
	scoped *apiservercel.DeclType
	envs   [2][2]*cel.Env // [EnvType][optional]
}

func (e *nodeEnvs) get(t EnvType, optional bool) (*cel.Env, error) {
	i := 0
	if optional {
		i = 1
	}
	if env := e.envs[t][i]; env != nil {
		return env, nil
	}
	base := baseEnvSet().StoredExpressionsEnv()
	recognizeKeywords := true
	if t == NewExpressions {
		base = baseEnvSet().NewExpressionsEnv()
		recognizeKeywords = environment.DefaultCompatibilityVersion().AtLeast(version.MajorMinor(1, 31))
	}
	oldSelfType := e.scoped.CelType()
	if optional {
		oldSelfType = types.NewOptionalType(oldSelfType)
	}
	provider := apiservercel.NewDeclTypeProvider(e.scoped)
	provider.SetRecognizeKeywordAsFieldName(recognizeKeywords)
	providerOpts, err := provider.EnvOptions(base.CELTypeProvider())
	if err != nil {
		return nil, err
	}
	envOpts := append([]cel.EnvOption{
		cel.Variable(ScopedVarName, e.scoped.CelType()),
		cel.Variable(OldScopedVarName, oldSelfType),
	}, providerOpts...)
	env, err := base.Extend(envOpts...)
	if err != nil {
		return nil, err
	}
	e.envs[t][i] = env
	return env, nil
}

func (c *compiler) compileRules(v *validator, declType *apiservercel.DeclType) error {
	envs := &nodeEnvs{scoped: declType.MaybeAssignTypeName(uniqueSelfTypeName())}
	estimator := &library.CostEstimator{SizeEstimator: &sizeEstimator{root: declType}}
	maxCardinality := maxCardinality(declType.MinSerializedSize)
	for i := range v.schema.xValidations {
		r, err := c.compileRule(v.schema, v.schema.xValidations[i], envs, estimator, maxCardinality)
		if err != nil {
			return err
		}
		v.rules = append(v.rules, r)
		if r.UsesOldSelf {
			v.usesOldSelf = true
		}
	}
	return nil
}

func (c *compiler) envType(expr string, messageExpression bool) EnvType {
	if c.opts.envFor == nil {
		return StoredExpressions
	}
	return c.opts.envFor(expr, messageExpression)
}

func (c *compiler) compileRule(n *node, src apiextensionsv1.ValidationRule, envs *nodeEnvs, estimator *library.CostEstimator, maxCardinality uint64) (*Rule, error) {
	r := &Rule{
		Source:          src,
		OptionalOldSelf: src.OptionalOldSelf != nil && *src.OptionalOldSelf,
		errString:       strings.TrimSpace(src.Rule),
	}
	if msg := strings.TrimSpace(src.Message); msg != "" {
		r.errString, r.defaultMessage = msg, msg
	} else {
		r.defaultMessage = "failed rule: " + r.errString
	}
	if strings.TrimSpace(src.Rule) == "" {
		return r, nil
	}
	env, err := envs.get(c.envType(src.Rule, false), r.OptionalOldSelf)
	if err != nil {
		return nil, err
	}
	ast, issues := env.Compile(src.Rule)
	if issues != nil {
		r.Error = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "compilation failed: " + issues.String()}
		return r, nil
	}
	if ast.OutputType() != cel.BoolType {
		r.Error = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "cel expression must evaluate to a bool"}
		return r, nil
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == OldScopedVarName {
			r.UsesOldSelf = true
			break
		}
	}
	prog, err := env.Program(ast,
		cel.CostLimit(c.opts.perCallLimit),
		cel.CostTracking(estimator),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	)
	if err != nil {
		r.Error = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "program instantiation failed: " + err.Error()}
		return r, nil
	}
	if c.opts.estimate {
		est, err := env.EstimateCost(ast, estimator)
		if err != nil {
			r.Error = &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: "cost estimation failed: " + err.Error()}
			return r, nil
		}
		r.MaxCost = est.Max
	}
	r.MaxCardinality = maxCardinality
	r.Program = prog
	r.folds = hasComprehension(ast)

	if src.MessageExpression != "" {
		menv, err := envs.get(c.envType(src.MessageExpression, true), r.OptionalOldSelf)
		if err != nil {
			return nil, err
		}
		mast, issues := menv.Compile(src.MessageExpression)
		switch {
		case issues != nil:
			r.MessageError = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "messageExpression compilation failed: " + issues.String()}
		case mast.OutputType() != cel.StringType:
			r.MessageError = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "messageExpression must evaluate to a string"}
		default:
			mprog, err := menv.Program(mast,
				cel.CostLimit(c.opts.perCallLimit),
				cel.CostTracking(estimator),
				cel.InterruptCheckFrequency(celconfig.CheckFrequency),
			)
			if err != nil {
				r.MessageError = &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "messageExpression instantiation failed: " + err.Error()}
				break
			}
			if c.opts.estimate {
				est, err := menv.EstimateCost(mast, estimator)
				if err != nil {
					r.MessageError = &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: "cost estimation failed for messageExpression: " + err.Error()}
					break
				}
				r.MessageMaxCost = est.Max
			}
			r.MessageProgram = mprog
			r.messageFolds = hasComprehension(mast)
		}
	}
	if src.FieldPath != "" {
		if p, _, err := resolveFieldPath(src.FieldPath, n); err == nil {
			r.FieldPath = p.String()
		}
	}
	return r, nil
}

// sizeEstimator gives the cost estimator the maximum sizes the schema
// allows (maxItems, maxProperties, maxLength, or what fits in a request).
type sizeEstimator struct {
	root *apiservercel.DeclType
}

func (s *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 {
		return nil
	}
	t := s.root
	for _, name := range path[1:] { // path[0] is the variable (self)
		switch name {
		case "@items", "@values":
			if t.ElemType == nil {
				return nil
			}
			t = t.ElemType
		case "@keys":
			if t.KeyType == nil {
				return nil
			}
			t = t.KeyType
		default:
			f, ok := t.Fields[name]
			if !ok || f.Type == nil {
				return nil
			}
			t = f.Type
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(t.MaxElements)}
}

func (s *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// maxCardinality is how many times a value of at least minSize bytes fits
// in a request of the maximum size (one comma apart).
func maxCardinality(minSize int64) uint64 {
	return uint64(celconfig.MaxRequestSizeBytes / (minSize + 1))
}

// hasComprehension reports whether a checked expression has a
// comprehension (a macro such as all, exists, map, filter).
func hasComprehension(a *cel.Ast) bool {
	found := false
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}
