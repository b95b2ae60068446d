#!/usr/bin/env bash
# make test-compose: runs the compose deployment (images from `make images`)
# under load and faults (compose_test.go) in a project of its own, and
# removes it (containers, network, volumes) however the test ends.
set -euo pipefail
cd "$(dirname "$0")/../../.."

export COMPOSE_PROJECT_NAME="crdplanetest$$"
if [ -z "${COMPOSE:-}" ]; then
	if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE="docker-compose"; fi
fi
export COMPOSE
export COMPOSE_FILE="$PWD/deploy/compose/docker-compose.yaml:$PWD/deploy/compose/test/docker-compose.test.yaml"
export COMPOSE_PATH_SEPARATOR=":"
tmp="$(mktemp -d)"
export CRDPLANE_KUBECONFIG_DIR="$tmp"

cleanup() {
	$COMPOSE down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "compose project $COMPOSE_PROJECT_NAME ($COMPOSE)"
CRDPLANE_COMPOSE_TEST=1 go test -count=1 -timeout "${TIMEOUT:-10m}" -v -run '^TestCompose$' ./deploy/compose/test/
