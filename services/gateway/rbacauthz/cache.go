package rbacauthz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// Policy is one consistent view of the RBAC objects. It is never modified
// once published: a change builds the next one.
type Policy struct {
	roles               map[string]*rbacv1.Role // <namespace>/<name>
	clusterRoles        map[string]*rbacv1.ClusterRole
	roleBindings        map[string][]*rbacv1.RoleBinding // by namespace, in name order
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	// generation changes with every change (the decision cache's key).
	generation uint64
}

// The upstream listers' not-found errors, which the rule resolver words
// in its reasons ("RBAC: clusterrole.rbac.authorization.k8s.io "x" not
// found").
var (
	roleGR        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "role"}
	clusterRoleGR = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrole"}
)

// roleRules resolves a binding's roleRef as upstream's
// GetRoleReferenceRules.
func (p *Policy) roleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, ok := p.roles[namespace+"/"+ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(roleGR, ref.Name)
		}
		return r.Rules, nil
	case "ClusterRole":
		r, ok := p.clusterRoles[ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(clusterRoleGR, ref.Name)
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// Cache keeps every Role, ClusterRole, RoleBinding and ClusterRoleBinding
// from the registry's RBACService watches, so that authorizing a request
// costs no call.
type Cache struct {
	client registryv1.RBACServiceClient
	log    *slog.Logger

	mu     sync.Mutex // serialises changes
	policy atomic.Pointer[Policy]
	// objects by resource and <namespace>/<name>, what the next Policy is
	// built from
	objects map[string]map[string]any
	synced  map[string]bool
	ready   chan struct{}
	gen     uint64
}

// resources are the watched RBAC resources.
var resources = []string{"roles", "clusterroles", "rolebindings", "clusterrolebindings"}

// NewCache returns a Cache that Run fills.
func NewCache(client registryv1.RBACServiceClient, log *slog.Logger) *Cache {
	c := &Cache{client: client, log: log, objects: map[string]map[string]any{}, synced: map[string]bool{}, ready: make(chan struct{})}
	for _, r := range resources {
		c.objects[r] = map[string]any{}
	}
	c.policy.Store(&Policy{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}, roleBindings: map[string][]*rbacv1.RoleBinding{}})
	return c
}

// Policy is the current view.
func (c *Cache) Policy() *Policy { return c.policy.Load() }

// WaitSynced waits until every watch has delivered its initial objects.
func (c *Cache) WaitSynced(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("RBAC cache not synced: %w", ctx.Err())
	}
}

// Synced reports whether every watch has delivered its initial objects.
func (c *Cache) Synced() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// Run watches the four resources until ctx ends, reconnecting with
// backoff (a reconnect starts from the objects' initial events again).
func (c *Cache) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range resources {
		wg.Go(func() { c.runOne(ctx, r) })
	}
	wg.Wait()
}

func (c *Cache) runOne(ctx context.Context, resource string) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := c.watch(ctx, resource)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug("RBAC watch ended; reconnecting", "resource", resource, "err", err, "backoff", backoff)
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

func (c *Cache) watch(ctx context.Context, resource string) error {
	stream, err := c.client.Watch(ctx, &registryv1.RBACServiceWatchRequest{
		Target:  &registryv1.RBACTarget{Resource: resource},
		Request: &registryv1.WatchRequest{SendInitialEvents: true, AllowBookmarks: true},
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", resource, err)
	}
	initial := map[string]any{}
	inInitial := true
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch %s: %w", resource, err)
		}
		switch ev.GetType() {
		case commonv1.EventType_EVENT_TYPE_BOOKMARK:
			if inInitial {
				inInitial = false
				c.replace(resource, initial)
			}
			continue
		}
		key, obj, err := decode(resource, ev.GetObject())
		if err != nil {
			c.log.Warn("RBAC watch: undecodable object", "resource", resource, "err", err)
			continue
		}
		if inInitial {
			if ev.GetType() != commonv1.EventType_EVENT_TYPE_DELETED {
				initial[key] = obj
			}
			continue
		}
		c.change(resource, key, obj, ev.GetType() == commonv1.EventType_EVENT_TYPE_DELETED)
	}
}

func decode(resource string, data []byte) (string, any, error) {
	var meta struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", nil, err
	}
	key := meta.Metadata.Namespace + "/" + meta.Metadata.Name
	var obj any
	switch resource {
	case "roles":
		obj = &rbacv1.Role{}
	case "clusterroles":
		obj = &rbacv1.ClusterRole{}
	case "rolebindings":
		obj = &rbacv1.RoleBinding{}
	default:
		obj = &rbacv1.ClusterRoleBinding{}
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return "", nil, err
	}
	return key, obj, nil
}

func (c *Cache) replace(resource string, objs map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[resource] = objs
	c.synced[resource] = true
	c.publishLocked()
	if len(c.synced) == len(resources) {
		select {
		case <-c.ready:
		default:
			close(c.ready)
		}
	}
}

func (c *Cache) change(resource, key string, obj any, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]any, len(c.objects[resource])+1)
	for k, v := range c.objects[resource] {
		m[k] = v
	}
	if deleted {
		delete(m, key)
	} else {
		m[key] = obj
	}
	c.objects[resource] = m
	c.publishLocked()
}

// publishLocked builds the next Policy from the objects.
func (c *Cache) publishLocked() {
	c.gen++
	p := &Policy{
		roles:        map[string]*rbacv1.Role{},
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		roleBindings: map[string][]*rbacv1.RoleBinding{},
		generation:   c.gen,
	}
	for k, o := range c.objects["roles"] {
		p.roles[k], _ = o.(*rbacv1.Role)
	}
	for _, o := range c.objects["clusterroles"] {
		cr, _ := o.(*rbacv1.ClusterRole)
		p.clusterRoles[cr.Name] = cr
	}
	for _, k := range sortedKeys(c.objects["rolebindings"]) {
		rb, _ := c.objects["rolebindings"][k].(*rbacv1.RoleBinding)
		p.roleBindings[rb.Namespace] = append(p.roleBindings[rb.Namespace], rb)
	}
	for _, k := range sortedKeys(c.objects["clusterrolebindings"]) {
		crb, _ := c.objects["clusterrolebindings"][k].(*rbacv1.ClusterRoleBinding)
		p.clusterRoleBindings = append(p.clusterRoleBindings, crb)
	}
	c.policy.Store(p)
}

// NewStaticPolicy is a Policy of the given objects (tests, benchmarks).
func NewStaticPolicy(roles []*rbacv1.Role, clusterRoles []*rbacv1.ClusterRole, roleBindings []*rbacv1.RoleBinding, clusterRoleBindings []*rbacv1.ClusterRoleBinding) *Policy {
	p := &Policy{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}, roleBindings: map[string][]*rbacv1.RoleBinding{}, clusterRoleBindings: clusterRoleBindings, generation: 1}
	for _, r := range roles {
		p.roles[r.Namespace+"/"+r.Name] = r
	}
	for _, r := range clusterRoles {
		p.clusterRoles[r.Name] = r
	}
	for _, b := range roleBindings {
		p.roleBindings[b.Namespace] = append(p.roleBindings[b.Namespace], b)
	}
	return p
}
