package celrules

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/structural"
)

// Result is the outcome of validating one object.
type Result struct {
	// Errors are the rule failures and evaluation errors, as upstream's
	// field errors.
	Errors field.ErrorList
	// Warnings are the failures that ratcheting excused (on update, rules
	// without oldSelf on values equal to their old values): upstream sends
	// them as warnings (the field error's text).
	Warnings []string
	// RemainingBudget is the cost budget left; negative when it ran out
	// (and evaluation stopped).
	RemainingBudget int64
}

// Validate evaluates every rule of v against obj (a custom resource, or
// a value of v's schema), with old its old value on update (nil on create)
// and corr the correlation of obj with old for ratcheting (nil: no
// ratcheting). fldPath prefixes the error paths (nil at a custom
// resource's root, as upstream: root errors read "<nil>: ..."). Rules run
// depth first, properties in sorted order, within budget (upstream's
// RuntimeCELCostBudget per object); each evaluation is limited to the
// per-call limit.
func (v *Validator) Validate(ctx context.Context, fldPath *field.Path, obj, old any, corr *structural.Correlation, budget int64) Result {
	if v == nil {
		return Result{RemainingBudget: budget}
	}
	w := walker{ctx: ctx, base: fldPath, budget: budget}
	w.validate(v.root, obj, old, ratchet{cur: corr})
	return Result{Errors: w.errs, Warnings: w.warnings, RemainingBudget: w.budget}
}

// Rules returns the compiled rules of the schema node at the property path
// (tests, write-time checks).
func (v *Validator) Rules(path ...string) []*Rule {
	if v == nil {
		return nil
	}
	n := v.root
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch p {
		case "[]":
			n = n.items
		case "{}":
			n = n.additional
		default:
			var next *validator
			for _, pv := range n.props {
				if pv.name == p {
					next = pv.v
				}
			}
			n = next
		}
	}
	if n == nil {
		return nil
	}
	return n.rules
}

// ratchet is upstream's ratcheting options: the node's correlation with
// its old value, or (when it does not correlate) its nearest correlated
// ancestor. A failure is ratcheted when the node, or else that ancestor,
// equals its old value.
type ratchet struct {
	cur, parent *structural.Correlation
}

func (r ratchet) excused() bool {
	if r.cur != nil {
		return r.cur.Equal()
	}
	return r.parent.Equal()
}

func (r ratchet) key(k string) ratchet {
	if r.cur == nil {
		return r
	}
	if r.parent == nil && (k == "apiVersion" || k == "kind") {
		// apiVersion and kind of the root are not ratcheted.
		return ratchet{}
	}
	return ratchet{cur: r.cur.Key(k), parent: r.cur}
}

func (r ratchet) index(i int) ratchet {
	if r.cur == nil {
		return r
	}
	return ratchet{cur: r.cur.Index(i), parent: r.cur}
}

type segKind uint8

const (
	segChild segKind = iota
	segKey
	segIndex
)

type seg struct {
	kind  segKind
	name  string
	index int
}

type walker struct {
	ctx      context.Context
	base     *field.Path
	path     []seg
	budget   int64
	errs     field.ErrorList
	warnings []string
}

// fieldPath materializes the current path (only when reporting).
func (w *walker) fieldPath() *field.Path {
	p := w.base
	for _, s := range w.path {
		switch s.kind {
		case segChild:
			p = p.Child(s.name)
		case segKey:
			p = p.Key(s.name)
		case segIndex:
			p = p.Index(s.index)
		}
	}
	return p
}

func (w *walker) validate(v *validator, obj, old any, r ratchet) {
	if v == nil || obj == nil {
		return
	}
	w.expressions(v, obj, old, r)
	if w.budget < 0 {
		return
	}
	switch obj := obj.(type) {
	case []any:
		if v.items == nil {
			return
		}
		oldList, _ := old.([]any)
		// Only items of list-type map lists correlate with old items.
		oldItems := common.MakeMapList(v.schema, oldList)
		for i, item := range obj {
			w.path = append(w.path, seg{kind: segIndex, index: i})
			w.validate(v.items, item, oldItems.Get(item), r.index(i))
			w.path = w.path[:len(w.path)-1]
			if w.budget < 0 {
				return
			}
		}
	case map[string]any:
		oldMap, _ := old.(map[string]any)
		if v.additional != nil {
			for _, k := range sortedKeys(obj) {
				var oldV any
				if v.mapCorrelatable {
					oldV = oldMap[k]
				}
				w.path = append(w.path, seg{kind: segKey, name: k})
				w.validate(v.additional, obj[k], oldV, r.key(k))
				w.path = w.path[:len(w.path)-1]
				if w.budget < 0 {
					return
				}
			}
		}
		for _, pv := range v.props {
			val, ok := obj[pv.name]
			if !ok {
				continue
			}
			var oldV any
			if v.mapCorrelatable {
				oldV = oldMap[pv.name]
			}
			w.path = append(w.path, seg{kind: segChild, name: pv.name})
			w.validate(pv.v, val, oldV, r.key(pv.name))
			w.path = w.path[:len(w.path)-1]
			if w.budget < 0 {
				return
			}
		}
	}
}

// activation binds self and oldSelf.
type activation struct {
	self, oldSelf ref.Val
	hasOldSelf    bool
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case ScopedVarName:
		return a.self, true
	case OldScopedVarName:
		return a.oldSelf, a.hasOldSelf
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

const outOfBudget = "validation failed due to running out of cost budget, no further validation rules will be run"

// expressions evaluates the rules of one node, as upstream's
// validateExpressions.
func (w *walker) expressions(v *validator, obj, old any, r ratchet) {
	if v.compileErr != nil {
		w.errs = append(w.errs, field.Invalid(w.fieldPath(), v.schema.typ, fmt.Sprintf("rule compiler initialization error: %v", v.compileErr)))
		return
	}
	if len(v.rules) == 0 {
		return
	}
	typ := v.schema.typ
	if w.budget <= 0 {
		w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, outOfBudget))
		w.budget = -1
		return
	}
	act := &activation{self: common.UnstructuredToVal(obj, v.valSchema)}
	optAct := act
	if v.usesOldSelf {
		optAct = &activation{self: act.self, hasOldSelf: true, oldSelf: types.OptionalNone}
		if old != nil {
			act.oldSelf, act.hasOldSelf = common.UnstructuredToVal(old, v.valSchema), true
			optAct.oldSelf = types.OptionalOf(act.oldSelf)
		}
	}
	for _, rule := range v.rules {
		if rule.Error != nil {
			w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, fmt.Sprintf("rule compile error: %v", rule.Error)))
			continue
		}
		if rule.Program == nil {
			continue // empty rule
		}
		if rule.UsesOldSelf && old == nil && !rule.OptionalOldSelf {
			continue // transition rules need an old value
		}
		ruleAct := act
		if rule.OptionalOldSelf {
			ruleAct = optAct
		}
		result, details, err := eval(w.ctx, rule.Program, rule.folds, ruleAct)
		if details == nil {
			w.errs = append(w.errs, field.InternalError(w.fieldPath(), fmt.Errorf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", rule.errString)))
			w.budget = -1
			return
		}
		cost := details.ActualCost()
		if cost == nil {
			w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, fmt.Sprintf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", rule.errString)))
			w.budget = -1
			return
		}
		if *cost > math.MaxInt64 || int64(*cost) > w.budget {
			w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, outOfBudget))
			w.budget = -1
			return
		}
		w.budget -= int64(*cost)
		if err != nil {
			switch msg := err.Error(); {
			case strings.HasPrefix(msg, "no such overload"):
				// Only possible where type checking is bypassed (int-or-string).
				w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, rule.errString)))
			case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
				w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, rule.errString)))
				w.budget = -1
				return
			default:
				// no such key, index out of bounds, overflow, division by zero, ...
				w.errs = append(w.errs, field.Invalid(w.fieldPath(), typ, fmt.Sprintf("%v evaluating rule: %v", err, rule.errString)))
			}
			continue
		}
		if result == types.True {
			continue
		}

		// The rule failed: its message may come from messageExpression.
		fldPath := w.fieldPath()
		if rule.FieldPath != "" {
			fldPath = fldPath.Child(rule.FieldPath)
		}
		excused := !rule.UsesOldSelf && r.excused()
		report := func(e *field.Error) {
			if excused {
				w.warnings = append(w.warnings, fielderr.Error(e))
			} else {
				w.errs = append(w.errs, e)
			}
		}
		detail, ok := "", false
		if rule.MessageProgram != nil {
			// As upstream, the messageExpression sees the rule's activation
			// without optional oldSelf (so with optionalOldSelf it fails
			// and the message falls back).
			msg, remaining, msgErr := w.messageExpression(rule, act)
			switch {
			case msgErr == nil:
				detail, ok = msg, true
				w.budget = remaining
			case msgErr.Type == apiservercel.ErrorTypeInternal:
				report(field.InternalError(fldPath, msgErr))
				w.budget = -1
				return
			case msgErr.Type == apiservercel.ErrorTypeInvalid:
				report(field.Invalid(fldPath, typ, msgErr.Error()))
				w.budget = -1
				return
			default:
				// Upstream logs the failure and falls back to the message.
				w.budget = remaining
			}
		}
		if !ok {
			detail = rule.defaultMessage
		}
		// As upstream v1.33, the error's value is the schema's type name
		// ("object", "string", ...; "" when untyped), not the value.
		report(errorForReason(fldPath, typ, detail, rule.Source.Reason))
	}
}

// messageExpression evaluates a rule's messageExpression as upstream:
// out of budget and the per-call limit stop validation (Invalid); other
// failures (an evaluation error, an empty, too long or multi-line message)
// fall back to the rule's message.
func (w *walker) messageExpression(rule *Rule, act *activation) (string, int64, *apiservercel.Error) {
	src := rule.Source.MessageExpression
	result, details, err := eval(w.ctx, rule.MessageProgram, rule.messageFolds, act)
	if details == nil || details.ActualCost() == nil {
		return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInternal,
			Detail: fmt.Sprintf("runtime cost could not be calculated for messageExpression: %q", src)}
	}
	cost := *details.ActualCost()
	if cost > math.MaxInt64 || int64(cost) > w.budget {
		return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid,
			Detail: "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"}
	}
	remaining := w.budget - int64(cost)
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid,
				Detail: fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", src)}
		}
		return "", remaining, &apiservercel.Error{Detail: fmt.Sprintf("messageExpression evaluation failed due to: %v", err)}
	}
	msg, ok := result.Value().(string)
	if !ok {
		return "", remaining, &apiservercel.Error{Detail: "messageExpression failed to convert to string"}
	}
	msg = strings.TrimSpace(msg)
	switch {
	case len(msg) > celconfig.MaxEvaluatedMessageExpressionSizeBytes:
		return "", remaining, &apiservercel.Error{Detail: fmt.Sprintf("messageExpression beyond allowable length of %d", celconfig.MaxEvaluatedMessageExpressionSizeBytes)}
	case strings.Contains(msg, "\n"):
		return "", remaining, &apiservercel.Error{Detail: "messageExpression should not contain line breaks"}
	case msg == "":
		return "", remaining, &apiservercel.Error{Detail: "messageExpression should evaluate to a non-empty string"}
	}
	return msg, remaining, nil
}

// eval evaluates a program, with ctx only when it has comprehensions
// (cel-go checks for cancellation in comprehensions only, so an
// expression without them evaluates the same without; binding a context
// costs a cancelable context per evaluation).
func eval(ctx context.Context, prog cel.Program, folds bool, act *activation) (ref.Val, *cel.EvalDetails, error) {
	if folds {
		return prog.ContextEval(ctx, act)
	}
	return prog.Eval(act)
}

// errorForReason is the field error of a failed rule for its reason
// (FieldValueInvalid when unset).
func errorForReason(fldPath *field.Path, value any, detail string, reason *apiextensionsv1.FieldValueErrorReason) *field.Error {
	if reason == nil {
		return field.Invalid(fldPath, value, detail)
	}
	switch *reason {
	case apiextensionsv1.FieldValueForbidden:
		return field.Forbidden(fldPath, detail)
	case apiextensionsv1.FieldValueRequired:
		return field.Required(fldPath, detail)
	case apiextensionsv1.FieldValueDuplicate:
		return field.Duplicate(fldPath, value)
	}
	return field.Invalid(fldPath, value, detail)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
