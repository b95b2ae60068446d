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
	if err := b.run([]string{"--check-flags", "--custom", "x", "--grpc-listen", ":1"}); err != nil {
		t.Fatal(err)
	}
	if built || custom != "x" {
		t.Fatalf("built=%v custom=%q", built, custom)
	}
	if err := b.run([]string{"--check-flags", "stray"}); err == nil {
		t.Fatal("stray argument accepted")
	}
	want := errors.New("boom")
	b.New = func(context.Context) (Service, error) { return nil, want }
	if err := b.run([]string{"--http-listen", ""}); !errors.Is(err, want) {
		t.Fatalf("New's error: %v", err)
	}
}
