"""datatrove's four MinHash stages on a folder of JSONL shards, each stage a LocalPipelineExecutor.

Run by run.py inside the experiment's venv (run.py times and samples this whole process tree); it can also be run
by hand:

    python datatrove_pipeline.py --shards DIR --work DIR --output DIR [--workers 2] [--n-grams 5] [--buckets 14]
        [--rows 8] [--timings FILE]

Stages and tasks (datatrove's own layout for a local run):
  1. MinhashDedupSignature: one task per shard; writes each shard's sorted signatures, one file per bucket.
  2. MinhashDedupBuckets:   one task per bucket (datatrove requires tasks to be a multiple of num_buckets); writes
                            the pairs of documents that agree on a whole bucket.
  3. MinhashDedupCluster:   one task (datatrove requires world_size 1); union-find over those pairs, writes for
                            each shard the indices of the documents to drop (every component member except its
                            root).
  4. MinhashDedupFilter:    one task per shard; re-reads the shard, drops those documents, and JsonlWriter writes
                            the rest (uncompressed, `${rank}.jsonl`, with the input's `id`).
Every stage runs `--workers` tasks at a time (a multiprocess pool; stage 3 has one task and runs in this
process). The stage boundaries and their wall times go to --timings as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", required=True, type=Path, help="folder of *.jsonl shards, one task each")
    ap.add_argument("--work", required=True, type=Path, help="folder for signatures, buckets, removal lists, logs")
    ap.add_argument("--output", required=True, type=Path, help="folder for the kept documents (JSONL per shard)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-grams", type=int, default=5)
    ap.add_argument("--buckets", type=int, default=14)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--timings", type=Path)
    args = ap.parse_args()

    shards = sorted(args.shards.glob("*.jsonl"))
    if not shards:
        raise SystemExit(f"no *.jsonl shard in {args.shards}")
    # The text normalisation and the 64-bit xxhash of each n-gram are datatrove's defaults (MinhashConfig's
    # norm_config and hash_config); only the n-gram size and the banding are set.
    config = MinhashConfig(n_grams=args.n_grams, num_buckets=args.buckets, hashes_per_bucket=args.rows)
    work = args.work

    def reader() -> JsonlReader:
        # One shard file per task; `id` is the id field (JsonlReader's default, stated for clarity).
        return JsonlReader(str(args.shards), glob_pattern="*.jsonl", id_key="id", text_key="text")

    signatures = LocalPipelineExecutor(
        pipeline=[reader(), MinhashDedupSignature(output_folder=str(work / "signatures"), config=config)],
        tasks=len(shards),
        workers=args.workers,
        logging_dir=str(work / "logs" / "signatures"),
    )
    buckets = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupBuckets(
                input_folder=str(work / "signatures"), output_folder=str(work / "buckets"), config=config
            )
        ],
        tasks=config.num_buckets,
        workers=args.workers,
        logging_dir=str(work / "logs" / "buckets"),
        depends=signatures,
    )
    cluster = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupCluster(input_folder=str(work / "buckets"), output_folder=str(work / "remove_ids"), config=config)
        ],
        tasks=1,
        logging_dir=str(work / "logs" / "clusters"),
        depends=buckets,
    )
    dedup_filter = LocalPipelineExecutor(
        pipeline=[
            reader(),
            MinhashDedupFilter(input_folder=str(work / "remove_ids")),
            JsonlWriter(output_folder=str(args.output), compression=None),
        ],
        tasks=len(shards),
        workers=args.workers,
        logging_dir=str(work / "logs" / "filter"),
        depends=cluster,
    )

    # Run the stages one after the other (as `dedup_filter.run()` would through `depends`), timing each.
    timings = {}
    for name, stage in (
        ("signature", signatures),
        ("buckets", buckets),
        ("cluster", cluster),
        ("filter", dedup_filter),
    ):
        t0 = time.perf_counter()
        stage.run()
        timings[name] = time.perf_counter() - t0
    if args.timings:
        args.timings.write_text(json.dumps(timings))


if __name__ == "__main__":
    main()
