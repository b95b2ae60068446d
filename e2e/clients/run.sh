#!/usr/bin/env bash
# The client matrix (make test-clients): start a fresh server, then drive it
# with every client generation, one line per client x version x check.
#
#   SERVER=crdplane (default) runs $CRDPLANE_BIN run on a new data directory;
#   SERVER=upstream runs $UPSTREAM_BIN (apiextensions-apiserver v1.33, the
#   reference), to show the tests themselves are right.
#   CLIENTS=regexp narrows the suites (matched against "client version").
#
# Each suite is a Go test module under e2e/clients/ built with GOWORK=off;
# client-go and controller-runtime build once per minor from their own
# go.mod files (go test -modfile). Exits non-zero on any failure; the last
# line is "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
SERVER="${SERVER:-crdplane}"
GO="${GO:-go}"
CLIENTS="${CLIENTS:-.}"
bin="$root/bin"
export GOWORK=off GOFLAGS="${GOFLAGS:--buildvcs=false}"

work="$(mktemp -d "${TMPDIR:-/tmp}/crdplane-clients.XXXXXX")"
logs="$work/logs"; mkdir -p "$logs"
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$pid" 2>/dev/null
	fi
	if [ "${KEEP_WORK:-}" = "" ]; then rm -rf "$work"; else echo "work directory kept: $work"; fi
}
trap cleanup EXIT

kubeconfig="$work/kubeconfig"
case "$SERVER" in
crdplane)
	"${CRDPLANE_BIN:-$bin/crdplane}" run --listen 127.0.0.1:0 --data-dir "$work/etcd" --kubeconfig "$kubeconfig" \
		--log-format text --log-level warn >"$work/server.out" 2>"$work/server.err" &
	pid=$!
	for _ in $(seq 1 300); do grep -q 'serving the Kubernetes API at' "$work/server.out" 2>/dev/null && break; sleep 0.2; done
	url="$(grep -o 'serving the Kubernetes API at https://[^ ]*' "$work/server.out" | awk '{print $NF}')"
	ready=/readyz
	;;
upstream)
	"${UPSTREAM_BIN:-$bin/apiextensions-upstream}" --dir "$work/upstream" >"$work/server.out" 2>"$work/server.err" &
	pid=$!
	for _ in $(seq 1 600); do grep -q '^{' "$work/server.out" 2>/dev/null && break; sleep 0.2; done
	line="$(grep -m1 '^{' "$work/server.out")"
	url="$(sed -E 's/.*"url":"([^"]*)".*/\1/' <<<"$line")"
	token="$(sed -E 's/.*"token":"([^"]*)".*/\1/' <<<"$line")"
	cat >"$kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: upstream
  cluster: {server: "$url", insecure-skip-tls-verify: true}
users:
- name: upstream
  user: {token: "$token"}
contexts:
- name: upstream
  context: {cluster: upstream, user: upstream}
current-context: upstream
KC
	# Its /readyz never passes (no kube-apiserver for its Service informer).
	ready=/healthz
	;;
*) echo "SERVER must be crdplane or upstream, not $SERVER"; exit 2 ;;
esac
if [ -z "${url:-}" ]; then
	echo "$SERVER did not start:"; tail -50 "$work/server.err" "$work/server.out"; exit 1
fi
export KUBECONFIG="$kubeconfig"
kubectl133="$(ls "$(dirname "$(readlink -f "$(command -v kubectl)")")"/kubectl.1.33 2>/dev/null || command -v kubectl.1.33)"
for _ in $(seq 1 300); do
	"$kubectl133" get --raw "$ready" >/dev/null 2>&1 && break; sleep 0.3
done
echo "client matrix against $SERVER at $url"

# kubectl binaries: the machine's dispatcher keeps kubectl.1.NN beside it.
kubectl_bin() {
	local d; d="$(dirname "$(readlink -f "$(command -v kubectl)")")"
	if [ -x "$d/kubectl.1.$1" ]; then echo "$d/kubectl.1.$1"; else command -v "kubectl.1.$1"; fi
}

# modver MODFILE MODULE: the module's version in a go.mod file.
modver() { awk -v m="$2" '$1==m {print $2; exit}' "$1"; }

passed=0 failed=0 skipped=0
declare -a matrix
# suite NAME VERSION DIR [go test args...]: runs one suite, records every
# test and subtest of its -v output.
suite() {
	local name="$1" version="$2" dir="$3"; shift 3
	if ! [[ "$name $version" =~ $CLIENTS ]]; then return; fi
	local log="$logs/${name}-${version}.log" start=$SECONDS rc
	echo "== $name $version"
	(cd "$dir" && "$GO" test -count=1 -v -timeout 15m "$@" 2>&1) >"$log"
	rc=$?
	local n=0
	while read -r verdict test dur; do
		n=$((n + 1))
		matrix+=("$(printf '%-4s  %-18s %-10s %-34s %s' "$verdict" "$name" "$version" "$test" "$dur")")
		case "$verdict" in PASS) passed=$((passed + 1)) ;; SKIP) skipped=$((skipped + 1)) ;; *) failed=$((failed + 1)) ;; esac
	done < <(sed -n -E 's/^ *--- (PASS|FAIL|SKIP): ([^ ]+) (\(.*\))$/\1 \2 \3/p' "$log")
	if [ "$rc" -ne 0 ] && ! grep -q -E '^ *--- FAIL' "$log"; then
		# Build failure, panic or timeout: no test verdict to show.
		matrix+=("$(printf '%-4s  %-18s %-10s %-34s %s' FAIL "$name" "$version" "(go test exit $rc)" "")")
		failed=$((failed + 1)); n=$((n + 1))
	fi
	if [ "$rc" -ne 0 ]; then
		echo "-- $name $version failed; its output:"
		grep -v -E '^\s+[IWE][0-9]{4} ' "$log" | tail -120
	fi
	echo "   $n checks in $((SECONDS - start))s"
}

cg="$here/clientgo"
for mf in go130.mod go133.mod go.mod; do
	suite client-go "$(modver "$cg/$mf" k8s.io/client-go)" "$cg" -modfile="$mf" ./...
done
cr="$here/controllerruntime"
for mf in cr018.mod go.mod; do
	[ -f "$cr/$mf" ] && suite controller-runtime "$(modver "$cr/$mf" sigs.k8s.io/controller-runtime)" "$cr" -modfile="$mf" ./...
done
for v in 27 30 33; do
	k="$(kubectl_bin $v)"
	if [ -z "$k" ]; then
		matrix+=("$(printf '%-4s  %-18s %-10s %-34s' FAIL kubectl "1.$v" "(kubectl.1.$v not found)")"); failed=$((failed + 1)); continue
	fi
	KUBECTL="$k" suite kubectl "$("$k" version --client -o json 2>/dev/null | sed -n -E 's/.*"gitVersion": *"([^"]*)".*/\1/p' | head -1)" "$here/kubectl" ./...
done
[ -f "$here/helm/go.mod" ] && suite helm "$(modver "$here/helm/go.mod" helm.sh/helm/v3)" "$here/helm" ./...

echo
echo "client matrix against $SERVER:"
printf '%s\n' "${matrix[@]}"
if [ "$failed" -ne 0 ] && [ "$SERVER" = crdplane ]; then
	echo "-- crdplane log (tail):"; tail -40 "$work/server.err"
fi
echo "clients: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
