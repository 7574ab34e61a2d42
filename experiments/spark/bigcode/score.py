#!/usr/bin/env python3
"""Scores a run_bigcode.py output against the exact truth: every pair with Jaccard >= threshold.

    lshbench exact --input corpus.parquet --id-column id --shingle word:3 --threshold 0.7 --output truth.csv
    python experiments/spark/bigcode/score.py --input corpus.parquet --bigcode OUT --truth truth.csv \
        --threshold 0.7 --shingle word:3

Jaccard here is ours (lshbench shingling, --shingle, no other normalisation), not BigCode's own tokenisation,
so the scores say how well BigCode finds the pairs our benchmark counts as near-duplicates. Reports:
  recall (edges)       truth pairs that are one of BigCode's candidate edges. BigCode links each band bucket
                       as a star (every document to the bucket's smallest), so this undercounts for groups of 3+
  recall (components)  truth pairs whose two documents end in the same BigCode component
  precision (edges)    BigCode edges with exact Jaccard >= threshold (computed with lshbench.jaccard_pairs)
  unjustified removals documents BigCode removes that have no truth partner among the documents it keeps
Prints a summary and writes score.json into the --bigcode directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

import lshbench


def as_index(ids: pa.Array, index: dict) -> np.ndarray:
    """Our ids (compared as strings, so int and string columns agree) to row positions in the corpus."""
    return np.array([index[s] for s in ids.cast(pa.string()).to_pylist()], dtype=np.int64)


def pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """One int64 per unordered pair, for set operations."""
    return np.minimum(a, b) * n + np.maximum(a, b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, required=True, help="the corpus given to run_bigcode.py (id, text)")
    ap.add_argument("--bigcode", type=Path, required=True, help="run_bigcode.py's --output directory")
    ap.add_argument("--truth", type=Path, required=True, help="`lshbench exact` CSV id_a,id_b,jaccard")
    ap.add_argument("--threshold", type=float, default=0.7, help="the one the truth was made with")
    ap.add_argument("--shingle", default="word:3", help="the one the truth was made with")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    corpus = pq.read_table(args.input, columns=["id", "text"])
    n = corpus.num_rows
    index = {s: i for i, s in enumerate(corpus["id"].cast(pa.string()).to_pylist())}
    assert len(index) == n, "ids must be unique"

    str_cols = pcsv.ConvertOptions(column_types={"id_a": pa.string(), "id_b": pa.string()})
    truth = pcsv.read_csv(args.truth, convert_options=str_cols)
    ta, tb = as_index(truth["id_a"], index), as_index(truth["id_b"], index)
    edges = pq.read_table(args.bigcode / "edges")
    ea, eb = as_index(edges["id_a"], index), as_index(edges["id_b"], index)
    comps = pq.read_table(args.bigcode / "components")

    # Component of every document: its own position unless BigCode put it in a component.
    comp = np.arange(n, dtype=np.int64)
    comp[as_index(comps["id"], index)] = as_index(comps["component"], index)
    removed = np.zeros(n, dtype=bool)
    removed[comp != np.arange(n)] = True  # every member but the component's smallest (the one it keeps)

    truth_keys = pair_keys(ta, tb, n)
    edge_keys = np.unique(pair_keys(ea, eb, n))
    ea, eb = edge_keys // n, edge_keys % n  # each edge once (BigCode's are distinct already)
    in_edges = np.isin(truth_keys, edge_keys)
    same_comp = comp[ta] == comp[tb]

    # Exact Jaccard of BigCode's edges under our shingling.
    j = lshbench.jaccard_pairs(corpus["text"], np.stack([ea, eb], axis=1), shingle=args.shingle, threads=args.threads)
    good = j >= args.threshold

    # A removal is justified when the document has a truth partner that BigCode keeps.
    justified = np.zeros(n, dtype=bool)
    justified[ta[removed[ta] & ~removed[tb]]] = True
    justified[tb[removed[tb] & ~removed[ta]]] = True
    unjustified = int((removed & ~justified).sum())

    # The kept output must be exactly the documents not removed.
    kept_ids = pq.read_table(args.bigcode / "kept", columns=["id"])["id"]
    assert len(kept_ids) == n - removed.sum(), "BigCode's kept output disagrees with its components"

    def frac(a: int, b: int):
        return a / b if b else None  # None (null) when there is nothing to divide by

    s = {
        "threshold": args.threshold, "shingle": args.shingle, "docs": n, "truth_pairs": len(truth_keys),
        "edges": len(edge_keys), "components": int(len(np.unique(comp[removed]))),
        "docs_removed": int(removed.sum()),
        "recall_edges": frac(int(in_edges.sum()), len(truth_keys)),
        "recall_components": frac(int(same_comp.sum()), len(truth_keys)),
        "precision_edges": frac(int(good.sum()), len(j)),
        "edges_jaccard_ge_threshold": int(good.sum()),
        "edges_in_truth": int(np.isin(edge_keys, truth_keys).sum()),  # a cross-check: should equal the line above
        "edges_jaccard_quartiles": [float(x) for x in np.quantile(j, [0.25, 0.5, 0.75])] if len(j) else [],
        "unjustified_removals": unjustified,
        "unjustified_removal_rate": frac(unjustified, int(removed.sum())),
    }
    (args.bigcode / "score.json").write_text(json.dumps(s, indent=2) + "\n")
    print(json.dumps(s, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
