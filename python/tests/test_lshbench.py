"""The Python package against the CLI and against independent computations."""

from __future__ import annotations

import csv
import itertools
import threading
import time
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lshbench


def cli_kernels(cli):
    """The kernel names `lshbench info` lists."""
    out = cli("info").stdout
    lines = out.split("kernels:\n", 1)[1].splitlines()
    return [ln.split()[0] for ln in lines if ln.startswith("  ")]


def cli_npy(cli, tmp_path, input_path, *flags):
    out = tmp_path / "sigs.npy"
    cli("sketch", "--input", input_path, "--output", out, *flags)
    return np.load(out)


# ------------------------------------------------------------------------------------------------ sketch


def test_registry_matches_cli_info(cli):
    assert lshbench.kernels() == cli_kernels(cli)


def test_sketch_equals_cli_for_every_kernel(cli, tmp_path, corpus, corpus_path):
    _, texts = corpus
    column = pa.chunked_array([pa.array(texts[:3000], type=pa.large_string()), pa.array(texts[3000:], type=pa.large_string())])
    for kernel in cli_kernels(cli):
        want = cli_npy(cli, tmp_path, corpus_path, "--kernel", kernel, "--num-perm", 128, "--seed", 42)
        got = lshbench.sketch(column, kernel=kernel, num_perm=128, seed=42)
        assert got.dtype == np.uint32 and got.shape == want.shape == (len(texts), 128), kernel
        assert got.tobytes() == want.tobytes(), f"kernel {kernel}: bytes differ from `lshbench sketch`"


@pytest.mark.parametrize(
    "flags,kwargs",
    [
        (["--shingle", "word:2", "--lowercase"], dict(shingle="word:2", lowercase=True)),
        (
            ["--shingle", "char:9", "--collapse-whitespace", "--strip-punctuation"],
            dict(shingle="char:9", collapse_whitespace=True, strip_punctuation=True),
        ),
        (["--shingle", "byte:4", "--seed", "7", "--num-perm", "37"], dict(shingle="byte:4", seed=7, num_perm=37)),
        (["--shingle", "stopword:2"], dict(shingle="stopword:2")),
    ],
)
def test_sketch_equals_cli_with_shingles_and_normalisation(cli, tmp_path, corpus, write_jsonl, flags, kwargs):
    ids, texts = corpus
    path = write_jsonl("part.jsonl", ids[:800], texts[:800])
    for kernel in ("oph-opt", "simd"):
        want = cli_npy(cli, tmp_path, path, "--kernel", kernel, *flags)
        got = lshbench.sketch(texts[:800], kernel=kernel, **kwargs)
        assert got.tobytes() == want.tobytes(), (kernel, flags)


def test_every_input_type_gives_the_same_bytes(corpus):
    _, texts = corpus
    texts = texts[:500] + ["", "héllo wörld ünïcode", "a"]
    want = lshbench.sketch(texts, num_perm=64)
    for column in (
        pa.array(texts),
        pa.array(texts, type=pa.large_string()),
        pa.array(texts, type=pa.string_view()),
        pa.chunked_array([pa.array(texts[:100]), pa.array(texts[100:])]),
        np.array(texts),
        np.array(texts, dtype=object),
        pa.array(texts).slice(0),  # a zero-offset slice
    ):
        assert lshbench.sketch(column, num_perm=64).tobytes() == want.tobytes(), type(column)
    # A slice with an offset reads the right rows.
    sliced = pa.array(texts).slice(10, 20)
    assert lshbench.sketch(sliced, num_perm=64).tobytes() == want[10:30].tobytes()
    # The empty document's row is all 2**32 - 1.
    assert (want[500] == 2**32 - 1).all()


def test_same_bytes_for_every_isa_and_thread_count(corpus):
    _, texts = corpus
    col = pa.array(texts[:1500])
    for kernel in lshbench.kernels():
        want = lshbench.sketch(col, kernel=kernel, isa="scalar", threads=1)
        for isa in lshbench.isas():
            for threads in (1, 2, 3):
                got = lshbench.sketch(col, kernel=kernel, isa=isa, threads=threads)
                assert got.tobytes() == want.tobytes(), (kernel, isa, threads)


def test_arrow_input_makes_no_python_object_per_row():
    n = 200_000
    column = pa.array([f"document number {i} with some words in it" for i in range(n)])
    lshbench.sketch(column[:10], num_perm=1)  # warm up imports and caches
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        sigs = lshbench.sketch(column, num_perm=1, threads=1)
        _, arrow_peak = tracemalloc.get_traced_memory()
        # The same measure sees per-row objects when there are some: the list path makes a str per row.
        tracemalloc.reset_peak()
        lshbench.sketch(column.to_pylist(), num_perm=1, threads=1)
        _, list_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sigs.shape == (n, 1)
    # The output is n * 4 bytes of numpy data; a Python str costs at least 49 bytes.
    print(f"tracemalloc peak: arrow column {arrow_peak} B, list of str {list_peak} B, for {n} rows")
    assert arrow_peak < n * 8, f"{arrow_peak} bytes traced for {n} rows: Python objects per row?"
    assert list_peak > n * 49


def test_sketch_releases_the_gil(corpus):
    _, texts = corpus
    column = pa.array(texts * 2)
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.05)
    before = ticks
    t0 = time.perf_counter()
    lshbench.sketch(column, kernel="simd", threads=1)
    seconds = time.perf_counter() - t0
    during = ticks - before
    stop.set()
    t.join()
    print(f"sketch took {seconds:.2f} s; the other thread counted {during} ticks meanwhile")
    assert seconds > 0.1, "the input is too small to tell"
    # Holding the GIL for the call would leave the counter all but still (it gets the GIL only between calls).
    assert during > 10_000


# ------------------------------------------------------------------------------------------------ errors


def test_bad_arguments_raise_with_the_cli_messages(cli, corpus_path, tmp_path):
    texts = ["some text here", "other text"]
    cli_err = cli("sketch", "--input", corpus_path, "--kernel", "nope", "-o", tmp_path / "x.npy", check=False)
    assert cli_err.returncode != 0
    with pytest.raises(ValueError) as e:
        lshbench.sketch(texts, kernel="nope")
    assert str(e.value) in cli_err.stderr
    cases = [
        (lambda: lshbench.sketch(texts, num_perm=0), ValueError, "num_perm must be at least 1"),
        (lambda: lshbench.sketch(texts, shingle="char:0"), ValueError, "the length must be at least 1"),
        (lambda: lshbench.sketch(texts, shingle="tri:3"), ValueError, "unknown kind `tri`"),
        (lambda: lshbench.sketch(texts, shingle="char"), ValueError, "expected KIND:N"),
        (lambda: lshbench.sketch(texts, isa="sse9"), ValueError, "isa `sse9`"),
        (lambda: lshbench.sketch(texts, threads=0), ValueError, "--threads must be at least 1"),
        (lambda: lshbench.sketch(texts, seed=-1), ValueError, "seed must not be negative"),
        (lambda: lshbench.sketch("one string"), TypeError, "not a single str"),
        (lambda: lshbench.sketch(["a", 3]), TypeError, "texts[1]: expected str"),
        (lambda: lshbench.sketch(pa.array([1, 2])), TypeError, "expected string"),
        (lambda: lshbench.sketch(pa.array(["a", None])), ValueError, "texts[1] is null"),
        (lambda: lshbench.sketch(np.zeros(3)), TypeError, "dtype float64"),
        (lambda: lshbench.band_keys(np.zeros((2, 8), np.uint32), 3, 3), ValueError, "9 slots"),
        (lambda: lshbench.band_keys(np.zeros((2, 8), np.uint32), 0, 3), ValueError, "--bands must be at least 1"),
        (lambda: lshbench.band_keys(np.zeros((2, 8), np.int64), 2, 3), TypeError, "uint32"),
        (lambda: lshbench.band_keys(np.zeros(8, np.uint32), 2, 3), ValueError, "2-d"),
        (lambda: lshbench.estimate(np.zeros(4, np.uint32), np.zeros(5, np.uint32)), ValueError, "different lengths"),
        (lambda: lshbench.estimate_pairs(np.zeros((2, 4), np.uint32), [[0, 2]]), ValueError, "outside 0..2"),
        (lambda: lshbench.estimate_pairs(np.zeros((2, 4), np.uint32), [[0, 1, 1]]), ValueError, "shape (m, 2)"),
        (lambda: lshbench.jaccard_pairs(texts, [[0, -1]]), ValueError, "outside 0..2"),
        (lambda: lshbench.jaccard("a", "b", shingle="word:0"), ValueError, "at least 1"),
        (lambda: lshbench.scurve(0, 3, 0.5), ValueError, "--bands must be at least 1"),
        (lambda: lshbench.scurve(3, 3, 1.5), ValueError, "not a similarity"),
        (lambda: lshbench.tune(0), ValueError, "--num-perm must be at least 1"),
        (lambda: lshbench.tune(128, fn=(0.05, 0.01), fp=(0.5, 0.001)), ValueError, "must be below the --fn"),
        (lambda: lshbench.tune(128, fn=(1.5, 0.01)), ValueError, "must lie in [0, 1]"),
        (lambda: lshbench.dedup(texts, threshold=0.0), ValueError, "outside (0, 1]"),
        (lambda: lshbench.dedup(texts, threshold=1.2), ValueError, "outside (0, 1]"),
        (lambda: lshbench.dedup(texts, bands=4), ValueError, "--bands needs --rows"),
        (lambda: lshbench.dedup(texts, rows=4), ValueError, "--rows needs --bands"),
        (lambda: lshbench.dedup(texts, bands=43, rows=3), ValueError, "129 slots"),
        (lambda: lshbench.dedup(texts, bands=5, rows=25, threshold=0.5), ValueError, "contradicts --bands 5"),
        (lambda: lshbench.dedup(texts, verify="maybe"), ValueError, "verify `maybe`"),
        (lambda: lshbench.dedup(texts, groups="cliques"), ValueError, "groups `cliques`"),
        (lambda: lshbench.dedup(texts, bucket_cap=1), ValueError, "--bucket-cap must be at least 2"),
        (lambda: lshbench.dedup(texts, ids=["a"]), ValueError, "1 ids for 2 texts"),
        (lambda: lshbench.LSHIndex(43, 3, num_perm=128), ValueError, "129 slots"),
        (lambda: lshbench.LSHIndex(4, 4, kernel="nope"), ValueError, "unknown kernel `nope`"),
        (lambda: lshbench.LSHIndex.load("/nonexistent/state.bin", 4, 4), ValueError, "reading state"),
    ]
    for call, exc, message in cases:
        with pytest.raises(exc) as e:
            call()
        assert message in str(e.value), (message, str(e.value))


def test_cli_messages_for_dedup_arguments(cli, corpus_path):
    for flags, call in [
        (["--threshold", "1.2"], lambda: lshbench.dedup(["a"], threshold=1.2)),
        (["--bands", "5", "--rows", "25", "--threshold", "0.5"], lambda: lshbench.dedup(["a"], bands=5, rows=25, threshold=0.5)),
        (["--bands", "4"], lambda: lshbench.dedup(["a"], bands=4)),
    ]:
        res = cli("dedup", "--input", corpus_path, *flags, check=False)
        assert res.returncode != 0
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) in res.stderr, (str(e.value), res.stderr)


def test_a_rust_panic_becomes_a_python_exception():
    with pytest.raises(BaseException) as e:
        lshbench._lshbench._panic_for_test()
    assert type(e.value).__name__ == "PanicException"
    assert "deliberate panic" in str(e.value)
    # The interpreter is still alive and the module still works.
    assert lshbench.sketch(["still here"], num_perm=4).shape == (1, 4)


def test_the_stub_lists_every_public_name():
    from pathlib import Path

    stub = (Path(lshbench.__file__).parent / "__init__.pyi").read_text()
    for name in lshbench.__all__:
        if name != "__version__":
            assert f"def {name}" in stub or f"class {name}" in stub or f"\n{name}: " in stub, name


# ------------------------------------------------------------------------------------------------ estimates


def _char_set(text, k=5):
    if not text:
        return set()
    if len(text) < k:
        return {text}
    return {text[i : i + k] for i in range(len(text) - k + 1)}


def test_jaccard_is_exact(corpus):
    _, texts = corpus
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, 2000, size=(300, 2))
    got = lshbench.jaccard_pairs(texts[:2000], pairs)
    for (a, b), j in zip(pairs, got):
        sa, sb = _char_set(texts[a]), _char_set(texts[b])
        want = len(sa & sb) / len(sa | sb) if sa | sb else 1.0
        assert j == pytest.approx(want, abs=1e-12)
        assert lshbench.jaccard(texts[a], texts[b]) == j


def test_estimates_are_the_fraction_of_equal_slots(corpus):
    _, texts = corpus
    sigs = lshbench.sketch(texts[:2000], num_perm=256)
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, 2000, size=(2000, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    est = lshbench.estimate_pairs(sigs, pairs)
    frac = (sigs[pairs[:, 0]] == sigs[pairs[:, 1]]).mean(axis=1)
    np.testing.assert_array_equal(est, frac)
    assert lshbench.estimate(sigs[pairs[0, 0]], sigs[pairs[0, 1]]) == est[0]
    # (Unbiasedness against exact Jaccard, over many seeds, is the kernel contract's job: tests/kernels.rs.)


def test_scurve_and_tune_match_the_cli(cli):
    for b, r in [(42, 3), (20, 5), (1, 1)]:
        for s in (0.0, 0.3, 0.5, 0.9, 1.0):
            assert lshbench.scurve(b, r, s) == pytest.approx(1 - (1 - s**r) ** b, abs=1e-15)
    np.testing.assert_allclose(lshbench.scurve(20, 5, np.array([0.2, 0.8])), [lshbench.scurve(20, 5, 0.2), lshbench.scurve(20, 5, 0.8)])
    for num_perm, fn, fp in [(128, (0.5, 0.01), (0.05, 0.001)), (256, (0.8, 0.05), (0.3, 0.01)), (64, (0.9, 0.1), (0.2, 0.05))]:
        got = lshbench.tune(num_perm, fn=fn, fp=fp)
        out = cli("tune", "--num-perm", num_perm, "--fn", f"{fn[0]}:{fn[1]}", "--fp", f"{fp[0]}:{fp[1]}").stdout
        assert got["report"].strip() == out.strip()
        c = got["choice"]
        assert c["p_recall"] == pytest.approx(lshbench.scurve(c["bands"], c["rows"], fn[0]))
        assert c["p_fp"] == pytest.approx(lshbench.scurve(c["bands"], c["rows"], fp[0]))
        assert f"{c['bands']:>5} {c['rows']:>5}" in out
        if got["feasible"]:
            assert c["p_recall"] >= 1 - fn[1] and c["p_fp"] <= fp[1]


# ------------------------------------------------------------------------------------------------ LSH


def _candidate_pairs_from_keys(keys):
    pairs = set()
    for col in keys.T:
        buckets = {}
        for i, key in enumerate(col):
            buckets.setdefault(int(key), []).append(i)
        for members in buckets.values():
            pairs.update(itertools.combinations(members, 2))
    return pairs


def _banded_head(corpus):
    """The corpus's first 1,500 documents, their signatures at k = 100, empty flags, and the pairs of non-empty
    documents sharing a band at 20 x 5 (from their band keys)."""
    ids, texts = corpus
    ids, texts = ids[:1500], texts[:1500]
    sigs = lshbench.sketch(texts, num_perm=100)
    empty = (sigs == 2**32 - 1).all(axis=1)
    keys = lshbench.band_keys(sigs, 20, 5)
    assert keys.dtype == np.uint64 and keys.shape == (1500, 20)
    pairs = {(a, b) for a, b in _candidate_pairs_from_keys(keys) if not empty[a] and not empty[b]}
    return ids, texts, sigs, empty, pairs


def test_band_keys_query_then_insert_and_dedup_agree(corpus):
    ids, texts, sigs, empty, from_keys = _banded_head(corpus)
    bands, rows = 20, 5
    # The streaming index finds the same pairs, each once, by its later document.
    index = lshbench.LSHIndex(bands, rows)
    found = index.query_then_insert(texts, ids)
    pos = {d: i for i, d in enumerate(ids)}
    streamed = {(pos[h], j) for j, hits in enumerate(found) for h in hits}
    assert streamed == from_keys
    assert len(from_keys) > 100
    # query() on a full index returns the document itself and its candidates.
    again = index.query(texts[:50])
    for j in range(50):
        if not empty[j]:
            assert ids[j] in again[j]
            assert set(again[j]) - {ids[j]} == {ids[b] for a, b in from_keys if a == j} | {ids[a] for a, b in from_keys if b == j}
    # dedup without verification reports exactly these candidates.
    pairs, _ = lshbench.dedup(texts, ids, bands=bands, rows=rows, verify="none", num_perm=100)
    assert {(pos[a], pos[b]) for a, b in zip(pairs["id_a"].to_pylist(), pairs["id_b"].to_pylist())} == from_keys


def test_removed_documents_leave_the_index_and_its_state(corpus, tmp_path):
    ids, texts, sigs, empty, pairs = _banded_head(corpus)
    bands, rows = 20, 5
    index = lshbench.LSHIndex(bands, rows)
    index.insert(texts, ids)
    # Remove every document of the first 300 that has a candidate, and every third of the rest of them.
    gone = {a for a, b in pairs if a < 300} | set(range(0, 300, 3))
    with pytest.raises(KeyError, match="no-such-id"):
        index.remove([ids[0], "no-such-id"])
    assert len(index) == 1500, "a refused remove changes nothing"
    assert index.remove([ids[i] for i in sorted(gone)]) == len(gone)
    assert index.remove(ids[300]) == 1
    gone.add(300)
    kept = [i for i in range(1500) if i not in gone]
    assert len(index) == len(kept) and index.ids == [ids[i] for i in kept]
    np.testing.assert_array_equal(index.signatures(), sigs[kept])
    # A query finds exactly the kept documents sharing a band with it.
    found = index.query(texts[:400])
    for j in range(400):
        if empty[j]:
            continue
        expected = {ids[b] for a, b in pairs if a == j and b not in gone} | {ids[a] for a, b in pairs if b == j and a not in gone}
        if j not in gone:
            expected.add(ids[j])
        assert set(found[j]) == expected, j
    # The saved state holds the kept documents only.
    index.save(tmp_path / "kept.state")
    again = lshbench.LSHIndex.load(tmp_path / "kept.state", bands, rows)
    assert again.ids == index.ids
    np.testing.assert_array_equal(again.signatures(), sigs[kept])


def test_state_files_cross_between_cli_and_python(cli, corpus, write_jsonl, tmp_path):
    ids, texts = corpus
    first = write_jsonl("first.jsonl", ids[:1000], texts[:1000])
    second = write_jsonl("second.jsonl", ids[1300:1600], texts[1300:1600])
    cli_state = tmp_path / "cli.state"
    cli("dedup", "--input", first, "--kernel", "oph-opt", "--save", cli_state)
    # CLI -> Python: the ids and signatures are those Python computes.
    index = lshbench.LSHIndex.load(cli_state, 42, 3)
    assert index.ids == ids[:1000]
    assert index.params["kernel"] == "oph-opt" and index.params["num_perm"] == 128
    np.testing.assert_array_equal(index.signatures(), lshbench.sketch(texts[:1000]))
    # Python adds documents and saves; the CLI loads it and reports only pairs with a document read now.
    index.insert(texts[1000:1300], ids[1000:1300])
    py_state = tmp_path / "py.state"
    index.save(py_state)
    pairs_csv = tmp_path / "pairs.csv"
    cli("dedup", "--input", second, "--kernel", "oph-opt", "--load", py_state, "--pairs", pairs_csv, "--save", tmp_path / "both.state")
    both = lshbench.LSHIndex.load(tmp_path / "both.state", 42, 3)
    assert both.ids == ids[:1600]
    np.testing.assert_array_equal(both.signatures(), lshbench.sketch(texts[:1600]))
    with open(pairs_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, "expected some near-duplicates across the two halves"
    assert all(r["id_b"] in set(ids[1300:1600]) or r["id_a"] in set(ids[1300:1600]) for r in rows)
    # A state made with other parameters is refused by the CLI with its own message.
    other = lshbench.LSHIndex(16, 4, kernel="simd", num_perm=64)
    other.insert(texts[:10], ids[:10])
    other.save(tmp_path / "other.state")
    res = cli("dedup", "--input", second, "--kernel", "oph-opt", "--load", tmp_path / "other.state", check=False)
    assert res.returncode != 0 and "other signature parameters" in res.stderr


# ------------------------------------------------------------------------------------------------ dedup


def _csv_rows(path):
    with open(path, newline="") as f:
        return [tuple(r) for r in csv.reader(f)]


def _fmt(x):
    return "" if x is None else f"{x:.6f}"


@pytest.mark.parametrize("kernel,flags,kwargs", [
    ("oph-opt", [], {}),
    ("simd", ["--threshold", "0.7", "--groups", "center"], dict(threshold=0.7, groups="center")),
    ("oph-opt", ["--bands", "20", "--rows", "5", "--verify", "estimate"], dict(bands=20, rows=5, verify="estimate")),
])
def test_dedup_equals_cli_dedup_on_the_shipped_corpus(cli, corpus, corpus_path, tmp_path, kernel, flags, kwargs):
    ids, texts = corpus
    p_csv, c_csv = tmp_path / "pairs.csv", tmp_path / "clusters.csv"
    cli("dedup", "--input", corpus_path, "--kernel", kernel, *flags, "--pairs", p_csv, "--clusters", c_csv)
    pairs, clusters = lshbench.dedup(pa.array(texts), pa.array(ids), kernel=kernel, threads=2, **kwargs)
    assert pairs.column_names == ["id_a", "id_b", "estimate", "jaccard", "verified_by"]
    assert clusters.column_names == ["group", "id", "size", "center", "is_center", "similarity_to_center"]
    got_pairs = [("id_a", "id_b", "estimate", "jaccard", "verified_by")] + [
        (r["id_a"], r["id_b"], _fmt(r["estimate"]), _fmt(r["jaccard"]), r["verified_by"]) for r in pairs.to_pylist()
    ]
    got_clusters = [("group", "id", "size", "center", "is_center", "similarity_to_center")] + [
        (str(r["group"]), r["id"], str(r["size"]), r["center"], "1" if r["is_center"] else "0", _fmt(r["similarity_to_center"]))
        for r in clusters.to_pylist()
    ]
    want_pairs, want_clusters = _csv_rows(p_csv), _csv_rows(c_csv)
    assert len(want_pairs) > 100
    assert got_pairs == want_pairs
    assert got_clusters == want_clusters
    # The CLI's Parquet tables are the same tables, type for type (int64 counts, null where undefined).
    p_pq, c_pq = tmp_path / "pairs.parquet", tmp_path / "clusters.parquet"
    cli("dedup", "--input", corpus_path, "--kernel", kernel, *flags, "--pairs", p_pq, "--clusters", c_pq)
    for got, path in ((pairs, p_pq), (clusters, c_pq)):
        want = pq.read_table(path)
        assert got.schema.equals(want.schema, check_metadata=False), (got.schema, want.schema)
        assert got.equals(want.replace_schema_metadata(None))


def test_dedup_default_ids_are_positions():
    texts = ["the same text, twice over", "the same text, twice over", "something else entirely"]
    pairs, clusters = lshbench.dedup(texts)
    assert pairs.to_pylist() == [
        {"id_a": "0", "id_b": "1", "estimate": 1.0, "jaccard": 1.0, "verified_by": "exact"}
    ]
    assert clusters["id"].to_pylist() == ["0", "1"]


# ------------------------------------------------------------------------------------------------ survivors


def _survivor_corpus(corpus):
    """The shipped corpus with two survivor columns: `score` (numbers with ties and missing values) and `day`
    (ISO dates as text, some missing), seeded so the CLI reads the same values from JSONL."""
    ids, texts = corpus
    rng = np.random.default_rng(7)
    score = [None if rng.random() < 0.1 else int(rng.integers(0, 20)) for _ in ids]
    day = [None if rng.random() < 0.1 else f"2002-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}" for _ in ids]
    return pa.table({"id": ids, "text": texts, "score": score, "day": day})


@pytest.fixture(scope="module")
def survivor_table(corpus):
    return _survivor_corpus(corpus)


@pytest.fixture(scope="module")
def survivor_jsonl(survivor_table, tmp_path_factory):
    import json

    path = tmp_path_factory.mktemp("survivors") / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for r in survivor_table.to_pylist():
            f.write(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n")
    return path


def _removed_rows(table):
    return [("id", "survivor", "similarity", "basis", "group", "rule")] + [
        (r["id"], r["survivor"] or "", _fmt(r["similarity"]), r["basis"], "" if r["group"] is None else str(r["group"]),
         r["rule"])
        for r in table.to_pylist()
    ]


# The CLI's flags and the Python call for each policy; `--removed` makes the CLI group by center, as a `keep`
# policy or a Table does in Python.
@pytest.mark.parametrize("flags,kwargs", [
    (["--keep", "first"], dict(keep="first")),
    (["--keep", "last", "--verify", "estimate"], dict(keep="last", verify="estimate")),
    (["--keep", "longest"], dict(keep="longest")),
    (["--keep", "shortest", "--groups", "components"], dict(keep="shortest", groups="components")),
    (["--keep", "center"], dict(keep="center")),
    (["--keep", "column:score:max"], dict(keep="column:score:max")),
    (["--keep", "column:day:min"], dict(keep="column:day:min")),
])
def test_survivors_equal_cli_dedup(cli, survivor_table, survivor_jsonl, tmp_path, flags, kwargs):
    r_csv, c_csv, k_jsonl = tmp_path / "removed.csv", tmp_path / "clusters.csv", tmp_path / "kept.jsonl"
    cli("dedup", "--input", survivor_jsonl, *flags, "--removed", r_csv, "--clusters", c_csv, "--kept", k_jsonl)
    res = lshbench.dedup(survivor_table, id_column="id", threads=2, **kwargs)
    want = _csv_rows(r_csv)
    assert len(want) > 1000
    assert _removed_rows(res.removed) == want
    assert [(r["id"], r["center"]) for r in res.clusters.to_pylist()] == [
        (r[1], r[3]) for r in _csv_rows(c_csv)[1:]
    ]
    # The mask is the audit's complement, and the kept rows are the CLI's kept corpus, every column kept.
    removed_ids = set(res.removed["id"].to_pylist())
    assert res.mask.dtype == np.bool_ and len(res.mask) == survivor_table.num_rows
    assert [not m for m in res.mask] == [i in removed_ids for i in survivor_table["id"].to_pylist()]
    import json

    kept_cli = [json.loads(line)["id"] for line in open(k_jsonl, encoding="utf-8")]
    assert res.kept.column_names == survivor_table.column_names
    assert res.kept["id"].to_pylist() == kept_cli
    assert res.kept.equals(survivor_table.filter(pa.array(res.mask)))


def test_keep_values_rank_as_the_table_column(survivor_table):
    # The same ranking from a column, from a list with None, from numpy floats with NaN and from a pyarrow array.
    texts, ids = survivor_table["text"], survivor_table["id"]
    want = lshbench.dedup(survivor_table, id_column="id", keep="column:score:max", threads=2).removed
    score = survivor_table["score"].to_pylist()
    for values in (score, np.array([np.nan if s is None else s for s in score]), survivor_table["score"]):
        got = lshbench.dedup(texts, ids, keep="max", keep_values=values, threads=2).removed
        assert got.drop_columns(["rule"]).equals(want.drop_columns(["rule"]))
        assert set(got["rule"].to_pylist()) == {"center:column:keep_values:max"}


def test_removed_table_is_the_cli_parquet_table(cli, survivor_table, survivor_jsonl, tmp_path):
    r_pq = tmp_path / "removed.parquet"
    cli("dedup", "--input", survivor_jsonl, "--keep", "first", "--removed", r_pq)
    got = lshbench.dedup(survivor_table, id_column="id", keep="first", threads=2).removed
    want = pq.read_table(r_pq)
    assert got.schema.equals(want.schema, check_metadata=False), (got.schema, want.schema)
    assert got.equals(want.replace_schema_metadata(None))


def test_groups_default_to_center_only_when_survivors_are_asked_for(corpus):
    ids, texts = corpus
    plain = lshbench.dedup(texts[:2000], ids[:2000], threads=2)
    pairs, clusters = plain  # still unpacks as the two tables
    assert pairs is plain.pairs and clusters is plain.clusters
    assert set(plain.removed["rule"].to_pylist()) == {"components:center"}
    assert set(lshbench.dedup(texts[:2000], ids[:2000], keep="first", threads=2).removed["rule"].to_pylist()) == {
        "center:first"
    }
    assert plain.kept is None and plain.mask.sum() == 2000 - plain.removed.num_rows


@pytest.mark.parametrize("policy", ["keep", "drop", "exact"])
def test_short_policy_equals_cli(cli, write_jsonl, tmp_path, policy):
    texts = ["abc", "abc", "hi", "a text long enough to hold shingles", "a text long enough to hold shingles!",
             "", "hi"]
    ids = [f"d{i}" for i in range(len(texts))]
    src = write_jsonl("short.jsonl", ids, texts)
    cli("dedup", "--input", src, "--short", policy, "--keep", "first", "--removed", tmp_path / "r.csv")
    res = lshbench.dedup(texts, ids, short=policy, keep="first")
    assert _removed_rows(res.removed) == _csv_rows(tmp_path / "r.csv")
    assert [not m for m in res.mask] == [i in set(res.removed["id"].to_pylist()) for i in ids]


def test_survivor_arguments_are_checked():
    texts = ["one text here", "another text"]
    table = pa.table({"text": texts, "flag": [True, False]})
    cases = [
        (lambda: lshbench.dedup(texts, keep="oldest"), ValueError, "keep='oldest' is not a survivor policy"),
        (lambda: lshbench.dedup(texts, keep=3), TypeError, "keep must be a str"),
        (lambda: lshbench.dedup(texts, keep="max"), ValueError, "ranks by keep_values"),
        (lambda: lshbench.dedup(texts, keep="first", keep_values=[1, 2]), ValueError, "only by keep='max'"),
        (lambda: lshbench.dedup(texts, keep="column:ts:max"), ValueError, "reads column 'ts' of a Table"),
        (lambda: lshbench.dedup(table, keep="column:ts:max"), ValueError, "no column 'ts'"),
        (lambda: lshbench.dedup(table, keep="column:flag:max"), TypeError, "array of bool"),
        (lambda: lshbench.dedup(texts, keep="max", keep_values=[1]), ValueError, "1 values for 2 texts"),
        (lambda: lshbench.dedup(texts, keep="max", keep_values=[1, True]), TypeError, "keep_values[1]: a bool"),
        (lambda: lshbench.dedup(texts, keep="max", keep_values=[1, {}]), TypeError, "keep_values[1]: a dict"),
        (lambda: lshbench.dedup(texts, keep="max", keep_values="ab"), TypeError, "not a single str"),
        (lambda: lshbench.dedup(texts, keep="max", keep_values=[1, "x"]), ValueError,
         'holds a number in document "0" and text in document "1"'),
        (lambda: lshbench.dedup(texts, short="maybe"), ValueError, "short `maybe`: expected exact, keep or drop"),
        (lambda: lshbench.dedup(table, text_column="body"), ValueError, "text_column='body'"),
        (lambda: lshbench.dedup(texts, text_column="text"), TypeError, "not one"),
        (lambda: lshbench.dedup(pa.table({"text": texts, "id": ["a", "b"]}), ["x", "y"], id_column="id"),
         ValueError, "not both"),
    ]
    for call, exc, message in cases:
        with pytest.raises(exc) as e:
            call()
        assert message in str(e.value), (message, str(e.value))


def test_group_ranked_checks_its_arrays():
    a, b, s = np.array([0, 1]), np.array([1, 2]), np.array([0.9, 0.8])
    from lshbench import _lshbench

    assert _lshbench.group_ranked(3, a, b, s, "center", None).tolist() == [1, 1, 1]
    assert _lshbench.group_ranked(3, a, b, s, "center", np.array([0, 1, 2])).tolist() == [0, 0, -1]
    with pytest.raises(ValueError, match="outside 0..2"):
        _lshbench.group_ranked(2, a, b, s, "center", None)
    with pytest.raises(ValueError, match="rank: 2 entries for 3 documents"):
        _lshbench.group_ranked(3, a, b, s, "center", np.array([0, 1]))
