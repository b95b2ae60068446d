#!/usr/bin/env bash
# Load test of the validator on its own (make loadtest-validator): starts
# crdplane-validator with --crd-dir (no registry, no etcd), drives Admit of a
# CronTab with CEL rules with ghz, then compares one replica with two behind
# client-side round robin (validator-load). Prints req/s and p50/p99.
#
# Each replica runs with GOMAXPROCS=REPLICA_CPUS (default 1), so that the
# comparison shows how the throughput scales from one core's worth of
# validator to two on a small machine too (the load generator needs CPU as
# well).
#
# Environment: BIN (tools and binaries, default ./bin), DURATION (10s),
# CONCURRENCY (50), REPLICA_CPUS (1), PORT1/PORT2 (17003/17013), CRD_DIR.
set -euo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
BIN=${BIN:-$root/bin}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-50}
REPLICA_CPUS=${REPLICA_CPUS:-1}
PORT1=${PORT1:-17003}
PORT2=${PORT2:-17013}
CRD_DIR=${CRD_DIR:-$root/services/validator/testdata/crds}
work=$(mktemp -d)
pids=()

cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

start_validator() { # port
	local port=$1 http=$(($1 + 100))
	GOMAXPROCS=$REPLICA_CPUS "$BIN/crdplane-validator" --crd-dir "$CRD_DIR" --grpc-listen "127.0.0.1:$port" \
		--http-listen "127.0.0.1:$http" --log-level warn >"$work/validator-$port.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do
		if curl -fsS "http://127.0.0.1:$http/readyz" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "validator on :$port did not become ready:" >&2
	cat "$work/validator-$port.log" >&2
	return 1
}

echo "== validator load test: $(nproc) CPUs, GOMAXPROCS=$REPLICA_CPUS per replica, concurrency $CONCURRENCY, $DURATION per run"
start_validator "$PORT1"

"$BIN/validator-load" -print-request >"$work/request.json"
echo
echo "-- ghz, 1 replica (Admit of a valid CronTab with 11 CEL rules)"
(cd "$root/proto" && "$BIN/ghz" --insecure \
	--proto crdplane/validator/v1/validator.proto --import-paths . \
	--call crdplane.validator.v1.ValidatorService/Admit \
	--data-file "$work/request.json" \
	--concurrency "$CONCURRENCY" --duration "$DURATION" --connections 1 \
	"127.0.0.1:$PORT1") >"$work/ghz.txt"
grep -E 'Count:|Requests/sec:|Average:' "$work/ghz.txt" || true
grep -E ' (50|90|99) % in ' "$work/ghz.txt" || true
# ghz cuts the connection at the end of the duration: the calls then in
# flight fail with Unavailable; anything else is a real error.
if grep -q 'Error distribution' "$work/ghz.txt"; then
	sed -n '/Error distribution/,$p' "$work/ghz.txt"
	if sed -n '/Error distribution/,$p' "$work/ghz.txt" | grep -E '^\s+\[' | grep -vq 'closed network connection\|context canceled\|transport is closing\|client connection is closing'; then
		exit 1
	fi
fi

hz=$(getconf CLK_TCK)
cpu_ticks() { # pid: user+system CPU ticks so far
	awk '{print $14 + $15}' "/proc/$1/stat"
}
admits() { # port: Admit calls the replica handled so far (its /metrics)
	curl -fsS "http://127.0.0.1:$(($1 + 100))/metrics" 2>/dev/null |
		awk '/^crdplane_grpc_server_handled_total\{.*grpc_method="Admit"/ {s += $2} END {print s + 0}'
}

# load TARGETS PORTS...: one validator-load run, then the validators' CPU
# time and how the calls spread over the replicas.
load() {
	local targets=$1
	shift
	local ports=("$@") before=() calls=() i
	for i in "${!ports[@]}"; do
		before[i]=$(cpu_ticks "${pids[i]}")
		calls[i]=$(admits "${ports[i]}")
	done
	"$BIN/validator-load" -targets "$targets" -c "$CONCURRENCY" -d "$DURATION"
	# CPU time and calls both include the warm-up.
	local ticks=0 total=0 spread="" n
	for i in "${!ports[@]}"; do
		ticks=$((ticks + $(cpu_ticks "${pids[i]}") - before[i]))
		n=$(($(admits "${ports[i]}") - calls[i]))
		total=$((total + n))
		spread+=" :${ports[i]}=$n"
	done
	awk -v t="$ticks" -v hz="$hz" -v n="$total" -v s="$spread" 'BEGIN {
		cpu = t / hz
		printf "   validator CPU %.1fs for the run, %.0f requests per validator CPU-second; Admit calls per replica:%s\n", cpu, (cpu > 0 ? n / cpu : 0), s
	}'
}

echo
echo "-- validator-load (client-side round robin)"
load "127.0.0.1:$PORT1" "$PORT1"
start_validator "$PORT2"
load "127.0.0.1:$PORT1,127.0.0.1:$PORT2" "$PORT1" "$PORT2"
