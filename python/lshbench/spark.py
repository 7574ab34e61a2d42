"""Near-duplicate detection on Apache Spark, with the answer of ``lshbench dedup``.

:func:`dedup` takes a Spark DataFrame of texts and ids and returns DataFrames with the columns of ``lshbench
dedup``'s ``--pairs``, ``--clusters``, (the edge columns of) ``--group-report`` and ``--removed`` files, and the
kept rows of the input with every column (``--kept``), under the same survivor policies (``keep``, ``short``).
Every stage is a Spark operation, so nothing has to fit on the driver or in one task:

1. signatures and band keys: ``mapInArrow``, each Arrow batch signed by :func:`lshbench.sketch` and banded by
   :func:`lshbench.band_keys` (the CLI's kernels and band hash, so the keys are the CLI's keys);
2. candidates as the CLI forms them (``src/lsh/index.rs``): documents with identical banded slots form a class
   (its pairs once, not once per band); a (band, key) bucket holding two or more classes gives every pair
   across its classes; a class or bucket of more than ``bucket_cap`` documents is walked as a star on its
   smallest position instead of a clique; empty documents are never candidates;
3. verification: the texts (or the signatures) joined back to the pairs and scored in ``mapInArrow`` by
   :func:`lshbench.jaccard_pairs` (or :func:`lshbench.estimate_pairs`);
4. connected components of the verified pairs by alternating large-star and small-star (Kiveris et al.,
   "Connected Components in MapReduce and Beyond", SoCC 2014) until the edge set stops changing, each round
   checkpointed so the plan does not grow with the number of rounds;
5. groups: under ``components`` each component with its centre (the member the survivor policy ranks first;
   by default the most edges, then the highest similarity sum added in the CLI's order, then the smallest
   position); under ``center`` the CLI's greedy star cover, run by the binding on one component per
   ``applyInArrow`` call; then group numbers (groups ordered by their smallest member) and the similarity of
   every member to its centre;
6. survivors: the audit of removals (every member but its centre, and short documents under ``short="drop"``)
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
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa

import lshbench

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
    (``components`` or ``center``), groups. ``removed``: ``id, survivor, similarity, basis, group, rule``, the
    audit of ``lshbench dedup --removed``, one row per removed document by position. ``kept``: the input
    DataFrame's rows that survive, every column, by position (``lshbench dedup --kept``).
    """

    pairs: Any
    clusters: Any
    groups: Any
    stats: dict
    removed: Any = None
    kept: Any = None


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


def _sign_batches(params: dict) -> Any:
    """The mapInArrow function of stage 1: (pos, text) batches to (pos, sig, cls, keys, empty, short)."""

    def sign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import lshbench as lb

        used = params["bands"] * params["rows"]
        for batch in batches:
            texts = batch.column("text")
            if texts.null_count:
                raise ValueError(
                    f"column {params['text_column']!r}: {texts.null_count} null value(s) in a batch of "
                    f"{len(texts)} rows; every document needs a text (drop or fill the nulls first)"
                )
            sigs = lb.sketch(
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
            keys = lb.band_keys(sigs, params["bands"], params["rows"], seed=params["seed"])
            empty = np.all(sigs == _EMPTY_SLOT, axis=1)
            if params["short"] == "exact":
                short = np.zeros(len(empty), dtype=bool)
            else:
                # --short keep|drop: documents shorter than one shingle are not banded.
                short = lb._lshbench.short_documents(
                    texts, params["shingle"], params["lowercase"], params["collapse_whitespace"],
                    params["strip_punctuation"], params["seed"], params["threads"],
                )
                empty = empty | short
            n, b = keys.shape
            key_list = pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * b),
                pa.array(keys.view(np.int64).reshape(-1)),
            )
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column("pos"),
                    _binary_rows(sigs),
                    _binary_rows(np.ascontiguousarray(sigs[:, :used])),
                    key_list,
                    pa.array(empty),
                    pa.array(short),
                ],
                names=["pos", "sig", "cls", "keys", "empty", "short"],
            )

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
    (``pos``); ``(None, None)`` for ``center``. The same order as ``lshbench dedup --keep`` (src/dedup/survivor.rs):
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


def _cover(order: Optional[list]) -> Any:
    """The grouped applyInArrow function of ``groups="center"``: one connected component's verified edges ``(a, b,
    similarity)``, with each end's survivor keys (``a_NAME``, ``b_NAME``), to ``(node, centre)`` for every member of
    a star group. The greedy cover itself is the CLI's (``lsh::cluster::group_ranked`` through the binding), on
    the component's documents in position order: a component's edges are all the edges of its documents, so
    the degrees, similarity sums and the cover are those of the whole corpus."""

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
        centre = _lshbench.group_ranked(len(nodes), la, lb, similarity, "center", rank)
        grouped = centre >= 0
        return pa.table({"node": nodes[grouped], "centre": nodes[centre[grouped]]})

    return cover


def dedup(
    df: Any,
    *,
    text_column: str = "text",
    id_column: str = "id",
    position_column: Optional[str] = None,
    bands: int,
    rows: int,
    threshold: float = 0.5,
    verify: str = "exact",
    kernel: str = "oph-opt",
    num_perm: int = 128,
    seed: int = 42,
    shingle: str = "char:5",
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    bucket_cap: int = 5000,
    max_candidates: int = 20_000_000,
    threads_per_task: int = 1,
    checkpoint_dir: Optional[str] = None,
    groups: Optional[str] = None,
    keep: Optional[str] = None,
    short: str = "exact",
) -> DedupResult:
    """Near-duplicates of the texts of ``df``, as ``lshbench dedup`` finds them, and the survivors.

    df: a Spark DataFrame with a string column ``text_column`` and an id column ``id_column`` (cast to string).
    position_column: an integer column giving each document's position (distinct values; the order of the
        corpus); default: the DataFrame's partition order (``monotonically_increasing_id``).
    bands, rows, threshold, verify (``exact``, ``estimate`` or ``none``), kernel, num_perm, seed, shingle, the
        normalisation flags, bucket_cap and max_candidates: as ``lshbench dedup``'s flags of those names.
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
    nulls = base.agg(
        F.count(F.when(F.col("id").isNull(), 1)).alias("id"),
        F.count(F.when(F.col("text").isNull(), 1)).alias("text"),
        F.count(F.when(F.col("pos").isNull(), 1)).alias("pos"),
    ).first()
    for what, column in (("id", id_column), ("text", text_column), ("pos", position_column)):
        if nulls[what]:
            raise ValueError(
                f"column {column!r}: {nulls[what]} null value(s); every document needs a {what} "
                "(drop or fill the nulls first)"
            )

    # 1. Signatures and band keys, per Arrow batch.
    sign_schema = "pos long, sig binary, cls binary, keys array<long>, empty boolean, short boolean"
    signed = _checkpoint(
        base.select("pos", "text").mapInArrow(_sign_batches(params), sign_schema), True
    )
    documents = signed.count()
    docs = signed.where(~F.col("empty"))
    banded = docs.count()

    # 2. Candidates. Classes of identical banded slots, represented by their smallest position.
    classes = docs.groupBy("cls").agg(F.min("pos").alias("rep"), F.count("*").alias("csize"))
    members = docs.join(classes, "cls").select("pos", "rep", "csize")
    members = _checkpoint(members, True)
    class_rows = classes.where(F.col("csize") > 1).agg(
        F.coalesce(F.sum(F.col("csize") * (F.col("csize") - 1) / 2), F.lit(0)).alias("pairs")
    )
    in_class = members.where(F.col("csize") > 1)
    m1, m2 = in_class.alias("m1"), in_class.alias("m2")
    class_pairs = (
        m1.where(F.col("csize") <= bucket_cap)
        .join(m2, (F.col("m1.rep") == F.col("m2.rep")) & (F.col("m1.pos") < F.col("m2.pos")))
        .select(F.col("m1.pos").alias("a"), F.col("m2.pos").alias("b"))
    ).union(
        in_class.where((F.col("csize") > bucket_cap) & (F.col("pos") != F.col("rep"))).select(
            F.col("rep").alias("a"), F.col("pos").alias("b")
        )
    )
    reps = docs.join(classes, docs.pos == classes.rep).select("rep", "csize", "keys")
    keyed = reps.select("rep", "csize", F.posexplode("keys").alias("band", "key"))
    buckets = (
        keyed.groupBy("band", "key")
        .agg(
            F.count("*").alias("nclasses"),
            F.sum("csize").alias("size"),
            F.sum(F.col("csize") * F.col("csize")).alias("size2"),
            F.min("rep").alias("centre"),
        )
        .where(F.col("nclasses") > 1)
    )
    buckets = _checkpoint(buckets, True)
    # The pairs the CLI emits (with repeats across bands), counted before any is made: --max-candidates.
    within = class_rows.first()["pairs"] or 0
    across = buckets.agg(
        F.coalesce(
            F.sum(
                F.when(F.col("size") <= bucket_cap, (F.col("size") * F.col("size") - F.col("size2")) / 2).otherwise(
                    F.col("nclasses") - 1
                )
            ),
            F.lit(0),
        ).alias("n")
    ).first()["n"]
    if within + across > max_candidates:
        raise ValueError(
            f"the banding produced more than {max_candidates} candidate pairs (counted once per band) before "
            "stopping; the S-curve lets through too many dissimilar pairs for this corpus. Use more rows per "
            "band (a higher threshold), longer shingles, or raise --max-candidates"
        )
    in_bucket = keyed.join(buckets, ["band", "key"])
    small = in_bucket.where(F.col("size") <= bucket_cap)
    s1, s2 = small.alias("s1"), small.alias("s2")
    cross = (
        s1.join(
            s2,
            (F.col("s1.band") == F.col("s2.band"))
            & (F.col("s1.key") == F.col("s2.key"))
            & (F.col("s1.rep") < F.col("s2.rep")),
        )
        .select(F.col("s1.rep").alias("ra"), F.col("s2.rep").alias("rb"))
        .distinct()
    )
    ma, mb = members.alias("ma"), members.alias("mb")
    bucket_pairs = (
        cross.join(ma, F.col("ra") == F.col("ma.rep"))
        .join(mb, F.col("rb") == F.col("mb.rep"))
        .select(F.col("ma.pos").alias("a"), F.col("mb.pos").alias("b"))
    )
    star_pairs = in_bucket.where((F.col("size") > bucket_cap) & (F.col("rep") != F.col("centre"))).select(
        F.col("centre").alias("a"), F.col("rep").alias("b")
    )
    candidates = (
        class_pairs.union(bucket_pairs)
        .union(star_pairs)
        .select(F.least("a", "b").alias("a"), F.greatest("a", "b").alias("b"))
        .distinct()
    )
    candidates = _checkpoint(candidates, True)
    n_candidates = candidates.count()

    # 3. Verification: signatures (and texts) joined back to each pair, scored per Arrow batch.
    exact = verify == "exact"
    sa = signed.select(F.col("pos").alias("a"), F.col("sig").alias("sig_a"))
    sb = signed.select(F.col("pos").alias("b"), F.col("sig").alias("sig_b"))
    joined = candidates.join(sa, "a").join(sb, "b")
    if exact:
        ta = base.select(F.col("pos").alias("a"), F.col("text").alias("text_a"))
        tb = base.select(F.col("pos").alias("b"), F.col("text").alias("text_b"))
        joined = joined.join(ta, "a").join(tb, "b")
    scored = joined.mapInArrow(
        _score_batches(params, exact), "a long, b long, estimate double, jaccard double"
    )
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

    ids = base.select("pos", "id")
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

    # 4. Connected components.
    labels, rounds = _components(verified.select(F.col("a").alias("u"), F.col("b").alias("v")), True)

    # 5. Groups: each grouped document's centre (its survivor).
    if rank_order is not None:
        # The survivor keys of every document (only grouped ones are looked at).
        keyed_docs = full.select(F.col(_POS).alias("pos"), *[c.alias(n) for n, c in rank_keys])
    if groups == "center":
        # The star cover, one connected component per call: its edges with both ends' survivor keys.
        key_names = [n for n, _ in rank_keys or []]
        comp_edges = verified.join(labels.withColumnRenamed("node", "a"), "a").select("root", "a", "b", "similarity")
        if key_names:
            for end in ("a", "b"):
                comp_edges = comp_edges.join(
                    keyed_docs.select(F.col("pos").alias(end), *[F.col(n).alias(f"{end}_{n}") for n in key_names]),
                    end,
                )
        assignment = comp_edges.groupBy("root").applyInArrow(_cover(rank_order), "node long, centre long")
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
    assignment = _checkpoint(assignment, True)
    groups_core = assignment.groupBy("centre").agg(F.count("*").alias("size"), F.min("node").alias("first"))
    # Group numbers: groups ordered by their smallest member, numbered from 0 without one task.
    numbered = groups_core.select("first").rdd.map(lambda r: r[0]).sortBy(lambda x: x).zipWithIndex()
    numbers = spark.createDataFrame(numbered, "first long, group long")
    group_table = _checkpoint(groups_core.join(numbers, "first"), True)

    # Similarity of each member to its centre: the exact Jaccard (verify exact) or the estimate.
    member_rows = assignment.join(group_table, "centre").select(
        "group", "size", "centre", F.col("node").alias("a"), F.col("centre").alias("b")
    )
    to_score = member_rows.where(F.col("a") != F.col("b")).select("a", "b")
    scored_to_centre = to_score.join(sa, "a").join(sb, "b")
    if exact:
        scored_to_centre = scored_to_centre.join(ta, "a").join(tb, "b")
    to_centre = scored_to_centre.mapInArrow(
        _score_batches(params, exact), "a long, b long, estimate double, jaccard double"
    ).select("a", "b", F.coalesce(F.col("jaccard"), F.col("estimate")).alias("sim"))
    grouped = (
        member_rows.join(to_centre, ["a", "b"], "left")
        .join(ids.select(F.col("pos").alias("a"), "id"), "a")
        .join(ids.select(F.col("pos").alias("centre"), F.col("id").alias("center")), "centre")
        .select(
            "group",
            "id",
            "size",
            "center",
            (F.col("a") == F.col("centre")).alias("is_center"),
            F.when(F.col("a") == F.col("centre"), F.lit(1.0))
            .otherwise(F.when(F.isnan("sim"), F.lit(None)).otherwise(F.col("sim")))
            .alias("similarity_to_center"),
            F.col("a").alias("_pos"),
        )
    )
    grouped = _checkpoint(grouped, True)
    clusters = grouped.orderBy("group", "_pos").drop("_pos")

    # The group report's edge columns: edges inside the group, their min and mean (summed in pair order).
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
    groups_report = (
        group_table.join(edge_stats, "centre")
        .join(ids.select(F.col("pos").alias("centre"), F.col("id").alias("center")), "centre")
        .select(
            "group",
            "size",
            "center",
            "edges",
            "min_edge",
            (F.col("sum_edge") / F.col("edges")).alias("mean_edge"),
            F.lit("exact" if exact else "estimate").alias("similarity"),
        )
        .orderBy("group")
    )

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
            signed.where(F.col("short"))
            .join(ids, "pos")
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
        empty_documents=documents - banded,
        candidates=n_candidates,
        verified=n_verified,
        component_rounds=rounds,
        grouping=groups,
        groups=group_table.count(),
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lshbench.spark dedup ...``: see the module docstring and ``--help``."""
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
    p.add_argument("--keep", default="center", help="survivor policy: center, first, last, longest, shortest, "
                   "column:NAME:max|min")
    p.add_argument("--short", choices=["exact", "keep", "drop"], default="exact")
    p.add_argument("--bands", type=int, required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--verify", choices=["exact", "estimate", "none"], default="exact")
    p.add_argument("--kernel", default="oph-opt")
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--shingle", default="char:5")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--collapse-whitespace", action="store_true")
    p.add_argument("--strip-punctuation", action="store_true")
    p.add_argument("--bucket-cap", type=int, default=5000)
    p.add_argument("--max-candidates", type=int, default=20_000_000)
    p.add_argument("--threads-per-task", type=int, default=1)
    p.add_argument("--checkpoint-dir", help="default: a temporary directory (use shared storage on a cluster)")
    p.add_argument("--master", help="Spark master, e.g. local[2]; default: spark-submit's, else local[*]")
    p.add_argument("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions")
    args = parser.parse_args(argv)

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
            threads_per_task=args.threads_per_task,
            checkpoint_dir=args.checkpoint_dir,
            groups=args.groups or ("center" if survivors else "components"),
            keep=args.keep,
            short=args.short,
        )
        out = args.output.rstrip("/")
        result.pairs.write.mode("overwrite").parquet(f"{out}/pairs.parquet")
        result.clusters.write.mode("overwrite").parquet(f"{out}/clusters.parquet")
        result.groups.write.mode("overwrite").parquet(f"{out}/groups.parquet")
        written = ["pairs", "clusters", "groups"]
        if args.removed:
            result.removed.write.mode("overwrite").parquet(f"{out}/removed.parquet")
            written.append("removed")
        if args.kept:
            result.kept.drop("_position").write.mode("overwrite").parquet(f"{out}/kept.parquet")
            written.append("kept")
        s = result.stats
        print(
            f"documents: {s['documents']} read, {s['empty_documents']} empty (never candidates)\n"
            f"candidates: {s['candidates']} pairs\n"
            f"verified ({args.verify}, similarity >= {args.threshold}): {s['verified']} pairs\n"
            f"groups ({s['grouping']}, {s['component_rounds']} large-star/small-star rounds): {s['groups']}\n"
            f"wrote {', '.join(f'{out}/{name}.parquet' for name in written)}"
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
