#!/usr/bin/env python3
"""Writes the markdown summary of experiments/serve/bench.sh's outputs:

    python3 summarize.py OUT DOCS DS_DOCS DS_SECONDS
"""

import json
import sys
from pathlib import Path


def main():
    out, docs, ds_docs, ds_seconds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])

    def load(name):
        return json.loads((out / name).read_text())

    def recoveries(tag):
        lines = (out / f"lshbench-{tag}.recovery.json").read_text().splitlines()
        return {r["page_cache"]: r for r in map(json.loads, lines)}

    def rate(w):
        return w["documents"] / w["seconds"]

    def server_side(tag):
        """The server's own latency histogram of POST /v1/check at the run's end: the share answered within
        10 ms and 20 ms, and the mean (ms); None when the run saved no histogram."""
        path = out / f"lshbench-{tag}.metrics.txt"
        if not path.exists():
            return None
        le, total, count = {}, None, None
        for line in path.read_text().splitlines():
            if 'route="/v1/check"' not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if name.startswith("lshbench_request_duration_seconds_bucket"):
                le[name.split('le="')[1].split('"')[0]] = float(value)
            elif name.startswith("lshbench_request_duration_seconds_sum"):
                total = float(value)
            elif name.startswith("lshbench_request_duration_seconds_count"):
                count = float(value)
        if not count or "0.01" not in le or "0.02" not in le:
            return None
        return le["0.01"] / count, le["0.02"] / count, 1000 * total / count

    print("# serve: under load, with datasketch on Redis\n")
    print("```text\n" + (out / "machine.txt").read_text().strip() + "\n```\n")
    print(
        f"{docs:,} documents from `lshbench gen --docs {docs} --mean-len 1500 --seed 7`, one per `POST /v1/check` "
        "request (query, exact verification, insert; answered after `fdatasync`), sent by wrk (2 threads, 1 with "
        "one connection) on the same 2 cores as the server, into a new index for each row; the index parameters "
        "are in the block above. Memory is the index's own count (tables, signatures, ids, compressed texts) "
        "and the process's resident set; disk is the index directory after the run. Recovery: the time from "
        "starting `lshbench serve` on the index after `kill -9` until it listens, with the files in the page "
        "cache (a process crash) and with the page cache dropped first (a power cut).\n\n"
        "wrk's latencies are corrected for coordinated omission: each response slower than twice the mean "
        "interval between a connection's requests adds samples for the requests a client sending at a steady "
        "rate would have sent meanwhile (each one interval less late). A pause of the server therefore counts "
        "once per interval it lasted, not once per connection, and wrk's p99 is stricter than the share of "
        "answers a closed loop of clients received within it. The server's own histogram (`/metrics`, "
        "`lshbench_request_duration_seconds`, from the request's headers to its answer, reading the body, "
        "signing, the writer's queue and the `fdatasync` included) is in the last columns.\n"
    )
    print(
        "| clients | docs/s | p50 ms | p99 ms | p99.9 ms | errors | memory B/doc | RSS B/doc | disk B/doc | "
        "recovery, cached | recovery, cold | server: within 10 ms | within 20 ms | mean ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for c in (1, 16, 64):
        tag = f"c{c}"
        if not (out / f"lshbench-{tag}.json").exists():
            print(f"| {c} | not run | | | | | | | | | | | | |")
            continue
        w, s, rec = load(f"lshbench-{tag}.json"), load(f"lshbench-{tag}.stats.json"), recoveries(tag)
        disk = int((out / f"lshbench-{tag}.du.txt").read_text())
        rows[c] = w
        n = s["documents"]
        cold = rec.get("cold")
        print(
            f"| {c} | {rate(w):,.0f} | {w['p50_ms']:.2f} | {w['p99_ms']:.2f} | {w['p999_ms']:.2f} | "
            f"{w['not_200'] + w['socket_errors']} | {s['memory_bytes'] / n:,.0f} | {s['resident_bytes'] / n:,.0f} | "
            f"{disk / n:,.0f} | {rec['warm']['until_listening_s']:.2f} s | "
            + (f"{cold['until_listening_s']:.2f} s |" if cold else "not measured |")
            + (" {:.2%} | {:.2%} | {:.2f} |".format(*srv) if (srv := server_side(tag)) else " not saved | | |")
        )

    ds = load("datasketch-w16.json")
    used = int((out / "datasketch-w16.redis-memory.txt").read_text().split(":")[1])
    print()
    stopped = f" (stopped after {ds_seconds:.0f} s)" if ds["stopped_by_time"] else ""
    print(
        f"datasketch {ds['datasketch']} MinHashLSH (35 bands x 3 rows, Redis {ds['redis']} storage without "
        f"persistence), 16 worker processes on the same stream: {ds['documents']:,} documents in "
        f"{ds['seconds']:.0f} s{stopped}: {ds['docs_per_second']:,.0f} docs/s, p50 {ds['p50_ms']:.1f} ms, "
        f"p99 {ds['p99_ms']:.1f} ms per document; Redis holds {used / max(ds['documents'], 1):,.0f} B/doc "
        "(`used_memory`, signatures not kept).\n"
    )
    eq = out / f"lshbench-c16-n{ds_docs}.json"
    if eq.exists():
        w = json.loads(eq.read_text())
        print(
            f"lshbench at 16 clients on the same first {ds_docs:,} documents, into a new index: "
            f"{rate(w):,.0f} docs/s, p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms: "
            f"**{rate(w) / ds['docs_per_second']:,.0f} times datasketch's throughput at equal index size**; "
            f"growing to {docs:,} documents, {rate(rows[16]) / ds['docs_per_second']:,.0f} times."
        )
    elif 16 in rows:
        print(
            f"lshbench at 16 clients on the same stream: **{rate(rows[16]) / ds['docs_per_second']:,.0f} times "
            "datasketch's throughput**."
        )
    print(
        "\nRegenerate: `bash experiments/serve/bench.sh` on a quiet machine (see BENCHMARKING.md), with PY naming "
        "a Python that has experiments/serve/requirements.txt installed. The raw files are beside this summary: "
        "wrk's output and its JSON line (`lshbench-c*.wrk.txt`, `.json`), `/v1/stats` and `/metrics` at the end "
        "of each run, the restarts (`.recovery.json`), the index's size on disk (`.du.txt`), datasketch's JSON, "
        "and `quiet.txt` (the load and any compiler or test process before and after each run)."
    )


if __name__ == "__main__":
    main()
