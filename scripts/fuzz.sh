#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short while: the
# targets are found with `go test -list '^Fuzz'` in each package, never
# listed by hand, so a new Fuzz function is fuzzed as soon as it exists.
#
#   scripts/fuzz.sh [PACKAGES...]        (default ./...)
#
# FUZZTIME (default 20s) is each target's -fuzztime. FUZZMINIMIZETIME, when
# set, is passed as -fuzzminimizetime (Go's default is 60s per new input).
# GO names the go command (default go). Every target runs even after one
# fails; the script then lists the failures and exits 1.
#
# Go's fuzzing coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is mid-input, most often on a
# loaded machine (go.dev/issue/75804, fixed in Go 1.27). Such a run wrote no
# failing input, so it is run again, up to twice; a target that only ever
# ends that way is reported as a flake, not a failure. A run that writes a
# failing input under testdata/fuzz/ always fails.
set -euo pipefail

go=${GO:-go}
fuzztime=${FUZZTIME:-20s}
minimize=()
if [ -n "${FUZZMINIMIZETIME:-}" ]; then
	minimize=(-fuzzminimizetime="$FUZZMINIMIZETIME")
fi
[ $# -gt 0 ] || set -- ./...

# One `go test -list` over every package prints each package's matching
# names, then a line "ok <import path> <time>" (or "? <import path> [no test
# files]"), which says whose names they were.
listing=$("$go" test -run='^$' -list='^Fuzz' "$@")
targets=()
names=()
while IFS= read -r line; do
	case $line in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in ${names[@]+"${names[@]}"}; do targets+=("$pkg $n"); done
		names=()
		;;
	'?'*) names=() ;;
	*) ;;
	esac
done <<<"$listing"

if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found in $*" >&2
	exit 1
fi
echo "fuzz.sh: ${#targets[@]} fuzz targets, $fuzztime each"

failed=()
flaked=()
i=0
for t in "${targets[@]}"; do
	i=$((i + 1))
	pkg=${t% *} name=${t#* }
	corpus="$("$go" list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	result=failed
	for try in 1 2 3; do
		echo "== [$i/${#targets[@]}] $name ($pkg)$([ "$try" -gt 1 ] && echo ", try $try")"
		log=$(mktemp)
		if "$go" test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" ${minimize[@]+"${minimize[@]}"} "$pkg" 2>&1 | tee "$log"; then
			result=passed
		elif grep -q '^    context deadline exceeded$' "$log" && [ "$(ls "$corpus" 2>/dev/null | sort || true)" = "$before" ]; then
			result=flaked
		else
			result=failed
		fi
		rm -f "$log"
		[ "$result" = flaked ] || break
		echo "fuzz.sh: $name ended with Go's fuzztime deadline race (go.dev/issue/75804) and wrote no failing input"
	done
	case $result in
	failed) failed+=("$name ($pkg)") ;;
	flaked) flaked+=("$name ($pkg)") ;;
	esac
done

if [ ${#flaked[@]} -gt 0 ]; then
	echo "fuzz.sh: ${#flaked[@]} targets ended three times with only Go's deadline race and no failing input:" >&2
	printf '  %s\n' "${flaked[@]}" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz.sh: ${#failed[@]} of ${#targets[@]} fuzz targets failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz.sh: all ${#targets[@]} fuzz targets ran, $((${#targets[@]} - ${#flaked[@]})) passed"
