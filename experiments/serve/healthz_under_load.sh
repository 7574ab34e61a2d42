#!/usr/bin/env bash
# How long GET /healthz waits while batch queries keep the server's CPUs busy (the guide's serve chapter,
# "Hostile clients"):
#   bash experiments/serve/healthz_under_load.sh [BIN [PROBES]]    # default target/release/lshbench, 200
# Starts BIN serve on a new index of the first 2,000 mails of data/spamassassin.jsonl.gz (default parameters),
# then 4 clients (curl in loops) each POST /v1/query with the first 1,000 mails again and again, and meanwhile
# PROBES GET /healthz, one after another 20 ms apart, each on a new connection; with CHECKERS > 0 (default 16),
# that many wrk connections also check the remaining mails one per request (POST /v1/check, insert always)
# until the probes end. Prints the probes' p50, p99 and maximum (curl's time_total: connect, request, answer), the
# queries answered meanwhile, and the checks' rate and latency. Needs curl, jq, and wrk when CHECKERS > 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/lshbench}
probes=${2:-200}
checkers=${CHECKERS:-16}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
gzip -dc data/spamassassin.jsonl.gz | awk "NR <= 2000" >"$work/index.jsonl"
head -n 1000 "$work/index.jsonl" | jq -cs '{documents: map({id, text})}' >"$work/query.json"
"$bin" serve --index "$work/idx" --create --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
for _ in $(seq 100); do
    grep -q '^listening on ' "$work/serve.out" 2>/dev/null && break
    sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$work/serve.out")
"$bin" check --server "$url" --input "$work/index.jsonl" >/dev/null
for c in 1 2 3 4; do
    (
        while :; do
            curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H 'Content-Type: application/json' \
                --data-binary @"$work/query.json" "$url/v1/query"
        done >"$work/load.$c"
    ) &
    pids+=($!)
done
if [ "$checkers" -gt 0 ]; then
    # As experiments/serve/bench.sh: one body a line, after an empty check that wrk asks for and drops.
    { echo '{"documents":[]}'; gzip -dc data/spamassassin.jsonl.gz | awk "NR > 2000" |
        jq -c '{documents: [{id, text}]}'; } >"$work/bodies.0"
    wrk -t1 -c"$checkers" -d3600s --timeout 30s -s experiments/serve/wrk_check.lua "$url" -- "$work/bodies" \
        >"$work/wrk.txt" &
    pids+=($!)
fi
sleep 3
for _ in $(seq "$probes"); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$url/healthz"
    sleep 0.02
done >"$work/probes"
if [ "$checkers" -gt 0 ]; then
    kill -INT "${pids[-1]}" 2>/dev/null || true
    wait "${pids[-1]}" 2>/dev/null || true
    unset 'pids[-1]'
fi
kill "${pids[@]:1}" 2>/dev/null || true
echo "binary: $bin ($("$bin" --version))"
echo "machine: $(lscpu | sed -n 's/^Vendor ID: *//p') $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) logical CPUs; flags: $(grep -m1 -o -w -E 'avx2|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
awk '$1 != 200 {bad++} END {if (bad) print bad " probes not answered 200"}' "$work/probes"
sort -k2 -g "$work/probes" | awk -v n="$probes" '{t[NR] = $2 * 1000} END {
    printf "GET /healthz under load, %d probes: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
        n, t[int(n * 0.5 + 0.5)], t[int(n * 0.99 + 0.5)], t[n]}'
cat "$work"/load.* | awk '{n++; if ($1 == 200) ok++; s += $2} END {
    printf "queries of 1,000 mails answered meanwhile: %d (%d with 200), mean %.2f s each\n", n, ok, s / n}'
if [ "$checkers" -gt 0 ]; then
    tail -n 1 "$work/wrk.txt" | jq -r --arg c "$checkers" \
        '"single-document checks from \($c) connections meanwhile: \(.requests) in \(.seconds) s, p50 \(.p50_ms) ms, p99 \(.p99_ms) ms, \(.not_200) not 200"'
fi
