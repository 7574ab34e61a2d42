#!/usr/bin/env bash
# Where `lshbench serve`'s long pauses come from: one client checks DOCS documents into a new index, with snapshots
# taken as usual (`--snapshot-min 64M`, the default) and with none (`--snapshot-min 1000G`), alternating, ROUNDS
# rounds of each; the table counts the slow checks by the server's own clock and gives wrk's percentiles.
#   bash experiments/serve/pauses.sh [DOCS [ROUNDS [OUT]]]   # default 400000 documents, 2 rounds, results/serve/pauses.md
# Same documents and index parameters as experiments/serve/bench.sh (word 3-grams at 0.5, exact verification).
# Needs wrk and a quiet machine; scratch files (about 2 x DOCS x 1.6 KB) go under SERVE_BENCH_WORK (default /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
docs=${1:-400000}
rounds=${2:-2}
out=${3:-results/serve/pauses.md}
work=${SERVE_BENCH_WORK:-/tmp}/lshbench-serve-pauses
bin=target/release/lshbench
mkdir -p "$work"
cargo build --release --locked --bin lshbench
$bin gen --docs "$docs" --mean-len 1500 --seed 7 --output "$work/corpus.jsonl" >/dev/null
# One body file for wrk's one thread; it asks the script for one request before the run and drops it, so the file
# starts with an empty check.
awk -v P="$work/bodies.0" 'BEGIN { print "{\"documents\":[]}" > P } { print "{\"documents\":[" $0 "]}" > P }' \
    "$work/corpus.jsonl"
rm -f "$work/corpus.jsonl" "$work/corpus.truth.csv"

bucket() { awk -v le="$2" -F'[{}" =]+' '$1 == "lshbench_request_duration_seconds_bucket" && $3 == "/v1/check" && $5 == le { print $6 }' "$1"; }
rows=()
for round in $(seq "$rounds"); do
    for mode in snapshots none; do
        extra=()
        [ "$mode" = none ] && extra=(--snapshot-min 1000G)
        rm -rf "$work/index" "$work/serve.out"
        sync
        $bin serve --index "$work/index" --listen 127.0.0.1:0 --create --shingle word:3 --threshold 0.5 "${extra[@]}" \
            >"$work/serve.out" 2>>"$work/serve.err" &
        pid=$!
        url=
        for _ in $(seq 300); do
            url=$(grep -o 'http://[0-9.:]*' "$work/serve.out" | head -n 1 || true)
            [ -n "$url" ] && break
            sleep 0.1
        done
        [ -n "$url" ] || { echo "the server did not start; its errors:" >&2; cat "$work/serve.err" >&2; exit 1; }
        load=$(uptime | sed 's/.*load average: //')
        wrk -t1 -c1 -d3600s --timeout 30s -s experiments/serve/wrk_check.lua "$url" -- "$work/bodies" >"$work/wrk.txt" &
        wrk_pid=$!
        while true; do
            sleep 0.2
            now=$(curl -s "$url/metrics" | awk '$1 == "lshbench_documents" { print $2 }')
            [ "${now:-0}" -ge "$docs" ] && break
        done
        kill -INT "$wrk_pid"
        wait "$wrk_pid" || true
        curl -s "$url/metrics" >"$work/metrics.txt"
        kill -TERM "$pid"
        wait "$pid" || true
        total=$(bucket "$work/metrics.txt" +Inf)
        over() { echo $((total - $(bucket "$work/metrics.txt" "$1"))); }
        row=$(tail -n 1 "$work/wrk.txt" | python3 -c "import json, sys; w = json.load(sys.stdin); print(f\"{w['requests'] / w['seconds']:,.0f} | {w['p99_ms']:.1f} | {w['p999_ms']:.1f} | {w['max_ms']:.0f}\")")
        rows+=("| $round | $mode | $row | $(over 0.02) | $(over 0.1) | $(over 0.5) | $load |")
        echo "${rows[-1]}"
    done
done
rm -rf "$work"

{
    echo "# serve: long pauses with and without snapshots"
    echo
    echo '```text'
    echo "command: bash experiments/serve/pauses.sh $docs $rounds $out"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates src Cargo.toml || echo ' (with uncommitted changes)')"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(lscpu | sed -n 's/^Vendor ID: *//p') $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) logical CPUs"
    echo "kernel: $(uname -r); disk of the index: $(df -hT "${SERVE_BENCH_WORK:-/tmp}" | awk 'NR == 2 { print $2, "on", $1 }')"
    echo '```'
    echo
    echo "One wrk connection checks $docs documents of \`lshbench gen --mean-len 1500 --seed 7\` into a new index (word"
    echo "3-grams at 0.5, exact verification, every check answered after its \`fdatasync\`), with snapshots taken as"
    echo "usual and with none, alternating. The \"over\" columns count checks slower than that by the server's own clock"
    echo "(\`/metrics\`); wrk's percentiles are corrected for coordinated omission (the serve chapter says how)."
    echo
    echo "| round | snapshots | docs/s | wrk p99 ms | wrk p99.9 ms | longest ms | over 20 ms | over 100 ms | over 500 ms | load before |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Regenerate: \`bash experiments/serve/pauses.sh\` on a quiet machine. [sync-probe.md](sync-probe.md) is the disk's"
    echo "own sync latency with nothing else running."
} >"$out"
cat "$out"
