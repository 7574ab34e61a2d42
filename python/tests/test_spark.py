"""lshbench.spark against `lshbench dedup`: the same verified pairs and the same groups on the shipped corpus.

One SparkSession (local[2], UI off, few shuffle partitions) for the module. pyspark and Java 17 are required
(python/requirements-ci.txt pins pyspark; .ci/run checks for java).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lshbench import spark as lspark

ROOT = Path(__file__).resolve().parents[2]
BANDING = ["--bands", "42", "--rows", "3", "--threshold", "0.5"]


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # The Python workers must run this interpreter (and find the package the driver imported).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    package_root = str(Path(lspark.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, os.environ.get("PYTHONPATH")] if p)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lshbench-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _shipped_corpus():
    """(ids, texts) of data/spamassassin.jsonl.gz, in file order."""
    ids, texts = [], []
    with gzip.open(ROOT / "data" / "spamassassin.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            ids.append(str(rec["id"]))
            texts.append(rec["text"])
    return ids, texts


@pytest.fixture(scope="module")
def parquet_corpus(tmp_path_factory):
    """data/spamassassin.jsonl.gz as Parquet (id, text), in the order of the JSONL file."""
    ids, texts = _shipped_corpus()
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), path, row_group_size=1000)
    return path


@pytest.fixture(scope="module")
def head_corpus(tmp_path_factory):
    """The first 1,500 documents of the shipped corpus as JSONL and as Parquet, with `lshbench dedup`'s exact
    answer on them: the command-line test starts a second Spark, so it runs on a quarter of the corpus (the
    whole corpus goes through `lshbench.spark.dedup` in the equality tests above)."""
    d = tmp_path_factory.mktemp("head")
    ids, texts, lines = [], [], []
    with gzip.open(ROOT / "data" / "spamassassin.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if len(lines) == 1500:
                break
            rec = json.loads(line)
            ids.append(str(rec["id"]))
            texts.append(rec["text"])
            lines.append(line)
    (d / "head.jsonl").write_text("".join(lines), encoding="utf-8")
    pq.write_table(pa.table({"id": ids, "text": texts}), d / "head.parquet", row_group_size=500)
    binary = os.environ.get("LSHBENCH_BIN") or str(ROOT / "target" / "release" / "lshbench")
    proc = subprocess.run(
        [binary, "dedup", "--input", str(d / "head.jsonl"), *BANDING, "--pairs", str(d / "p.csv"),
         "--clusters", str(d / "c.csv"), "--groups", "components", "--keep", "longest", "--removed", str(d / "r.csv"),
         "--kept", str(d / "k.jsonl")],
        check=True, capture_output=True, text=True,
    )
    candidates = int(re.search(r"^candidates: (\d+) pairs", proc.stdout, re.M).group(1))
    kept = [json.loads(line)["id"] for line in open(d / "k.jsonl", encoding="utf-8")]
    return d / "head.parquet", (_csv(d / "p.csv"), _csv(d / "c.csv"), candidates, _csv(d / "r.csv"), kept)


def _csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _fmt(x):
    return "" if x is None else f"{x:.6f}"


@pytest.fixture(scope="module")
def cli_answer(tmp_path_factory):
    """`lshbench dedup` on the shipped corpus: (pairs, clusters, group report) as CSV rows, per verify mode."""
    binary = os.environ.get("LSHBENCH_BIN") or str(ROOT / "target" / "release" / "lshbench")
    if not Path(binary).exists():
        raise RuntimeError("the lshbench CLI is not built: run `cargo build --release` or set LSHBENCH_BIN")
    out = {}
    for verify in ("exact", "estimate"):
        d = tmp_path_factory.mktemp(f"cli-{verify}")
        proc = subprocess.run(
            [binary, "dedup", "--input", str(ROOT / "data" / "spamassassin.jsonl.gz"), *BANDING,
             "--verify", verify, "--pairs", str(d / "p.csv"), "--clusters", str(d / "c.csv"),
             "--group-report", str(d / "g.csv")],
            check=True, capture_output=True, text=True,
        )
        candidates = int(re.search(r"^candidates: (\d+) pairs", proc.stdout, re.M).group(1))
        out[verify] = (_csv(d / "p.csv"), _csv(d / "c.csv"), _csv(d / "g.csv"), candidates)
    return out


def _removed_row(r):
    """A row of the removal audit as the CLI's CSV prints it."""
    return {"id": r["id"], "survivor": r["survivor"] or "", "similarity": _fmt(r["similarity"]), "basis": r["basis"],
            "group": "" if r["group"] is None else str(r["group"]), "rule": r["rule"]}


def _groups_as_sets(cluster_rows):
    groups = {}
    for r in cluster_rows:
        groups.setdefault(str(r["group"]), set()).add(r["id"])
    return {frozenset(g) for g in groups.values()}


def _check_equal(result, cli_rows):
    want_pairs, want_clusters, want_groups, _ = cli_rows
    pairs = [r.asDict() for r in result.pairs.collect()]
    clusters = [r.asDict() for r in result.clusters.collect()]
    groups = [r.asDict() for r in result.groups.collect()]
    assert len(want_pairs) > 1000 and len(want_clusters) > 1000

    # The criterion: exactly the verified pairs, exactly the groups as sets of ids.
    assert {(r["id_a"], r["id_b"]) for r in pairs} == {(r["id_a"], r["id_b"]) for r in want_pairs}
    assert _groups_as_sets(clusters) == _groups_as_sets(want_clusters)

    # And row for row, in the CLI's order, with its numbers (the CSV rounds floats to 6 decimals).
    assert [
        {"id_a": r["id_a"], "id_b": r["id_b"], "estimate": _fmt(r["estimate"]), "jaccard": _fmt(r["jaccard"]),
         "verified_by": r["verified_by"]}
        for r in pairs
    ] == want_pairs
    assert [
        {"group": str(r["group"]), "id": r["id"], "size": str(r["size"]), "center": r["center"],
         "is_center": "1" if r["is_center"] else "0", "similarity_to_center": _fmt(r["similarity_to_center"])}
        for r in clusters
    ] == want_clusters
    edge_columns = ["group", "size", "center", "edges", "min_edge", "mean_edge", "similarity"]
    assert [
        {k: (_fmt(r[k]) if k in ("min_edge", "mean_edge") else str(r[k])) for k in edge_columns} for r in groups
    ] == [{k: r[k] for k in edge_columns} for r in want_groups]


# Eight partitions (more than the two cores, and than the corpus's 7 row groups) with exact verification and the
# groups formed by large-star/small-star rounds, and one partition with the estimate mode and the groups formed in
# one task: both ends of the partitionings, both verification modes and both ways of grouping, each once (each run
# costs 20 to 60 s of Spark on two cores).
@pytest.mark.parametrize("partitions,verify,max_local_edges", [(8, "exact", 0), (1, "estimate", 10_000_000)])
def test_spark_dedup_equals_cli_dedup(spark, parquet_corpus, cli_answer, partitions, verify, max_local_edges):
    # Rows dealt round-robin over the partitions: the answer may depend on the positions only, never on the
    # partitioning.
    df = (
        spark.read.parquet(str(parquet_corpus))
        .select("id", "text", "_metadata.row_index")
        .repartition(partitions)
    )
    assert df.rdd.getNumPartitions() == partitions
    result = lspark.dedup(
        df, text_column="text", id_column="id", position_column="row_index", bands=42, rows=3,
        threshold=0.5, verify=verify, max_local_edges=max_local_edges,
    )
    assert result.stats["documents"] == 6046
    if max_local_edges:
        assert (result.stats["graph"], result.stats["component_rounds"]) == ("one task", 0)
    else:
        assert result.stats["graph"] == "distributed" and result.stats["component_rounds"] >= 2
    assert result.stats["candidates"] == cli_answer[verify][3]
    assert result.stats["groups"] == len({r["group"] for r in cli_answer[verify][1]})
    _check_equal(result, cli_answer[verify])


def test_command_line_writes_the_cli_tables(head_corpus, tmp_path, spark, capsys):
    # `main` as `python -m lshbench.spark` calls it, in this process: it uses the module's running session and
    # leaves it running, instead of starting a second JVM (the entry point itself is run in the test below).
    corpus, (want_pairs, want_clusters, want_candidates, want_removed, want_kept) = head_corpus
    assert len(want_pairs) > 100 and len(want_clusters) > 100
    out = tmp_path / "out"
    status = lspark.main(
        ["dedup", "--input", str(corpus), "--text-column", "text", "--id-column", "id", *BANDING, "--output",
         str(out), "--master", "local[2]", "--shuffle-partitions", "4", "--groups", "components", "--keep", "longest",
         "--removed", "--kept"]
    )
    printed = capsys.readouterr()
    assert status == 0, printed.err[-3000:]
    assert spark.range(3).count() == 3, "main stopped a session it did not start"
    pairs = pq.read_table(out / "pairs.parquet")
    clusters = pq.read_table(out / "clusters.parquet")
    assert pairs.column_names == ["id_a", "id_b", "estimate", "jaccard", "verified_by"]
    assert clusters.column_names == ["group", "id", "size", "center", "is_center", "similarity_to_center"]
    assert [pairs.schema.field(c).type for c in pairs.column_names] == [
        pa.string(), pa.string(), pa.float64(), pa.float64(), pa.string()
    ]
    assert [clusters.schema.field(c).type for c in clusters.column_names] == [
        pa.int64(), pa.string(), pa.int64(), pa.string(), pa.bool_(), pa.float64()
    ]
    # Spark writes a directory of part files in sorted order: read in order they are the CLI's rows.
    assert [(r["id_a"], r["id_b"]) for r in pairs.to_pylist()] == [(r["id_a"], r["id_b"]) for r in want_pairs]
    assert [(r["group"], r["id"], r["center"]) for r in clusters.to_pylist()] == [
        (int(r["group"]), r["id"], r["center"]) for r in want_clusters
    ]
    assert f"candidates: {want_candidates} pairs" in printed.out
    assert f"verified (exact, similarity >= 0.5): {len(want_pairs)} pairs" in printed.out
    # The survivors of `--keep longest`: the CLI's audit row for row, and its kept rows with every input column.
    removed = pq.read_table(out / "removed.parquet")
    assert removed.column_names == ["id", "survivor", "similarity", "basis", "group", "rule"]
    assert [_removed_row(r) for r in removed.to_pylist()] == want_removed
    kept = pq.read_table(out / "kept.parquet")
    assert kept.column_names == ["id", "text"]
    assert kept["id"].to_pylist() == want_kept


def test_command_line_entry_point_names_a_missing_input(tmp_path):
    # `python -m lshbench.spark` in a process of its own: a missing input is refused with exit status 2 before
    # any Spark starts.
    missing = tmp_path / "no-such.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "lshbench.spark", "dedup", "--input", str(missing), *BANDING, "--output",
         str(tmp_path / "out")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"--input {missing}: no such file or directory" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_contradicting_threshold_is_refused_before_any_work(spark):
    df = spark.createDataFrame([("a", "some text")], "id string, text string")
    with pytest.raises(ValueError, match="contradicts --bands 4 --rows 8"):
        lspark.dedup(df, bands=4, rows=8, threshold=0.3)
    with pytest.raises(ValueError, match="more than --num-perm 128"):
        lspark.dedup(df, bands=50, rows=3)


def test_null_text_is_named(spark):
    df = spark.createDataFrame([("a", "some text"), ("b", None)], "id string, text string")
    with pytest.raises(ValueError, match="column 'text': 1 null value"):
        lspark.dedup(df, bands=42, rows=3)


def test_components_on_a_long_chain_and_separate_pieces(spark):
    # A path 0-1-...-39 written in a scrambled order, plus a triangle and a lone edge: three components,
    # each labelled with its smallest node.
    edges = [(i, i + 1) for i in range(39)] + [(100, 101), (101, 102), (100, 102), (200, 300)]
    random.Random(7).shuffle(edges)
    df = spark.createDataFrame(edges, "u long, v long")
    labels, rounds = lspark._components(df, use_reliable=False)
    got = dict((r["node"], r["root"]) for r in labels.collect())
    want = {i: 0 for i in range(40)} | {100: 100, 101: 100, 102: 100, 200: 200, 300: 200}
    assert got == want
    assert rounds >= 2


def test_bucket_cap_and_max_candidates_as_the_cli(spark, cli_answer, tmp_path):
    # Seven copies of one text (one class of identical banded slots, over a cap of 3: a star on its first
    # document), two near-copies of another and a loner. The CLI's pairs are the reference.
    base = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat " * 3
    other = "a completely different message about invoices, shipping dates and payment terms " * 3
    texts = [base] * 4 + [other, other + " thanks"] + [base] * 3 + ["a loner with nothing in common at all"]
    ids = [f"d{i}" for i in range(len(texts))]
    src = tmp_path / "small.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, texts)))
    binary = os.environ.get("LSHBENCH_BIN") or str(ROOT / "target" / "release" / "lshbench")
    subprocess.run([binary, "dedup", "--input", str(src), *BANDING, "--bucket-cap", "3", "--pairs",
                    str(tmp_path / "p.csv"), "--clusters", str(tmp_path / "c.csv")], check=True, capture_output=True)
    df = spark.createDataFrame(list(zip(range(len(texts)), ids, texts)), "pos long, id string, text string")
    result = lspark.dedup(df, position_column="pos", bands=42, rows=3, threshold=0.5, bucket_cap=3)
    got = [(r["id_a"], r["id_b"]) for r in result.pairs.collect()]
    want = [(r["id_a"], r["id_b"]) for r in _csv(tmp_path / "p.csv")]
    assert got == want
    assert ("d0", "d8") in got and ("d1", "d2") not in got  # a star on d0, not a clique
    assert _groups_as_sets([r.asDict() for r in result.clusters.collect()]) == _groups_as_sets(_csv(tmp_path / "c.csv"))
    with pytest.raises(ValueError, match="more than 5 candidate pairs"):
        lspark.dedup(df, position_column="pos", bands=42, rows=3, max_candidates=5)


def test_default_positions_are_the_dataframe_order(spark):
    # Without position_column the DataFrame's own order (partition, then row) decides orientation and numbering.
    texts = ["near duplicate text about the weather today and tomorrow " * 4] * 2 + ["unrelated words " * 9]
    rows = [(f"x{i}", t) for i, t in enumerate(texts)]
    result = lspark.dedup(spark.createDataFrame(rows, "id string, text string").coalesce(1), bands=42, rows=3)
    assert [(r["id_a"], r["id_b"], r["jaccard"]) for r in result.pairs.collect()] == [("x0", "x1", 1.0)]
    assert [(r["group"], r["id"], r["center"], r["is_center"]) for r in result.clusters.collect()] == [
        (0, "x0", "x0", True), (0, "x1", "x0", False)
    ]


def test_entry_point_runs_its_local_workers_on_its_own_interpreter(tmp_path):
    # The session `python -m lshbench.spark` starts, from an interpreter whose venv is not activated: `python3`
    # on PATH is another Python (here one that fails at once), and PYSPARK_PYTHON is unset. A local worker must
    # run the interpreter that started the job (the job itself would then fail with "No module named ...").
    shim = tmp_path / "bin"
    shim.mkdir()
    for name in ("python3", "python"):
        (shim / name).write_text("#!/bin/sh\necho 'not the job interpreter' >&2\nexit 3\n")
        (shim / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    package_root = str(Path(lspark.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    script = (
        "import sys\n"
        "from lshbench import spark\n"
        "session = spark._session('local[1]', None)\n"
        "rdd = session.sparkContext.parallelize([0], 1)\n"
        "print('worker:', rdd.map(lambda _: __import__('sys').executable).collect()[0])\n"
        "session.stop()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"worker: {sys.executable}" in proc.stdout, proc.stdout[-2000:]


@pytest.fixture(scope="module")
def survivor_corpus(tmp_path_factory):
    """The shipped corpus as Parquet with a survivor column `score` (integers with ties and nulls) and four texts
    shorter than one shingle, and the CLI's survivors on that file under two policies (the default grouping of
    `--removed`: center), the second with `--short drop`."""
    ids, texts = _shipped_corpus()
    ids, texts = ids + ["short-0", "short-1", "short-2", "short-3"], texts + ["hi", "hi", "abc", ""]
    rng = random.Random(11)
    score = [None if rng.random() < 0.1 else rng.randrange(20) for _ in ids]
    d = tmp_path_factory.mktemp("survivors")
    path = d / "corpus.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "score": score}), path, row_group_size=1000)
    binary = os.environ.get("LSHBENCH_BIN") or str(ROOT / "target" / "release" / "lshbench")
    want = {}
    for keep, short in SURVIVOR_RUNS:
        out = d / keep.replace(":", "-")
        out.mkdir()
        subprocess.run(
            [binary, "dedup", "--input", str(path), "--id-column", "id", *BANDING, "--keep", keep, "--short", short,
             "--clusters", str(out / "c.csv"), "--group-report", str(out / "g.csv"), "--removed", str(out / "r.csv"),
             "--kept", str(out / "k.parquet")],
            check=True, capture_output=True, text=True,
        )
        # --kept writes the input's form: Parquet here, with every column.
        kept = pq.read_table(out / "k.parquet").column("id").to_pylist()
        want[keep] = (_csv(out / "c.csv"), _csv(out / "g.csv"), _csv(out / "r.csv"), kept)
    return path, want


# The greedy star cover per component, under two policies, on the whole corpus (each about as long as one run
# above); the short documents are matched whole (two of them a group) in the first, dropped in the second.
SURVIVOR_RUNS = [("first", "exact"), ("column:score:max", "drop")]


@pytest.mark.parametrize("keep,short", SURVIVOR_RUNS)
def test_spark_survivors_equal_cli_dedup(spark, survivor_corpus, keep, short):
    path, want = survivor_corpus
    want_clusters, want_groups, want_removed, want_kept = want[keep]
    assert ("short:drop" in {r["rule"] for r in want_removed}) == (short == "drop")
    df = spark.read.parquet(str(path)).select("id", "text", "score", "_metadata.row_index").repartition(3)
    result = lspark.dedup(df, position_column="row_index", bands=42, rows=3, threshold=0.5, keep=keep, short=short)
    assert result.stats["grouping"] == "center"
    clusters = [r.asDict() for r in result.clusters.collect()]
    assert [(str(r["group"]), r["id"], r["center"]) for r in clusters] == [
        (r["group"], r["id"], r["center"]) for r in want_clusters
    ]
    assert [(str(r["group"]), r["center"], str(r["edges"]), _fmt(r["mean_edge"])) for r in result.groups.collect()] == [
        (r["group"], r["center"], r["edges"], r["mean_edge"]) for r in want_groups
    ]
    assert len(want_removed) > 1000
    assert [_removed_row(r.asDict()) for r in result.removed.collect()] == want_removed
    kept = result.kept
    assert kept.columns == ["id", "text", "score", "row_index"]
    assert [r["id"] for r in kept.select("id").collect()] == want_kept


def test_survivor_arguments_are_refused_before_any_work(spark):
    df = spark.createDataFrame([(0, "a", "some text", True)], "pos long, id string, text string, flag boolean")
    cases = [
        (dict(keep="column:ts:max"), "no column 'ts'"),
        (dict(keep="column:flag:max"), "column 'flag' is boolean; a survivor column holds numbers"),
        (dict(keep="oldest"), "--keep oldest: not a survivor policy"),
        (dict(groups="cliques"), "groups must be components or center"),
        (dict(short="maybe"), "short must be exact, keep or drop"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as e:
            lspark.dedup(df, position_column="pos", bands=42, rows=3, **kwargs)
        assert message in str(e.value), (message, str(e.value))


def test_standalone_cluster_runs_the_job_as_spark_submit(head_corpus, tmp_path):
    # A real Spark standalone cluster on this machine (a master and one worker of one core, pyspark's own
    # daemons), the job submitted with spark-submit as the guide's cluster chapter says: the CLI's pairs and
    # groups, written by executors that are not the driver.
    corpus, (want_pairs, want_clusters, _, _, _) = head_corpus
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "spark" / "cluster.py"), "--input", str(corpus), "--output",
         str(out), "--workers", "1", "--worker-memory", "1g", "--driver-memory", "1g", "--shuffle-partitions", "4",
         "--work", str(tmp_path / "cluster"), "--", "--text-column", "text", "--id-column", "id", *BANDING,
         "--groups", "components", "--keep", "longest"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    pairs = pq.read_table(out / "pairs.parquet")
    clusters = pq.read_table(out / "clusters.parquet")
    assert [(r["id_a"], r["id_b"]) for r in pairs.to_pylist()] == [(r["id_a"], r["id_b"]) for r in want_pairs]
    assert [(r["group"], r["id"], r["center"]) for r in clusters.to_pylist()] == [
        (int(r["group"]), r["id"], r["center"]) for r in want_clusters
    ]
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["workers"] == 1 and report["events"]["executors"] == 1 and report["events"]["tasks"] > 0
