#!/usr/bin/env python3
"""Recall of an out-of-core dedup run against the generator's planted truth, next to the S-curve's prediction.

Usage: recall.py CORPUS.jsonl.gz TRUTH.csv PAIRS.csv LSHBENCH OUT.json [--clusters 4000] [--bands 42 --rows 3
       --threshold 0.5 --shingle word:3 --seed 42]

Planted pairs are every pair of members of one planted cluster (base-copy and copy-copy). Their exact Jaccard
needs the texts, so a seeded sample of clusters is taken (optionally only among clusters lying wholly within the
first --prefix-lines lines, to read less of a large corpus): its documents are cut out of the corpus (ids are line
numbers), `lshbench exact` gives the exact word-shingle Jaccard of every sample pair with J >= 0.05, and a planted
pair counts as a true near-duplicate when J >= threshold. Recall = the share of those the dedup run reported as
a verified pair (PAIRS.csv); the prediction is the mean of the S-curve P(J) = 1 - (1 - J^r)^b over the same
pairs, with a binomial standard error on the measured recall.
"""
import argparse, csv, gzip, json, math, random, subprocess, sys, tempfile, os
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("corpus"); ap.add_argument("truth"); ap.add_argument("pairs"); ap.add_argument("lshbench")
ap.add_argument("out")
ap.add_argument("--clusters", type=int, default=4000)
ap.add_argument("--bands", type=int, default=42); ap.add_argument("--rows", type=int, default=3)
ap.add_argument("--threshold", type=float, default=0.5); ap.add_argument("--shingle", default="word:3")
ap.add_argument("--seed", type=int, default=42)
ap.add_argument("--prefix-lines", type=int, default=None,
                help="sample only clusters whose members all lie in the first this many lines (reads less)")
a = ap.parse_args()

members = defaultdict(list)
with open(a.truth) as f:
    for row in csv.DictReader(f):
        members[int(row["cluster"])].append(int(row["id"]))
rng = random.Random(7)
eligible = sorted(c for c, m in members.items() if a.prefix_lines is None or max(m) < a.prefix_lines)
chosen = rng.sample(eligible, min(a.clusters, len(eligible)))
want = {d for c in chosen for d in members[c]}
planted = [(min(x, y), max(x, y)) for c in chosen for i, x in enumerate(members[c]) for y in members[c][i + 1:]]

with tempfile.TemporaryDirectory() as tmp:
    sample = os.path.join(tmp, "sample.jsonl")
    with gzip.open(a.corpus, "rt", encoding="utf-8") as f, open(sample, "w", encoding="utf-8") as out:
        last = max(want)
        for line_no, line in enumerate(f):
            if line_no in want:
                out.write(line)
            if line_no >= last:
                break
    exact = os.path.join(tmp, "exact.csv")
    subprocess.run([a.lshbench, "exact", "--input", sample, "--shingle", a.shingle, "--seed", str(a.seed),
                    "--threshold", "0.05", "--output", exact], check=True, stdout=subprocess.DEVNULL)
    jac = {}
    with open(exact) as f:
        for row in csv.DictReader(f):
            x, y = int(row["id_a"]), int(row["id_b"])
            jac[(min(x, y), max(x, y))] = float(row["jaccard"])

found = set()
with open(a.pairs) as f:
    for row in csv.DictReader(f):
        x, y = int(row["id_a"]), int(row["id_b"])
        if x in want and y in want:
            found.add((min(x, y), max(x, y)))

p = lambda j: 1 - (1 - j ** a.rows) ** a.bands
true_pairs = [q for q in planted if jac.get(q, 0.0) >= a.threshold]
hit = sum(q in found for q in true_pairs)
n = len(true_pairs)
recall = hit / n
predicted = sum(p(jac[q]) for q in true_pairs) / n
se = math.sqrt(max(recall * (1 - recall), 1 / n) / n)
res = {
    "clusters_sampled": len(chosen), "planted_pairs": len(planted), "planted_pairs_at_or_above_t": n,
    "found": hit, "recall": recall, "recall_standard_error": se, "scurve_prediction": predicted,
    "prefix_lines": a.prefix_lines, "threshold": a.threshold, "bands": a.bands, "rows": a.rows,
    "false_reports_in_sample": sum(1 for q in found if jac.get(q, 0.0) < a.threshold),
}
json.dump(res, open(a.out, "w"), indent=1)
print(json.dumps(res))
