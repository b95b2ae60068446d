// Command sample-apiserver is upstream's k8s.io/sample-apiserver v0.33
// (the wardle.example.com Flunders and Fischers), built as its own module
// outside go.work (its Kubernetes libraries are v0.33, crdplane's v0.37):
// the extension API server the aggregation layer's end-to-end tests
// (e2e/aggregator_test.go) run behind crdplane. It only calls the
// library's command.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	"k8s.io/sample-apiserver/pkg/cmd/server"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	options := server.NewWardleServerOptions(os.Stdout, os.Stderr)
	cmd := server.NewCommandStartWardleServer(ctx, options, false)
	os.Exit(cli.Run(cmd))
}
