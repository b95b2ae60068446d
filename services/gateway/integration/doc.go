// Package integration holds the gateway's integration test: the real
// storage (embedded etcd), registry, validator and converter services of
// internal/backendtest and gateways serving HTTPS, in one process over
// in-process gRPC, driven by net/http and client-go's dynamic client.
package integration
