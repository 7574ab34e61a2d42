#!/usr/bin/env python3
"""Writes the markdown summary of experiments/serve/bench.sh's outputs: python3 summarize.py OUT DOCS DS_DOCS."""

import json
import sys
from pathlib import Path


def main():
    out, docs, ds_docs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    load = lambda p: json.loads((out / p).read_text())  # noqa: E731
    print("# lshbench serve under load, with datasketch on Redis\n")
    print("```text\n" + (out / "machine.txt").read_text().strip() + "\n```\n")
    print(f"{docs:,} documents from `lshbench gen --mean-len 1500 --seed 7`, one per `POST /v1/check` request "
          "(query then insert, exact verification, answered after fdatasync), into a new index each run; the "
          "index parameters are in the machine block above.\n")
    print("| clients | docs/s | p50 ms | p99 ms | p99.9 ms | not 200 | memory B/doc | RSS B/doc | disk B/doc | "
          "recovery after kill -9 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for c in (1, 16, 64):
        tag = f"c{c}"
        if not (out / f"lshbench-{tag}.json").exists():
            print(f"| {c} | not run | | | | | | | | |")
            continue
        w, s, r = load(f"lshbench-{tag}.json"), load(f"lshbench-{tag}.stats.json"), load(f"lshbench-{tag}.recovery.json")
        rate = w["documents"] / w["seconds"]
        rows[c] = rate
        n = s["documents"]
        print(f"| {c} | {rate:,.0f} | {w['p50_ms']:.2f} | {w['p99_ms']:.2f} | {w['p999_ms']:.2f} | "
              f"{w['not_200'] + w['socket_errors']} | {s['memory_bytes'] / n:,.0f} | {s['resident_bytes'] / n:,.0f} | "
              f"{s['disk_bytes'] / n:,.0f} | {r['until_listening_s']:.2f} s for {r['documents']:,} documents "
              f"(recovery {r['recovery']['seconds']:.2f} s) |")
    ds = load("datasketch-w16.json")
    print()
    print(f"datasketch MinHashLSH (35 x 3 bands, Redis storage), 16 worker processes: {ds['documents']:,} documents "
          f"in {ds['seconds']:.0f} s{' (stopped by the time limit)' if ds['stopped_by_time'] else ''}: "
          f"{ds['docs_per_second']:,.0f} docs/s, p50 {ds['p50_ms']:.2f} ms, p99 {ds['p99_ms']:.2f} ms per document.")
    eq = out / f"lshbench-c16-n{ds_docs}.json"
    if eq.exists():
        w = json.loads(eq.read_text())
        rate = w["documents"] / w["seconds"]
        print(f"lshbench at 16 clients on the same {ds_docs:,} documents: {rate:,.0f} docs/s, p50 {w['p50_ms']:.2f} ms, "
              f"p99 {w['p99_ms']:.2f} ms: {rate / ds['docs_per_second']:.1f} times datasketch's throughput at equal "
              "index size.")
    else:
        print(f"lshbench at 16 clients on the same stream: {rows[16] / ds['docs_per_second']:.1f} times datasketch's "
              "throughput.")
    print("\nRegenerate: `bash experiments/serve/bench.sh` on a quiet machine (see BENCHMARKING.md); the raw wrk, "
          "stats, metrics and recovery files are beside this summary.")


if __name__ == "__main__":
    main()
