package registry

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// syncNames accepts a CRD's names unless another CRD of its group already
// serves them: status.acceptedNames, the NamesAccepted condition, and
// Established False ("Installing") until the establishing controller
// confirms.
//
// The controller runs one worker, and the first stored wins a conflict:
// CRDs of the group stored before name still waiting for some of their
// names (undecided, or in conflict with names a deletion may have freed)
// are decided first, whatever order concurrent creates queued them in (each create
// queues its CRD when it is answered, and answers race), so that the
// outcome is that of the creates one after another.
//
// "Stored before" is the revision each CRD was created at (the informer's
// first sight: later writes such as the finalizer's do not move it), and a
// CRD is decided only once the watch has delivered its creation, so that
// every CRD created before it is known: a create's answer puts its CRD in
// the informer before the watch brings the creates committed just before.
func (c *controllers) syncNames(ctx context.Context, name string) error {
	if cur, ok := c.inf.get(name); ok && !semanticEqual(cur.Spec.Names, cur.Status.AcceptedNames) {
		created, watched := c.inf.createdAt(name)
		if watched < created {
			c.enqueueAfter("names", name, 5*time.Millisecond)
			return nil
		}
		// each CRD's creation revision read once, not per comparison
		createdOf := map[string]int64{}
		earlier := slices.DeleteFunc(c.inf.listGroup(cur.Spec.Group), func(o *CRD) bool {
			oc, _ := c.inf.createdAt(o.Name)
			createdOf[o.Name] = oc
			return o.Name == name || semanticEqual(o.Spec.Names, o.Status.AcceptedNames) || oc >= created
		})
		slices.SortFunc(earlier, func(a, b *CRD) int { return cmp.Compare(createdOf[a.Name], createdOf[b.Name]) })
		for _, o := range earlier {
			if err := c.decideNames(ctx, o.Name); err != nil {
				return err
			}
		}
	}
	return c.decideNames(ctx, name)
}

// decideNames is syncNames for one CRD.
func (c *controllers) decideNames(ctx context.Context, name string) error {
	cur, ok := c.inf.get(name)
	if !ok {
		// a deleted CRD may free names others wait for
		c.requeueGroup(name)
		return nil
	}
	if semanticEqual(cur.Spec.Names, cur.Status.AcceptedNames) {
		return nil
	}
	accepted, namesCond, establishedCond := c.calculateNames(cur)
	if reflect.DeepEqual(cur.Status.AcceptedNames, accepted) && conditionEquivalent(&namesCond, findCondition(cur, condNamesAccepted)) {
		return nil
	}
	crd := cur.DeepCopy()
	crd.Status.AcceptedNames = accepted
	setCondition(crd, namesCond)
	setCondition(crd, establishedCond)
	if err := c.writeStatus(ctx, crd, cur); err != nil {
		return err
	}
	c.requeueGroup(name)
	return nil
}

// requeueGroup queues the other CRDs of name's group.
func (c *controllers) requeueGroup(name string) {
	for _, other := range c.inf.listGroup(groupOf(name)) {
		if other.Name != name {
			c.enqueue("names", other.Name)
		}
	}
}

// usedNames collects the accepted resource names (plural, singular, short
// names) and kinds (kind, listKind) of every CRD in group.
func (c *controllers) usedNames(group string) (resources, kinds map[string]bool) {
	resources, kinds = map[string]bool{}, map[string]bool{}
	for _, crd := range c.inf.listGroup(group) {
		n := crd.Status.AcceptedNames
		resources[n.Plural] = true
		resources[n.Singular] = true
		for _, s := range n.ShortNames {
			resources[s] = true
		}
		kinds[n.Kind] = true
		kinds[n.ListKind] = true
	}
	return resources, kinds
}

// calculateNames decides which requested names crd may have, as upstream's
// naming controller: a name is granted when it is already crd's or unused
// in the group.
func (c *controllers) calculateNames(crd *CRD) (apiextensionsv1.CustomResourceDefinitionNames, condition, condition) {
	resources, kinds := c.usedNames(crd.Spec.Group)
	want, have := crd.Spec.Names, crd.Status.AcceptedNames
	names := *have.DeepCopy()
	cond := condition{Type: condNamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}

	if err := grantable(want.Plural, have.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = want.Plural
	}
	if err := grantable(want.Singular, have.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = want.Singular
	}
	if !reflect.DeepEqual(want.ShortNames, have.ShortNames) {
		var errs []error
		held := map[string]bool{}
		for _, s := range have.ShortNames {
			held[s] = true
		}
		for _, s := range want.ShortNames {
			if held[s] {
				continue
			}
			if err := grantable(s, "", resources); err != nil {
				errs = append(errs, err)
			}
		}
		if err := utilerrors.NewAggregate(errs); err != nil {
			conflict("ShortNamesConflict", err)
		} else {
			names.ShortNames = want.ShortNames
		}
	}
	if err := grantable(want.Kind, have.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = want.Kind
	}
	if err := grantable(want.ListKind, have.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = want.ListKind
	}
	names.Categories = want.Categories

	if cond.Status == apiextensionsv1.ConditionUnknown {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}

	established := condition{Type: condEstablished, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := findCondition(crd, condEstablished); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && cond.Status == apiextensionsv1.ConditionTrue {
		established = condition{Type: condEstablished, Status: apiextensionsv1.ConditionFalse, Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return names, cond, established
}

// grantable: requested may be used when crd already holds it or nobody does.
func grantable(requested, accepted string, used map[string]bool) error {
	if requested == accepted || !used[requested] {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}
