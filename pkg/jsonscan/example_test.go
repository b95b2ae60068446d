package jsonscan_test

import (
	"fmt"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

func ExampleLookup() {
	obj := []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","uid":"u-1"}}`)
	raw, found, err := jsonscan.Lookup(obj, "metadata", "uid")
	uid, _ := jsonscan.String(raw)
	fmt.Println(string(raw), found, err, uid)
	// Output: "u-1" true <nil> u-1
}

func ExampleScanObject() {
	obj := []byte(`{"kind":"CronTab","metadata":{"name":"a"},"spec":{"replicas":3}}`)
	_, err := jsonscan.ScanObject(obj, 0, func(m jsonscan.Member) {
		name, _ := m.Name(obj)
		fmt.Printf("%s = %s\n", name, m.Value(obj))
	})
	fmt.Println(err)
	// Output:
	// kind = "CronTab"
	// metadata = {"name":"a"}
	// spec = {"replicas":3}
	// <nil>
}

func ExampleApplyEdits() {
	obj := []byte(`{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab"}`)
	m, _, _ := jsonscan.Find(obj, 0, "apiVersion")
	fmt.Println(string(jsonscan.ApplyEdits(obj, jsonscan.Edit{Start: m.ValStart, End: m.ValEnd, Repl: []byte(`"stable.example.com/v1"`)})))
	// Output: {"apiVersion":"stable.example.com/v1","kind":"CronTab"}
}
