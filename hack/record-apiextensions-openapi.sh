#!/usr/bin/env bash
# Records the OpenAPI v3 document of apiextensions.k8s.io/v1 as upstream
# apiextensions-apiserver v1.33 (the conformance oracle's reference,
# conformance/upstream) serves it, byte for byte, into
# services/registry/openapi/v133_apiextensions_v1.json, which the registry
# serves as it is. UPSTREAM_BIN: a built reference (default: built here).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/conformance"
CONFORMANCE_RECORD_OPENAPI="$root/services/registry/openapi/v133_apiextensions_v1.json" \
  go test -count=1 -run '^TestRecordAPIExtensionsOpenAPI$' -v . | grep -E '^(recorded|ok|FAIL|---)'
