package discovery

import (
	"context"
	"encoding/json"
	goruntime "runtime"
	"runtime/debug"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"k8s.io/apimachinery/pkg/version"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Kubernetes version the gateway reports: the API level it implements.
const (
	kubeMajor      = "1"
	kubeMinor      = "33"
	kubeGitVersion = "v1.33.0"
)

// versionInfo is the /version document, shaped as kube-apiserver's.
func versionInfo() version.Info {
	info := version.Info{
		Major:                 kubeMajor,
		Minor:                 kubeMinor,
		EmulationMajor:        kubeMajor,
		EmulationMinor:        kubeMinor,
		MinCompatibilityMajor: kubeMajor,
		MinCompatibilityMinor: "32",
		GitVersion:            kubeGitVersion,
		GitCommit:             "0000000000000000000000000000000000000000",
		GitTreeState:          "clean",
		BuildDate:             "1970-01-01T00:00:00Z",
		GoVersion:             goruntime.Version(),
		Compiler:              goruntime.Compiler,
		Platform:              goruntime.GOOS + "/" + goruntime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.time":
				info.BuildDate = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					info.GitTreeState = "dirty"
				}
			}
		}
	}
	return info
}

// GetVersion serves /version.
func (s *Server) GetVersion(context.Context, *gatewayv1.GetVersionRequest) (*httpbody.HttpBody, error) {
	b, err := json.MarshalIndent(versionInfo(), "", "  ")
	if err != nil {
		return nil, httpx.ToGRPC(err)
	}
	return &httpbody.HttpBody{ContentType: httpx.ContentTypeJSON, Data: b}, nil
}
