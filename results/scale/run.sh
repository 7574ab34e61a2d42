#!/usr/bin/env bash
# Regenerates one row of results/scale: lshbench gen --docs N (gzip'd), then the out-of-core dedup under
# /usr/bin/time -v, then recall against the planted truth (recall.py), then deletes the corpus and the outputs.
# Usage: results/scale/run.sh N LABEL [SCRATCH]   e.g. results/scale/run.sh 10000000 10m /tmp/scale
# Needs the release build (cargo build --release), about 0.76 GB of scratch disk per million documents, and
# python3 (standard library only). Then: python3 results/scale/plot.py
set -euo pipefail
N=$1; LABEL=$2; SCRATCH=${3:-/tmp/lshbench-scale}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
B=$ROOT/target/release/lshbench
OUT=$HERE/$LABEL
mkdir -p "$SCRATCH" "$OUT"
"$B" gen --docs "$N" --output "$SCRATCH/corpus.jsonl.gz" --threads 2
/usr/bin/time -v "$B" dedup --input "$SCRATCH/corpus.jsonl.gz" --shingle word:3 --bands 42 --rows 3 \
    --threshold 0.5 --memory-limit 6G --tmp-dir "$SCRATCH" --threads 2 \
    --pairs "$SCRATCH/pairs.csv" --clusters "$SCRATCH/clusters.csv" --group-report "$SCRATCH/groups.csv" \
    > "$OUT/summary.txt" 2> "$OUT/time.txt"
"$B" info > "$OUT/machine.txt"
# Sample clusters among the first 3M lines only (reading all of a 10M corpus in Python is slow).
PREFIX=$(( N > 3000000 ? 3000000 : N ))
python3 "$HERE/recall.py" "$SCRATCH/corpus.jsonl.gz" "$SCRATCH/corpus.truth.csv" "$SCRATCH/pairs.csv" "$B" \
    "$OUT/recall.json" --prefix-lines "$PREFIX"
rm -f "$SCRATCH/corpus.jsonl.gz" "$SCRATCH/corpus.truth.csv" "$SCRATCH/pairs.csv" "$SCRATCH/clusters.csv" \
    "$SCRATCH/groups.csv"
