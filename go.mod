module github.com/crdplane/crdplane

go 1.26.0

replace (
	github.com/crdplane/crdplane/pkg => ./pkg
	github.com/crdplane/crdplane/proto => ./proto
	github.com/crdplane/crdplane/services/converter => ./services/converter
	github.com/crdplane/crdplane/services/gateway => ./services/gateway
	github.com/crdplane/crdplane/services/registry => ./services/registry
	github.com/crdplane/crdplane/services/storage => ./services/storage
	github.com/crdplane/crdplane/services/validator => ./services/validator
)
