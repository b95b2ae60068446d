#!/usr/bin/env bash
# Records v1.33's OpenAPI schemas of the built-in kinds crdplane serves
# (and what they reference) as kube-apiserver v1.33 builds them: core/v1
# Namespace into services/registry/openapi/v133_core_namespace.json, the
# four kinds of rbac.authorization.k8s.io/v1 into v133_rbac.json.
# openapi-gen (the kube-openapi version v1.33 pins) generates the
# definitions of k8s.io/api@v0.33.13 core/v1, rbac/v1 and meta/v1, and
# kube-openapi's builders
# (v3 and v2, with k8s.io/apiserver's default configs and definition namer,
# as kube-apiserver calls them) render the closure of Namespace and
# NamespaceList. The module is built in a temporary directory from
# conformance/upstream's go.mod (the v0.33.13 pins); nothing of it is kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/conformance/upstream/go.mod" "$root/conformance/upstream/go.sum" "$tmp/"
cd "$tmp"
sed -i 's#^module .*#module coregen#' go.mod
mkdir -p defs cmd/record
echo 'package defs' > defs/doc.go
cp "$root/hack/record-core-openapi/main.go.txt" cmd/record/main.go
printf '//go:build tools\npackage tools\n\nimport _ "k8s.io/kube-openapi/cmd/openapi-gen"\n' > tools.go
touch hdr.txt
export GOWORK=off GOFLAGS=-mod=mod
go build -o openapi-gen k8s.io/kube-openapi/cmd/openapi-gen
./openapi-gen --go-header-file hdr.txt --output-dir defs --output-pkg coregen/defs \
  --output-file zz_generated.openapi.go -r /dev/null \
  k8s.io/api/core/v1 k8s.io/api/rbac/v1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime \
  k8s.io/apimachinery/pkg/version k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/util/intstr 2>/dev/null
out=$root/services/registry/openapi
go build -o record ./cmd/record
./record k8s.io/api/core/v1.Namespace k8s.io/api/core/v1.NamespaceList > "$out/v133_core_namespace.json"
rbac=
for k in Role RoleBinding ClusterRole ClusterRoleBinding; do
  rbac="$rbac k8s.io/api/rbac/v1.$k k8s.io/api/rbac/v1.${k}List"
done
# shellcheck disable=SC2086 # one argument per type
./record $rbac > "$out/v133_rbac.json"
