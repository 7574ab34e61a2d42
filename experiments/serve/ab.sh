#!/usr/bin/env bash
# Throughput of `lshbench serve` at one commit against another, measured side by side in one run:
#   bash experiments/serve/ab.sh BASE [DOCS [CLIENTS [ROUNDS]]]     # default 200000 documents, 16 clients, 3 rounds
# Builds BASE's release binary (a temporary worktree, into its own target directory, target/ab-base, kept between
# runs) and this checkout's, then checks the same DOCS documents of `lshbench gen` (about
# 1.5 KB, seed 7; word 3-grams at 0.5, exact verification, as bench.sh) into a new index with each, one document
# per request from CLIENTS wrk connections, alternating BASE and HEAD ROUNDS times so that a change of the
# machine's speed during the run touches both (AB_BASE_BIN and AB_HEAD_BIN name binaries already built, and
# skip both builds; BASE and AB_HEAD_REV then only label the report). Prints documents per second and p50/p99 latency for every run,
# and the ratio of the medians; writes them to results/serve/ab.md with the machine. Needs wrk (Debian) and a
# quiet machine (BENCHMARKING.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:?usage: ab.sh BASE [DOCS [CLIENTS [ROUNDS]]]}
docs=${2:-200000}
clients=${3:-16}
rounds=${4:-3}
out=${AB_OUT:-results/serve/ab.md}
work=${SERVE_BENCH_WORK:-/tmp}/lshbench-serve-ab
read -r -a params <<<"${PARAMS:---shingle word:3 --threshold 0.5}"
rm -rf "$work"
mkdir -p "$work"
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')

if [ -n "${AB_BASE_BIN:-}" ] && [ -n "${AB_HEAD_BIN:-}" ]; then
    cp "$AB_BASE_BIN" "$work/lshbench-base"
    cp "$AB_HEAD_BIN" "$work/lshbench-head"
else
    git worktree add --detach "$work/base" "$base" >/dev/null
    trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true' EXIT
    # Not this checkout's target directory: cargo keys a workspace's crates by their path relative to the
    # workspace, so after a build from the worktree, this checkout's older sources would look built and HEAD's
    # binary would be BASE's.
    (cd "$work/base" && CARGO_TARGET_DIR=$target/ab-base cargo build --release --locked --bin lshbench)
    cp "$target/ab-base/release/lshbench" "$work/lshbench-base"
    cargo build --release --locked --bin lshbench
    cp "$target/release/lshbench" "$work/lshbench-head"
fi
bin=$work/lshbench-head

$bin gen --docs "$docs" --mean-len 1500 --seed 7 --output "$work/corpus.jsonl"
threads=$((clients < 2 ? clients : 2))
# As bench.sh: each wrk thread's file starts with an empty check, which wrk asks for and drops.
awk -v T="$threads" -v P="$work/bodies" \
    'BEGIN { for (t = 0; t < T; t++) print "{\"documents\":[]}" > (P "." t) }
     { print "{\"documents\":[" $0 "]}" > (P "." ((NR - 1) % T)) }' "$work/corpus.jsonl"
sync

# One run of BIN: a new index, DOCS checks from CLIENTS connections; prints "docs_per_s p50_ms p99_ms".
run() {
    local bin=$1 index=$work/index
    rm -rf "$index" "$work/serve.out"
    $bin serve --index "$index" --create --listen 127.0.0.1:0 "${params[@]}" >"$work/serve.out" 2>/dev/null &
    local pid=$!
    until grep -q '^listening on ' "$work/serve.out" 2>/dev/null; do sleep 0.05; done
    local url
    url=$(sed -n 's/^listening on //p' "$work/serve.out")
    wrk -t"$threads" -c"$clients" -d3600s --timeout 30s -s experiments/serve/wrk_check.lua "$url" -- \
        "$work/bodies" >"$work/wrk.txt" &
    local wrk_pid=$!
    while :; do
        sleep 0.1
        local now
        now=$(curl -s "$url/metrics" | awk '$1 == "lshbench_documents" { print $2 }')
        [ "${now:-0}" -ge "$docs" ] && break
    done
    kill -INT "$wrk_pid"
    wait "$wrk_pid" || true
    kill -TERM "$pid"
    wait "$pid" || true
    tail -n 1 "$work/wrk.txt" | python3 -c "
import json, sys
w = json.load(sys.stdin)
print(f\"{$docs / w['seconds']:.0f} {w['p50_ms']:.2f} {w['p99_ms']:.2f}\")"
}

{
    echo "# lshbench serve: throughput at two commits"
    echo
    echo "command: bash experiments/serve/ab.sh $base $docs $clients $rounds"
    if [ -n "${AB_HEAD_BIN:-}" ]; then
        echo "base: $(git rev-parse --short "$base") (the binary $AB_BASE_BIN); head: ${AB_HEAD_REV:-?} (the binary $AB_HEAD_BIN)"
    else
        echo "base: $(git rev-parse --short "$base"); head: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src crates Cargo.toml || echo ' (with uncommitted changes)')"
    fi
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(lscpu | sed -n 's/^Vendor ID: *//p') $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) logical CPUs"
    echo "flags: $(grep -m1 -o -w -E 'avx2|avx512f|avx512bw' /proc/cpuinfo | sort -u | tr '\n' ' ')$(grep -q -w avx512f /proc/cpuinfo || echo '(no AVX-512)')"
    echo "kernel: $(uname -r); index parameters: ${params[*]}"
    echo
    echo "| run | binary | documents/s | p50 ms | p99 ms |"
    echo "|---|---|---:|---:|---:|"
} >"$work/report.md"
for r in $(seq "$rounds"); do
    for which in base head; do
        read -r rate p50 p99 < <(run "$work/lshbench-$which")
        echo "| $r | $which | $rate | $p50 | $p99 |" | tee -a "$work/report.md"
        echo "$rate" >>"$work/$which.rates"
    done
done
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mb=$(median "$work/base.rates")
mh=$(median "$work/head.rates")
{
    echo
    echo "median documents/s: base $mb, head $mh; head / base = $(python3 -c "print(f'{$mh / $mb:.3f}')")"
} | tee -a "$work/report.md"
mkdir -p "$(dirname "$out")"
cp "$work/report.md" "$out"
rm -rf "$work/index" "$work/bodies".* "$work/corpus.jsonl"
