#!/usr/bin/env bash
# make soak: the soak benchmark (soak_test.go) against the docker compose
# deployment (images from `make images`) in a compose project of its own,
# removed (containers, network, volumes) however the run ends. It builds
# the conversion webhook's image (examples/crontab-conversion-webhook, FROM
# scratch around a static binary; nothing is pulled) first.
#
#   SOAK_DURATION (30m) SOAK_RATE (50 req/s) SOAK_BAD (0.10)
#   SOAK_KILL_INTERVAL (2m) SOAK_RESTART_DELAY (1s) SOAK_RESULTS (file)
#   CRDPLANE_IMAGE_PREFIX, CRDPLANE_TAG (the images to run)
set -euo pipefail
cd "$(dirname "$0")/../.."

export COMPOSE_PROJECT_NAME="crdplanesoak$$"
if [ -z "${COMPOSE:-}" ]; then
	if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE="docker-compose"; fi
fi
export COMPOSE
export COMPOSE_FILE="$PWD/deploy/compose/docker-compose.yaml:$PWD/bench/soak/docker-compose.soak.yaml"
export COMPOSE_PATH_SEPARATOR=":"
tmp="$(mktemp -d)"
export CRDPLANE_KUBECONFIG_DIR="$tmp/kube"
export SOAK_WEBHOOK_PKI="$tmp/webhook-pki"
export SOAK_WEBHOOK_IMAGE="${SOAK_WEBHOOK_IMAGE:-crdplane-soak/webhook:dev}"
mkdir -p "$CRDPLANE_KUBECONFIG_DIR" "$SOAK_WEBHOOK_PKI"

cleanup() {
	$COMPOSE down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building $SOAK_WEBHOOK_IMAGE"
mkdir -p "$tmp/webhook"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$tmp/webhook/webhook" ./examples/crontab-conversion-webhook
printf 'FROM scratch\nCOPY webhook /webhook\nUSER 65532:65532\nENTRYPOINT ["/webhook"]\n' >"$tmp/webhook/Dockerfile"
if [ -z "${DOCKER_BUILDKIT:-}" ] && ! docker buildx version >/dev/null 2>&1; then
	export DOCKER_BUILDKIT=0
fi
docker build -q -t "$SOAK_WEBHOOK_IMAGE" "$tmp/webhook" >/dev/null

duration="${SOAK_DURATION:-30m}"
export SOAK_DURATION="$duration"
# The test's own timeout: the load plus 30m (bring-up, settling, verdict).
secs=0
if [[ "$duration" =~ ^(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?$ ]]; then
	secs=$(( ${BASH_REMATCH[2]:-0} * 3600 + ${BASH_REMATCH[4]:-0} * 60 + ${BASH_REMATCH[6]:-0} ))
else
	echo "SOAK_DURATION=$duration: use h, m and s (e.g. 30m, 1h30m)" >&2
	exit 2
fi
timeout="$(( secs + 1800 ))s"
echo "compose project $COMPOSE_PROJECT_NAME ($COMPOSE), soak of $duration"
CRDPLANE_SOAK=1 go test -count=1 -timeout "$timeout" -v -run '^TestSoak$' ./bench/soak/
