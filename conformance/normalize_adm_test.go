package conformance

import (
	"testing"
	"time"
)

// TestNormalizeRequestScoped covers what the normaliser replaces because of
// the request it answers (a name generated from its generateName) and random
// UUIDs quoted inside messages.
func TestNormalizeRequestScoped(t *testing.T) {
	n := normalizer{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	cases := []struct {
		name, body, in, want string
	}{
		{
			name: "a name generated from the request's generateName, in an error",
			body: `{"metadata":{"generateName":"Gen_"}}`,
			in:   `{"kind":"Status","details":{"name":"Gen_6zrf2"},"message":"Token \"Gen_6zrf2\" is invalid: metadata.name: Invalid value: \"Gen_6zrf2\""}`,
			want: `{"details":{"name":"Gen_<generated>"},"kind":"Status","message":"Token \"Gen_<generated>\" is invalid: metadata.name: Invalid value: \"Gen_<generated>\""}`,
		},
		{
			name: "the generateName itself and longer names are kept",
			body: `{"metadata":{"generateName":"gen-"}}`,
			in:   `{"message":"gen-: gen-abcdefgh"}`,
			want: `{"message":"gen-: gen-abcdefgh"}`,
		},
		{
			name: "without a generateName nothing is replaced",
			body: `{"metadata":{"name":"gen-x7k2p"}}`,
			in:   `{"message":"gen-x7k2p"}`,
			want: `{"message":"gen-x7k2p"}`,
		},
		{
			name: "a random UUID inside a message",
			body: ``,
			in:   `{"message":"Precondition failed: UID in precondition: 44444444-4444-4444-4444-444444444444, UID in object meta: 03129e9f-dfad-4c2c-8419-46ed1a2f7767"}`,
			want: `{"message":"Precondition failed: UID in precondition: 44444444-4444-4444-4444-444444444444, UID in object meta: <uid>"}`,
		},
		{
			name: "a resourceVersion inside an object quoted in a message",
			body: ``,
			in:   `{"message":"patch: Invalid value: \"{\\\"metadata\\\":{\\\"resourceVersion\\\":\\\"16\\\"}}\": strict decoding error"}`,
			want: `{"message":"patch: Invalid value: \"{\\\"metadata\\\":{\\\"resourceVersion\\\":\\\"<resourceVersion>\\\"}}\": strict decoding error"}`,
		},
		{
			name: "a UUID that is a whole value under another key is kept",
			body: ``,
			in:   `{"spec":{"id":"03129e9f-dfad-4c2c-8419-46ed1a2f7767"}}`,
			want: `{"spec":{"id":"03129e9f-dfad-4c2c-8419-46ed1a2f7767"}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := n.forRequest([]byte(c.body)).JSON([]byte(c.in), nil, false)
			if !ok {
				t.Fatal("not JSON")
			}
			want, _ := normalizer{}.JSON([]byte(c.want), nil, false)
			if got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
