package storage

import (
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Reads "not older than" a revision (min_resource_version): storage waits
// for etcd to reach it, as upstream's watch cache does, at most 3s, then
// 504 Too large resource version (retry after 1s).
func TestReadNotOlderThan(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 1, nil)
	cur := currentRV(t, e, prefix)
	key := prefix + "a/late"

	// Reached already: answered at once.
	start := time.Now()
	if _, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, MinResourceVersion: uint64(cur)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Get(ctx, &storagev1.GetRequest{Key: prefix + "a/o00", MinResourceVersion: uint64(cur)}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("reads of a reached revision took %s", took)
	}

	// Reached within the wait: the read sees the state as of it (a get of
	// an object created meanwhile finds it).
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("late", "a", nil, nil)})
	}()
	got, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key, MinResourceVersion: uint64(cur + 1)})
	if err != nil {
		t.Fatalf("get not older than %d: %v", cur+1, err)
	}
	if got.GetResourceVersion() < cur+1 {
		t.Fatalf("resourceVersion %d, want %d or later", got.GetResourceVersion(), cur+1)
	}
	list, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, MinResourceVersion: uint64(cur + 1)})
	if err != nil || list.GetResourceVersion() < cur+1 || len(list.GetObjects()) != 2 {
		t.Fatalf("list not older than %d: rv %d, %d objects, %v", cur+1, list.GetResourceVersion(), len(list.GetObjects()), err)
	}

	// Not reached: 504 after 3s, the revision said as the uint64 asked.
	for _, asked := range []uint64{uint64(cur + 1000), math.MaxUint64} {
		for name, read := range map[string]func() error{
			"get": func() error {
				_, err := e.client.Get(ctx, &storagev1.GetRequest{Key: prefix + "a/missing", MinResourceVersion: asked})
				return err
			},
			"list": func() error {
				_, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, MinResourceVersion: asked})
				return err
			},
		} {
			start := time.Now()
			err := read()
			took := time.Since(start)
			st := wantStatus(t, err, 504, metav1.StatusReasonTimeout, "")
			if want := regexp.MustCompile(fmt.Sprintf(`^Timeout: Too large resource version: %d, current: \d+$`, asked)); !want.MatchString(st.Message) ||
				st.Details == nil || st.Details.RetryAfterSeconds != 1 || len(st.Details.Causes) != 1 ||
				st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
				t.Fatalf("%s %d: %+v %+v", name, asked, st, st.Details)
			}
			if took < 2900*time.Millisecond || took > 6*time.Second {
				t.Fatalf("%s %d: answered after %s, want ~3s", name, asked, took)
			}
		}
	}
}
