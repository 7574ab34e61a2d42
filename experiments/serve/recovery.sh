#!/usr/bin/env bash
# Recovery of `lshbench serve` after kill -9, against the running server: time until it listens again and peak
# resident memory, at DOCS documents.
#   bash experiments/serve/recovery.sh [DOCS [OUT]]      # default 1000000 documents, results/serve/recovery.md
# Checks DOCS documents of `lshbench gen` (about 1.5 KB, seed 7; word 3-grams at 0.5, exact verification, as
# bench.sh) into a new index from 16 wrk connections, one per request; reads the running server's resident and
# peak resident memory (VmRSS, VmHWM of /proc/PID/status); kills it with SIGKILL; starts it again on the same
# index and reads the same once it listens (its peak is recovery's), with the time from the start of the process
# until it listens; twice, the index's files in the page cache (a process crash). Needs wrk (Debian) and a quiet
# machine. Scratch files (about 3 x DOCS x 1.6 KB) go under SERVE_BENCH_WORK (default /tmp), removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
docs=${1:-1000000}
out=${2:-results/serve/recovery.md}
work=${SERVE_BENCH_WORK:-/tmp}/lshbench-serve-recovery
read -r -a params <<<"${PARAMS:---shingle word:3 --threshold 0.5}"
bin=target/release/lshbench
cargo build --release --locked --bin lshbench
rm -rf "$work"
mkdir -p "$work"
$bin gen --docs "$docs" --mean-len 1500 --seed 7 --output "$work/corpus.jsonl" >/dev/null
# As bench.sh: each wrk thread's file starts with an empty check, which wrk asks for and drops.
awk -v P="$work/bodies" 'BEGIN { print "{\"documents\":[]}" > (P ".0"); print "{\"documents\":[]}" > (P ".1") }
     { print "{\"documents\":[" $0 "]}" > (P "." ((NR - 1) % 2)) }' "$work/corpus.jsonl"
rm -f "$work/corpus.jsonl"
sync

# Starts serve on the index with ARGS; sets pid, url and listen_s (seconds from the start until it listens).
start_server() {
    rm -f "$work/serve.out"
    local t0
    t0=$(date +%s.%N)
    $bin serve --index "$work/index" --listen 127.0.0.1:0 "$@" >"$work/serve.out" 2>>"$work/serve.err" &
    pid=$!
    until grep -q '^listening on ' "$work/serve.out" 2>/dev/null; do sleep 0.01; done
    listen_s=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')")
    url=$(sed -n 's/^listening on //p' "$work/serve.out")
}
mib() { awk -v k="$1" '$1 == k":" { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }
documents() { curl -s "$url/metrics" | awk '$1 == "lshbench_documents" { print $2 }'; }

start_server --create "${params[@]}"
wrk -t2 -c16 -d3600s --timeout 30s -s experiments/serve/wrk_check.lua "$url" -- "$work/bodies" >"$work/wrk.txt" &
wrk_pid=$!
last=-1
same=0
until [ "$(documents)" -ge "$docs" ] 2>/dev/null; do
    sleep 0.5
    now=$(documents)
    if [ "${now:-0}" -eq "$last" ]; then same=$((same + 1)); else same=0; fi
    [ "$same" -lt 120 ] || { echo "no progress for 60 s at ${now:-0} documents" >&2; kill "$wrk_pid" "$pid"; exit 1; }
    last=${now:-0}
done
kill -INT "$wrk_pid"
wait "$wrk_pid" || true
rss=$(mib VmRSS)
hwm=$(mib VmHWM)
stats=$(curl -s "$url/v1/stats")
{
    echo "# lshbench serve: recovery after kill -9"
    echo
    echo "command: bash experiments/serve/recovery.sh $docs $out"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml || echo ' (with uncommitted changes)'); date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(lscpu | sed -n 's/^Vendor ID: *//p') $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) logical CPUs; flags: $(grep -m1 -o -w -E 'avx2|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "kernel: $(uname -r); index parameters: ${params[*]}; disk of the index: $(du -sh "$work/index" | cut -f1)"
    echo
    echo "| server | documents | resident MiB | peak resident MiB | seconds until listening | snapshot at | log segments read | groups replayed |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    echo "| running, before kill -9 | $(echo "$stats" | jq .documents) | $rss | $hwm | | | | |"
} >"$work/report.md"
for run in 1 2; do
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    start_server
    rss=$(mib VmRSS)
    hwm=$(mib VmHWM)
    stats=$(curl -s "$url/v1/stats")
    echo "| restarted ($run) | $(echo "$stats" | jq .documents) | $rss | $hwm | $listen_s | $(echo "$stats" | jq .recovery.snapshot_seq) | $(echo "$stats" | jq .recovery.segments) | $(echo "$stats" | jq .recovery.groups) |" >>"$work/report.md"
done
kill -TERM "$pid"
wait "$pid" || true
mkdir -p "$(dirname "$out")"
cp "$work/report.md" "$out"
cat "$out"
rm -rf "$work"
