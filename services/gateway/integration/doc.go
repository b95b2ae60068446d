// Package integration holds the gateway's integration test: the real
// storage (embedded etcd), registry, validator and gateway services in one
// process over in-process gRPC, driven over HTTPS by net/http and
// client-go's dynamic client.
package integration
