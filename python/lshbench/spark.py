"""Near-duplicate detection on Apache Spark, with the answer of ``lshbench dedup``.

:func:`dedup` takes a Spark DataFrame of texts and ids and returns DataFrames with the columns of ``lshbench
dedup``'s ``--pairs``, ``--clusters``, (the edge columns of) ``--group-report`` and ``--removed`` files, and the
kept rows of the input with every column (``--kept``), under the same survivor policies (``keep``, ``short``).
Every stage is a Spark operation, so nothing has to fit on the driver or in one task:

1. signatures, band keys and candidates in one pass: ``mapInArrow`` signs each Arrow batch with
   :func:`lshbench.sketch` and bands it with :func:`lshbench.band_keys` (the CLI's kernels and band hash, so the
   keys are the CLI's keys), writing one row per band of each document; one shuffle by (band, key) brings each
   bucket to one task, whose ``mapInArrow`` walks its buckets as the CLI does (``crates/core/src/lsh/index.rs``): documents
   with identical banded slots form a class (its pairs once, not once per band); a bucket holding two or more
   classes gives every pair across its classes; a class or bucket of more than ``bucket_cap`` documents is
   walked as a star on its smallest position instead of a clique; empty documents are never candidates;
2. verification: the candidates' documents (only those) signed again and, for exact verification, kept with
   their texts; joined to the pairs and scored in ``mapInArrow`` by :func:`lshbench.jaccard_pairs` (or
   :func:`lshbench.estimate_pairs`);
3. groups: up to ``max_local_edges`` verified pairs, the whole graph goes to one task, where the CLI's own
   grouping (``lsh::cluster::group_ranked``) makes the components or the star cover; beyond it, connected
   components by alternating large-star and small-star (Kiveris et al., "Connected Components in MapReduce and
   Beyond", SoCC 2014) until the edge set stops changing, each round checkpointed, then each component's centre
   (the member the survivor policy ranks first; by default the most edges, then the highest similarity sum
   added in the CLI's order, then the smallest position) or the CLI's greedy cover, one component per
   ``applyInArrow`` call; then group numbers (groups ordered by their smallest member) and the similarity of
   every member to its centre (a verified pair's own, or scored like the candidates);
4. survivors: the audit of removals (every member but its centre, and short documents under ``short="drop"``)
   and the kept rows of the input, every column, by a join on the positions.

A document's position (the order that decides pair orientation, centre ties, group numbers and ``keep="first"``
or ``"last"``) is the value of ``position_column`` when given (``python -m lshbench.spark`` uses each input row's
file and row index, the order ``lshbench dedup`` reads), otherwise the DataFrame's own order.

Command line::

    python -m lshbench.spark dedup --input corpus.parquet --text-column text --id-column id \\
        --bands 42 --rows 3 --threshold 0.5 --output out/ [--kept] [--removed] [--keep first] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa

import lshbench

# The defaults every front end shares (the Rust table lshbench_core::defaults), as the CLI's flags have them.
_D = lshbench.DEFAULTS

__all__ = ["DedupResult", "dedup", "main"]

# Signature slots of an empty document (no shingle): lshbench.sketch fills its row with this value.
_EMPTY_SLOT = np.uint32(0xFFFF_FFFF)


@dataclass
class DedupResult:
    """What :func:`dedup` returns: five DataFrames and the counts of the run.

    ``pairs``: ``id_a, id_b, estimate, jaccard, verified_by``, one row per verified pair, ``id_a`` the earlier
    document, sorted by position. ``clusters``: ``group, id, size, center, is_center, similarity_to_center``,
    one row per member of each group of two or more documents, sorted by group then position. ``groups``:
    ``group, size, center, edges, min_edge, mean_edge, similarity``, the first columns of the CLI's group
    report. ``stats``: documents, empty documents, candidates, verified pairs, components rounds, the grouping
    (``components`` or ``center``), where the graph was grouped (``graph``: ``one task`` or ``distributed``),
    groups, and the wall seconds of each stage (``seconds``). ``removed``: ``id, survivor, similarity, basis, group, rule``, the
    audit of ``lshbench dedup --removed``, one row per removed document by position. ``kept``: the input
    DataFrame's rows that survive, every column, by position (``lshbench dedup --kept``).
    """

    pairs: Any
    clusters: Any
    groups: Any
    stats: dict
    removed: Any = None
    kept: Any = None


class _Clock:
    """Wall seconds per stage of a run (``stats["seconds"]``): each call to :meth:`lap` closes the stage that began at
    the previous one. The stages end where the job materialises (an eager checkpoint or a count), so each figure is
    the work of that stage and not a lazy plan's."""

    def __init__(self) -> None:
        self.seconds: dict = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._last
        self._last = now


def _check_banding(bands: int, rows: int, num_perm: int, threshold: float) -> None:
    """The CLI's refusals for an explicit banding (`lshbench dedup --bands --rows --threshold`)."""
    for name, v in (("bands", bands), ("rows", rows), ("num_perm", num_perm)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, not {v!r}")
    if bands * rows > num_perm:
        raise ValueError(
            f"--bands {bands} x --rows {rows} = {bands * rows} slots, more than --num-perm {num_perm}: "
            "use fewer bands or rows, or a larger --num-perm"
        )
    if not (0.0 < threshold <= 1.0):
        raise ValueError(f"--threshold must be in (0, 1], not {threshold}")
    p = lshbench.scurve(bands, rows, threshold)
    if p < 0.5:
        raise ValueError(
            f"--threshold {threshold} contradicts --bands {bands} --rows {rows}: a pair of similarity "
            f"{threshold} becomes a candidate with probability {p:.4f} < 1/2; lower the rows per band or "
            "raise the threshold (`lshbench tune` picks a banding)"
        )


def _binary_rows(matrix: np.ndarray) -> pa.Array:
    """Each row of a C-contiguous 2-d array as one Arrow binary value, built from the buffer without copies."""
    n, width = matrix.shape[0], matrix.shape[1] * matrix.itemsize
    offsets = np.arange(n + 1, dtype=np.int32) * width
    data = np.ascontiguousarray(matrix).view(np.uint8).reshape(-1)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _rows_of(binary: pa.Array, width: int) -> np.ndarray:
    """The inverse of :func:`_binary_rows` for uint32 rows of ``width`` slots (equal-width values)."""
    binary = binary.combine_chunks() if isinstance(binary, pa.ChunkedArray) else binary
    n = len(binary)
    if n == 0:
        return np.zeros((0, width), dtype=np.uint32)
    offsets = np.frombuffer(binary.buffers()[1], dtype=np.int32, count=n + 1, offset=binary.offset * 4)
    data = np.frombuffer(binary.buffers()[2], dtype=np.uint8)
    flat = data[offsets[0] : offsets[-1]]
    return flat.view(np.uint32).reshape(n, width)


# Flags of a document's own row in the band rows (band -1): why it is not banded, or which of its fields is null.
_EMPTY, _SHORT, _NULL_TEXT, _NULL_ID, _NULL_POS = 1, 2, 4, 8, 16
# Kinds of the rows the bucket walk writes: a candidate pair, a short document to drop, and per-partition counts
# (pairs emitted with repeats; documents and empty documents; null texts and ids; null positions).
_PAIR, _SHORT_DOC, _EMITTED, _DOCS, _NULLS, _NULL_POSITIONS = 0, 1, 2, 3, 4, 5


def _fingerprint_multipliers(bands: int, seed: int) -> np.ndarray:
    """The odd multipliers of :func:`_class_fingerprint`, one per band, drawn from ``seed``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(0, 1 << 63, size=bands, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _class_fingerprint(keys: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """A 64-bit fingerprint of each row of band keys (a multiply-sum with ``mult``, then a finalising mix).
    Documents with identical banded slots have identical keys in every band, so equal fingerprints; two documents
    of one bucket with different keys share a fingerprint with probability about 2**-64, and then only the
    counting of their pairs changes, never the candidate set (below the cap)."""
    with np.errstate(over="ignore"):
        h = (keys.view(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
    return h.view(np.int64)


# Bytes of one band row as the shuffle carries it (Spark's own rows of these columns take 44): a blob of n rows
# holds n keys, n positions, n fingerprints (int64 each) and n bands (int16), column after column.
_BAND_ROW_BYTES = 8 + 8 + 8 + 2


def _routes(spark: Any, partitions: int) -> np.ndarray:
    """For each partition p, a long whose Spark hash partitioning (``repartition(partitions, col)``: pmod of its
    Murmur3 hash, seed 42) is p: the band rows choose their partition themselves and ship in a few large blobs."""
    from pyspark.sql import functions as F

    probe = spark.range(0, 64 * partitions).select("id", F.expr(f"pmod(hash(id), {partitions})").alias("p"))
    first = {r["p"]: r["id"] for r in probe.groupBy("p").agg(F.min("id").alias("id")).collect()}
    if len(first) != partitions:
        raise RuntimeError(f"no route found for {partitions - len(first)} of {partitions} partitions")
    return np.array([first[p] for p in range(partitions)], dtype=np.int64)


def _sketch(texts: pa.Array, params: dict) -> np.ndarray:
    """The signatures of ``texts`` under the job's kernel, shingles and normalisation (in a Python worker)."""
    import lshbench as lb

    return lb.sketch(
        texts,
        kernel=params["kernel"],
        num_perm=params["num_perm"],
        seed=params["seed"],
        shingle=params["shingle"],
        lowercase=params["lowercase"],
        collapse_whitespace=params["collapse_whitespace"],
        strip_punctuation=params["strip_punctuation"],
        threads=params["threads"],
    )


def _band_rows(params: dict, routes: np.ndarray) -> Any:
    """The mapInArrow function of stage 1: (pos, id, text) batches to band rows (band, key, pos, fp): one row per
    band of every banded document (its band key and its class fingerprint), and one row of its own per document
    (band -1, key = its flags), packed column by column in one blob per target partition (``route``, see
    :func:`_routes`). Nothing is kept of the signature: the bucket walk needs the keys only, and verification
    signs again the few documents that are candidates."""

    def band(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        import lshbench as lb

        b = params["bands"]
        mult = _fingerprint_multipliers(b, params["seed"])
        for batch in batches:
            texts = batch.column("text")
            flags = np.zeros(batch.num_rows, dtype=np.int64)
            if texts.null_count:
                flags |= np.where(texts.is_null().to_numpy(zero_copy_only=False), _NULL_TEXT, 0)
                texts = pc.fill_null(texts, "")
            if batch.column("id").null_count:
                flags |= np.where(batch.column("id").is_null().to_numpy(zero_copy_only=False), _NULL_ID, 0)
            pos_col = batch.column("pos")
            if pos_col.null_count:
                flags |= np.where(pos_col.is_null().to_numpy(zero_copy_only=False), _NULL_POS, 0)
                pos_col = pc.fill_null(pos_col, -1)
            pos = pos_col.to_numpy().astype(np.int64, copy=False)
            sigs = _sketch(texts, params)
            unbanded = np.all(sigs == _EMPTY_SLOT, axis=1)
            flags |= np.where(unbanded, _EMPTY, 0)
            if params["short"] != "exact":
                # --short keep|drop: documents shorter than one shingle are not banded.
                short = lb._lshbench.short_documents(
                    texts, params["shingle"], params["lowercase"], params["collapse_whitespace"],
                    params["strip_punctuation"], params["seed"], params["threads"],
                )
                flags |= np.where(short, _SHORT | _EMPTY, 0)
                unbanded |= short
            unbanded |= flags & (_NULL_TEXT | _NULL_ID | _NULL_POS) != 0
            live = np.flatnonzero(~unbanded)
            keys = lb.band_keys(sigs[live], b, params["rows"], seed=params["seed"]).view(np.int64)
            fp = _class_fingerprint(keys, mult)
            n = len(live)
            columns = (
                np.concatenate([keys.reshape(-1), flags]),
                np.concatenate([np.repeat(pos[live], b), pos]),
                np.concatenate([np.repeat(fp, b), np.zeros(len(pos), np.int64)]),
                np.concatenate([np.tile(np.arange(b, dtype=np.int16), n), np.full(len(pos), -1, np.int16)]),
            )
            # A bucket's rows all go to the partition of its key; a document's own row to that of its position.
            parts = np.uint64(len(routes))
            target = np.concatenate([keys.reshape(-1).view(np.uint64) % parts, pos.view(np.uint64) % parts])
            order = np.argsort(target.astype(np.int16), kind="stable")
            columns = [c[order] for c in columns]
            bounds = np.searchsorted(target[order], np.arange(len(routes) + 1, dtype=np.uint64))
            used = np.flatnonzero(bounds[1:] > bounds[:-1])
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(routes[used]),
                    pa.array(
                        [b"".join(c[bounds[p] : bounds[p + 1]].tobytes() for c in columns) for p in used], pa.binary()
                    ),
                ],
                names=["route", "rows"],
            )

    return band


def _clique(starts: np.ndarray, lengths: np.ndarray) -> tuple:
    """Every pair (i, j), i < j, of row indices inside each run [start, start + length), as two index arrays."""
    lengths = lengths.astype(np.int64)
    offset = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    row = np.repeat(starts, lengths) + offset
    after = np.repeat(lengths, lengths) - 1 - offset
    i = np.repeat(row, after)
    j = i + 1 + (np.arange(after.sum()) - np.repeat(np.cumsum(after) - after, after))
    return i, j


def _walk_buckets(params: dict, cap: int, max_candidates: int) -> Any:
    """The mapInArrow function of stage 2, on band rows partitioned by their key: the candidate pairs of every
    bucket of the partition, as ``crates/core/src/lsh/index.rs`` makes them. Documents with the same fingerprint in a bucket
    are one class (identical banded slots): a class's own pairs are made once, in its band-0 bucket (a clique, or
    over ``cap`` a star on its smallest position); a bucket holding two or more classes pairs every document
    with every document of the other classes (over ``cap`` documents: a star of its smallest position with each
    other class's smallest). Writes (kind, a, b) rows: the pairs (``a < b``, repeats across bands left to the
    distinct that follows), short documents to drop, and this partition's counts."""

    def walk(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chunks: list = [[], [], [], []]
        for batch in batches:
            blobs = batch.column("rows")
            width = np.int64 if pa.types.is_large_binary(blobs.type) else np.int32
            offsets = np.frombuffer(blobs.buffers()[1], dtype=width)[blobs.offset : blobs.offset + len(blobs) + 1]
            data = blobs.buffers()[2]
            for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
                n = (end - start) // _BAND_ROW_BYTES
                for i, (dtype, at) in enumerate(((np.int64, 0), (np.int64, 8), (np.int64, 16), (np.int16, 24))):
                    chunks[i].append(np.frombuffer(data, dtype=dtype, count=n, offset=start + at * n))
        if not chunks[0]:
            return
        key, pos, fp, band = (np.concatenate(c) for c in chunks)

        def rows(kind: int, a: np.ndarray, b: np.ndarray) -> pa.RecordBatch:
            return pa.RecordBatch.from_arrays(
                [pa.array(np.full(len(a), kind, np.int8)), pa.array(a, pa.int64()), pa.array(b, pa.int64())],
                names=["kind", "a", "b"],
            )

        own = band < 0
        flags, own_pos = key[own], pos[own]
        null_text = int(np.count_nonzero(flags & _NULL_TEXT))
        null_id = int(np.count_nonzero(flags & _NULL_ID))
        null_pos = int(np.count_nonzero(flags & _NULL_POS))
        yield rows(_DOCS, np.array([len(flags)]), np.array([np.count_nonzero(flags & _EMPTY)]))
        yield rows(_NULLS, np.array([null_text]), np.array([null_id]))
        yield rows(_NULL_POSITIONS, np.array([null_pos]), np.array([0]))
        if params["short"] == "drop":
            short = own_pos[(flags & _SHORT) != 0]
            yield rows(_SHORT_DOC, short, short)

        # Only rows whose key occurs twice or more can share a bucket: one sort of the keys finds them (a few in
        # a hundred), and only those are sorted by bucket, class and position.
        live = np.flatnonzero(~own)
        by_key = live[np.argsort(key[live])]
        sorted_keys = key[by_key]
        repeated = np.zeros(len(by_key), dtype=bool)
        repeated[1:] = sorted_keys[1:] == sorted_keys[:-1]
        repeated[:-1] |= repeated[1:].copy()
        shared_rows = by_key[repeated]
        order = shared_rows[np.lexsort((pos[shared_rows], fp[shared_rows], key[shared_rows], band[shared_rows]))]
        band, key, pos, fp = band[order], key[order], pos[order], fp[order]
        n = len(pos)
        if n == 0:
            yield rows(_EMITTED, np.array([0]), np.array([0]))
            return
        new_bucket = np.ones(n, dtype=bool)
        new_bucket[1:] = (band[1:] != band[:-1]) | (key[1:] != key[:-1])
        new_class = new_bucket.copy()
        new_class[1:] |= fp[1:] != fp[:-1]
        b_start = np.flatnonzero(new_bucket)
        b_size = np.diff(np.append(b_start, n))
        c_start = np.flatnonzero(new_class)
        c_size = np.diff(np.append(c_start, n))
        c_bucket = np.cumsum(new_bucket)[c_start] - 1
        n_classes = np.bincount(c_bucket, minlength=len(b_start))

        # What the CLI counts (with repeats across bands) before any pair is made.
        own_class = (c_size > 1) & (band[c_start] == 0)
        s = c_size[own_class].astype(np.int64)
        within = np.where(s <= cap, s * (s - 1) // 2, s - 1).sum()
        shared = n_classes > 1
        sq = np.bincount(c_bucket, weights=c_size.astype(np.float64) ** 2, minlength=len(b_start)).astype(np.int64)
        bs = b_size.astype(np.int64)
        across = np.where(bs <= cap, (bs * bs - sq) // 2, n_classes - 1)[shared].sum()
        emitted = int(within + across)
        yield rows(_EMITTED, np.array([emitted]), np.array([0]))
        if emitted > max_candidates:
            # The whole run is over the limit; the driver stops it with the CLI's message.
            return

        # A class's own pairs, in its band-0 bucket.
        small = own_class & (c_size <= cap)
        i, j = _clique(c_start[small], c_size[small])
        out_a, out_b = [pos[i]], [pos[j]]
        big = own_class & (c_size > cap)
        if big.any():
            # Each member after the first (the smallest position) paired with the first.
            others = c_size[big] - 1
            i = np.repeat(c_start[big], others)
            j = i + 1 + (np.arange(len(i)) - np.repeat(np.cumsum(others) - others, others))
            out_a.append(pos[i])
            out_b.append(pos[j])
        # Pairs across the classes of a shared bucket: every document pair of the bucket whose fingerprints differ.
        clique = shared & (b_size <= cap)
        i, j = _clique(b_start[clique], b_size[clique])
        across_class = fp[i] != fp[j]
        out_a.append(pos[i][across_class])
        out_b.append(pos[j][across_class])
        star = shared & (b_size > cap)
        if star.any():
            # Each class's smallest position (its first row) with the bucket's smallest.
            centre = np.minimum.reduceat(pos, b_start)
            reps = np.isin(c_bucket, np.flatnonzero(star))
            rep_pos, rep_centre = pos[c_start[reps]], centre[c_bucket[reps]]
            other = rep_pos != rep_centre
            out_a.append(rep_centre[other])
            out_b.append(rep_pos[other])
        a, b = np.concatenate(out_a), np.concatenate(out_b)
        yield rows(_PAIR, np.minimum(a, b), np.maximum(a, b))

    return walk


def _verification_docs(params: dict, exact: bool) -> Any:
    """The mapInArrow function that signs the candidates' documents again: (pos, id, text) to (pos, id, sig[,
    text])."""

    def sign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            sigs = _sketch(batch.column("text"), params)
            columns = [batch.column("pos"), batch.column("id"), _binary_rows(sigs)]
            names = ["pos", "id", "sig"]
            if exact:
                columns.append(batch.column("text"))
                names.append("text")
            yield pa.RecordBatch.from_arrays(columns, names=names)

    return sign


def _score_batches(params: dict, exact: bool) -> Any:
    """The mapInArrow function of stage 3: (a, b, sig_a, sig_b[, text_a, text_b]) to (a, b, estimate, jaccard)."""

    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import lshbench as lb

        k = params["num_perm"]
        for batch in batches:
            m = batch.num_rows
            both = np.concatenate(
                [_rows_of(batch.column("sig_a"), k), _rows_of(batch.column("sig_b"), k)]
            )
            idx = np.stack([np.arange(m), np.arange(m, 2 * m)], axis=1).astype(np.int64)
            est = lb.estimate_pairs(both, idx, kernel=params["kernel"], seed=params["seed"], threads=params["threads"])
            if exact:
                texts = pa.chunked_array([batch.column("text_a"), batch.column("text_b")], type=pa.string())
                jac = pa.array(
                    lb.jaccard_pairs(
                        texts,
                        idx,
                        shingle=params["shingle"],
                        lowercase=params["lowercase"],
                        collapse_whitespace=params["collapse_whitespace"],
                        strip_punctuation=params["strip_punctuation"],
                        seed=params["seed"],
                        threads=params["threads"],
                    )
                )
            else:
                jac = pa.nulls(m, pa.float64())
            yield pa.RecordBatch.from_arrays(
                [batch.column("a"), batch.column("b"), pa.array(est), jac], names=["a", "b", "estimate", "jaccard"]
            )

    return score


def _checkpoint(df: Any, use_reliable: bool) -> Any:
    """Cuts the lineage of ``df`` (a reliable checkpoint when a checkpoint directory is set, else a local one)."""
    return df.checkpoint(eager=True) if use_reliable else df.localCheckpoint(eager=True)


def _components(edges: Any, use_reliable: bool, max_rounds: int = 200) -> tuple:
    """Connected components of the undirected ``edges`` (u, v) by alternating large-star and small-star.

    Returns ``(labels, rounds)``: ``labels`` has one row (node, root) per node of an edge, ``root`` the smallest
    node of its component. Stops when a large-star and small-star round leaves the edge set unchanged (then
    every edge joins a node to its component's minimum).
    """
    from pyspark.sql import functions as F

    def both_ways(e: Any) -> Any:
        return e.select(F.col("u"), F.col("v")).union(e.select(F.col("v").alias("u"), F.col("u").alias("v")))

    def large_star(e: Any) -> Any:
        # Every node u links its larger neighbours to the smallest of u and its neighbours.
        sym = both_ways(e)
        m = sym.groupBy("u").agg(F.least(F.min("v"), F.first("u")).alias("m"))
        return sym.where(F.col("v") > F.col("u")).join(m, "u").select(F.col("v").alias("u"), F.col("m").alias("v"))

    def small_star(e: Any) -> Any:
        # Every node u links itself and its smaller neighbours to the smallest of them.
        sym = both_ways(e).where(F.col("v") < F.col("u"))
        m = sym.groupBy("u").agg(F.min("v").alias("m"))
        j = sym.join(m, "u")
        return (
            j.where(F.col("v") != F.col("m"))
            .select(F.col("v").alias("u"), F.col("m").alias("v"))
            .union(m.select(F.col("u"), F.col("m").alias("v")))
        )

    def canonical(e: Any) -> Any:
        return e.select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v")).where(
            F.col("u") != F.col("v")
        ).distinct()

    current = _checkpoint(canonical(edges), use_reliable)
    rounds = 0
    while True:
        rounds += 1
        if rounds > max_rounds:
            raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
        nxt = _checkpoint(canonical(small_star(canonical(large_star(current)))), use_reliable)
        changed = nxt.exceptAll(current).limit(1).count() + current.exceptAll(nxt).limit(1).count()
        current = nxt
        if changed == 0:
            break
    # Converged: every edge is (node, minimum of its component).
    labels = current.select(F.col("u").alias("node"), F.col("v").alias("root")).union(
        current.select(F.col("v").alias("node"), F.col("v").alias("root"))
    ).distinct()
    return labels, rounds


# The column that carries each document's position beside the input's own columns.
_POS = "_lshbench_pos"


def _survivor_order(keep: str, df: Any, text_column: str) -> tuple:
    """The survivor policy as Spark columns: ``(keys, order)``, ``keys`` the (name, column) pairs to compute per
    document and ``order`` the (name, ascending) sort that ranks documents best first, ending with the position
    (``pos``); ``(None, None)`` for ``center``. The same order as ``lshbench dedup --keep`` (crates/core/src/dedup/survivor.rs):
    a column's missing values (null, NaN) last, numbers compared as numbers, strings byte by byte, dates and
    timestamps by their value."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if keep == "center":
        return None, None
    if keep == "first":
        return [], [("pos", True)]
    if keep == "last":
        return [], [("pos", False)]
    if keep in ("longest", "shortest"):
        return [("k_len", F.octet_length(F.col(text_column)))], [("k_len", keep == "shortest"), ("pos", True)]
    name, _, order = keep[len("column:") :].rpartition(":") if keep.startswith("column:") else ("", "", "")
    if not name or order not in ("max", "min"):
        raise ValueError(
            f"--keep {keep}: not a survivor policy; use center, first, last, longest, shortest, column:NAME:max "
            "or column:NAME:min"
        )
    if name not in df.columns:
        raise ValueError(f"--keep {keep}: the DataFrame has no column {name!r} (columns: {', '.join(df.columns)})")
    dtype = df.schema[name].dataType
    column = F.col(name)
    if isinstance(dtype, T.StringType):
        value = column
    elif isinstance(dtype, T.NumericType):
        value = F.when(F.isnan(column.cast("double")), F.lit(None)).otherwise(column.cast("double"))
    elif isinstance(dtype, T.DateType):
        value = F.unix_date(column).cast("double")
    elif isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        value = F.unix_micros(column.cast("timestamp")).cast("double")
    else:
        raise ValueError(
            f"--keep {keep}: column {name!r} is {dtype.simpleString()}; a survivor column holds numbers, dates, "
            "timestamps or strings"
        )
    return (
        [("k_missing", value.isNull().cast("int")), ("k_value", value)],
        [("k_missing", True), ("k_value", order == "min"), ("pos", True)],
    )


def _cover(order: Optional[list], mode: str) -> Any:
    """The grouped applyInArrow function of the grouping: the verified edges ``(a, b, similarity)`` of one or more
    whole connected components, with each end's survivor keys (``a_NAME``, ``b_NAME``), to ``(node, centre)`` for
    every member of a group. The grouping itself (``mode``: ``components`` or ``center``, the greedy star cover)
    is the CLI's (``lsh::cluster::group_ranked`` through the binding), on the documents in position order: the
    edges handed over are all the edges of their documents, so the degrees, similarity sums and the cover are
    those of the whole corpus."""

    def cover(table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        from lshbench import _lshbench

        a, b = table.column("a").to_numpy(), table.column("b").to_numpy()
        nodes, local = np.unique(np.concatenate([a, b]), return_inverse=True)
        m = len(a)
        # Edges in the CLI's order: by the first document's position, then the second's.
        e = np.lexsort((local[m:], local[:m]))
        la, lb = local[:m][e].astype(np.int64), local[m:][e].astype(np.int64)
        similarity = table.column("similarity").to_numpy()[e].astype(np.float64)
        rank = None
        if order is not None:
            first = np.unique(local, return_index=True)[1]
            keys = {"pos": pa.array(nodes)}
            for name, _ in order:
                if name != "pos":
                    both = pa.chunked_array(
                        table.column(f"a_{name}").chunks + table.column(f"b_{name}").chunks
                    ).combine_chunks()
                    keys[name] = both.take(pa.array(first))
            best_first = pc.sort_indices(
                pa.table(keys), sort_keys=[(n, "ascending" if asc else "descending") for n, asc in order]
            ).to_numpy()
            rank = np.empty(len(nodes), dtype=np.int64)
            rank[best_first] = np.arange(len(nodes))
        centre = _lshbench.group_ranked(len(nodes), la, lb, similarity, mode, rank)
        grouped = centre >= 0
        return pa.table({"node": nodes[grouped], "centre": nodes[centre[grouped]]})

    return cover


def _group_all(order: Optional[list], mode: str) -> Any:
    """The applyInArrow function of the grouping in one task: every verified edge ``(a, b, similarity)``, with
    both ends' survivor keys, to one row per member of a group: ``node, centre, group, size, sim`` (the similarity
    of the member to its centre: their verified pair's, 1 for the centre, NaN when they share no verified pair),
    and on the centre's row the group report's ``edges, min_edge, sum_edge`` (the edges inside the group, their
    minimum, and their sum in pair order). Groups are numbered by their smallest member, as the CLI numbers them."""
    cover = _cover(order, mode)

    def group_all(table: pa.Table) -> pa.Table:
        a, b = table.column("a").to_numpy(), table.column("b").to_numpy()
        similarity = table.column("similarity").to_numpy().astype(np.float64)
        assigned = cover(table)
        node, centre = assigned.column("node").to_numpy(), assigned.column("centre").to_numpy()
        # Nodes in position order; groups ranked by their smallest member.
        by_node = np.argsort(node)
        node, centre = node[by_node], centre[by_node]
        centres, first, size = np.unique(centre, return_index=True, return_counts=True)
        rank = np.empty(len(centres), dtype=np.int64)
        rank[np.argsort(node[first], kind="stable")] = np.arange(len(centres))
        g = np.searchsorted(centres, centre)
        # Positions as indices into the sorted nodes, so that an edge is one int64 key.
        nodes = np.unique(np.concatenate([a, b]))
        n = len(nodes)
        la, lb = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
        pair_order = np.lexsort((lb, la))  # the order the CLI sums in
        la, lb, similarity = la[pair_order], lb[pair_order], similarity[pair_order]
        keys = la * n + lb
        by_key = np.argsort(keys)
        # Each member's verified pair with its centre, if any.
        lx, lc = np.searchsorted(nodes, node), np.searchsorted(nodes, centre)
        wanted = np.minimum(lx, lc) * n + np.maximum(lx, lc)
        at = np.minimum(np.searchsorted(keys[by_key], wanted), len(keys) - 1)
        found = keys[by_key][at] == wanted
        sim = np.where(found, similarity[by_key][at], np.nan)
        sim[node == centre] = 1.0
        # The group report: the edges whose two ends are in one group; their sum taken one by one in pair order
        # (np.add.at adds in index order), as the CLI sums them.
        group_of = np.full(n, -1, dtype=np.int64)
        group_of[lx] = g
        ga, gb = group_of[la], group_of[lb]
        inside = (ga == gb) & (ga >= 0)
        edges = np.bincount(ga[inside], minlength=len(centres)).astype(np.int64)
        min_edge = np.full(len(centres), np.inf)
        np.minimum.at(min_edge, ga[inside], similarity[inside])
        sum_edge = np.zeros(len(centres))
        np.add.at(sum_edge, ga[inside], similarity[inside])
        is_centre = node == centre
        on_centre = [pa.array(x[g], mask=~is_centre) for x in (edges, min_edge, sum_edge)]
        return pa.table(
            {
                "node": node, "centre": centre, "group": rank[g], "size": size[g].astype(np.int64), "sim": sim,
                "edges": on_centre[0], "min_edge": on_centre[1], "sum_edge": on_centre[2],
            }
        )

    return group_all


def dedup(
    df: Any,
    *,
    text_column: str = "text",
    id_column: str = "id",
    position_column: Optional[str] = None,
    bands: int,
    rows: int,
    threshold: float = 0.5,
    verify: str = _D["verify"],
    kernel: str = _D["kernel"],
    num_perm: int = _D["num_perm"],
    seed: int = _D["seed"],
    shingle: str = _D["shingle"],
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    bucket_cap: int = _D["bucket_cap"],
    max_candidates: int = _D["max_candidates"],
    max_local_edges: int = 10_000_000,
    threads_per_task: int = 1,
    checkpoint_dir: Optional[str] = None,
    groups: Optional[str] = None,
    keep: Optional[str] = None,
    short: str = _D["short"],
) -> DedupResult:
    """Near-duplicates of the texts of ``df``, as ``lshbench dedup`` finds them, and the survivors.

    df: a Spark DataFrame with a string column ``text_column`` and an id column ``id_column`` (cast to string).
    position_column: an integer column giving each document's position (distinct values; the order of the
        corpus); default: the DataFrame's partition order (``monotonically_increasing_id``).
    bands, rows, threshold, verify (``exact``, ``estimate`` or ``none``), kernel, num_perm, seed, shingle, the
        normalisation flags, bucket_cap and max_candidates: as ``lshbench dedup``'s flags of those names.
    max_local_edges: up to this many verified pairs the grouping runs in one task (about 100 bytes a pair of
        Python worker memory), the CLI's own code on the whole graph; beyond it, in large-star/small-star rounds.
    threads_per_task: threads each Spark task signs and scores with (1 when Spark runs a task per core).
    checkpoint_dir: the directory for the components' checkpoints; default: the SparkContext's checkpoint
        directory if one is set, else a new temporary directory (set it to shared storage on a cluster).
    groups: ``components`` (connected components) or ``center`` (the CLI's greedy star cover in survivor order,
        run per connected component: every removed document pairs with its survivor, no two kept documents form
        a pair). ``None``: ``center`` when a ``keep`` policy is given (the CLI defaults to center when it writes
        survivors), else ``components``.
    keep: the survivor policy, as ``--keep``: ``center`` (default), ``first``, ``last`` (by position),
        ``longest``, ``shortest`` (UTF-8 bytes), ``column:NAME:max`` or ``column:NAME:min`` (a numeric, date,
        timestamp or string column of ``df``; null and NaN never survive a value).
    short: documents shorter than one shingle, as ``--short``: ``exact``, ``keep`` (never matched) or ``drop``
        (removed, rule ``short:drop``).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    threshold = float(threshold)
    _check_banding(bands, rows, num_perm, threshold)
    if groups is None:
        groups = "components" if keep is None else "center"
    if groups not in ("components", "center"):
        raise ValueError(f"groups must be components or center, not {groups!r}")
    keep = "center" if keep is None else keep
    if short not in ("exact", "keep", "drop"):
        raise ValueError(f"short must be exact, keep or drop, not {short!r}")
    if _POS in df.columns:
        raise ValueError(f"the DataFrame has a column {_POS!r}, which this job uses for positions: rename it")
    if verify not in ("exact", "estimate", "none"):
        raise ValueError(f"verify must be exact, estimate or none, not {verify!r}")
    if kernel not in lshbench.kernels():
        raise ValueError(f"unknown kernel {kernel!r}: one of {', '.join(lshbench.kernels())}")
    if bucket_cap < 2:
        raise ValueError("--bucket-cap must be at least 2")
    for col in (text_column, id_column) + ((position_column,) if position_column else ()):
        if col not in df.columns:
            raise ValueError(f"the DataFrame has no column {col!r} (columns: {', '.join(df.columns)})")
    if not isinstance(df.schema[text_column].dataType, T.StringType):
        raise ValueError(f"column {text_column!r} is {df.schema[text_column].dataType.simpleString()}, not string")
    rank_keys, rank_order = _survivor_order(keep, df, text_column)

    spark = df.sparkSession
    sc = spark.sparkContext
    if checkpoint_dir is not None:
        sc.setCheckpointDir(checkpoint_dir)
    elif sc.getCheckpointDir() is None:
        sc.setCheckpointDir(tempfile.mkdtemp(prefix="lshbench-spark-checkpoints-"))

    params = dict(
        text_column=text_column,
        bands=bands,
        rows=rows,
        kernel=kernel,
        num_perm=num_perm,
        seed=seed,
        shingle=shingle,
        lowercase=bool(lowercase),
        collapse_whitespace=bool(collapse_whitespace),
        strip_punctuation=bool(strip_punctuation),
        threads=int(threads_per_task),
        short=short,
    )
    clock = _Clock()
    pos = F.col(position_column).cast("long") if position_column else F.monotonically_increasing_id()
    # Every input column with its position, for the kept rows.
    full = df.withColumn(_POS, pos)
    if position_column is None:
        # Fixes the positions monotonically_increasing_id gives (the texts are read again for verification and
        # the kept rows are read from it).
        full = _checkpoint(full, True)
    base = full.select(
        F.col(_POS).alias("pos"), F.col(id_column).cast("string").alias("id"), F.col(text_column).alias("text")
    )
    clock.lap("input")

    # 1-2. Signatures, band keys and candidates in one pass: each document's band rows go straight into one
    # shuffle by bucket, and each partition's buckets are walked by the binding's kernels and numpy.
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    band_rows = base.mapInArrow(_band_rows(params, _routes(spark, partitions)), "route long, rows binary")
    walked = _checkpoint(
        band_rows.repartition(partitions, "route").mapInArrow(
            _walk_buckets(params, bucket_cap, max_candidates), "kind byte, a long, b long"
        ),
        True,
    )
    counts = {
        r["kind"]: (r["a"] or 0, r["b"] or 0)
        for r in walked.where(F.col("kind") != _PAIR)
        .groupBy("kind")
        .agg(F.sum("a").alias("a"), F.sum("b").alias("b"))
        .collect()
    }
    null_text, null_id = counts.get(_NULLS, (0, 0))
    null_pos = counts.get(_NULL_POSITIONS, (0, 0))[0]
    for n_null, what, column in (
        (null_id, "id", id_column), (null_text, "text", text_column), (null_pos, "pos", position_column)
    ):
        if n_null:
            raise ValueError(
                f"column {column!r}: {n_null} null value(s); every document needs a {what} "
                "(drop or fill the nulls first)"
            )
    documents, empty_documents = counts.get(_DOCS, (0, 0))
    if counts.get(_EMITTED, (0, 0))[0] > max_candidates:
        raise ValueError(
            f"the banding produced more than {max_candidates} candidate pairs (counted once per band) before "
            "stopping; the S-curve lets through too many dissimilar pairs for this corpus. Use more rows per "
            "band (a higher threshold), longer shingles, or raise --max-candidates"
        )
    clock.lap("sign and band")
    candidates = _checkpoint(walked.where(F.col("kind") == _PAIR).select("a", "b").distinct(), True)
    n_candidates = candidates.count()
    clock.lap("candidates")

    # 3. Verification: the candidates' documents signed again (with their texts for exact verification), joined
    # to each pair and scored per Arrow batch.
    exact = verify == "exact"
    needed = candidates.select(F.col("a").alias("pos")).union(candidates.select(F.col("b").alias("pos"))).distinct()
    vdocs = _checkpoint(
        base.join(needed, "pos", "left_semi").mapInArrow(
            _verification_docs(params, exact), "pos long, id string, sig binary" + (", text string" if exact else "")
        ),
        True,
    )

    def score(pairs: Any) -> Any:
        """(a, b) pairs of candidates' documents with (a, b, estimate, jaccard)."""
        # Both ends join the same frame under the same name, so Spark shuffles it once for both joins.
        ends = ["sig", "text"] if exact else ["sig"]
        joined = pairs.join(vdocs, pairs.a == vdocs.pos).select(
            "a", "b", *[F.col(c).alias(f"{c}_a") for c in ends]
        )
        joined = joined.join(vdocs, joined.b == vdocs.pos).select(
            "a", "b", *[f"{c}_a" for c in ends], *[F.col(c).alias(f"{c}_b") for c in ends]
        )
        return joined.mapInArrow(_score_batches(params, exact), "a long, b long, estimate double, jaccard double")

    scored = score(candidates)
    if verify == "exact":
        kept = scored.where(F.col("jaccard") >= threshold)
    elif verify == "estimate":
        kept = scored.where(F.col("estimate") >= threshold)
    else:
        kept = scored
    verified = _checkpoint(
        kept.withColumn("similarity", F.coalesce(F.col("jaccard"), F.col("estimate"))), True
    )
    n_verified = verified.count()
    clock.lap("verify")

    ids = vdocs.select("pos", "id")
    ida = ids.select(F.col("pos").alias("a"), F.col("id").alias("id_a"))
    idb = ids.select(F.col("pos").alias("b"), F.col("id").alias("id_b"))
    pairs = (
        verified.join(ida, "a")
        .join(idb, "b")
        .orderBy("a", "b")
        .select(
            "id_a",
            "id_b",
            "estimate",
            "jaccard",
            F.lit(verify).alias("verified_by"),
        )
    )

    # 4-5. Groups: each grouped document's centre (its survivor).
    key_names = [n for n, _ in rank_keys or []]
    if rank_order is not None:
        # The survivor keys of every document (only grouped ones are looked at).
        keyed_docs = full.select(F.col(_POS).alias("pos"), *[c.alias(n) for n, c in rank_keys])

    def with_keys(edges: Any) -> Any:
        """Edges with both ends' survivor keys (a_NAME, b_NAME), what _cover ranks by."""
        for end in ("a", "b") if key_names else ():
            edges = edges.join(
                keyed_docs.select(F.col("pos").alias(end), *[F.col(n).alias(f"{end}_{n}") for n in key_names]), end
            )
        return edges

    if n_verified <= max_local_edges:
        # The whole graph in one task: the CLI's own grouping (lsh::cluster::group_ranked) over every verified
        # edge at once, so components, centres and the star cover are the CLI's without any rounds.
        edges = with_keys(verified.select("a", "b", "similarity"))
        members = _checkpoint(
            edges.groupBy(F.lit(0).alias("_graph")).applyInArrow(
                _group_all(rank_order, groups),
                "node long, centre long, group long, size long, sim double, edges long, min_edge double, "
                "sum_edge double",
            ),
            True,
        )
        rounds, graph = 0, "one task"
        clock.lap("groups")
    else:
        labels, rounds = _components(verified.select(F.col("a").alias("u"), F.col("b").alias("v")), True)
        graph = "distributed"
        clock.lap("components")
        if groups == "center":
            # The star cover, one connected component per call: its edges with both ends' survivor keys.
            comp_edges = verified.join(labels.withColumnRenamed("node", "a"), "a").select(
                "root", "a", "b", "similarity"
            )
            assignment = with_keys(comp_edges).groupBy("root").applyInArrow(
                _cover(rank_order, "center"), "node long, centre long"
            )
        elif rank_order is None:
            # Components, centred on the most edges, then the highest similarity sum (added in the CLI's order: by
            # the other document's position), then the smallest position.
            ends = verified.select(F.col("a").alias("node"), F.col("b").alias("other"), "similarity").union(
                verified.select(F.col("b").alias("node"), F.col("a").alias("other"), "similarity")
            )
            weights = ends.groupBy("node").agg(
                F.count("*").alias("degree"),
                F.aggregate(
                    F.array_sort(F.collect_list(F.struct("other", "similarity"))),
                    F.lit(0.0).cast("double"),
                    lambda acc, x: acc + x["similarity"],
                ).alias("weight"),
            )
            centres = labels.join(weights, "node").groupBy("root").agg(
                F.min(F.struct((-F.col("degree")).alias("d"), (-F.col("weight")).alias("w"), F.col("node").alias("c")))[
                    "c"
                ].alias("centre")
            )
            assignment = labels.join(centres, "root").select("node", "centre")
        else:
            # Components, centred on the member the survivor policy ranks first.
            from pyspark.sql import Window

            by_policy = Window.partitionBy("root").orderBy(
                *[F.col(n).asc() if asc else F.col(n).desc() for n, asc in rank_order]
            )
            ranked = labels.join(keyed_docs.withColumnRenamed("pos", "node"), "node").withColumn(
                "pos", F.col("node")
            )
            assignment = ranked.withColumn("centre", F.first("node").over(by_policy)).select("node", "centre")
    if graph == "distributed":
        assignment = _checkpoint(assignment, True)
        clock.lap("centres")
        groups_core = assignment.groupBy("centre").agg(F.count("*").alias("size"), F.min("node").alias("first"))
        # Group numbers: groups ordered by their smallest member, numbered from 0 without one task.
        numbered = groups_core.select("first").rdd.map(lambda r: r[0]).sortBy(lambda x: x).zipWithIndex()
        numbers = spark.createDataFrame(numbered, "first long, group long")
        group_table = _checkpoint(groups_core.join(numbers, "first"), True)
        # A member joined to its centre by a verified edge (every member under center) takes the edge's
        # similarity; the others are scored below. The group report's edge columns: the edges inside the group,
        # their min and their sum in pair order.
        edge_sim = verified.select(
            F.col("a").alias("lo"), F.col("b").alias("hi"), F.col("similarity").alias("edge")
        )
        ga = assignment.select(F.col("node").alias("a"), F.col("centre"))
        gb = assignment.select(F.col("node").alias("b"), F.col("centre").alias("centre_b"))
        edge_stats = (
            verified.join(ga, "a")
            .join(gb, "b")
            .where(F.col("centre") == F.col("centre_b"))
            .groupBy("centre")
            .agg(
                F.count("*").alias("edges"),
                F.min("similarity").alias("min_edge"),
                F.aggregate(
                    F.array_sort(F.collect_list(F.struct("a", "b", "similarity"))),
                    F.lit(0.0).cast("double"),
                    lambda acc, x: acc + x["similarity"],
                ).alias("sum_edge"),
            )
        )
        members = _checkpoint(
            assignment.join(group_table, "centre")
            .join(
                edge_sim,
                (F.least("node", "centre") == F.col("lo")) & (F.greatest("node", "centre") == F.col("hi")),
                "left",
            )
            .join(edge_stats.withColumnRenamed("centre", "node"), "node", "left")
            .select(
                "node", "centre", "group", "size",
                F.when(F.col("node") == F.col("centre"), F.lit(1.0)).otherwise(
                    F.coalesce(F.col("edge"), F.lit(float("nan")))
                ).alias("sim"),
                "edges", "min_edge", "sum_edge",
            ),
            True,
        )
        clock.lap("group numbers")

    # Members that share no verified pair with their centre (only under components) are scored like the
    # candidates; then the ids.
    unpaired = members.where(F.isnan("sim")).select(F.col("node").alias("a"), F.col("centre").alias("b"))
    if unpaired.limit(1).count():
        members = members.join(
            score(unpaired).select(
                F.col("a").alias("node"), F.coalesce(F.col("jaccard"), F.col("estimate")).alias("fresh")
            ),
            "node",
            "left",
        )
    else:
        members = members.withColumn("fresh", F.lit(None).cast("double"))
    grouped = (
        members
        .join(ids.select(F.col("pos").alias("node"), "id"), "node")
        .join(ids.select(F.col("pos").alias("centre"), F.col("id").alias("center")), "centre")
        .select(
            "group",
            "id",
            "size",
            "center",
            (F.col("node") == F.col("centre")).alias("is_center"),
            F.when(F.isnan("sim"), F.col("fresh")).otherwise(F.col("sim")).alias("sim"),
            F.col("node").alias("_pos"),
            "edges",
            "min_edge",
            "sum_edge",
        )
        .withColumn(
            "similarity_to_center", F.when(F.isnan("sim"), F.lit(None)).otherwise(F.col("sim"))
        )
    )
    grouped = _checkpoint(grouped, True)
    clock.lap("similarity to centre")
    clusters = grouped.orderBy("group", "_pos").select(
        "group", "id", "size", "center", "is_center", "similarity_to_center"
    )
    group_table = grouped.where(F.col("is_center"))
    groups_report = group_table.select(
        "group",
        "size",
        "center",
        "edges",
        "min_edge",
        (F.col("sum_edge") / F.col("edges")).alias("mean_edge"),
        F.lit("exact" if exact else "estimate").alias("similarity"),
    ).orderBy("group")

    # 6. Survivors: the audit of removals (`lshbench dedup --removed`) and the kept rows.
    removals = grouped.where(~F.col("is_center")).select(
        F.col("_pos").alias("pos"),
        "id",
        F.col("center").alias("survivor"),
        F.col("similarity_to_center").alias("similarity"),
        F.lit("exact" if exact else "estimate").alias("basis"),
        "group",
        F.lit(f"{groups}:{keep}").alias("rule"),
    )
    if short == "drop":
        removals = removals.unionByName(
            walked.where(F.col("kind") == _SHORT_DOC)
            .select(F.col("a").alias("pos"))
            .join(base.select("pos", "id"), "pos")
            .select(
                "pos",
                "id",
                F.lit(None).cast("string").alias("survivor"),
                F.lit(None).cast("double").alias("similarity"),
                F.lit("").alias("basis"),
                F.lit(None).cast("long").alias("group"),
                F.lit("short:drop").alias("rule"),
            )
        )
    removed = removals.orderBy("pos").drop("pos")
    kept = (
        full.join(removals.select(F.col("pos").alias(_POS)), _POS, "left_anti").orderBy(_POS).drop(_POS)
    )
    stats = dict(
        documents=documents,
        empty_documents=empty_documents,
        candidates=n_candidates,
        verified=n_verified,
        component_rounds=rounds,
        graph=graph,
        grouping=groups,
        groups=group_table.count(),
        seconds=clock.seconds,
    )
    return DedupResult(pairs=pairs, clusters=clusters, groups=groups_report, stats=stats, removed=removed, kept=kept)


def _read_input(spark: Any, path: str) -> Any:
    """Reads Parquet, every column, with each row's position in the input (``_position``): files in name order,
    rows in file order."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    columns = df.columns
    df = df.select("*", F.col("_metadata.file_path").alias("_file_path"), "_metadata.row_index")
    files = sorted(r[0] for r in df.select("_file_path").distinct().collect())  # one row per input file
    if len(files) >= 1 << 23:
        raise ValueError(f"{path}: {len(files)} files; at most 2**23 are supported")
    index = spark.createDataFrame([(f, i) for i, f in enumerate(files)], "_file_path string, file_index long")
    return df.join(F.broadcast(index), "_file_path").select(
        *columns, (F.col("file_index") * F.lit(1 << 40) + F.col("row_index")).alias("_position")
    )


def _local_workers_use(python: str) -> None:
    """Makes the Python workers of a local Spark started from this process run `python` (the interpreter running
    this job, with lshbench, numpy and pyarrow installed beside it), unless ``PYSPARK_PYTHON`` already names one.
    Spark's own default is ``python3`` from ``PATH``, which in a venv that is not activated is another Python
    without these packages. ``spark.pyspark.python``, when configured, still wins over both."""
    os.environ.setdefault("PYSPARK_PYTHON", python)


def _session(master: Optional[str], shuffle_partitions: Optional[int]) -> Any:
    """The session ``python -m lshbench.spark`` runs on: the one running in this process, or a new one on
    ``master`` (default: spark-submit's, else ``local[*]``), whose local workers run this interpreter."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("lshbench-dedup")
    if not master and "SPARK_HOME" not in os.environ and not os.environ.get("PYSPARK_SUBMIT_ARGS"):
        master = "local[*]"
    if master:
        builder = builder.master(master)
    if master and master.startswith("local") and SparkSession.getActiveSession() is None:
        _local_workers_use(sys.executable)
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    return builder.getOrCreate()


def _parser() -> argparse.ArgumentParser:
    """The command line of ``python -m lshbench.spark``."""
    parser = argparse.ArgumentParser(prog="python -m lshbench.spark", description="lshbench on Apache Spark")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dedup", help="near-duplicate pairs and groups of a Parquet corpus, as lshbench dedup")
    p.add_argument("--input", required=True, help="Parquet file or directory")
    p.add_argument("--text-column", default="text")
    p.add_argument("--id-column", default="id")
    p.add_argument("--output", required=True, help="directory for pairs.parquet, clusters.parquet, groups.parquet")
    p.add_argument("--kept", action="store_true", help="also write kept.parquet: the surviving rows, every column")
    p.add_argument("--removed", action="store_true", help="also write removed.parquet: the audit of removals")
    p.add_argument(
        "--groups", choices=["components", "center"],
        help="default: center with --kept or --removed, else components (as lshbench dedup)",
    )
    p.add_argument("--keep", default=_D["keep"], help="survivor policy: center, first, last, longest, shortest, "
                   "column:NAME:max|min")
    p.add_argument("--short", choices=["exact", "keep", "drop"], default=_D["short"])
    p.add_argument("--bands", type=int, required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--verify", choices=["exact", "estimate", "none"], default=_D["verify"])
    p.add_argument("--kernel", default=_D["kernel"])
    p.add_argument("--num-perm", type=int, default=_D["num_perm"])
    p.add_argument("--seed", type=int, default=_D["seed"])
    p.add_argument("--shingle", default=_D["shingle"])
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--collapse-whitespace", action="store_true")
    p.add_argument("--strip-punctuation", action="store_true")
    p.add_argument("--bucket-cap", type=int, default=_D["bucket_cap"])
    p.add_argument("--max-candidates", type=int, default=_D["max_candidates"])
    p.add_argument(
        "--max-local-edges", type=int, default=10_000_000,
        help="group the verified pairs in one task up to this many (else large-star/small-star rounds)",
    )
    p.add_argument("--threads-per-task", type=int, default=1)
    p.add_argument("--checkpoint-dir", help="default: a temporary directory (use shared storage on a cluster)")
    p.add_argument("--master", help="Spark master, e.g. local[2]; default: spark-submit's, else local[*]")
    p.add_argument("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lshbench.spark dedup ...``: see the module docstring and ``--help``."""
    args = _parser().parse_args(argv)

    if not os.path.exists(args.input) and "://" not in args.input:
        print(f"error: --input {args.input}: no such file or directory", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    # A session already running in this process (a notebook's, a test's) is used and left running; one this
    # command starts, it stops.
    own_session = SparkSession.getActiveSession() is None
    spark = _session(args.master, args.shuffle_partitions)
    try:
        df = _read_input(spark, args.input)
        survivors = args.kept or args.removed
        result = dedup(
            df,
            text_column=args.text_column,
            id_column=args.id_column,
            position_column="_position",
            bands=args.bands,
            rows=args.rows,
            threshold=args.threshold,
            verify=args.verify,
            kernel=args.kernel,
            num_perm=args.num_perm,
            seed=args.seed,
            shingle=args.shingle,
            lowercase=args.lowercase,
            collapse_whitespace=args.collapse_whitespace,
            strip_punctuation=args.strip_punctuation,
            bucket_cap=args.bucket_cap,
            max_candidates=args.max_candidates,
            max_local_edges=args.max_local_edges,
            threads_per_task=args.threads_per_task,
            checkpoint_dir=args.checkpoint_dir,
            groups=args.groups or ("center" if survivors else "components"),
            keep=args.keep,
            short=args.short,
        )
        out = args.output.rstrip("/")
        s = result.stats
        outputs = [("pairs", result.pairs), ("clusters", result.clusters), ("groups", result.groups)]
        if args.removed:
            outputs.append(("removed", result.removed))
        if args.kept:
            outputs.append(("kept", result.kept.drop("_position")))
        for name, frame in outputs:
            start = time.perf_counter()
            frame.write.mode("overwrite").parquet(f"{out}/{name}.parquet")
            s["seconds"][f"write {name}"] = time.perf_counter() - start
        written = [name for name, _ in outputs]
        print(
            f"documents: {s['documents']} read, {s['empty_documents']} empty (never candidates)\n"
            f"candidates: {s['candidates']} pairs\n"
            f"verified ({args.verify}, similarity >= {args.threshold}): {s['verified']} pairs\n"
            f"groups ({s['grouping']}, {s['graph']}, {s['component_rounds']} large-star/small-star rounds): "
            f"{s['groups']}\n"
            f"wrote {', '.join(f'{out}/{name}.parquet' for name in written)}\n"
            f"seconds: {', '.join(f'{stage} {t:.1f}' for stage, t in s['seconds'].items())}"
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if own_session:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
