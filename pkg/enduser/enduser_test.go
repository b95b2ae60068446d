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
