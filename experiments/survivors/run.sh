#!/usr/bin/env bash
# Which grouping should `--kept` use? Removes near-duplicates from the shipped mail corpus under both groupings
# and several survivor policies, and scores each audit against the exact all-pairs join at the same threshold.
#
#   bash experiments/survivors/run.sh > results/survivors/mails.md
#
# LSHBENCH names the binary (default target/release/lshbench, built if missing). Counts do not depend on the
# build, the thread count or the instruction set.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${LSHBENCH:-target/release/lshbench}
[ -x "$bin" ] || cargo build --release --quiet
corpus=data/spamassassin.jsonl.gz
t=0.5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" exact --input "$corpus" --shingle char:5 --threshold "$t" --output "$work/truth.csv" >/dev/null
audits=()
for groups in components center; do
    for keep in center first longest; do
        out="$work/$groups-$keep.csv"
        "$bin" dedup --input "$corpus" --shingle char:5 --threshold "$t" --groups "$groups" --keep "$keep" \
            --removed "$out" --threads 2 >/dev/null
        audits+=("$out")
    done
done
echo "# Survivors on the shipped mail corpus: components against center"
echo
echo "\`bash experiments/survivors/run.sh\`: \`lshbench dedup --input $corpus --shingle char:5 --threshold $t"
echo "--groups G --keep P --removed R\`, each audit scored against \`lshbench exact\` at J >= $t"
echo "(experiments/survivors/audit.py). Commit $(git rev-parse --short HEAD)."
echo
python3 experiments/survivors/audit.py "$work/truth.csv" "$t" "${audits[@]}" | sed "s|$work/||"
