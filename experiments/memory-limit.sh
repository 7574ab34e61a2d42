#!/bin/sh
# Peak resident memory of `dedup --memory-limit` on the shipped mail corpus against each limit, on 1 and 2
# threads: the smallest limit the run accepts (found by raising the limit to each refusal's stated need), 8 MiB
# above it, 64M and 96M. Writes a markdown table on stdout; results/outofcore/memory-limit.md is its output.
# Needs a release build (cargo build --release) and GNU time (/usr/bin/time).
set -eu
bin=${LSHBENCH:-target/release/lshbench}
corpus=data/spamassassin.jsonl.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs one limit; prints "ok PEAK_KB" or "refused NEED_MIB_ROUNDED_UP".
run() {
    if /usr/bin/time -f %M -o "$tmp/peak" "$bin" dedup --input "$corpus" --pairs "$tmp/pairs.csv" \
        --threads "$1" --memory-limit "$2" --tmp-dir "$tmp" >/dev/null 2>"$tmp/err"; then
        echo "ok $(tail -1 "$tmp/peak")"
    else
        need=$(sed -n 's/.*needs about \([0-9.]*\) MiB.*/\1/p' "$tmp/err")
        [ -n "$need" ] || { cat "$tmp/err" >&2; exit 1; }
        echo "refused $(awk -v x="$need" 'BEGIN { printf "%d", x + 2 }')"
    fi
}

echo "| threads | --memory-limit | peak RSS (MiB) | under the limit |"
echo "|---:|---:|---:|:---|"
for threads in 1 2; do
    limit=1
    while :; do
        set -- $(run "$threads" "${limit}M")
        [ "$1" = ok ] && break
        limit=$2
    done
    floor=$limit
    for l in "$floor" $((floor + 8)) 64 96; do
        set -- $(run "$threads" "${l}M")
        if [ "$1" = ok ]; then
            awk -v t="$threads" -v l="$l" -v f="$floor" -v kb="$2" 'BEGIN {
                tag = (l == f) ? " (smallest accepted)" : ""
                printf "| %d | %dM%s | %.1f | %s |\n", t, l, tag, kb / 1024, (kb < l * 1024) ? "yes" : "NO" }'
        else
            echo "| $threads | ${l}M | refused: needs about $2 MiB | - |"
        fi
    done
done
