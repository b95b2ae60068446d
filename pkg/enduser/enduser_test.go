package enduser

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestRoundTrip: what the gateway puts in outgoing metadata is what a
// service reads from incoming metadata, whatever the characters; a user
// set again replaces the first.
func TestRoundTrip(t *testing.T) {
	for _, u := range []User{
		{Name: "alice", Groups: []string{"dev", "system:authenticated"}},
		{Name: "system:serviceaccount:ns:sa", UID: "1-2", Groups: []string{"a b", "ç,d"}, Extra: map[string][]string{"scopes.example.com/x=y": {"r w", "ü"}}},
	} {
		ctx := NewOutgoingContext(context.Background(), User{Name: "first", Groups: []string{"old"}})
		ctx = NewOutgoingContext(ctx, u)
		md, _ := metadata.FromOutgoingContext(ctx)
		for k, vs := range md {
			for _, v := range vs {
				for _, c := range v {
					if c < 0x20 || c > 0x7e {
						t.Fatalf("%s: %q is not printable ASCII", k, v)
					}
				}
			}
		}
		got := FromIncomingContext(metadata.NewIncomingContext(context.Background(), md))
		if !reflect.DeepEqual(got, u) {
			t.Errorf("got %+v, want %+v", got, u)
		}
	}
	if u := FromIncomingContext(context.Background()); !u.Empty() {
		t.Errorf("no metadata: %+v", u)
	}
}

func TestPropagate(t *testing.T) {
	u := User{Name: "alice", UID: "1", Groups: []string{"devs"}}
	// What a server sees of a call made with u.
	out, _ := metadata.FromOutgoingContext(NewOutgoingContext(context.Background(), u))
	in := metadata.NewIncomingContext(context.Background(), out)
	got, _ := metadata.FromOutgoingContext(Propagate(in))
	if got.Get(KeyName)[0] != "alice" || got.Get(KeyGroups)[0] != "devs" {
		t.Fatalf("propagated %v", got)
	}
	// A user set for the outgoing call wins.
	bob := NewOutgoingContext(in, User{Name: "bob"})
	if got, _ := metadata.FromOutgoingContext(Propagate(bob)); got.Get(KeyName)[0] != "bob" {
		t.Fatalf("replaced the outgoing user: %v", got)
	}
	// Nothing incoming: unchanged.
	if ctx := context.Background(); Propagate(ctx) != ctx {
		t.Fatal("a context without an incoming user changed")
	}
}
