// Command etcd is etcd v3.7 (go.etcd.io/etcd/server/v3's own entry point,
// etcdmain), built from the Go module cache, so that the crdplane etcd image
// can be built FROM scratch without pulling quay.io/coreos/etcd. Its flags
// are etcd's; `etcd <flags> --version` parses the flags and exits.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
