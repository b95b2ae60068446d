module github.com/crdplane/crdplane/services/converter

go 1.26.0

replace (
	github.com/crdplane/crdplane/pkg => ../../pkg
	github.com/crdplane/crdplane/proto => ../../proto
	github.com/crdplane/crdplane/services/converter => ../converter
	github.com/crdplane/crdplane/services/gateway => ../gateway
	github.com/crdplane/crdplane/services/registry => ../registry
	github.com/crdplane/crdplane/services/storage => ../storage
	github.com/crdplane/crdplane/services/validator => ../validator
)
