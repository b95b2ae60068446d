package registry

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestControllersFollowLeadership(t *testing.T) {
	inf := newInformer(nil, slog.Default())
	inf.replace(map[string]*CRD{})
	c := newControllers(slog.Default(), inf, nil, 1, cleanupConfig{})
	leading := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sessions != nil
	}
	if leading() {
		t.Fatal("controllers run before leading")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.lead(ctx); close(done) }()
	eventually(t, time.Second, "leading", leading)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("controllers did not stop when leadership ended")
	}
	if leading() {
		t.Error("controllers still queued after leadership ended")
	}
}
