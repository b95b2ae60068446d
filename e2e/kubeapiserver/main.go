// Command kube-apiserver is upstream Kubernetes' kube-apiserver, the version
// pinned in this module's go.mod (k8s.io/kubernetes v1.33.13), built from
// the library (k8s.io/kubernetes/cmd/kube-apiserver/app) and nothing else.
// It is the front of the e2e test of crdplane's extension API server mode
// (e2e/extension_test.go): the aggregator that authenticates users and
// proxies an APIService's group-version to crdplane. It is a test helper,
// built with GOWORK=off in its own module (make's $(KUBE_APISERVER_BIN)),
// never part of a deployment.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream's main
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	os.Exit(cli.Run(command))
}
