#!/usr/bin/env python3
"""Runs BigCode's Spark near-deduplication script on a Parquet corpus, for a side-by-side with lshbench.spark.

    PYSPARK_PYTHON=/work/venv58/bin/python python experiments/spark/bigcode/run_bigcode.py \
        --script minhash_deduplication_spark.py --input corpus.parquet \
        --bands 35 --rows 3 --ngram 3 --output /tmp/bc/out --master 'local[2]' --driver-memory 6g

BigCode's code is not part of this repository: --script is your own download of it at the pinned commit
(see EXPECTED_SHA256 and URL below); the runner refuses any other version. It runs that file unchanged except
for one expression: its BigQuery read becomes a Parquet read of --input. Everything else (shingling, hashing,
banding, edges, connected components, output) is BigCode's own code. The banding goes through the script's own
--b/--r arguments, with --num_perm = bands * rows (it bands the first b * r of its num_perm hash values).

Writes to --output:
    kept/            BigCode's own output (the rows it keeps, Parquet, the input's columns)
    edges/           the candidate edges its banding produced, as our ids (Parquet id_a, id_b); BigCode links
                     each document of a band bucket to the bucket's smallest document, so this is a star per bucket,
                     not every colliding pair
    components/      each document in a component of two or more and its component (Parquet id, component = the
                     id of the component's kept document)
    counts.json      documents in and kept, edges, components, and wall times
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

COMMIT = "61fe0f86def3ac88c688e7fdc6304c969847d602"
PATH = "near_deduplication/minhash_deduplication_spark.py"
URL = f"https://raw.githubusercontent.com/bigcode-project/bigcode-dataset/{COMMIT}/{PATH}"
EXPECTED_SHA256 = "bb7638fd0cd2c152c7f187054a70df744768a86f8449b63663ee98352f625368"

# The only change to BigCode's code: its input. `args.table` then carries the Parquet path (passed as --table).
INPUT_BEFORE = 'spark.read.format("bigquery").option("table", args.table).load()'
INPUT_AFTER = "spark.read.parquet(args.table)"


class ScriptGlobals(dict):
    """The exec'd script's module namespace. It remembers every value the script binds to `df`: the script
    rebinds `df` to its output, so this is how the runner gets the cached table that carries BigCode's
    internal `__id__` next to our `id` (to translate its edges into our ids). Nothing is changed, only seen."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.df_history: list = []

    def __setitem__(self, key, value):
        if key == "df":
            self.df_history.append(value)
        super().__setitem__(key, value)


def load_script(path: Path) -> str:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != EXPECTED_SHA256:
        sys.exit(f"error: {path} has sha256 {digest}, not {EXPECTED_SHA256}.\n"
                 f"This runner supports only {PATH} at commit {COMMIT} of bigcode-project/bigcode-dataset;\n"
                 f"download it with: curl -fLo minhash_deduplication_spark.py {URL}")
    text = data.decode("utf-8")
    n = text.count(INPUT_BEFORE)
    assert n == 1, f"expected the BigQuery read exactly once in {path}, found it {n} times"
    return text.replace(INPUT_BEFORE, INPUT_AFTER)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", type=Path, required=True, help=f"BigCode's {PATH} at commit {COMMIT}")
    ap.add_argument("--input", type=Path, required=True, help="Parquet corpus with columns id and text")
    ap.add_argument("--bands", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--ngram", type=int, default=5, help="BigCode's --ngram_size (tokens per shingle)")
    ap.add_argument("--min-ngram-size", type=int, default=5,
                    help="BigCode's --min_ngram_size (its default 5): shorter documents get an all-max signature")
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory (local mode: driver and executor)")
    args = ap.parse_args()
    source = load_script(args.script)
    args.output.mkdir(parents=True, exist_ok=True)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    # Our session first, so that master and memory are ours; the script's getOrCreate() then returns it.
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master(args.master).config("spark.driver.memory", args.driver_memory)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").appName("MinHashLSH").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    t_start = time.perf_counter() - t0

    # BigCode's own arguments: the input, the text column, n-gram size and the forced banding.
    argv = [str(args.script), "--table", str(args.input.resolve()), "--column", "text",
            "--ngram_size", str(args.ngram), "--min_ngram_size", str(args.min_ngram_size),
            "--num_perm", str(args.bands * args.rows), "--b", str(args.bands), "--r", str(args.rows),
            "--output", str((args.output / "kept").resolve())]
    ns = ScriptGlobals(__name__="__main__", __file__=str(args.script), __builtins__=__builtins__)
    saved_argv, sys.argv = sys.argv, argv
    t1 = time.perf_counter()
    try:
        exec(compile(source, str(args.script), "exec"), ns)
    except SystemExit as e:  # the script exits with 0 when it finds no component
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = saved_argv
    t_bigcode = time.perf_counter() - t1

    # Extra outputs from the script's own objects (not timed): its edges and components, as our ids.
    t2 = time.perf_counter()
    with_id = next(d for d in ns.df_history if "__id__" in d.columns)  # the cached input with BigCode's __id__
    ids = with_id.select("__id__", "id")
    n_in = ids.count()
    edges = spark.createDataFrame(ns["edges"], "a long, b long")
    edges_ids = (edges.join(ids.withColumnRenamed("__id__", "a").withColumnRenamed("id", "id_a"), "a")
                 .join(ids.withColumnRenamed("__id__", "b").withColumnRenamed("id", "id_b"), "b")
                 .select("id_a", "id_b"))
    edges_ids.write.parquet(str(args.output / "edges"), mode="overwrite")
    n_edges = spark.read.parquet(str(args.output / "edges")).count()
    results = ns.get("results") or []  # (__id__, component root __id__) of every removed document
    roots = {c for _, c in results}
    members = results + [(r, r) for r in roots]  # the roots (kept) belong to their components too
    comp = spark.createDataFrame(members, "n long, c long")
    (comp.join(ids.withColumnRenamed("__id__", "n"), "n")
     .join(ids.withColumnRenamed("__id__", "c").withColumnRenamed("id", "component"), "c")
     .select("id", "component").write.parquet(str(args.output / "components"), mode="overwrite"))
    n_kept = spark.read.parquet(str(args.output / "kept")).count()
    counts = {
        "script": {"commit": COMMIT, "path": PATH, "sha256": EXPECTED_SHA256},
        "bands": args.bands, "rows": args.rows, "num_perm": args.bands * args.rows, "ngram": args.ngram,
        "min_ngram_size": args.min_ngram_size, "master": args.master, "driver_memory": args.driver_memory,
        "docs_in": n_in, "docs_kept": n_kept, "docs_removed": len(results), "edges": n_edges,
        "components": len(roots),
        "seconds": {"spark_start": t_start, "bigcode": t_bigcode, "extra_outputs": time.perf_counter() - t2},
    }
    (args.output / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    print(json.dumps(counts, indent=2))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
