package kubewire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The files of testdata/upstream are upstream's answers (bin/
// apiextensions-upstream, v0.33.13) to the same read in JSON and in
// protobuf: the protobuf Encoder's output from the JSON must be upstream's
// protobuf, byte for byte.

func readUpstream(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/upstream/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type jsonList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ListMeta          `json:"metadata"`
	Items      []json.RawMessage `json:"items"`
}

func (l jsonList) items() [][]byte {
	out := make([][]byte, len(l.Items))
	for i, it := range l.Items {
		out[i] = it
	}
	return out
}

func TestGoldenUpstreamObjects(t *testing.T) {
	for _, tc := range []struct{ json, pb string }{
		{"crd.json", "crd.pb"},
		{"group.json", "group.pb"},
		{"resources.json", "resources.pb"},
		{"cr-pom.json", "cr-pom.pb"},
		{"cr-poml.json", "cr-poml.pb"},
		{"crdlist.json", "crdlist.pb"},
	} {
		t.Run(tc.json, func(t *testing.T) {
			got, err := NewEncoder(EncoderConfig{}).Object(readUpstream(t, tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if want := readUpstream(t, tc.pb); !bytes.Equal(got, want) {
				t.Fatalf("differs from upstream's protobuf:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestGoldenUpstreamLists(t *testing.T) {
	for _, tc := range []struct{ json, pb string }{
		{"crdlist.json", "crdlist.pb"},
		{"cr-poml.json", "cr-poml.pb"},
	} {
		t.Run(tc.json, func(t *testing.T) {
			var l jsonList
			if err := json.Unmarshal(readUpstream(t, tc.json), &l); err != nil {
				t.Fatal(err)
			}
			e := NewEncoder(EncoderConfig{})
			for range 2 {
				got, err := e.List(l.APIVersion, l.Kind, ListMeta{ResourceVersion: l.Metadata.ResourceVersion}, l.items())
				if err != nil {
					t.Fatal(err)
				}
				if want := readUpstream(t, tc.pb); !bytes.Equal(got, want) {
					t.Fatalf("differs from upstream's protobuf:\n got %q\nwant %q", got, want)
				}
			}
		})
	}
}

func TestGoldenUpstreamWatch(t *testing.T) {
	var got []byte
	e := NewEncoder(EncoderConfig{})
	sc := bufio.NewScanner(bytes.NewReader(readUpstream(t, "crdwatch.json")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		frame, err := e.WatchEvent(ev.Type, ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, frame...)
	}
	if want := readUpstream(t, "crdwatch.pb"); len(got) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("differs from upstream's protobuf stream:\n got %q\nwant %q", got, want)
	}
}

// TestGoldenNotAcceptableStatus: upstream answers a protobuf GET of a
// custom resource with its 406 Status in protobuf (ErrorOutput).
func TestGoldenNotAcceptableStatus(t *testing.T) {
	r := Request{Accept: ContentTypeProtobuf}
	_, err := Negotiate(r, TargetCustomResource)
	if err == nil {
		t.Fatal("no 406")
	}
	if out := ErrorOutput(r, TargetCustomResource); !out.Protobuf() {
		t.Fatalf("error rendered as %+v", out)
	}
	st := statusOf(err)
	st.Kind, st.APIVersion = "Status", "v1"
	doc, jerr := json.Marshal(st)
	if jerr != nil {
		t.Fatal(jerr)
	}
	got, err := NewEncoder(EncoderConfig{}).Object(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := readUpstream(t, "cr-notacceptable.pb"); !bytes.Equal(got, want) {
		t.Fatalf("differs:\n got %q\nwant %q", got, want)
	}
}

func statusOf(err error) metav1.Status {
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		return as.Status()
	}
	return metav1.Status{}
}
