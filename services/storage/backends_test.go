package storage

import (
	"context"
	"errors"
	"flag"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/storage/etcdtest"
)

func TestParseEtcdOverrides(t *testing.T) {
	gr := func(g, r string) schema.GroupResource { return schema.GroupResource{Group: g, Resource: r} }
	tests := []struct {
		in   string
		want []EtcdOverride
		err  bool
	}{
		{in: "", want: nil},
		{in: "stable.example.com/crontabs#http://a:2379", want: []EtcdOverride{{gr("stable.example.com", "crontabs"), []string{"http://a:2379"}}}},
		{in: "stable.example.com/*#http://a:2379;http://b:2379, /namespaces#https://c:2379",
			want: []EtcdOverride{
				{gr("stable.example.com", "*"), []string{"http://a:2379", "http://b:2379"}},
				{gr("", "namespaces"), []string{"https://c:2379"}},
			}},
		{in: "stable.example.com#http://a:2379", err: true},
		{in: "stable.example.com/crontabs", err: true},
		{in: "a/b/c#http://a:2379", err: true},
		{in: "a/#http://a:2379", err: true},
		{in: "a/b#http://a:2379;", err: true},
		{in: "a/b#x#y", err: true},
	}
	for _, tt := range tests {
		got, err := ParseEtcdOverrides(tt.in)
		if tt.err {
			if !errors.Is(err, errOverridesInvalid) {
				t.Errorf("%q: error %v, want %v", tt.in, err, errOverridesInvalid)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestOverridesFlag(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--etcd-servers-overrides=a.example.com/*#http://a:2379", "--etcd-servers-overrides=b.example.com/bs#http://b:2379,c.example.com/cs#http://c:2379"}); err != nil {
		t.Fatal(err)
	}
	if len(c.EtcdServersOverrides) != 3 || c.EtcdServersOverrides[2].String() != "c.example.com/cs#http://c:2379" {
		t.Fatalf("overrides %v", c.EtcdServersOverrides)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--etcd-servers-overrides=a.example.com/*#http://x:2379"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || err.Error() != "--etcd-servers-overrides: a.example.com/* is given twice" {
		t.Fatalf("Validate: %v", err)
	}
}

// TestEtcdOverrides routes a group and one resource of another group to a
// second etcd cluster, stops that cluster, shows that the other groups keep
// serving reads, writes and watches while only the routed resources fail,
// and that the routed resources come back, their data and their watches
// intact, when the cluster returns.
func TestEtcdOverrides(t *testing.T) {
	second := etcdtest.StartMember(t)
	e := newEnv(t, func(c *Config) {
		c.EtcdDialTimeout = 2 * time.Second
		c.EtcdServersOverrides = []EtcdOverride{
			{Resource: schema.GroupResource{Group: "isolated.example.com", Resource: "*"}, Endpoints: []string{second.Endpoint}},
			{Resource: schema.GroupResource{Group: "mixed.example.com", Resource: "widgets"}, Endpoints: []string{second.Endpoint}},
		}
	})
	if n := len(e.svc.router.overrides); n != 1 {
		t.Fatalf("%d override clusters, want 1 (two overrides name the same servers)", n)
	}
	direct, err := clientv3.New(clientv3.Config{Endpoints: []string{second.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := ctxT(t)

	const (
		isolated = "/registry/isolated.example.com/crontabs/default/"
		widgets  = "/registry/mixed.example.com/widgets/default/"
		gadgets  = "/registry/mixed.example.com/gadgets/default/"
		mainCRs  = "/registry/main.example.com/crontabs/default/"
		crds     = "/registry/apiextensions.k8s.io/customresourcedefinitions/"
	)
	create := func(ctx context.Context, prefix, name string) (*storagev1.CreateResponse, error) {
		return e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + name, Object: object(name, "default", nil, nil)})
	}
	for _, p := range []string{isolated, widgets, gadgets, mainCRs} {
		if _, err := create(ctx, p, "a"); err != nil {
			t.Fatalf("create %sa: %v", p, err)
		}
	}
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: crds + "crontabs.isolated.example.com",
		Object: []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crontabs.isolated.example.com","uid":"u1"}}`)}); err != nil {
		t.Fatal(err)
	}
	// Each key is in its cluster, and only there.
	for key, onSecond := range map[string]bool{isolated + "a": true, widgets + "a": true, gadgets + "a": false, mainCRs + "a": false, crds + "crontabs.isolated.example.com": false} {
		s, err := direct.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.svc.Client().Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Count == 1 && m.Count == 0; got != onSecond || s.Count+m.Count != 1 {
			t.Errorf("%s: %d on the override's cluster, %d on the main one; want it on the override's: %v", key, s.Count, m.Count, onSecond)
		}
	}

	isoRV := currentRV(t, e, isolated)
	mainRV := currentRV(t, e, mainCRs)
	isoWatch := startWatch(t, e, &storagev1.WatchRequest{Prefix: isolated, ResourceVersion: isoRV})
	mainWatch := startWatch(t, e, &storagev1.WatchRequest{Prefix: mainCRs, ResourceVersion: mainRV})

	second.Stop()

	// The other groups serve reads, writes and watches.
	if _, err := create(ctx, mainCRs, "b"); err != nil {
		t.Fatalf("create on the main cluster while the override's is down: %v", err)
	}
	mainWatch.expect("EVENT_TYPE_ADDED b")
	if _, err := create(ctx, gadgets, "b"); err != nil {
		t.Fatal(err)
	}
	list, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: mainCRs})
	if err != nil || len(list.Objects) != 2 {
		t.Fatalf("list on the main cluster: %v, %v", list, err)
	}
	if _, err := e.client.Get(ctx, &storagev1.GetRequest{Key: crds + "crontabs.isolated.example.com"}); err != nil {
		t.Fatalf("the CRD of the isolated group is on the main cluster: %v", err)
	}
	if err := e.svc.Ready(); err != nil {
		t.Fatalf("Ready with an override's cluster down: %v", err)
	}
	// The routed resources fail within the caller's deadline; nothing is
	// written.
	for _, p := range []string{isolated, widgets} {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := create(short, p, "b")
		cancel()
		if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
			t.Fatalf("create %sb with its cluster down: %v", p, err)
		}
	}

	second.Start()

	// Back: the data is there, the watch opened before the outage goes on,
	// writes succeed.
	got, err := e.client.Get(ctx, &storagev1.GetRequest{Key: isolated + "a"})
	if err != nil || meta(t, got.Object).Name != "a" {
		t.Fatalf("get after the cluster returned: %v", err)
	}
	if _, err := create(ctx, isolated, "c"); err != nil {
		t.Fatal(err)
	}
	isoWatch.expect("EVENT_TYPE_ADDED c")
	if _, err := create(ctx, widgets, "c"); err != nil {
		t.Fatal(err)
	}
	list, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: isolated, Options: &commonv1.ListOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	if n := names(t, list.Objects); !reflect.DeepEqual(n, []string{"a", "c"}) {
		t.Fatalf("isolated objects %v, want [a c]", n)
	}
}

func TestRouterPrecedence(t *testing.T) {
	mainB, groupB, resB := &backend{name: "main"}, &backend{name: "group"}, &backend{name: "resource"}
	r := router{
		main:      mainB,
		groups:    map[string]*backend{"a.example.com": groupB},
		resources: map[schema.GroupResource]*backend{{Group: "a.example.com", Resource: "special"}: resB, {Group: "", Resource: "namespaces"}: resB},
		overrides: []*backend{groupB, resB},
	}
	for prefix, want := range map[string]*backend{
		"/registry/a.example.com/things/":                           groupB,
		"/registry/a.example.com/special/ns/":                       resB,
		"/registry/b.example.com/things/":                           mainB,
		"/registry/namespaces/":                                     resB,
		"/registry/roles/default/":                                  mainB,
		"/registry/apiextensions.k8s.io/customresourcedefinitions/": mainB,
		"/registry/a.example.com.other/things/":                     mainB,
	} {
		if got := r.forResource(prefixResource(prefix)); got != want {
			t.Errorf("%s: backend %s, want %s", prefix, got.name, want.name)
		}
	}
}
