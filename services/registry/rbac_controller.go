package registry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// rbacController is what kube-apiserver runs for RBAC on the leader: the
// bootstrap policy (the default ClusterRoles and ClusterRoleBindings,
// created when missing, as its rbac/bootstrap-roles post-start hook) and
// the ClusterRole aggregation controller (the rules of a ClusterRole with
// an aggregationRule are the union of the rules of the ClusterRoles its
// selectors match).
type rbacController struct {
	srv *rbacServer
	log *slog.Logger
}

// aggregationManager is the field manager of the aggregation
// controller's writes, as kube-controller-manager's.
const aggregationManager = "clusterrole-aggregation-controller"

func (c *rbacController) lead(ctx context.Context) {
	for ctx.Err() == nil {
		err := c.ensureBootstrap(ctx)
		if err == nil {
			break
		}
		c.log.Warn("creating the RBAC bootstrap policy", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.followClusterRoles(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug("ClusterRole watch ended; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// bootstrapLabels and bootstrapAnnotations mark the bootstrap policy as
// kube-apiserver marks it.
var (
	bootstrapLabels      = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	bootstrapAnnotations = map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}
)

func bootstrapMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: bootstrapLabels, Annotations: bootstrapAnnotations}
}

func groupSubjects(groups ...string) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, g := range groups {
		out = append(out, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	return out
}

// aggregateTo is the aggregationRule of admin, edit and view.
func aggregateTo(role string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + role: "true"}}}}
}

// bootstrapClusterRoles is the part of kube-apiserver's bootstrap policy
// crdplane serves: cluster-admin, the discovery, basic-user and
// public-info-viewer roles every authenticated (or anonymous) caller
// needs, and the user-facing admin, edit and view roles as aggregations
// (with the rules of crdplane's own resources aggregated into them).
func bootstrapClusterRoles() []*rbacv1.ClusterRole {
	read := []string{"get", "list", "watch"}
	write := []string{"create", "delete", "deletecollection", "patch", "update"}
	agg := func(name string, into ...string) metav1.ObjectMeta {
		m := bootstrapMeta(name)
		m.Labels = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
		for _, r := range into {
			m.Labels["rbac.authorization.k8s.io/aggregate-to-"+r] = "true"
		}
		return m
	}
	return []*rbacv1.ClusterRole{
		{ObjectMeta: bootstrapMeta("cluster-admin"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
			{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
		}},
		{ObjectMeta: bootstrapMeta("system:discovery"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}},
		}},
		{ObjectMeta: bootstrapMeta("system:basic-user"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
		}},
		{ObjectMeta: bootstrapMeta("system:public-info-viewer"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}},
		}},
		{ObjectMeta: bootstrapMeta("admin"), AggregationRule: aggregateTo("admin")},
		{ObjectMeta: bootstrapMeta("edit"), AggregationRule: aggregateTo("edit")},
		{ObjectMeta: bootstrapMeta("view"), AggregationRule: aggregateTo("view")},
		{ObjectMeta: agg("system:aggregate-to-admin", "admin"), Rules: []rbacv1.PolicyRule{
			{Verbs: slices.Concat(read, write), APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings", "roles"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"localsubjectaccessreviews"}},
		}},
		{ObjectMeta: agg("system:aggregate-to-view", "admin", "edit", "view"), Rules: []rbacv1.PolicyRule{
			{Verbs: read, APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status"}},
		}},
	}
}

func bootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(role string, groups ...string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: bootstrapMeta(role),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: groupSubjects(groups...)}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("cluster-admin", "system:masters"),
		bind("system:discovery", "system:authenticated"),
		bind("system:basic-user", "system:authenticated"),
		bind("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
	}
}

// ensureBootstrap creates the bootstrap objects that are missing (what
// exists, changed or not, is left as it is).
func (c *rbacController) ensureBootstrap(ctx context.Context) error {
	var objs []rbacObject
	for _, r := range bootstrapClusterRoles() {
		objs = append(objs, r)
	}
	for _, b := range bootstrapClusterRoleBindings() {
		objs = append(objs, b)
	}
	for _, obj := range objs {
		k := rbacKinds["clusterroles"]
		if _, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
			k = rbacKinds["clusterrolebindings"]
		}
		if _, err := c.srv.get(ctx, k, "", obj.GetName()); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		k.defaults(obj)
		tracked, err := k.trackUpdate(nil, obj, controllerManager)
		if err != nil {
			return err
		}
		if _, err := c.srv.create(ctx, k, tracked, false); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		c.log.Info("created RBAC bootstrap object", "kind", k.kind, "name", obj.GetName())
	}
	return nil
}

// followClusterRoles aggregates on every change of a ClusterRole.
func (c *rbacController) followClusterRoles(ctx context.Context) error {
	k := rbacKinds["clusterroles"]
	ws, err := c.srv.client.Watch(ctx, &storagev1.WatchRequest{Prefix: k.prefix(""), SendInitialEvents: true, AllowBookmarks: true})
	if err != nil {
		return err
	}
	for {
		if _, err := ws.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := c.aggregate(ctx); err != nil {
			c.log.Warn("ClusterRole aggregation", "err", err)
		}
	}
}

// aggregate sets the rules of every aggregating ClusterRole to the union
// of the rules of the ClusterRoles its selectors match (in name order,
// each rule once), as kube-controller-manager's aggregation controller.
func (c *rbacController) aggregate(ctx context.Context) error {
	k := rbacKinds["clusterroles"]
	resp, err := c.srv.client.List(ctx, &storagev1.ListRequest{Prefix: k.prefix("")})
	if err != nil {
		return err
	}
	var all []*rbacv1.ClusterRole
	for _, data := range resp.GetObjects() {
		obj, err := k.decodeStored(data, 0)
		if err != nil {
			return err
		}
		all = append(all, obj.(*rbacv1.ClusterRole))
	}
	slices.SortFunc(all, func(a, b *rbacv1.ClusterRole) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	var errs []error
	for _, cr := range all {
		if cr.AggregationRule == nil {
			continue
		}
		rules := aggregatedRules(cr, all)
		if apiequality.Semantic.DeepEqual(rules, cr.Rules) || (len(rules) == 0 && len(cr.Rules) == 0) {
			continue
		}
		updated := cr.DeepCopy()
		updated.Rules = rules
		tracked, err := k.trackUpdate(cr, updated, aggregationManager)
		if err == nil {
			_, err = c.srv.update(ctx, k, tracked, cr, false, false)
		}
		if err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func aggregatedRules(cr *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) []rbacv1.PolicyRule {
	var selectors []labels.Selector
	for _, s := range cr.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			continue
		}
		selectors = append(selectors, sel)
	}
	rules := []rbacv1.PolicyRule{}
	for _, other := range all {
		if other.Name == cr.Name {
			continue
		}
		set := labels.Set(other.Labels)
		if !slices.ContainsFunc(selectors, func(sel labels.Selector) bool { return sel.Matches(set) }) {
			continue
		}
		for _, r := range other.Rules {
			if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(have, r) }) {
				rules = append(rules, r)
			}
		}
	}
	return rules
}
