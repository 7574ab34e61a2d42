#!/usr/bin/env python3
"""The peer of experiments/serve/bench.sh: datasketch's MinHashLSH with its Redis storage on the same stream.

    python3 experiments/serve/datasketch_redis.py --input corpus.jsonl --workers 16 --redis-port 6390 \
        --max-seconds 600 --out results/serve/datasketch-w16.json

WORKERS processes (the "clients"; Python threads would share one interpreter lock) each take every WORKERS-th
document of the stream and, for each, do what `POST /v1/check` does: sign it (datasketch.MinHash, k = 128, its
default scheme affine32 with permutations drawn once per worker, the text's set of word 3-grams,
whitespace-separated tokens as lshbench's word:3), query the index, insert it. The index is one MinHashLSH with the
banding lshbench uses at threshold 0.5 (35 bands x 3 rows) in one Redis server, shared by all workers through its
basename. query and insert are datasketch's documented online calls; with Redis storage they send Redis about 107
commands per document (one or more per band), each a round trip. Each worker times every document (sign + query +
insert); the clock starts once every worker has started and connected, and the run stops at the end of the stream or
after --max-seconds, and writes documents, seconds, documents per second and latency percentiles as JSON.

What datasketch does not do, and lshbench does: verification (datasketch returns every candidate sharing a band,
unverified), atomic check-then-insert across clients, and durable acknowledged writes (Redis here runs without
persistence, as datasketch's documentation sets it up, which favours datasketch).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import multiprocessing as mp
import os
import time

# Imported before the workers fork, so that no worker spends its measured time importing numpy and scipy.
import redis
from datasketch import MinHash, MinHashLSH


def shingles(text: str, n: int = 3):
    tokens = text.split()
    if not tokens:
        return []
    if len(tokens) < n:
        return [" ".join(tokens).encode("utf-8")]
    return list({" ".join(tokens[i : i + n]).encode("utf-8") for i in range(len(tokens) - n + 1)})


def worker(args, index, out_q, ready):
    lsh = MinHashLSH(
        num_perm=128,
        params=(35, 3),
        storage_config={
            "type": "redis",
            "basename": b"lshbench-peer",
            "redis": {"host": "127.0.0.1", "port": args.redis_port},
        },
    )
    # Every worker's permutations are the same (seed 1): drawn once here, not once per document.
    permutations = MinHash(num_perm=128, seed=1).permutations
    lat = []
    found = 0
    # The clock starts when every worker is ready: imports, the Redis connection, the permutations are set-up.
    ready.wait()
    deadline = time.time() + args.max_seconds
    with open(args.input, "rb") as f:
        for n, line in enumerate(f):
            if n >= args.limit:
                break
            if n % args.workers != index:
                continue
            if time.time() > deadline:
                break
            doc = json.loads(line)
            t0 = time.perf_counter()
            m = MinHash(num_perm=128, seed=1, permutations=permutations, scheme="affine32")
            m.update_batch(shingles(doc["text"]))
            found += len(lsh.query(m))
            lsh.insert(doc["id"], m, check_duplication=False)
            lat.append(time.perf_counter() - t0)
    out_q.put((lat, found, time.time()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--redis-port", type=int, default=6390)
    ap.add_argument("--limit", type=int, default=10**12, help="documents of the stream at most")
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    q = mp.Queue()
    ready = mp.Barrier(args.workers + 1)
    procs = [mp.Process(target=worker, args=(args, i, q, ready)) for i in range(args.workers)]
    for p in procs:
        p.start()
    ready.wait()
    start_at = time.time()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    lat = sorted(x for r in results for x in r[0])
    end = max(r[2] for r in results)
    seconds = end - start_at
    pct = lambda p: 1000 * lat[min(len(lat) - 1, int(p / 100 * len(lat)))] if lat else float("nan")  # noqa: E731
    summary = {
        "tool": "datasketch MinHashLSH, Redis storage",
        "datasketch": importlib.metadata.version("datasketch"),
        "redis": redis.Redis(port=args.redis_port).info("server")["redis_version"],
        "redis_py": importlib.metadata.version("redis"),
        "workers": args.workers,
        "documents": len(lat),
        "seconds": round(seconds, 3),
        "docs_per_second": round(len(lat) / seconds, 1),
        "p50_ms": round(pct(50), 3),
        "p90_ms": round(pct(90), 3),
        "p99_ms": round(pct(99), 3),
        "candidates_found": sum(r[1] for r in results),
        "stopped_by_time": len(lat) < min(args.limit, sum(1 for _ in open(args.input, "rb"))),
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
