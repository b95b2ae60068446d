package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objmeta"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/registry/openapi"
)

// memKV is an in-memory revisioned key-value store with watches, the
// shared core of the fake storage and registry services.
type memKV struct {
	mu   sync.Mutex
	rev  int64
	data map[string]memEntry
	subs map[int]*memSub
	next int
}

type memEntry struct {
	obj map[string]any // without resourceVersion
	rev int64
}

type memEvent struct {
	typ commonv1.EventType
	key string
	obj []byte
	rev int64
}

type memSub struct {
	prefix string
	ch     chan memEvent
}

func newMemKV() *memKV {
	return &memKV{rev: 1, data: map[string]memEntry{}, subs: map[int]*memSub{}}
}

func withRV(obj map[string]any, rev int64) []byte {
	c := deepCopyObject(obj)
	md, _ := c["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		c["metadata"] = md
	}
	md["resourceVersion"] = strconv.FormatInt(rev, 10)
	b, _ := json.Marshal(c)
	return b
}

func stripRV(data []byte) (map[string]any, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	return obj, nil
}

func (m *memKV) publishLocked(ev memEvent) {
	for _, s := range m.subs {
		if strings.HasPrefix(ev.key, s.prefix) {
			select {
			case s.ch <- ev:
			default: // slow watcher: drop (tests keep up)
			}
		}
	}
}

func (m *memKV) create(key string, data []byte, gr schema.GroupResource, name string) ([]byte, int64, error) {
	obj, err := stripRV(data)
	if err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.data[key]; ok {
		return nil, 0, kstatus.ToGRPC(apierrors.NewAlreadyExists(gr, name))
	}
	m.rev++
	m.data[key] = memEntry{obj: obj, rev: m.rev}
	out := withRV(obj, m.rev)
	m.publishLocked(memEvent{commonv1.EventType_EVENT_TYPE_ADDED, key, out, m.rev})
	return out, m.rev, nil
}

func (m *memKV) get(key string, gr schema.GroupResource, name string) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[key]
	if !ok {
		return nil, 0, kstatus.ToGRPC(apierrors.NewNotFound(gr, name))
	}
	return withRV(e.obj, e.rev), e.rev, nil
}

func (m *memKV) update(key string, data []byte, expect int64, gr schema.GroupResource, name string) ([]byte, int64, error) {
	obj, err := stripRV(data)
	if err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[key]
	if !ok {
		return nil, 0, kstatus.ToGRPC(apierrors.NewNotFound(gr, name))
	}
	if expect != 0 && expect != e.rev {
		return nil, 0, kstatus.ToGRPC(apierrors.NewConflict(gr, name, fmt.Errorf("revision %d, expected %d", e.rev, expect)))
	}
	m.rev++
	m.data[key] = memEntry{obj: obj, rev: m.rev}
	out := withRV(obj, m.rev)
	m.publishLocked(memEvent{commonv1.EventType_EVENT_TYPE_MODIFIED, key, out, m.rev})
	return out, m.rev, nil
}

func (m *memKV) delete(key, uid string, rv int64, gr schema.GroupResource, name string) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[key]
	if !ok {
		return nil, 0, kstatus.ToGRPC(apierrors.NewNotFound(gr, name))
	}
	if md, _ := e.obj["metadata"].(map[string]any); uid != "" && md["uid"] != uid || rv != 0 && rv != e.rev {
		return nil, 0, kstatus.ToGRPC(apierrors.NewConflict(gr, name, fmt.Errorf("precondition failed")))
	}
	m.rev++
	delete(m.data, key)
	out := withRV(e.obj, m.rev)
	m.publishLocked(memEvent{commonv1.EventType_EVENT_TYPE_DELETED, key, out, m.rev})
	return out, m.rev, nil
}

func matches(obj map[string]any, ls, fs string) (bool, error) {
	md, _ := obj["metadata"].(map[string]any)
	if ls != "" {
		sel, err := labels.Parse(ls)
		if err != nil {
			return false, err
		}
		set := labels.Set{}
		if l, ok := md["labels"].(map[string]any); ok {
			for k, v := range l {
				set[k], _ = v.(string)
			}
		}
		if !sel.Matches(set) {
			return false, nil
		}
	}
	if fs != "" {
		sel, err := fields.ParseSelector(fs)
		if err != nil {
			return false, err
		}
		set := fields.Set{}
		set["metadata.name"], _ = md["name"].(string)
		set["metadata.namespace"], _ = md["namespace"].(string)
		if spec, ok := obj["spec"].(map[string]any); ok {
			for k, v := range spec {
				set["spec."+k] = fmt.Sprint(v)
			}
		}
		if !sel.Matches(set) {
			return false, nil
		}
	}
	return true, nil
}

func (m *memKV) list(prefix string, o *commonv1.ListOptions) ([][]byte, int64, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) && k > o.GetContinueToken() {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out [][]byte
	cont := ""
	for _, k := range keys {
		e := m.data[k]
		ok, err := matches(e.obj, o.GetLabelSelector(), o.GetFieldSelector())
		if err != nil {
			return nil, 0, "", kstatus.ToGRPC(apierrors.NewBadRequest(err.Error()))
		}
		if !ok {
			continue
		}
		if o.GetLimit() > 0 && int64(len(out)) == o.GetLimit() {
			cont = keyOf(out[len(out)-1], prefix, m)
			break
		}
		out = append(out, withRV(e.obj, e.rev))
	}
	return out, m.rev, cont, nil
}

// keyOf finds the key of a listed object (for the continue token).
func keyOf(obj []byte, prefix string, m *memKV) string {
	name, ns := itemNameNamespace(obj)
	for k := range m.data {
		if strings.HasPrefix(k, prefix) && (strings.HasSuffix(k, "/"+ns+"/"+name) || ns == "" && strings.HasSuffix(k, "/"+name)) {
			return k
		}
	}
	return ""
}

type watchFn func(typ commonv1.EventType, obj []byte, rev int64) error

func (m *memKV) watch(ctx context.Context, prefix string, rev int64, initial bool, ls, fs string, send watchFn) error {
	m.mu.Lock()
	sub := &memSub{prefix: prefix, ch: make(chan memEvent, 1024)}
	id := m.next
	m.next++
	m.subs[id] = sub
	var init []memEvent
	start := m.rev
	if initial {
		var keys []string
		for k := range m.data {
			if strings.HasPrefix(k, prefix) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			e := m.data[k]
			if ok, _ := matches(e.obj, ls, fs); ok {
				init = append(init, memEvent{commonv1.EventType_EVENT_TYPE_ADDED, k, withRV(e.obj, e.rev), e.rev})
			}
		}
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}()
	if rev != 0 && rev < start-100 {
		return kstatus.ToGRPC(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rev, start-100)))
	}
	if initial {
		for _, ev := range init {
			if err := send(ev.typ, ev.obj, ev.rev); err != nil {
				return err
			}
		}
		if err := send(commonv1.EventType_EVENT_TYPE_BOOKMARK, nil, start); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-sub.ch:
			if ev.rev <= rev {
				continue
			}
			obj, _ := decodeObject(ev.obj)
			if ok, _ := matches(obj, ls, fs); !ok {
				continue
			}
			if err := send(ev.typ, ev.obj, ev.rev); err != nil {
				return err
			}
		}
	}
}

// fakeStorage is StorageService over memKV.
type fakeStorage struct {
	storagev1.UnimplementedStorageServiceServer
	kv *memKV
}

var anyGR = schema.GroupResource{Resource: "objects"}

func (f *fakeStorage) Create(_ context.Context, r *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	o, rv, err := f.kv.create(r.GetKey(), r.GetObject(), anyGR, r.GetKey())
	return &storagev1.CreateResponse{Object: o, ResourceVersion: rv}, err
}

func (f *fakeStorage) Get(_ context.Context, r *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	o, rv, err := f.kv.get(r.GetKey(), anyGR, r.GetKey())
	return &storagev1.GetResponse{Object: o, ResourceVersion: rv}, err
}

func (f *fakeStorage) List(_ context.Context, r *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	objs, rv, cont, err := f.kv.list(r.GetPrefix(), r.GetOptions())
	return &storagev1.ListResponse{Objects: objs, ResourceVersion: rv, ContinueToken: cont}, err
}

func (f *fakeStorage) Update(_ context.Context, r *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	o, rv, err := f.kv.update(r.GetKey(), r.GetObject(), r.GetExpectedResourceVersion(), anyGR, r.GetKey())
	return &storagev1.UpdateResponse{Object: o, ResourceVersion: rv}, err
}

func (f *fakeStorage) Delete(_ context.Context, r *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	o, rv, err := f.kv.delete(r.GetKey(), r.GetPreconditionUid(), r.GetPreconditionResourceVersion(), anyGR, r.GetKey())
	return &storagev1.DeleteResponse{Object: o, ResourceVersion: rv}, err
}

func (f *fakeStorage) Watch(r *storagev1.WatchRequest, s storagev1.StorageService_WatchServer) error {
	return f.kv.watch(s.Context(), r.GetPrefix(), r.GetResourceVersion(), r.GetSendInitialEvents(), r.GetLabelSelector(), r.GetFieldSelector(),
		func(t commonv1.EventType, obj []byte, rev int64) error {
			return s.Send(&storagev1.WatchResponse{Type: t, Object: obj, ResourceVersion: rev})
		})
}

// fakeRegistry keeps CRDs in memKV and establishes them on create.
type fakeRegistry struct {
	registryv1.UnimplementedRegistryServiceServer
	kv *memKV
}

const crdPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

func (f *fakeRegistry) Create(_ context.Context, r *registryv1.CreateRequest) (*registryv1.CreateResponse, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(r.GetObject(), crd); err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewBadRequest(err.Error()))
	}
	crd.UID = types.UID(fmt.Sprintf("uid-%s", crd.Name))
	crd.Generation = 1
	crd.CreationTimestamp = metav1.Now()
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
		{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
		{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
	}
	data, _ := json.Marshal(crd)
	o, _, err := f.kv.create(crdPrefix+crd.Name, data, crdGR, crd.Name)
	return &registryv1.CreateResponse{Object: o}, err
}

func (f *fakeRegistry) Get(_ context.Context, r *registryv1.GetRequest) (*registryv1.GetResponse, error) {
	o, _, err := f.kv.get(crdPrefix+r.GetName(), crdGR, r.GetName())
	return &registryv1.GetResponse{Object: o}, err
}

func (f *fakeRegistry) List(_ context.Context, r *registryv1.ListRequest) (*registryv1.ListResponse, error) {
	objs, rv, cont, err := f.kv.list(crdPrefix, r.GetOptions())
	return &registryv1.ListResponse{Objects: objs, ResourceVersion: rv, ContinueToken: cont}, err
}

func (f *fakeRegistry) Delete(_ context.Context, r *registryv1.DeleteRequest) (*registryv1.DeleteResponse, error) {
	o, _, err := f.kv.delete(crdPrefix+r.GetName(), r.GetPreconditionUid(), 0, crdGR, r.GetName())
	return &registryv1.DeleteResponse{Object: o}, err
}

func (f *fakeRegistry) Watch(r *registryv1.WatchRequest, s registryv1.RegistryService_WatchServer) error {
	return f.kv.watch(s.Context(), crdPrefix, r.GetResourceVersion(), r.GetSendInitialEvents(), r.GetLabelSelector(), r.GetFieldSelector(),
		func(t commonv1.EventType, obj []byte, rev int64) error {
			return s.Send(&registryv1.WatchResponse{Type: t, Object: obj, ResourceVersion: rev})
		})
}

func (f *fakeRegistry) GetDiscovery(_ context.Context, r *registryv1.GetDiscoveryRequest) (*registryv1.GetDiscoveryResponse, error) {
	return &registryv1.GetDiscoveryResponse{ContentType: "application/json", Body: []byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)}, nil
}

// fakeValidator passes objects through, except: spec.replicas > 10 is a
// field error, and spec.unknown is pruned with an unknown-field warning.
type fakeValidator struct {
	validatorv1.UnimplementedValidatorServiceServer
	mu    sync.Mutex
	calls []*validatorv1.AdmitRequest
}

func (f *fakeValidator) Admit(_ context.Context, r *validatorv1.AdmitRequest) (*validatorv1.AdmitResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, r)
	f.mu.Unlock()
	obj, err := decodeObject(r.GetObject())
	if err != nil {
		return nil, err
	}
	resp := &validatorv1.AdmitResponse{}
	spec, _ := obj["spec"].(map[string]any)
	if n, ok := spec["replicas"].(int64); ok && n > 10 {
		resp.Causes = append(resp.Causes, &commonv1.StatusCause{Reason: "FieldValueInvalid", Field: "spec.replicas",
			Message: fmt.Sprintf("Invalid value: %d: spec.replicas in body should be less than or equal to 10", n)})
	}
	if s, ok := spec["cronSpec"]; ok {
		if _, isStr := s.(string); !isStr {
			resp.Causes = append(resp.Causes, &commonv1.StatusCause{Reason: "FieldValueTypeInvalid", Field: "spec.cronSpec",
				Message: fmt.Sprintf("Invalid value: %q: spec.cronSpec in body must be of type string: %q", "number", "number")})
		}
	}
	if _, ok := spec["unknown"]; ok {
		delete(spec, "unknown")
		resp.Warnings = append(resp.Warnings, `unknown field "spec.unknown"`)
	}
	if len(resp.Causes) == 0 {
		resp.Object, _ = json.Marshal(obj)
	}
	return resp, nil
}

// fakeConverter rewrites apiVersion and marks every object it converted.
type fakeConverter struct {
	converterv1.UnimplementedConverterServiceServer
	mu    sync.Mutex
	calls []*converterv1.ConvertRequest
}

func (f *fakeConverter) Convert(_ context.Context, r *converterv1.ConvertRequest) (*converterv1.ConvertResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, r)
	f.mu.Unlock()
	out := &converterv1.ConvertResponse{}
	for _, o := range r.GetObjects() {
		obj, err := decodeObject(o)
		if err != nil {
			return nil, err
		}
		obj["apiVersion"] = r.GetDesiredApiVersion()
		md := objmeta.Meta(obj)
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann["converted-to"] = r.GetDesiredApiVersion()
		md["annotations"] = ann
		b, _ := json.Marshal(obj)
		out.Objects = append(out.Objects, b)
	}
	return out, nil
}

func (f *fakeConverter) requests() []*converterv1.ConvertRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*converterv1.ConvertRequest(nil), f.calls...)
}

func (f *fakeValidator) requests() []*validatorv1.AdmitRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*validatorv1.AdmitRequest(nil), f.calls...)
}

// fakeBackends serves the four fakes on in-process listeners.
type fakeBackends struct {
	storage   *fakeStorage
	registry  *fakeRegistry
	validator *fakeValidator
	converter *fakeConverter
	addr      string
}

var fakeSeq struct {
	sync.Mutex
	n int
}

func startFakes(t *testing.T) *fakeBackends {
	t.Helper()
	fakeSeq.Lock()
	fakeSeq.n++
	name := fmt.Sprintf("gateway-test-fakes-%d-%d", fakeSeq.n, time.Now().UnixNano())
	fakeSeq.Unlock()
	fb := &fakeBackends{
		storage:   &fakeStorage{kv: newMemKV()},
		registry:  &fakeRegistry{kv: newMemKV()},
		validator: &fakeValidator{},
		converter: &fakeConverter{},
		addr:      "inproc://" + name,
	}
	srv := grpcx.NewServer()
	storagev1.RegisterStorageServiceServer(srv, fb.storage)
	registryv1.RegisterRegistryServiceServer(srv, fb.registry)
	registryv1.RegisterOpenAPIServiceServer(srv, openapi.NewServer(openapi.New()))
	validatorv1.RegisterValidatorServiceServer(srv, fb.validator)
	converterv1.RegisterConverterServiceServer(srv, fb.converter)
	lis := grpcx.ListenInProcess(name)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return fb
}
