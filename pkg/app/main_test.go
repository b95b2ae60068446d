package app

import (
	"context"
	"errors"
	"flag"
	"testing"
)

func TestBinaryCheckFlags(t *testing.T) {
	var built bool
	var custom string
	b := Binary{
		Name: "test", GRPCAddr: "127.0.0.1:0",
		RegisterFlags: func(fs *flag.FlagSet) { fs.StringVar(&custom, "custom", "", "") },
		New: func(context.Context) (Service, error) {
			built = true
			return nil, errors.New("not reached")
		},
	}
	if err := b.Run([]string{"--check-flags", "--custom", "x", "--grpc-listen", ":1"}); err != nil {
		t.Fatal(err)
	}
	if built || custom != "x" {
		t.Fatalf("built=%v custom=%q", built, custom)
	}
	if err := b.Run([]string{"--check-flags", "stray"}); err == nil {
		t.Fatal("stray argument accepted")
	}
	want := errors.New("boom")
	b.New = func(context.Context) (Service, error) { return nil, want }
	if err := b.Run([]string{"--http-listen", ""}); !errors.Is(err, want) {
		t.Fatalf("New's error: %v", err)
	}
}

func TestBinaryValidate(t *testing.T) {
	var addr string
	built := false
	b := Binary{
		Name: "test", GRPCAddr: "127.0.0.1:0",
		RegisterFlags: func(fs *flag.FlagSet) { fs.StringVar(&addr, "peer-addr", "localhost:1", "") },
		Validate: func() error {
			if addr == "" {
				return errors.New("--peer-addr is required")
			}
			return nil
		},
		New: func(context.Context) (Service, error) {
			built = true
			return nil, errors.New("not reached")
		},
	}
	// A missing required address fails --check-flags and the start.
	for _, args := range [][]string{{"--check-flags", "--peer-addr="}, {"--peer-addr="}} {
		if err := b.Run(args); err == nil || err.Error() != "--peer-addr is required" {
			t.Errorf("%q: %v", args, err)
		}
	}
	if built {
		t.Fatal("built without its required address")
	}
	if err := b.Run([]string{"--check-flags"}); err != nil {
		t.Fatal(err)
	}
	fs := b.FlagSet()
	for _, f := range []string{"grpc-listen", "http-listen", "log-format", "log-level", "check-flags", "peer-addr"} {
		if fs.Lookup(f) == nil {
			t.Errorf("no --%s", f)
		}
	}
}

type runner struct {
	ran chan struct{}
}

func (runner) Ready() error { return nil }
func (runner) Close() error { return nil }
func (r runner) Run(context.Context) error {
	close(r.ran)
	return errors.New("stopped")
}

func TestBinaryRunner(t *testing.T) {
	r := runner{ran: make(chan struct{})}
	b := Binary{Name: "test", New: func(context.Context) (Service, error) { return r, nil }}
	if b.FlagSet().Lookup("grpc-listen") != nil {
		t.Fatal("a runner has no gRPC server")
	}
	if err := b.Run([]string{"--http-listen=127.0.0.1:0"}); err == nil || err.Error() != "stopped" {
		t.Fatalf("Run: %v", err)
	}
	<-r.ran
}
