#!/usr/bin/env bash
# Runs the fuzz targets (fuzz/targets.txt) with cargo-fuzz on the nightly toolchain, from any directory:
#   bash fuzz/run.sh SECONDS [JOBS] [TARGET...]
# Each target runs for SECONDS (libFuzzer's -max_total_time) from its committed seeds (fuzz/seeds/TARGET) plus a
# scratch corpus under ${FUZZ_WORK:-/tmp/lshbench-fuzz}, JOBS targets at a time (default 1). Each run's logs go
# to a directory of their own under it (printed at the start), so runs side by side do not clobber each other's
# logs. A crash, or a log without libFuzzer's execution count, fails the script; a crash leaves the input in
# fuzz/artifacts/TARGET/. Extra libFuzzer flags go in FUZZ_FLAGS (e.g.
# FUZZ_FLAGS=-runs=10000000). Memory: a run fails as out-of-memory past FUZZ_RSS_MB of resident memory
# (default 512 without a sanitizer, where libFuzzer cannot see single allocations; 2048 under ASan, whose
# shadow and quarantine take hundreds of MB) or, under ASan, at one allocation over FUZZ_MALLOC_MB (default
# 512). No input of these sizes needs that much: a size read from a file and trusted does (session 9 found a
# 1.4-KB Parquet file taking 1.4 GB only from the log's rss column). FUZZ_SANITIZER=none builds without
# AddressSanitizer (cargo-fuzz's default), into fuzz/target-nosan so the two builds do not evict each other:
# several times the executions per second for the safe-Rust parsers. Without the nightly toolchain or cargo-fuzz
# it says so and exits 0 (a skip). FUZZ_BUILD_ONLY=1 builds the targets and stops (SECONDS is then ignored):
# CI builds them in the background while its other steps run, and runs them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: bash fuzz/run.sh SECONDS [JOBS] [TARGET...]}
jobs=${2:-1}
shift $(($# < 2 ? $# : 2))
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz: skipped: no nightly toolchain (rustup toolchain install nightly), which cargo-fuzz needs"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: skipped: cargo-fuzz is not installed (cargo install cargo-fuzz --locked; .ci/run does it)"
    exit 0
fi
work=${FUZZ_WORK:-/tmp/lshbench-fuzz}
mkdir -p "$work"
logs=$(mktemp -d "$work/logs.XXXXXX")
echo "fuzz: logs in $logs"
sanitizer=()
memory=(-rss_limit_mb="${FUZZ_RSS_MB:-2048}" -malloc_limit_mb="${FUZZ_MALLOC_MB:-512}")
if [ "${FUZZ_SANITIZER:-address}" = none ]; then
    sanitizer=(--sanitizer none --target-dir fuzz/target-nosan)
    memory=(-rss_limit_mb="${FUZZ_RSS_MB:-512}")
fi
cargo +nightly fuzz build "${sanitizer[@]}"
if [ -n "${FUZZ_BUILD_ONLY:-}" ]; then
    echo "fuzz: targets built"
    exit 0
fi
declare -A max_len
while read -r name len _; do
    case $name in '#'* | '') continue ;; esac
    max_len[$name]=$len
done <fuzz/targets.txt
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(grep -v '^#' fuzz/targets.txt | awk 'NF && $3 != "manual" {print $1}')
fi
run_one() {
    local t=$1
    mkdir -p "$work/corpus/$t"
    local dict=()
    [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
    # -print_final_stats: the execution count and rate end the log; the log keeps libFuzzer's own lines.
    if cargo +nightly fuzz run "${sanitizer[@]}" "$t" "$work/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -max_len="${max_len[$t]:?unknown target $t}" -print_final_stats=1 \
        "${memory[@]}" \
        "${dict[@]}" ${FUZZ_FLAGS:-} >"$logs/$t.log" 2>&1; then
        local count
        count=$(grep -E '^stat::number_of_executed_units' "$logs/$t.log" | awk '{print $2}' || true)
        if [ -z "$count" ]; then
            echo "fuzz: $t: FAILED: the run ended without libFuzzer's execution count (log: $logs/$t.log)" >&2
            tail -20 "$logs/$t.log" >&2
            return 1
        fi
        echo "fuzz: $t: ok: $count executions in at most ${seconds}s"
    else
        echo "fuzz: $t: FAILED (log: $logs/$t.log)" >&2
        tail -40 "$logs/$t.log" >&2
        return 1
    fi
}
status=0
pids=()
for t in "${targets[@]}"; do
    run_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do
    wait "$p" || status=1
done
exit $status
