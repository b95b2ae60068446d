#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx(f *testing.F)) of the
# repository, one at a time, each for FUZZTIME (default 30s), and prints the
# executions of each. `make fuzz` and `make fuzz-short` call it.
#
#   FUZZTIME          per target (a duration, or Nx for N executions); 30s
#   FUZZ              only the targets whose name matches this regexp
#   FUZZSKIP          none of the targets whose name matches this regexp
#   FUZZPARALLEL      fuzzing workers per target (go test -parallel); 1
#   FUZZSLOW          a regexp of targets whose test binary takes most of a
#                     short FUZZTIME to start and gather its baseline
#                     (the gateway's and the registry's: 0 to 200
#                     executions in 5s on 2 cores); they run for
#                     FUZZSLOWTIME instead when that is longer than FUZZTIME
#   FUZZSLOWTIME      20s
#   FUZZMINIMIZETIME  time spent minimizing an input (go test
#                     -fuzzminimizetime); 2s: the default 60s stalls the big
#                     binaries (gateway, registry, storage) on every new
#                     interesting input
#
# A crasher is written to the package's testdata/fuzz/FuzzXxx/ (commit it,
# fixed, as a regression seed) and fails the run. A target that stops with
# "context deadline exceeded" at the end of FUZZTIME without writing an
# input is Go's own coordinator race (golang/go#75804, fixed in Go 1.27),
# not a finding: it is reported as a flake and does not fail the run.
set -uo pipefail

cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
FUZZPARALLEL=${FUZZPARALLEL:-1}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-2s}
GO=${GO:-go}
FUZZSLOW=${FUZZSLOW:-'^(FuzzProtobufBody|FuzzListOptions|FuzzRequestBody|FuzzCRDPatch|FuzzCRDValidation|FuzzValidateCRD)$'}
FUZZSLOWTIME=${FUZZSLOWTIME:-20s}

# seconds of a duration such as 5s, 2m or 1m30s (0 for an Nx count)
seconds() {
	local d=$1 total=0 n
	[[ $d == *x ]] && { echo 0; return; }
	while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=${BASH_REMATCH[1]}
		case ${BASH_REMATCH[2]} in h) n=$((n * 3600)) ;; m) n=$((n * 60)) ;; esac
		total=$((total + n))
		d=${BASH_REMATCH[3]}
	done
	echo $total
}

# dir:name of every target (conformance/upstream is its own module, outside
# go.work, and has none)
targets=()
while IFS= read -r file; do
	dir=$(dirname "$file")
	for name in $(grep -oE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
		if [[ -n "${FUZZSKIP:-}" && "$name" =~ $FUZZSKIP ]]; then
			continue
		fi
		if [[ -z "${FUZZ:-}" || "$name" =~ $FUZZ ]]; then
			targets+=("$dir:$name")
		fi
	done
done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' pkg services cmd examples platform conformance 2>/dev/null | grep -v '^conformance/upstream/' | sort)

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no targets" >&2
	exit 1
fi

failed=0
summary=()
start=$(date +%s)
for t in "${targets[@]}"; do
	dir=${t%%:*}
	name=${t##*:}
	corpus="$dir/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort)
	fuzztime=$FUZZTIME
	if [[ "$name" =~ $FUZZSLOW ]] && (( $(seconds "$FUZZSLOWTIME") > $(seconds "$FUZZTIME") )) && [[ $FUZZTIME != *x ]]; then
		fuzztime=$FUZZSLOWTIME
	fi
	echo "== $dir $name (FUZZTIME=$fuzztime)"
	t0=$(date +%s)
	out=$(cd "$dir" && $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" \
		-fuzzminimizetime "$FUZZMINIMIZETIME" -parallel "$FUZZPARALLEL" . 2>&1)
	rc=$?
	took=$(( $(date +%s) - t0 ))
	execs=$(grep -oE 'execs: [0-9]+' <<<"$out" | tail -1 | grep -oE '[0-9]+')
	execs=${execs:-0}
	after=$(ls "$corpus" 2>/dev/null | sort)
	newinputs=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^$' || true)
	result=ok
	if [[ $rc -ne 0 ]]; then
		if [[ -z "$newinputs" ]] && grep -q 'context deadline exceeded' <<<"$out"; then
			result="flake (golang/go#75804)"
		else
			result=FAIL
			failed=1
			echo "$out" | grep -v -E '^\s+[IWE][0-9]{4} |^time=.* level=INFO' | tail -40
			for f in $newinputs; do echo "   crasher: $corpus/$f"; done
		fi
	fi
	summary+=("$(printf '%-44s %-26s %12s execs %5ss  %s' "$dir" "$name" "$execs" "$took" "$result")")
done

echo
echo "fuzz summary (FUZZTIME=$FUZZTIME; FUZZSLOWTIME=$FUZZSLOWTIME for targets matching $FUZZSLOW; $(( $(date +%s) - start ))s in all):"
printf '%s\n' "${summary[@]}"
exit $failed
