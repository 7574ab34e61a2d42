#!/usr/bin/env bash
# Load benchmark of `lshbench serve` (issue 49, point 6), with datasketch's MinHashLSH on Redis on the same stream:
#   bash experiments/serve/bench.sh [DOCS [OUT]]          # default 1000000 documents, results/serve
# DOCS documents of about 1.5 KB from `lshbench gen` (seed 7) are checked into a new index (word 3-gram
# shingles, threshold 0.5: 35 bands x 3 rows, exact verification; PARAMS overrides), one document per request
# (POST /v1/check, insert always), by wrk with experiments/serve/wrk_check.lua at 1, 16 and 64 concurrent
# connections, each run into its own new index growing to DOCS: documents per second, p50 and p99 latency. After
# each run: memory and disk per document (GET /v1/stats), then kill -9 and the time until the restarted server
# listens with the index's files in the page cache (a process crash), then once more after dropping the page
# cache (a power cut; needs root, skipped otherwise). Then datasketch (experiments/serve/datasketch_redis.py)
# with 16 worker processes on Debian's redis-server, stopped after DATASKETCH_SECONDS (default 600), and
# lshbench again at 16 clients on the same number of documents datasketch reached, for the comparison at equal
# index size.
# Needs: wrk and redis-server (Debian), a Python with datasketch and redis (PY, default python3; versions in
# experiments/serve/requirements.txt), a quiet machine (see BENCHMARKING.md): nothing else compiling or testing;
# OUT/quiet.txt records the load and any compiler or test process before and after each run. Writes OUT/*.json,
# OUT/*.txt and OUT/summary.md; scratch files (about 3 x DOCS x 1.6 KB) go under SERVE_BENCH_WORK (default
# /tmp), removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
docs=${1:-1000000}
out=${2:-results/serve}
work=${SERVE_BENCH_WORK:-/tmp}/lshbench-serve-bench
py=${PY:-python3}
ds_seconds=${DATASKETCH_SECONDS:-600}
bin=target/release/lshbench
# Character 5-grams at 0.5, dedup's default, make about 4% of this corpus's unrelated pairs candidates (its
# Zipfian words share many 5-grams): a query would meet thousands of candidates at 1M documents. Word 3-grams
# separate them (BENCHMARKING.md's note in the guide's serve chapter).
read -r -a params <<<"${PARAMS:---shingle word:3 --threshold 0.5}"
mkdir -p "$out" "$work"
rm -f "$out/quiet.txt"
cargo build --release --locked --bin lshbench

{
    echo "command: bash experiments/serve/bench.sh $docs $out"
    echo "index parameters: ${params[*]}"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml || echo ' (with uncommitted changes)')"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(lscpu | sed -n 's/^Vendor ID: *//p') $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) logical CPUs; flags: $(grep -m1 -o -w -E 'avx2|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "flags: $(grep -m1 -o -w -E 'avx2|avx512f|avx512bw|avx512vbmi' /proc/cpuinfo | sort -u | tr '\n' ' ')$(grep -q -w avx512f /proc/cpuinfo || echo '(no AVX-512)')"
    echo "kernel: $(uname -r); memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "disk of the index: $(df -hT "$work" | awk 'NR==2 {print $2, $3}')"
    echo "lshbench: $($bin info >"$work/info.txt" && head -n 1 "$work/info.txt"); $(grep "^  oph-opt " "$work/info.txt" | awk "{print \$1, \$2, \$3, \$4}")"
    echo "wrk: $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2); redis: $(redis-server --version | cut -d' ' -f3)"
    echo "datasketch: $($py -c 'import importlib.metadata as m; print(m.version("datasketch"))')"
} >"$out/machine.txt"
cat "$out/machine.txt"

corpus=$work/corpus.jsonl
if [ ! -f "$corpus" ] || [ "$(wc -l <"$corpus")" -ne "$docs" ]; then
    $bin gen --docs "$docs" --mean-len 1500 --seed 7 --output "$corpus"
fi

# Starts `serve` on INDEX with ARGS; sets pid and url.
start_server() {
    local index=$1
    shift
    rm -f "$work/serve.out"
    $bin serve --index "$index" --listen 127.0.0.1:0 "$@" >"$work/serve.out" 2>>"$work/serve.err" &
    pid=$!
    # Up to 10 minutes: a slow recovery is a figure to report, not a reason to abandon the run.
    for _ in $(seq 30000); do
        if grep -q '^listening on ' "$work/serve.out" 2>/dev/null; then
            url=$(sed -n 's/^listening on //p' "$work/serve.out")
            return 0
        fi
        sleep 0.02
    done
    echo "serve did not start" >&2
    exit 1
}

# Appends to OUT/quiet.txt the load average and every compiler, test runner or JVM running now (none may be).
quiet_check() {
    {
        echo "$1: $(uptime | sed 's/.*load average/load average/')"
        ps -eo pid=,comm=,args= | awk '$2 ~ /^(rustc|cargo|java|maturin|pytest)$/ || ($3 ~ /python/ && $0 ~ /pytest/)' |
            cut -c1-160 | sed 's/^/  busy: /'
    } >>"$out/quiet.txt"
}

# Documents the server holds, from GET /metrics (cheap enough to ask ten times a second).
documents() {
    curl -s "$url/metrics" | awk '$1 == "lshbench_documents" { print $2 }'
}

# Starts the server on INDEX again and appends to OUT/lshbench-TAG.recovery.json the time until it listens.
restart_timed() {
    local index=$1 tag=$2 cache=$3
    local t0 t1
    t0=$(date +%s.%N)
    start_server "$index"
    t1=$(date +%s.%N)
    curl -s "$url/v1/stats" | $py -c "import json,sys; s=json.load(sys.stdin); print(json.dumps({'page_cache': '$cache', 'documents': s['documents'], 'until_listening_s': round($t1 - $t0, 3), 'recovery': s['recovery'], 'resident_bytes_after_recovery': s['resident_bytes']}))" \
        >>"$out/lshbench-$tag.recovery.json"
    tail -n 1 "$out/lshbench-$tag.recovery.json"
}

# One wrk run of N documents at C connections into a new index; writes OUT/lshbench-cC[-nN].*.
run_lshbench() {
    local c=$1 n=$2 tag=$3
    local threads=$((c < 2 ? c : 2))
    rm -f "$work"/bodies.*
    # wrk asks the first thread's script for one request before the run, to check it, and drops it: each file
    # starts with an empty check (a no-op where it is sent, as by the second thread).
    head -n "$n" "$corpus" | awk -v T="$threads" -v P="$work/bodies" \
        'BEGIN { for (t = 0; t < T; t++) print "{\"documents\":[]}" > (P "." t) }
         { print "{\"documents\":[" $0 "]}" > (P "." ((NR - 1) % T)) }'
    local index=$work/index
    rm -rf "$index"
    # The bodies (1.5 GB at 1M documents), the corpus and whatever else is dirty are written out before the run:
    # left to the kernel's flusher, they would be written back about 30 s into it (vm.dirty_expire_centisecs),
    # and the index's fdatasyncs would wait for them, since ext4's journal commit writes such data out first.
    sync
    start_server "$index" --create "${params[@]}"
    sleep 1
    echo "== lshbench serve, $c clients, $n documents"
    quiet_check "before $tag"
    # wrk runs until -d ends even when every thread has stopped, so it is interrupted (it then prints its
    # summary) once the index holds all N documents; the poll adds at most 0.1 s to a run of minutes, and asks
    # nothing heavier than curl of the server meanwhile.
    wrk -t"$threads" -c"$c" -d3600s --timeout 30s -s experiments/serve/wrk_check.lua "$url" -- "$work/bodies" \
        >"$out/lshbench-$tag.wrk.txt" &
    local wrk_pid=$!
    local last=-1 same=0 now
    while true; do
        sleep 0.1
        now=$(documents)
        now=${now:-0}
        [ "$now" -ge "$n" ] && break
        if [ "$now" -eq "$last" ]; then same=$((same + 1)); else same=0; fi
        if [ "$same" -gt 600 ]; then
            echo "no progress for 60 s at $now documents" >&2
            kill -INT "$wrk_pid"
            exit 1
        fi
        last=$now
    done
    kill -INT "$wrk_pid"
    wait "$wrk_pid" || true
    quiet_check "after $tag"
    cat "$out/lshbench-$tag.wrk.txt"
    tail -n 1 "$out/lshbench-$tag.wrk.txt" | $py -c "import json,sys; w=json.load(sys.stdin); w['documents']=$n; print(json.dumps(w))" \
        >"$out/lshbench-$tag.json"
    curl -s "$url/v1/stats" >"$out/lshbench-$tag.stats.json"
    curl -s "$url/metrics" | grep -E '^lshbench_(documents|memory|resident|disk|log|group|request_duration_seconds_(bucket|sum|count)\{route="/v1/check")' >"$out/lshbench-$tag.metrics.txt"
    # kill -9 at N documents, then the time until the restarted server listens: with the files in the page cache
    # (as after a process crash), then (stopped with SIGTERM) once more with the page cache dropped (as after a
    # power cut).
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    rm -f "$out/lshbench-$tag.recovery.json"
    restart_timed "$index" "$tag" warm
    kill -TERM "$pid"
    wait "$pid" || true
    if sync && (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
        restart_timed "$index" "$tag" cold
        kill -TERM "$pid"
        wait "$pid" || true
    fi
    du -sb "$index" | cut -f1 >"$out/lshbench-$tag.du.txt"
    rm -rf "$index" "$work"/bodies.*
}

# 16 and 64 clients first, then datasketch, then 1 client (the longest run: one sync per document).
for c in 16 64; do
    run_lshbench "$c" "$docs" "c$c"
done

# datasketch on Redis, 16 workers, the same stream.
port=6390
redis-server --port $port --save '' --appendonly no --daemonize yes --pidfile "$work/redis.pid" \
    --logfile "$work/redis.log" --dir "$work"
sleep 1
redis-cli -p $port flushall >/dev/null
echo "== datasketch MinHashLSH on Redis, 16 workers (at most $ds_seconds s)"
quiet_check "before datasketch-w16"
$py experiments/serve/datasketch_redis.py --input "$corpus" --workers 16 --redis-port $port \
    --max-seconds "$ds_seconds" --out "$out/datasketch-w16.json"
quiet_check "after datasketch-w16"
redis-cli -p $port info memory | grep -E '^used_memory:' | tr -d '\r' >"$out/datasketch-w16.redis-memory.txt"
redis-cli -p $port shutdown nosave >/dev/null || true
ds_docs=$($py -c "import json; print(json.load(open('$out/datasketch-w16.json'))['documents'])")
# lshbench on the same number of documents, for the comparison at equal index size.
if [ "$ds_docs" -lt "$docs" ]; then
    run_lshbench 16 "$ds_docs" "c16-n$ds_docs"
fi

run_lshbench 1 "$docs" c1

$py experiments/serve/summarize.py "$out" "$docs" "$ds_docs" "$ds_seconds" | tee "$out/summary.md"
rm -rf "$work"
