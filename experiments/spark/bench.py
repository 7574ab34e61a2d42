#!/usr/bin/env python3
"""lshbench.spark on local[2] against `lshbench dedup` (and, optionally, BigCode's Spark script) on the same
generated corpus: wall time, MB of text per core-second, peak memory, and recall and precision.

    python experiments/spark/bench.py --docs 2000000 --mean-len 500 --work /tmp/spark-bench \
        [--bigcode-script minhash_deduplication_spark.py] [--result results/spark/bench.jsonl]

Steps: `lshbench gen` writes the corpus (JSONL), pyarrow converts it to Parquet; the CLI runs under
/usr/bin/time -v (wall time, maximum resident set); the Spark job runs as `python -m lshbench.spark dedup
--master local[2]` while this script samples the resident memory of its whole process tree (the driver's Python,
the JVM that is driver and executor in local mode, the Python workers) every 0.2 s. The two answers are
compared (verified pair count and group count). Prints a Markdown table and writes results.json in --work.
Not part of CI. Needs the lshbench CLI (cargo build --release), the package and pyspark (python/requirements-ci.txt).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tree_rss_kib(root_pid: int) -> dict:
    """Resident KiB of root_pid and all its descendants, by process name (from /proc)."""
    children: dict = {}
    names: dict = {}
    rss: dict = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                text = f.read()
        except OSError:
            continue
        pid = int(d)
        ppid = int(re.search(r"^PPid:\s+(\d+)", text, re.M).group(1))
        m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
        children.setdefault(ppid, []).append(pid)
        names[pid] = re.search(r"^Name:\s+(\S+)", text, re.M).group(1)
        rss[pid] = int(m.group(1)) if m else 0
    out: dict = {}
    stack = [root_pid]
    while stack:
        p = stack.pop()
        if p in rss:
            out[names[p]] = out.get(names[p], 0) + rss[p]
        stack.extend(children.get(p, []))
    return out


def run_sampled(cmd: list, log: Path) -> dict:
    """Runs cmd, sampling its process tree's RSS; returns wall seconds, peak total and peak per process name."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        peak_total, peak_by_name = 0, {}
        done = threading.Event()

        def sample():
            nonlocal peak_total
            while not done.is_set():
                by_name = tree_rss_kib(proc.pid)
                peak_total = max(peak_total, sum(by_name.values()))
                for k, v in by_name.items():
                    peak_by_name[k] = max(peak_by_name.get(k, 0), v)
                time.sleep(0.2)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        rc = proc.wait()
        done.set()
        t.join()
    wall = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"{cmd[0]} ... failed with status {rc}; see {log}")
    return {"wall_s": wall, "peak_rss_mib": peak_total / 1024, "peak_rss_mib_by_process": {k: v / 1024 for k, v in peak_by_name.items()}}


def cli_run(cmd: list) -> dict:
    """Runs cmd under /usr/bin/time -v: wall seconds, peak RSS, stdout."""
    t = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t.stderr).group(1)
    parts = [float(x) for x in wall.split(":")]
    return {
        "wall_s": sum(p * 60 ** i for i, p in enumerate(reversed(parts))),
        "peak_rss_mib": int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t.stderr).group(1)) / 1024,
        "stdout": t.stdout,
    }


def pair_set(path: Path, a: str, b: str) -> set:
    """Unordered id pairs of a CSV or a Parquet dataset."""
    if path.suffix == ".csv":
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types={a: "string", b: "string"}))
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=[a, b])
    return {(x, y) if x < y else (y, x) for x, y in zip(table[a].to_pylist(), table[b].to_pylist())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--mean-len", type=int, default=500)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--shingle", default="word:3")
    ap.add_argument("--bands", type=int, default=35)
    ap.add_argument("--rows", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory (local mode: driver and executor)")
    ap.add_argument("--shuffle-partitions", type=int, default=64)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "lshbench"))
    ap.add_argument("--bigcode-script", type=Path,
                    help="BigCode's minhash_deduplication_spark.py at the commit experiments/spark/bigcode pins: "
                         "also run it on the same corpus, and score all three against `lshbench exact`")
    ap.add_argument("--result", type=Path, help="also append the result as one JSON line to this file")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.work / f"corpus-{args.docs}-{args.mean_len}.jsonl"
    parquet = args.work / f"corpus-{args.docs}-{args.mean_len}.parquet"
    banding = ["--shingle", args.shingle, "--bands", str(args.bands), "--rows", str(args.rows),
               "--threshold", str(args.threshold)]

    if not corpus.exists():
        subprocess.run([args.bin, "gen", "--docs", str(args.docs), "--mean-len", str(args.mean_len), "--seed", "42",
                        "--output", str(corpus)], check=True)
    if not parquet.exists():
        import pyarrow.json as pj
        import pyarrow.parquet as pq

        table = pj.read_json(corpus)
        pq.write_table(table.select(["id", "text"]), parquet, row_group_size=1 << 16)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    text_mb = pc.sum(pc.binary_length(pq.read_table(parquet, columns=["text"])["text"])).as_py() / 1e6
    info = subprocess.run([args.bin, "info"], capture_output=True, text=True).stdout
    cores = os.cpu_count()

    # The CLI on the JSONL corpus (the same rows, in the same order), two threads as local[2] has two cores.
    cli_dir = args.work / "cli"
    cli_dir.mkdir(exist_ok=True)
    cli = cli_run([args.bin, "dedup", "--input", str(corpus), *banding, "--threads", "2",
                   "--pairs", str(cli_dir / "pairs.csv"), "--clusters", str(cli_dir / "clusters.csv")])
    cli_pairs = int(re.search(r"verified \(exact, similarity >= [0-9.]+\): (\d+) pairs", cli["stdout"]).group(1))
    cli_groups = int(re.search(r"groups \(Components\): (\d+) groups", cli["stdout"]).group(1))

    # The Spark job on local[2].
    spark_dir = args.work / "spark"
    env_cmd = [sys.executable, "-m", "lshbench.spark", "dedup", "--input", str(parquet), "--text-column", "text",
               "--id-column", "id", *banding, "--output", str(spark_dir), "--master", "local[2]",
               "--shuffle-partitions", str(args.shuffle_partitions),
               "--checkpoint-dir", str(args.work / "checkpoints")]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {args.driver_memory} pyspark-shell"
    spark = run_sampled(env_cmd, args.work / "spark.log")
    log = (args.work / "spark.log").read_text()
    spark_pairs = int(re.search(r"verified \(exact, similarity >= [0-9.]+\): (\d+) pairs", log).group(1))
    spark_groups = int(re.search(r"groups \(components, [^,]+, \d+ large-star/small-star rounds\): (\d+)",
                                 log).group(1))
    spark["stages_s"] = {k: float(v) for k, v in re.findall(r"([a-z][a-z ]+?) ([0-9.]+)(?:,|$)",
                                                             re.search(r"^seconds: (.*)$", log, re.M).group(1))}

    runs = {"lshbench dedup --threads 2": cli, "lshbench.spark local[2]": spark}
    quality = {}
    if args.bigcode_script:
        bc_dir = args.work / "bigcode"
        here = Path(__file__).resolve().parent / "bigcode"
        runs["BigCode minhash_deduplication_spark.py local[2]"] = run_sampled(
            [sys.executable, str(here / "run_bigcode.py"), "--script", str(args.bigcode_script), "--input",
             str(parquet), "--bands", str(args.bands), "--rows", str(args.rows),
             "--ngram", args.shingle.split(":")[1], "--output", str(bc_dir), "--master", "local[2]",
             "--driver-memory", args.driver_memory], args.work / "bigcode.log")
        truth_csv = args.work / f"truth-{args.threshold}.csv"
        if not truth_csv.exists():
            subprocess.run([args.bin, "exact", "--input", str(corpus), "--shingle", args.shingle, "--threshold",
                            str(args.threshold), "--output", str(truth_csv)], check=True, capture_output=True)
        subprocess.run([sys.executable, str(here / "score.py"), "--input", str(parquet), "--bigcode", str(bc_dir),
                        "--truth", str(truth_csv), "--threshold", str(args.threshold), "--shingle", args.shingle],
                       check=True, capture_output=True)
        truth = pair_set(truth_csv, "id_a", "id_b")
        found = pair_set(cli_dir / "pairs.csv", "id_a", "id_b")
        score = json.loads((bc_dir / "score.json").read_text())
        quality = {"truth_pairs": len(truth), "lshbench": {"recall": len(found & truth) / max(len(truth), 1),
                                                           "precision": len(found & truth) / max(len(found), 1)},
                   "bigcode": score}

    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    result = {
        "commit": commit, "docs": args.docs, "mean_len": args.mean_len, "text_mb": text_mb, "banding": banding, "cores": cores,
        "machine": platform.node(), "lshbench_info": info, "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions, "runs": runs,
        "verified_pairs": {"cli": cli_pairs, "spark": spark_pairs}, "groups": {"cli": cli_groups, "spark": spark_groups},
        "quality": quality,
    }
    (args.work / "results.json").write_text(json.dumps(result, indent=2))
    if args.result:
        with open(args.result, "a") as f:
            f.write(json.dumps(result) + "\n")
    print(f"{args.docs} documents, {text_mb:.0f} MB of text, {' '.join(banding)}; {info.splitlines()[0]}")
    print("| run | wall (s) | MB per core-second | cost per core vs CLI | peak RSS (MiB) |\n|---|---|---|---|---|")
    for name, r in runs.items():
        print(f"| {name} | {r['wall_s']:.1f} | {text_mb / (r['wall_s'] * cores):.2f} | "
              f"{r['wall_s'] / cli['wall_s']:.1f}x | {r['peak_rss_mib']:.0f} |")
    print(f"verified pairs: CLI {cli_pairs}, Spark {spark_pairs}; groups: CLI {cli_groups}, Spark {spark_groups}")
    print("Spark stages (s):", spark["stages_s"])
    if quality:
        print("quality:", json.dumps(quality))
    if (cli_pairs, cli_groups) != (spark_pairs, spark_groups):
        print("error: the Spark job's answer differs from the CLI's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
