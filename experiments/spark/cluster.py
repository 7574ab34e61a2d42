#!/usr/bin/env python3
"""lshbench.spark on a real Spark standalone cluster started on this machine: a master and N workers of one core
each (pyspark's own distribution: `spark-class` runs the Master and Worker daemons, as start-master.sh and
start-worker.sh do), the job submitted with `spark-submit` as the guide's cluster chapter says, with a
pip-installed environment (the interpreter running this script) on every node.

    python experiments/spark/cluster.py --input corpus.parquet --output out/ --workers 2 \\
        [--worker-memory 4g] [--work /tmp/cluster] [--result results/spark/cluster.jsonl] -- --bands 35 --rows 3 ...

Everything after `--` goes to `python -m lshbench.spark dedup` (its --input, --output and --checkpoint-dir are
set here). Reports the wall time of spark-submit and, from the job's event log, what moved between the
executors: shuffle bytes written, shuffle bytes read from another executor (remote) and from the same one
(local), and the executors' run time. Needs Java 17 and pyspark (python/requirements-ci.txt); the cluster is
stopped when the job ends, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def wait_for_workers(ui_port: int, workers: int, timeout: float = 120.0) -> None:
    """Polls the master's JSON status until `workers` workers are ALIVE."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                status = json.load(r)
            alive = sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")
            if alive >= workers:
                return
            last = f"{alive} of {workers} workers alive"
        except OSError as e:
            last = str(e)
        time.sleep(0.5)
    raise SystemExit(f"error: the standalone cluster did not come up in {timeout:.0f} s ({last})")


def event_totals(events_dir: Path) -> dict:
    """Sums the task metrics of the job's event log (one file per application)."""
    totals = {"tasks": 0, "shuffle_written_mib": 0.0, "remote_read_mib": 0.0, "local_read_mib": 0.0,
              "executor_run_s": 0.0, "executors": set()}
    for log in (p for p in events_dir.rglob("*") if p.is_file()):
        with open(log) as f:
            for line in f:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                e = json.loads(line)
                m = e.get("Task Metrics") or {}
                totals["tasks"] += 1
                totals["executors"].add(e["Task Info"]["Executor ID"])
                totals["executor_run_s"] += m.get("Executor Run Time", 0) / 1000
                w = m.get("Shuffle Write Metrics") or {}
                r = m.get("Shuffle Read Metrics") or {}
                totals["shuffle_written_mib"] += w.get("Shuffle Bytes Written", 0) / 2**20
                totals["remote_read_mib"] += r.get("Remote Bytes Read", 0) / 2**20
                totals["local_read_mib"] += r.get("Local Bytes Read", 0) / 2**20
    totals["executors"] = len(totals["executors"])
    return totals


def main() -> int:
    argv = sys.argv[1:]
    dedup_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="4g", help="each worker's memory, all of it its executor's")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    ap.add_argument("--work", type=Path, help="logs, event log, checkpoints (default: beside --output)")
    ap.add_argument("--result", type=Path, help="also append the result as one JSON line to this file")
    args = ap.parse_args(argv)
    work = (args.work or args.output.with_name(args.output.name + ".cluster")).resolve()
    (work / "events").mkdir(parents=True, exist_ok=True)
    home = spark_home()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(work / "logs"), PYSPARK_PYTHON=sys.executable)
    port, ui_port = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    daemons = []
    try:
        with open(work / "master.log", "w") as log:
            daemons.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui_port)], stdout=log, stderr=subprocess.STDOUT, env=env))
        for i in range(args.workers):
            with open(work / f"worker-{i}.log", "w") as log:
                daemons.append(subprocess.Popen(
                    [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", "--host",
                     "127.0.0.1", "--cores", "1", "--memory", args.worker_memory, "--webui-port", "0",
                     "--work-dir", str(work / f"worker-{i}"), master_url],
                    stdout=log, stderr=subprocess.STDOUT, env=env))
        wait_for_workers(ui_port, args.workers)
        job = Path(__import__("lshbench.spark", fromlist=["spark"]).__file__).resolve()
        cmd = [
            str(home / "bin" / "spark-submit"), "--master", master_url,
            "--driver-memory", args.driver_memory, "--executor-memory", args.worker_memory,
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", f"spark.sql.shuffle.partitions={args.shuffle_partitions}",
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={work / 'events'}",
            "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
            "--conf", "spark.ui.enabled=false",
            str(job), "dedup", "--input", str(args.input.resolve()), "--output", str(args.output.resolve()),
            "--checkpoint-dir", str(work / "checkpoints"), *dedup_args,
        ]
        start = time.perf_counter()
        with open(work / "submit.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        wall = time.perf_counter() - start
        printed = (work / "submit.log").read_text()
        if rc != 0:
            print(printed[-5000:], file=sys.stderr)
            print(f"error: spark-submit failed with status {rc}; see {work / 'submit.log'}", file=sys.stderr)
            return 1
    finally:
        for d in reversed(daemons):
            d.terminate()
        for d in daemons:
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
    summary = [line for line in printed.splitlines()
               if line.startswith(("documents:", "candidates:", "verified (", "groups (", "seconds:", "wrote "))]
    result = {"workers": args.workers, "worker_memory": args.worker_memory, "input": str(args.input),
              "dedup_args": dedup_args, "wall_s": wall, "machine": platform.node(), "summary": summary,
              "events": event_totals(work / "events")}
    print("\n".join(summary))
    print(json.dumps({k: result[k] for k in ("workers", "wall_s", "events")}))
    if args.result:
        with open(args.result, "a") as f:
            f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
