#!/usr/bin/env python3
"""lshbench.spark on local[2] against `lshbench dedup` on the same generated corpus: wall time and peak memory.

    python experiments/spark/bench.py --docs 2000000 --work /tmp/spark-bench [--mean-len 1500]

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--mean-len", type=int, default=1500)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--bands", type=int, default=42)
    ap.add_argument("--rows", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory (local mode: driver and executor)")
    ap.add_argument("--shuffle-partitions", type=int, default=64)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "lshbench"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.work / f"corpus-{args.docs}-{args.mean_len}.jsonl"
    parquet = args.work / f"corpus-{args.docs}-{args.mean_len}.parquet"
    banding = ["--bands", str(args.bands), "--rows", str(args.rows), "--threshold", str(args.threshold)]

    if not corpus.exists():
        subprocess.run([args.bin, "gen", "--docs", str(args.docs), "--mean-len", str(args.mean_len), "--seed", "42",
                        "--output", str(corpus)], check=True)
    if not parquet.exists():
        import pyarrow.json as pj
        import pyarrow.parquet as pq

        table = pj.read_json(corpus)
        pq.write_table(table.select(["id", "text"]), parquet, row_group_size=1 << 16)

    info = subprocess.run([args.bin, "info"], capture_output=True, text=True).stdout

    # The CLI on the JSONL corpus (the same rows, in the same order), two threads as local[2] has two cores.
    cli_dir = args.work / "cli"
    cli_dir.mkdir(exist_ok=True)
    t = subprocess.run(["/usr/bin/time", "-v", args.bin, "dedup", "--input", str(corpus), *banding, "--threads", "2",
                        "--pairs", str(cli_dir / "pairs.csv"), "--clusters", str(cli_dir / "clusters.csv")],
                       capture_output=True, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t.stderr).group(1)
    parts = [float(x) for x in wall.split(":")]
    cli = {
        "wall_s": sum(p * 60 ** i for i, p in enumerate(reversed(parts))),
        "peak_rss_mib": int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t.stderr).group(1)) / 1024,
        "summary": t.stdout,
    }
    cli_pairs = int(re.search(r"verified \(exact, similarity >= [0-9.]+\): (\d+) pairs", t.stdout).group(1))
    cli_groups = int(re.search(r"groups \(Components\): (\d+) groups", t.stdout).group(1))

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
    spark_groups = int(re.search(r"groups \(components, (\d+) large-star/small-star rounds\): (\d+)", log).group(2))

    result = {
        "docs": args.docs, "mean_len": args.mean_len, "banding": banding, "machine": platform.node(),
        "lshbench_info": info, "cli": cli, "spark": spark, "driver_memory": args.driver_memory,
        "verified_pairs": {"cli": cli_pairs, "spark": spark_pairs}, "groups": {"cli": cli_groups, "spark": spark_groups},
    }
    (args.work / "results.json").write_text(json.dumps(result, indent=2))
    print(f"| run | wall (s) | peak RSS (MiB) | verified pairs | groups |\n|---|---|---|---|---|")
    print(f"| lshbench dedup --threads 2 | {cli['wall_s']:.1f} | {cli['peak_rss_mib']:.0f} | {cli_pairs} | {cli_groups} |")
    print(f"| lshbench.spark local[2] | {spark['wall_s']:.1f} | {spark['peak_rss_mib']:.0f} | {spark_pairs} | {spark_groups} |")
    print("Spark peak RSS by process (MiB):", {k: round(v) for k, v in spark["peak_rss_mib_by_process"].items()})
    if (cli_pairs, cli_groups) != (spark_pairs, spark_groups):
        print("error: the Spark job's answer differs from the CLI's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
