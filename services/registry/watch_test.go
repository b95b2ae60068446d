package registry

import (
	"context"
	"testing"
	"time"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

func TestWatch(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "firsts", "First", func(o map[string]any) {
		o["metadata"].(map[string]any)["labels"] = map[string]any{"watch": group}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := testRegistry.Watch(ctx, &registryv1.WatchRequest{LabelSelector: "watch=" + group, SendInitialEvents: true, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	initialDone := false
	next := func() *registryv1.WatchResponse {
		t.Helper()
		for {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("recv: %v", err)
			}
			// periodic bookmarks after the initial one are not interesting here
			if ev.GetType() == commonv1.EventType_EVENT_TYPE_BOOKMARK && initialDone {
				continue
			}
			return ev
		}
	}
	ev := next()
	if ev.GetType() != commonv1.EventType_EVENT_TYPE_ADDED || decodeT(t, ev.GetObject()).Name != "firsts."+group {
		t.Fatalf("first event: %v %s", ev.GetType(), ev.GetObject())
	}
	ev = next()
	if ev.GetType() != commonv1.EventType_EVENT_TYPE_BOOKMARK || ev.GetResourceVersion() == 0 {
		t.Fatalf("expected the initial-events BOOKMARK, got %v", ev.GetType())
	}
	initialDone = true

	createT(t, crdJSON(group, "seconds", "Second", func(o map[string]any) {
		o["metadata"].(map[string]any)["labels"] = map[string]any{"watch": group}
	}))
	sawAdded, sawEstablished := false, false
	for !sawEstablished {
		ev := next()
		switch ev.GetType() {
		case commonv1.EventType_EVENT_TYPE_ADDED:
			sawAdded = decodeT(t, ev.GetObject()).Name == "seconds."+group
		case commonv1.EventType_EVENT_TYPE_MODIFIED:
			crd := decodeT(t, ev.GetObject())
			sawEstablished = crd.Name == "seconds."+group && conditionTrue(crd, condEstablished)
		}
	}
	if !sawAdded {
		t.Error("no ADDED event for the new CRD")
	}
}
