"""Scores removal audits (`lshbench dedup --removed`) against the exact pairs of `lshbench exact`.

usage: audit.py TRUTH.csv THRESHOLD REMOVED.csv...

For each audit: documents removed; unjustified removals (a removed document with no document at or above the
threshold among the kept, by exact Jaccard); removals whose survivor is below the threshold; residual pairs (exact
pairs with both documents kept). Prints one markdown row per audit.
"""
import csv
import sys


def main() -> None:
    truth, threshold, audits = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    near = {}
    with open(truth, newline="") as f:
        for row in csv.DictReader(f):
            if float(row["jaccard"]) >= threshold:
                near.setdefault(row["id_a"], set()).add(row["id_b"])
                near.setdefault(row["id_b"], set()).add(row["id_a"])
    print("| audit | removed | unjustified | survivor below threshold | residual pairs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for path in audits:
        with open(path, newline="") as f:
            removed = {row["id"]: row for row in csv.DictReader(f)}
        unjustified = sum(
            1 for d in removed if not any(x not in removed for x in near.get(d, ()))
        )
        below = sum(
            1
            for row in removed.values()
            if row["similarity"] and float(row["similarity"]) < threshold
        )
        residual = sum(
            1
            for a, bs in near.items()
            for b in bs
            if a < b and a not in removed and b not in removed
        )
        print(f"| {path} | {len(removed)} | {unjustified} | {below} | {residual} |")


if __name__ == "__main__":
    main()
