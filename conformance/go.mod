module github.com/crdplane/crdplane/conformance

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	sigs.k8s.io/yaml v1.6.0
)

require go.yaml.in/yaml/v2 v2.4.2 // indirect
