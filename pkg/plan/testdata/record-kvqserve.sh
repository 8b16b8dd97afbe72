#!/bin/bash
# Records the kvqserve-*.txt fixtures: four /metrics scrapes, three
# seconds apart, of a kvq serve on the built-in model under load — one whose KV
# budget is far too small for its traffic (KV-bound), one lightly loaded
# with short requests (not KV-bound). Run from the repository root with a
# built kvq: KVQ=bin/kvq bash pkg/plan/testdata/record-kvqserve.sh
set -euo pipefail
KVQ=${KVQ:-bin/kvq}
out=pkg/plan/testdata
record() { # name port budget-flag bench-args...
	local name=$1 port=$2 budget=$3
	shift 3
	$KVQ serve --port "$port" $budget >/dev/null 2>&1 &
	local srv=$!
	for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
	$KVQ bench --endpoint "load=http://127.0.0.1:$port" --warmups 0 "$@" >/dev/null 2>&1 &
	local load=$!
	for i in 0 1 2 3; do
		sleep 3
		curl -sf "http://127.0.0.1:$port/metrics" >"$out/kvqserve-$name-$i.txt"
	done
	kill $load $srv 2>/dev/null || true
	wait 2>/dev/null || true
}
record kvbound 18311 "--kv-budget 3MiB" --dataset fixed --input-len 256 --output-len 128 --max-concurrency 16 --num-prompts 200
record idle 18312 "" --dataset fixed --input-len 32 --output-len 16 --max-concurrency 1 --num-prompts 400
