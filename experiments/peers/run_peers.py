#!/usr/bin/env python3
"""lshbench against its peers (datasketch, rensa) on one corpus, one shingling and one k, in one run.

What it measures (all on data/spamassassin.jsonl.gz, char:5 shingles, k = 128, seed 42, one thread):

1. Signature throughput.
   * Peers sign pre-split shingles: only the signing call is timed; reading the corpus and splitting it into
     shingles (and, for datasketch, encoding them to UTF-8 bytes) are timed apart and reported on their own rows.
   * lshbench is timed as a whole process (`lshbench sketch ... --threads 1`): start-up, gzip and JSON reading,
     shingling, hashing, signing and writing the .npy are all inside its number.
   * From Python, every tool starts from the same pyarrow column of texts and ends with a signature matrix:
     lshbench's `sketch(column)` (reads the Arrow buffers in place, shingles and signs in Rust), rensa's whole
     path (column -> list of str, split shingles in Python, `digest_matrix_from_token_sets`) and datasketch's
     whole path (the same, plus encoding to bytes and `MinHash.bulk`).
2. Estimation error against exact Jaccard: every pair `lshbench exact` reports at J >= 0.3, plus a random sample of
   pairs whose exact J is computed here from the Python shingle sets; bias, RMSE and relative MSE
   (MSE / (J(1-J)/k)) by J bin for every tool's signatures.
3. Recall at 42x3 and 20x5 against the exact pairs at J >= 0.5, with candidate counts and end-to-end times:
   datasketch MinHashLSH and rensa RMinHashLSH (query-then-insert, one document at a time) and `lshbench dedup`.

Run from the repository root:  python3 experiments/peers/run_peers.py
It creates experiments/peers/.venv (pip, pinned requirements.txt), re-executes itself inside it with
RAYON_NUM_THREADS=1, and writes results/peers.csv and results/peers.md.  `--self-test` checks the shingler and
the statistics helpers and exits.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gc
import gzip
import hashlib
import io
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"

K = 128
SEED = 42
SHINGLE_K = 5
SHINGLE = f"char:{SHINGLE_K}"
LSH_SETTINGS = [(42, 3), (20, 5)]
LSH_THRESHOLD = 0.5
KERNELS = ["scalar", "simd", "oph-opt", "oph-rot", "fss"]
# J bins for the accuracy table; J = 1 exactly is its own bin (zero variance, no relative MSE).
J_BINS = [(0.0, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.0)]

CSV_FIELDS = [
    "section", "tool", "tool_version", "variant", "isa", "k", "bands", "rows", "seed", "shingle", "threads",
    "measure", "includes", "seconds", "cpu_seconds", "docs_per_s", "mb_per_s", "seeds",
    "j_lo", "j_hi", "pairs", "bias", "bias_se", "rmse", "rel_mse", "rel_mse_se",
    "candidates", "true_found", "missed_j", "truth_pairs", "recall", "expected_recall", "precision",
    "status", "command", "load_avg", "machine", "cpu_model", "git_commit", "python", "date_utc",
]


# ----------------------------------------------------------------------------------------------- bootstrap


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def ensure_venv() -> Path:
    """Creates the virtual environment and installs the pinned requirements once (keyed by their hash)."""
    py = VENV / "bin" / "python"
    stamp = VENV / ".requirements.sha256"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if py.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return py
    if not py.exists():
        print(f"creating {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    print(f"installing {REQUIREMENTS.name} into {VENV}", file=sys.stderr)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(want + "\n")
    return py


def install_lshbench_python(py: Path) -> None:
    """Builds and installs the lshbench Python package (python/, maturin) into the venv: incremental, so a rerun
    with unchanged sources only repackages the wheel."""
    print("installing the lshbench Python package (./python) into the venv", file=sys.stderr)
    env = dict(os.environ)
    env["PATH"] = f"{py.parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--force-reinstall",
                    "--no-deps", str(ROOT / "python")], check=True, env=env)


def reexec_in_venv() -> None:
    py = ensure_venv()
    install_lshbench_python(py)
    env = dict(os.environ)
    # One thread everywhere: rensa's batch APIs use rayon, numpy may use a BLAS pool.
    env.update(RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    os.execve(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]], env)


# ----------------------------------------------------------------------------------------------- shingling


def char_shingles(text: str, k: int = SHINGLE_K) -> list[str]:
    """Every window of k Unicode scalar values, in text order, repeats included (lshbench's `char:K`, no
    normalisation). A text shorter than k is one shingle, the whole text; an empty text has none."""
    n = len(text)
    if n == 0:
        return []
    if n < k:
        return [text]
    return [text[i : i + k] for i in range(n - k + 1)]


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 0.0  # lshbench's convention: an empty set is similar to nothing
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


# ----------------------------------------------------------------------------------------------- statistics


def error_stats(est, truth, k: int) -> dict:
    """Bias, RMSE and relative MSE (mean of (est-J)^2 / (J(1-J)/k) over pairs with 0 < J < 1, with its standard
    error over pairs) of Jaccard estimates against exact values."""
    import numpy as np

    est = np.asarray(est, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    n = len(est)
    if n == 0:
        return dict(pairs=0, bias=None, bias_se=None, rmse=None, rel_mse=None, rel_mse_se=None)
    err = est - truth
    inner = (truth > 0.0) & (truth < 1.0)
    z2 = err[inner] ** 2 / (truth[inner] * (1.0 - truth[inner]) / k)
    return dict(
        pairs=n,
        bias=float(err.mean()),
        # Naive standard error: pairs that share a document do not have independent errors.
        bias_se=float(err.std(ddof=1) / np.sqrt(n)) if n > 1 else None,
        rmse=float(np.sqrt((err**2).mean())),
        rel_mse=float(z2.mean()) if len(z2) else None,
        rel_mse_se=float(z2.std(ddof=1) / np.sqrt(len(z2))) if len(z2) > 1 else None,
    )


def error_stats_seeds(ests, truth, k: int) -> dict:
    """error_stats over several seeds' estimates of the same pairs: RMSE and relative MSE pooled over seeds; bias
    averaged over seeds, with its standard error taken across seeds when there are several (each seed's mean error
    is one independent draw), else the naive one across pairs."""
    per = [error_stats(e, truth, k) for e in ests]
    if len(per) == 1 or not per[0]["pairs"]:
        return per[0]
    bias = [p["bias"] for p in per]
    rel = [p["rel_mse"] for p in per if p["rel_mse"] is not None]
    return dict(
        pairs=per[0]["pairs"],
        bias=statistics.fmean(bias),
        bias_se=statistics.stdev(bias) / math.sqrt(len(bias)),
        rmse=math.sqrt(statistics.fmean([p["rmse"] ** 2 for p in per])),
        rel_mse=statistics.fmean(rel) if rel else None,
        rel_mse_se=statistics.stdev(rel) / math.sqrt(len(rel)) if len(rel) > 1 else per[0]["rel_mse_se"],
    )


def s_curve(s: float, b: int, r: int) -> float:
    return 1.0 - (1.0 - s**r) ** b


CPU_OF_LAST = [0.0]  # process CPU seconds of the last median_time call (median over its repeats)


def median_time(fn, repeats: int):
    """Runs fn `repeats` times with the garbage collector off; returns (median wall seconds, all wall times, last
    result) and leaves the median process CPU time in CPU_OF_LAST[0]."""
    times, cpus, result = [], [], None
    for _ in range(repeats):
        result = None
        gc.collect()
        gc.disable()
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            result = fn()
            t, c = time.perf_counter() - t0, time.process_time() - c0
        finally:
            gc.enable()
        times.append(t)
        cpus.append(c)
    CPU_OF_LAST[0] = statistics.median(cpus)
    return statistics.median(times), times, result


def child_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# ----------------------------------------------------------------------------------------------- self-test


def self_test() -> int:
    failures, total = [], [0]

    def check(cond, what):
        total[0] += 1
        if not cond:
            failures.append(what)

    check(char_shingles("") == [], "empty text has no shingle")
    check(char_shingles("abcd") == ["abcd"], "short text is one shingle")
    check(char_shingles("abcde") == ["abcde"], "exactly k gives one window")
    check(char_shingles("abcdef") == ["abcde", "bcdef"], "len-k+1 windows")
    check(char_shingles("héllo wörld")[1] == "éllo ", "windows count scalar values, not bytes")
    check(len(char_shingles("a" * 10)) == 6, "repeats are kept")
    check(jaccard({1, 2, 3}, {2, 3, 4}) == 0.5, "jaccard 2/4")
    check(jaccard(set(), set()) == 0.0, "two empty sets")
    st = error_stats([0.5, 0.7], [0.6, 0.6], 128)
    check(abs(st["bias"]) < 1e-12 and abs(st["rmse"] - 0.1) < 1e-12, "bias and rmse")
    check(abs(st["rel_mse"] - 0.01 / (0.24 / 128)) < 1e-9, "relative MSE")
    check(abs(s_curve(0.5, 20, 5) - 0.470) < 1e-3, "S-curve b=20 r=5 at 0.5 is .470")
    check(abs(s_curve(0.5, 42, 3) - 0.996) < 1e-3, "S-curve 42x3 at 0.5 is 99.6%")
    for f in failures:
        print("FAIL:", f)
    print(f"{total[0] - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


# ----------------------------------------------------------------------------------------------- environment


def sh(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def cpu_model() -> str:
    """The first CPU's model name, vendor, family and model, and whether it runs AVX-512: a VM's model name
    ("AMD EPYC") alone does not tell one generation from another."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    avx512 = "AVX-512" if "avx512f" in fields.get("flags", "").split() else "AVX2, no AVX-512"
    return (
        f"{fields.get('model name', '?')} ({fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} "
        f"model {fields.get('model', '?')}, {avx512})"
    )


def git_commit() -> str:
    head = sh(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"])
    if head.returncode != 0:
        return "unknown"
    # Generated results and the virtualenv do not make the code dirty.
    dirty = sh(["git", "-C", str(ROOT), "status", "--porcelain", "--", ".", ":!results", ":!experiments/peers/.venv"])
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class Lshbench:
    """The lshbench release binary, with what each subcommand offers (a missing one is reported, never faked)."""

    def __init__(self, path: Path):
        self.path = path
        self.ok = path.exists()
        self.why = "" if self.ok else f"{path} not found (run `cargo build --release`)"
        self._help: dict[str, str | None] = {}

    def has(self, sub: str) -> bool:
        if not self.ok:
            return False
        if sub not in self._help:
            p = sh([str(self.path), sub, "--help"])
            self._help[sub] = p.stdout if p.returncode == 0 else None
        return self._help[sub] is not None

    def flag(self, sub: str, flag: str) -> bool:
        return self.has(sub) and flag in (self._help[sub] or "")

    def missing(self, sub: str) -> str:
        return self.why or f"`lshbench {sub}` does not exist in this build"

    def run(self, args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
        """Runs one subcommand; returns its wall seconds and leaves its CPU seconds in self.cpu."""
        c0, t0 = child_cpu(), time.perf_counter()
        p = sh([str(self.path), *args], cwd=str(ROOT))
        self.cpu = child_cpu() - c0
        return time.perf_counter() - t0, p

    def isa_of(self) -> dict[str, str]:
        """Kernel name -> instruction set, from `lshbench info` ("  NAME runs on ISA ...")."""
        out = {}
        if not self.has("info"):
            return out
        p = sh([str(self.path), "info"])
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "runs" and parts[2] == "on":
                out[parts[0]] = parts[3]
        return out


def read_pairs_csv(path: Path, index_of: dict[str, int]) -> list[tuple[int, int, float | None]]:
    """Reads a pairs CSV written by lshbench (exact or dedup): two document columns (ids, or 0-based indices)
    and, when present, a Jaccard column. Returns (i, j, J) with i < j as corpus positions."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    id_cols = [n for n in ("id_a", "id_b", "a", "b", "left", "right", "doc_a", "doc_b", "id1", "id2") if n in header]
    idx_cols = [n for n in ("index_a", "index_b", "i", "j", "idx_a", "idx_b") if n in header]
    j_col = next((n for n in ("jaccard", "exact_jaccard", "j", "similarity", "exact") if n in header), None)
    if len(id_cols) >= 2:
        ca, cb, by_index = header.index(id_cols[0]), header.index(id_cols[1]), False
    elif len(idx_cols) >= 2:
        ca, cb, by_index = header.index(idx_cols[0]), header.index(idx_cols[1]), True
    else:
        raise ValueError(f"{path}: cannot find the two document columns in header {rows[0]}")
    cj = header.index(j_col) if j_col and j_col not in (id_cols + idx_cols)[:2] else None
    out = []
    for line_no, row in enumerate(rows[1:], start=2):
        try:
            if by_index:
                i, j = int(row[ca]), int(row[cb])
            else:
                i, j = index_of[row[ca]], index_of[row[cb]]
        except (KeyError, ValueError, IndexError) as e:
            raise ValueError(f"{path}:{line_no}: unknown document in {row}: {e}") from e
        jv = row[cj].strip() if cj is not None else ""
        out.append((min(i, j), max(i, j), float(jv) if jv else None))
    return out


def sketch_cmd(input_path, kern: str, seed: int, out: Path) -> list[str]:
    return ["sketch", "--input", str(input_path), "--shingle", SHINGLE, "--kernel", kern, "--num-perm", str(K),
            "--seed", str(seed), "--threads", "1", "--output", str(out)]


def load_npy_signatures(path: Path, n_docs: int, ids: list[str]):
    import numpy as np

    sig = np.load(path)
    if sig.ndim != 2 or sig.shape[0] != n_docs:
        raise ValueError(f"{path}: expected ({n_docs}, k) signatures, got shape {sig.shape}")
    # `lshbench sketch` writes the ids beside the .npy as <stem>.ids.csv (row,id,empty); they must list the
    # corpus in order, or the rows would be matched to the wrong documents.
    ids_path = path.with_suffix(".ids.csv")
    if not ids_path.exists():
        raise ValueError(f"{ids_path} is missing")
    with open(ids_path, newline="", encoding="utf-8") as fh:
        got = [row["id"] for row in csv.DictReader(fh)]
    if got != ids:
        raise ValueError(f"{ids_path}: ids do not match the corpus order")
    return sig


def internal_seconds(stderr: str):
    """The seconds `lshbench sketch` reports for itself ("... threads: 0.765 s, 27.7 MB/s of text")."""
    import re

    m = re.search(r"threads: ([0-9.]+) s, [0-9.]+ MB/s of text", stderr)
    return float(m.group(1)) if m else None


# ----------------------------------------------------------------------------------------------- main run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default="data/spamassassin.jsonl.gz", help="JSONL corpus ({id, text} per line)")
    ap.add_argument("--lshbench", default="target/release/lshbench", help="lshbench release binary")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per signing measurement (median)")
    ap.add_argument("--random-pairs", type=int, default=20000, help="random pairs for the low-J accuracy bins")
    ap.add_argument("--out-csv", default="results/peers.csv")
    ap.add_argument("--out-md", default="results/peers.md")
    ap.add_argument("--workdir", default=None, help="where lshbench outputs go (default: a temporary directory)")
    ap.add_argument("--seeds", type=int, default=5,
                    help="seeds per tool in the accuracy section (42, then 1, 2, ...); datasketch legacy gets one")
    ap.add_argument("--truth", default=None,
                    help="development only: reuse this `lshbench exact --threshold 0.3` CSV instead of running it")
    ap.add_argument("--limit", type=int, default=None,
                    help="development only: use the first N documents (written to the work directory)")
    ap.add_argument("--no-legacy", action="store_true", help="skip datasketch's legacy permutation scheme")
    ap.add_argument("--self-test", action="store_true", help="check the shingler and the statistics, then exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()

    import numpy as np
    import datasketch
    import rensa
    from importlib.metadata import version

    os.chdir(ROOT)
    input_path = Path(args.input)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="lshbench-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    lb = Lshbench(Path(args.lshbench))
    if args.limit:
        small = work / f"first-{args.limit}.jsonl.gz"
        with gzip.open(input_path, "rt", encoding="utf-8") as src, gzip.open(small, "wt", encoding="utf-8") as dst:
            for n, line in enumerate(src):
                if n >= args.limit:
                    break
                dst.write(line)
        input_path = small

    versions = {"datasketch": version("datasketch"), "rensa": version("rensa"), "numpy": version("numpy")}
    lb_version = sh([str(lb.path), "--version"]).stdout.strip() if lb.ok else "not built"
    isa = lb.isa_of()
    info_text = sh([str(lb.path), "info"]).stdout if lb.has("info") else "(lshbench info not available)"
    machine = next((l.split(":", 1)[1].strip() for l in info_text.splitlines() if l.startswith("machine:")),
                   f"{platform.machine()}, {os.cpu_count()} logical CPUs")
    common = dict(machine=machine, cpu_model=cpu_model(), git_commit=git_commit(),
                  python=platform.python_version(),
                  date_utc=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  seed=SEED, shingle=SHINGLE, threads=1)
    rows: list[dict] = []

    def add(**kw):
        row = dict(common)
        row.update(kw)
        rows.append(row)

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # ---- corpus and shingles (timed apart from the signing)
    log("reading corpus")
    def read_corpus():
        with gzip.open(input_path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    t_read, _, recs = median_time(read_corpus, 1)
    c_read = CPU_OF_LAST[0]
    ids = [r["id"] for r in recs]
    texts = [r["text"] for r in recs]
    del recs
    n_docs = len(texts)
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    mb = text_bytes / 1e6
    index_of = {d: i for i, d in enumerate(ids)}
    log(f"{n_docs} documents, {mb:.1f} MB of UTF-8 text")

    def rate(sec, cpu="last"):
        """Wall-clock rates; cpu defaults to the CPU time of the last median_time call (None: not measured)."""
        return dict(seconds=sec, cpu_seconds=CPU_OF_LAST[0] if cpu == "last" else cpu,
                    docs_per_s=n_docs / sec, mb_per_s=mb / sec, load_avg=" ".join(f"{x:.2f}" for x in os.getloadavg()))

    add(section="throughput", tool="python", tool_version=platform.python_version(), variant="read corpus",
        measure="read", includes="gzip + JSON parse of the corpus, in-process", **rate(t_read))

    log("splitting shingles")
    t_split, _, shingles = median_time(lambda: [char_shingles(t) for t in texts], 1)
    c_split = CPU_OF_LAST[0]
    n_shingles = sum(len(s) for s in shingles)
    add(section="throughput", tool="python", tool_version=platform.python_version(), variant="split char:5 (str)",
        measure="shingle", includes=f"text -> list of str windows ({n_shingles} shingles), in-process",
        **rate(t_split))
    t_enc, _, shingles_b = median_time(lambda: [[s.encode("utf-8") for s in doc] for doc in shingles], 1)
    c_enc = CPU_OF_LAST[0]
    add(section="throughput", tool="python", tool_version=platform.python_version(),
        variant="encode shingles to UTF-8 bytes", measure="shingle",
        includes="str windows -> bytes windows (datasketch's hash function takes bytes), in-process",
        **rate(t_enc))

    # ---- peer signing throughput (pre-split shingles in, signatures out; only the signing call is timed)
    sigs: dict[str, "np.ndarray"] = {}  # seed-42 signatures, by tool
    # Signers for the extra seeds of the accuracy section (bias is judged across seeds, not across pairs).
    signers = {
        "datasketch MinHash (affine32)": lambda sd: np.vstack(
            [m.hashvalues for m in datasketch.MinHash.bulk(shingles_b, num_perm=K, seed=sd)]),
        "rensa RMinHash": lambda sd: np.asarray(
            rensa.RMinHash.digest_matrix_from_token_sets(shingles, K, sd).to_rows(), dtype=np.uint32),
        "rensa CMinHash": lambda sd: np.vstack(
            [np.asarray(m.digest_u64(), dtype=np.uint64) for m in rensa.CMinHash.from_token_sets(shingles, K, sd)]),
    }
    log("datasketch MinHash.bulk (affine32)")
    t_ds, t_ds_all, mh = median_time(lambda: datasketch.MinHash.bulk(shingles_b, num_perm=K, seed=SEED), args.repeats)
    c_ds = CPU_OF_LAST[0]
    ds_minhashes = mh
    sigs["datasketch MinHash (affine32)"] = np.vstack([m.hashvalues for m in mh])
    add(section="throughput", tool="datasketch", tool_version=versions["datasketch"],
        variant="MinHash.bulk, scheme affine32, sha1_hash32", isa="numpy", k=K, measure="sign",
        includes=f"bytes shingles in -> MinHash objects; signing only; median of {args.repeats}: "
                 + ", ".join(f"{t:.2f}" for t in t_ds_all) + " s",
        **rate(t_ds))
    if not args.no_legacy:
        log("datasketch MinHash.bulk (legacy)")
        t_dl, _, mhl = median_time(
            lambda: datasketch.MinHash.bulk(shingles_b, num_perm=K, seed=SEED, scheme="legacy"), 1)
        sigs["datasketch MinHash (legacy)"] = np.vstack([m.hashvalues for m in mhl])
        del mhl
        add(section="throughput", tool="datasketch", tool_version=versions["datasketch"],
            variant="MinHash.bulk, scheme legacy (pre-2.0 default)", isa="numpy", k=K, measure="sign",
            includes="bytes shingles in -> MinHash objects; signing only; 1 run", **rate(t_dl))

    log("rensa RMinHash")
    rensa_isa = "runtime dispatch (AVX-512/AVX2/NEON), not reported"
    t_ro, t_ro_all, rmh = median_time(lambda: rensa.RMinHash.from_token_sets(shingles, K, SEED), args.repeats)
    add(section="throughput", tool="rensa", tool_version=versions["rensa"],
        variant="RMinHash.from_token_sets (objects)", isa=rensa_isa, k=K, measure="sign",
        includes=f"str shingles in -> RMinHash objects; signing only; median of {args.repeats}: "
                 + ", ".join(f"{t:.3f}" for t in t_ro_all) + " s",
        **rate(t_ro))
    t_rm, t_rm_all, rmat = median_time(
        lambda: rensa.RMinHash.digest_matrix_from_token_sets(shingles, K, SEED), args.repeats)
    sig_rm = np.asarray(rmat.to_rows(), dtype=np.uint32)
    sig_ro = np.vstack([np.asarray(m.digest(), dtype=np.uint32) for m in rmh])
    if not np.array_equal(sig_rm, sig_ro):
        log("WARNING: rensa digest matrix differs from RMinHash objects")
    sigs["rensa RMinHash"] = sig_ro
    add(section="throughput", tool="rensa", tool_version=versions["rensa"],
        variant="RMinHash.digest_matrix_from_token_sets (matrix)", isa=rensa_isa, k=K, measure="sign",
        includes=f"str shingles in -> u32 digest matrix; signing only; median of {args.repeats}: "
                 + ", ".join(f"{t:.3f}" for t in t_rm_all) + " s",
        **rate(t_rm))
    del rmat
    t_rc, _, cmh = median_time(lambda: rensa.CMinHash.from_token_sets(shingles, K, SEED), args.repeats)
    sigs["rensa CMinHash"] = np.vstack([np.asarray(m.digest_u64(), dtype=np.uint64) for m in cmh])
    del cmh
    add(section="throughput", tool="rensa", tool_version=versions["rensa"],
        variant="CMinHash.from_token_sets (objects)", isa=rensa_isa, k=K, measure="sign",
        includes=f"str shingles in -> CMinHash objects; signing only; median of {args.repeats}", **rate(t_rc))

    # ---- from one pyarrow column of texts to a signature matrix, in-process, one thread
    import pyarrow as pa
    import lshbench as lbpy

    column = pa.array(texts, type=pa.large_string())
    py_sigs: dict[str, "np.ndarray"] = {}  # checked against the CLI's .npy below
    py_version = version("lshbench")
    versions["pyarrow"] = version("pyarrow")
    for kern in KERNELS:
        log(f"lshbench Python sketch(column, kernel={kern})")
        t_lp, t_lp_all, m = median_time(
            lambda kern=kern: lbpy.sketch(column, kernel=kern, num_perm=K, seed=SEED, shingle=SHINGLE, threads=1),
            args.repeats)
        add(section="throughput", tool="lshbench (Python)", tool_version=py_version,
            variant=f"sketch(column, kernel={kern!r}, threads=1)", isa=isa.get(kern, ""), k=K, measure="column",
            includes="pyarrow column in (read in place) -> uint32 matrix: shingling and signing in Rust; median of "
                     f"{args.repeats}: " + ", ".join(f"{t:.3f}" for t in t_lp_all) + " s",
            **rate(t_lp))
        py_sigs[kern] = m
    log("rensa whole path from the column")

    def rensa_whole():
        docs = [char_shingles(t) for t in column.to_pylist()]
        return rensa.RMinHash.digest_matrix_from_token_sets(docs, K, SEED)

    t_rw, t_rw_all, _ = median_time(rensa_whole, args.repeats)
    add(section="throughput", tool="rensa", tool_version=versions["rensa"],
        variant="whole path: column.to_pylist() + split char:5 in Python + digest_matrix_from_token_sets",
        isa=rensa_isa, k=K, measure="column",
        includes="pyarrow column in -> u32 digest matrix; median of "
                 f"{args.repeats}: " + ", ".join(f"{t:.3f}" for t in t_rw_all) + " s",
        **rate(t_rw))
    log("datasketch whole path from the column")

    def datasketch_whole():
        docs = [[w.encode("utf-8") for w in char_shingles(t)] for t in column.to_pylist()]
        return datasketch.MinHash.bulk(docs, num_perm=K, seed=SEED)

    t_dw, _, _ = median_time(datasketch_whole, 1)
    add(section="throughput", tool="datasketch", tool_version=versions["datasketch"],
        variant="whole path: column.to_pylist() + split char:5 + encode + MinHash.bulk (affine32)", isa="numpy",
        k=K, measure="column", includes="pyarrow column in -> MinHash objects; 1 run", **rate(t_dw))

    # ---- lshbench sketch: whole process per kernel, and the signatures for the accuracy section
    lb_sig_status = {}
    lb_wall: dict[str, float] = {}
    lb_inner: dict[str, float] = {}
    for kern in KERNELS:
        name = f"lshbench {kern}"
        if not lb.has("sketch"):
            lb_sig_status[name] = lb.missing("sketch")
            add(section="throughput", tool="lshbench", tool_version=lb_version, variant=f"sketch --kernel {kern}",
                isa=isa.get(kern, ""), k=K, measure="sign", status="not available: " + lb.missing("sketch"))
            continue
        log(f"lshbench sketch --kernel {kern}")
        out = work / f"sketch-{kern}.npy"
        cmd = sketch_cmd(input_path, kern, SEED, out)
        times, cpus, inner, err = [], [], [], None
        for _ in range(args.repeats):
            sec, p = lb.run(cmd)
            if p.returncode != 0:
                err = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["exit %d" % p.returncode]
                break
            times.append(sec)
            cpus.append(lb.cpu)
            inner.append(internal_seconds(p.stderr))
        if err:
            lb_sig_status[name] = "failed: " + err[0]
            add(section="throughput", tool="lshbench", tool_version=lb_version, variant=f"sketch --kernel {kern}",
                isa=isa.get(kern, ""), k=K, measure="sign", status="failed: " + err[0])
            continue
        add(section="throughput", tool="lshbench", tool_version=lb_version, variant=f"sketch --kernel {kern}",
            isa=isa.get(kern, ""), k=K, measure="sketch",
            includes="whole process: start-up + gzip/JSON read + char:5 shingling + hashing + signing + .npy write; "
                     f"median of {len(times)}: " + ", ".join(f"{t:.2f}" for t in times) + " s",
            command="lshbench " + " ".join(cmd), **rate(statistics.median(times), statistics.median(cpus)))
        lb_wall[kern] = statistics.median(times)
        if all(x is not None for x in inner):
            lb_inner[kern] = statistics.median(inner)
            add(section="throughput", tool="lshbench", tool_version=lb_version,
                variant=f"sketch --kernel {kern} (its own timer)", isa=isa.get(kern, ""), k=K, measure="sketch",
                includes="lshbench's timer: read + shingle + sign + .npy write, no process start-up; median of "
                         f"{len(inner)}", command="lshbench " + " ".join(cmd), **rate(lb_inner[kern], None))
        try:
            sigs[name] = load_npy_signatures(out, n_docs, ids)
        except Exception as e:  # report, never guess
            lb_sig_status[name] = f"signatures unreadable: {e}"
            continue

        if kern in py_sigs and not np.array_equal(py_sigs[kern], np.load(out)):
            raise SystemExit(f"lshbench Python sketch(kernel={kern!r}) differs from `lshbench sketch`")

        def lb_signer(sd, kern=kern):
            o = work / f"sketch-{kern}-seed{sd}.npy"
            _, p = lb.run(sketch_cmd(input_path, kern, sd, o))
            if p.returncode != 0:
                raise RuntimeError((p.stderr or p.stdout).strip())
            return load_npy_signatures(o, n_docs, ids)
        signers[name] = lb_signer

    # lshbench has no sign-only timer: a scalar run at k = 1 (one hash per shingle) measures everything but the
    # signing (start-up, reading, shingling, writing), and each kernel's sign-only time is derived as the
    # difference of the two runs' own timers. Labelled "derived" in the outputs.
    if lb_inner and lb.has("sketch"):
        log("lshbench sketch k=1 baseline")
        base_cmd = sketch_cmd(input_path, "scalar", SEED, work / "sketch-k1.npy")
        base_cmd[base_cmd.index("--num-perm") + 1] = "1"
        base, bwall = [], []
        for _ in range(args.repeats):
            sec, p = lb.run(base_cmd)
            if p.returncode == 0 and internal_seconds(p.stderr) is not None:
                base.append(internal_seconds(p.stderr))
                bwall.append(sec)
        if base:
            b0 = statistics.median(base)
            add(section="throughput", tool="lshbench", tool_version=lb_version,
                variant="sketch --kernel scalar --num-perm 1 (baseline, its own timer)", isa=isa.get("scalar", ""),
                k=1, measure="baseline", includes="read + shingle + 1 hash per shingle + .npy write; median of "
                f"{len(base)}", command="lshbench " + " ".join(base_cmd), **rate(b0, None))
            for kern, t in lb_inner.items():
                d = t - b0
                if d <= 0:
                    add(section="throughput", tool="lshbench", tool_version=lb_version,
                        variant=f"{kern}: sign only (derived)", isa=isa.get(kern, ""), k=K, measure="sign",
                        status=f"below the noise: own timer at k={K} ({t:.3f} s) <= the k=1 baseline ({b0:.3f} s)")
                else:
                    add(section="throughput", tool="lshbench", tool_version=lb_version,
                        variant=f"{kern}: sign only (derived)", isa=isa.get(kern, ""), k=K, measure="sign",
                        includes=f"derived: own timer at k={K} ({t:.3f} s) minus the k=1 baseline ({b0:.3f} s); "
                                 "hashed shingle ids in", **rate(d, None))

    # ---- ground truth: lshbench exact (J >= 0.3) and Python-computed J for random pairs
    log("shingle sets")
    sets = [set(s) for s in shingles]
    truth_path = work / "truth.csv"
    truth: dict[tuple[int, int], float] = {}
    truth_status = ""
    if args.truth:
        for i, j, jv in read_pairs_csv(Path(args.truth), index_of):
            truth[(i, j)] = jv if jv is not None else jaccard(sets[i], sets[j])
        add(section="truth", tool="lshbench", tool_version=lb_version, variant="exact --threshold 0.3",
            measure="exact", includes=f"reused {args.truth} (not timed)", pairs=len(truth))
    elif lb.has("exact"):
        log("lshbench exact")
        exact_cmd = ["exact", "--input", str(input_path), "--shingle", SHINGLE, "--threshold", "0.3",
                     "--output", str(truth_path)]
        sec, p = lb.run(exact_cmd)
        if p.returncode == 0:
            for i, j, jv in read_pairs_csv(truth_path, index_of):
                truth[(i, j)] = jv if jv is not None else jaccard(sets[i], sets[j])
            own = next((l.strip() for l in (p.stdout + p.stderr).splitlines() if l.startswith("time:")), "")
            add(section="truth", tool="lshbench", tool_version=lb_version, variant="exact --threshold 0.3",
                measure="exact", includes="whole process: read + shingle + exact all-pairs join at J >= 0.3, "
                                          "default threads" + (f"; its own timer: {own[5:].strip()}" if own else ""),
                seconds=sec, pairs=len(truth), command="lshbench " + " ".join(exact_cmd))
        else:
            truth_status = "lshbench exact failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    else:
        truth_status = "not available: " + lb.missing("exact")
    if truth_status:
        add(section="truth", tool="lshbench", tool_version=lb_version, variant="exact --threshold 0.3",
            measure="exact", status=truth_status)

    # Cross-check lshbench's exact J against the Python shingle sets (same shingling, different hashing).
    max_dev = None
    if truth:
        checked = random.Random(SEED).sample(sorted(truth), min(len(truth), 20000))
        max_dev = max(abs(jaccard(sets[i], sets[j]) - truth[(i, j)]) for i, j in checked)
        add(section="truth", tool="python", tool_version=platform.python_version(),
            variant="check: max |J(python str sets) - J(lshbench exact)|", measure="check",
            pairs=len(checked), bias=max_dev, includes="over up to 20000 of the exact pairs")

    rng = random.Random(SEED)
    sample: dict[tuple[int, int], float] = {}
    while len(sample) < args.random_pairs:
        i, j = rng.randrange(n_docs), rng.randrange(n_docs)
        if i == j:
            continue
        key = (min(i, j), max(i, j))
        if key not in sample:
            sample[key] = jaccard(sets[key[0]], sets[key[1]])
    # A random pair at J >= 0.3 missing from the exact output would mean the truth is incomplete.
    missed_by_exact = sum(1 for key, jv in sample.items() if jv >= 0.3 + 1e-9 and truth and key not in truth)
    eval_pairs = dict(sample)
    eval_pairs.update(truth)
    pair_i = np.array([p[0] for p in eval_pairs], dtype=np.int64)
    pair_j = np.array([p[1] for p in eval_pairs], dtype=np.int64)
    pair_t = np.array(list(eval_pairs.values()), dtype=np.float64)
    add(section="truth", tool="python", tool_version=platform.python_version(),
        variant=f"{args.random_pairs} random pairs, exact J from str sets", measure="sample",
        pairs=len(sample), candidates=missed_by_exact,
        includes="candidates = random pairs at J >= 0.3 missing from lshbench exact (must be 0)")

    # ---- estimation error by J bin, over seeds: seed 42 (the signatures above) and the extra seeds
    log("estimation error")
    seeds = [SEED] + [s for s in range(1, 1000) if s != SEED][: max(0, args.seeds - 1)]

    def estimate(sig):
        return np.concatenate([(sig[pair_i[c : c + 65536]] == sig[pair_j[c : c + 65536]]).mean(axis=1)
                               for c in range(0, len(pair_i), 65536)])

    bins = J_BINS + [(1.0, 1.0)]
    masks = [(pair_t >= 1.0) if lo == hi else ((pair_t >= lo) & (pair_t < hi)) for lo, hi in bins]
    for name in list(sigs):
        k_eff = sigs[name].shape[1]
        ests = [estimate(sigs[name])]
        if name in signers:
            for sd in seeds[1:]:
                log(f"  {name} seed {sd}")
                try:
                    ests.append(estimate(signers[name](sd)))
                except Exception as e:  # keep the seeds that worked, say so in the log
                    log(f"  {name} seed {sd} failed: {e}")
        tool, _, variant = name.partition(" ")
        ver = lb_version if tool == "lshbench" else versions[tool]
        for (lo, hi), m in zip(bins, masks):
            st = error_stats_seeds([e[m] for e in ests], pair_t[m], k_eff)
            add(section="accuracy", tool=tool, tool_version=ver, variant=variant,
                isa=isa.get(variant, "") if tool == "lshbench" else "", k=k_eff, measure="estimate",
                j_lo=lo, j_hi=hi, seeds=len(ests), **st)
    for name, why in lb_sig_status.items():
        add(section="accuracy", tool="lshbench", tool_version=lb_version, variant=name.split(" ", 1)[1],
            k=K, measure="estimate", status=why)

    # ---- recall at 42x3 and 20x5
    truth05 = {p for p, jv in truth.items() if jv >= LSH_THRESHOLD}

    def recall_row(tool, ver, variant, isa_, k_, b, r, cands, seconds, includes="", status="", command="",
                   cpu=None):
        if status:  # nothing was measured: no figures at all, only the reason
            add(section="recall", tool=tool, tool_version=ver, variant=variant, isa=isa_, k=k_, bands=b, rows=r,
                measure="lsh", status=status, command=command)
            return
        cset = set(cands)
        found = len(cset & truth05) if truth05 else None
        missed = sorted(truth[p] for p in truth05 - cset)
        exp_rec = (sum(s_curve(truth[p], b, r) for p in truth05) / len(truth05)) if truth05 else None
        add(section="recall", tool=tool, tool_version=ver, variant=variant, isa=isa_, k=k_, bands=b, rows=r,
            measure="lsh", includes=includes, seconds=seconds, cpu_seconds=cpu,
            missed_j=(" ".join(f"{x:.3f}" for x in missed) if len(missed) <= 5
                      else f"{len(missed)} missed, J from {missed[0]:.3f} to {missed[-1]:.3f}"),
            docs_per_s=n_docs / seconds if seconds else None, mb_per_s=mb / seconds if seconds else None,
            candidates=len(cset), true_found=found, truth_pairs=len(truth05) if truth else None,
            recall=(found / len(truth05)) if truth05 else None, expected_recall=exp_rec,
            precision=(found / len(cset)) if (truth05 and cset) else None, status=status, command=command)

    for b, r in LSH_SETTINGS:
        # datasketch: the 128-slot MinHash objects signed above, query-then-insert (seed 000's loop).
        log(f"datasketch MinHashLSH {b}x{r}")
        def ds_lsh():
            lsh = datasketch.MinHashLSH(num_perm=K, params=(b, r))
            out = []
            for i, m in enumerate(ds_minhashes):
                for j in lsh.query(m):
                    out.append((j, i))
                lsh.insert(i, m)
            return out
        t_l, _, cands = median_time(ds_lsh, 1)
        e2e = t_read + t_split + t_enc + t_ds + t_l
        recall_row("datasketch", versions["datasketch"], "MinHashLSH(params=(b,r)) query-then-insert",
                   "numpy", K, b, r, cands, e2e, cpu=c_read + c_split + c_enc + c_ds + CPU_OF_LAST[0],
                   includes=
                   f"end to end, in-process stage sum: read {t_read:.2f} + split {t_split:.2f} + encode {t_enc:.2f}"
                   f" + sign {t_ds:.2f} + LSH {t_l:.2f} s (no interpreter start-up/imports)")

        # rensa: RMinHashLSH needs num_bands to divide num_perm, so it signs with k = b*r.
        kb = b * r
        log(f"rensa RMinHashLSH {b}x{r} (k={kb})")
        t_rs, _, rk = median_time(lambda: rensa.RMinHash.from_token_sets(shingles, kb, SEED), 1)
        c_rs = CPU_OF_LAST[0]
        def rs_lsh():
            lsh = rensa.RMinHashLSH(LSH_THRESHOLD, kb, b)
            out = []
            for i, m in enumerate(rk):
                for j in lsh.query(m):
                    out.append((j, i))
                lsh.insert(i, m)
            return out
        t_l, _, cands = median_time(rs_lsh, 1)
        e2e = t_read + t_split + t_rs + t_l
        recall_row("rensa", versions["rensa"], "RMinHashLSH query-then-insert (k = b*r)", rensa_isa, kb, b, r,
                   cands, e2e, cpu=c_read + c_split + c_rs + CPU_OF_LAST[0], includes=
                   f"end to end, in-process stage sum: read {t_read:.2f} + split {t_split:.2f} + sign(k={kb}) "
                   f"{t_rs:.2f} + LSH {t_l:.2f} s (no interpreter start-up/imports)")
        del rk

        # lshbench dedup: whole process, unverified candidates and exact verification.
        for verify in ("none", "exact"):
            variant = f"dedup --kernel oph-opt --verify {verify}"
            if not lb.has("dedup"):
                recall_row("lshbench", lb_version, variant, isa.get("oph-opt", ""), K, b, r, [], None, "",
                           status="not available: " + lb.missing("dedup"))
                continue
            log(f"lshbench {variant} {b}x{r}")
            pairs_out = work / f"dedup-{b}x{r}-{verify}.csv"
            # --threshold is left at its default, 0.5: given explicitly next to --bands 20 --rows 5, lshbench
            # refuses it because P(0.5) = 0.47 < 1/2 under that banding.
            cmd = ["dedup", "--input", str(input_path), "--shingle", SHINGLE, "--kernel", "oph-opt",
                   "--bands", str(b), "--rows", str(r), "--verify", verify, "--pairs", str(pairs_out)]
            # Optional flags, passed when this build has them (k = 128 and seed 42 are the defaults asked for).
            for flag, val in (("--num-perm", str(K)), ("--seed", str(SEED)), ("--threads", "1")):
                if lb.flag("dedup", flag):
                    cmd += [flag, val]
            sec, p = lb.run(cmd)
            if p.returncode != 0:
                msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
                recall_row("lshbench", lb_version, variant, isa.get("oph-opt", ""), K, b, r, [], None, "",
                           status="failed: " + msg)
                continue
            cands = [(i, j) for i, j, _ in read_pairs_csv(pairs_out, index_of)]
            own = next((l.strip() for l in (p.stdout + p.stderr).splitlines() if l.startswith("time:")), "")
            recall_row("lshbench", lb_version, variant, isa.get("oph-opt", ""), K, b, r, cands, sec, cpu=lb.cpu,
                       includes="whole process: start-up + read + shingle + sign + LSH"
                       + (" + exact verification" if verify == "exact" else "") + " + grouping + pairs CSV write"
                       + (f"; its own timer: {own[5:].strip()}" if own else ""),
                       command="lshbench " + " ".join(cmd))

    # ---- outputs
    out_csv = Path(args.out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="raise")
        w.writeheader()
        for row in rows:
            w.writerow({k: fmt_csv(row.get(k)) for k in CSV_FIELDS})
    Path(args.out_md).write_text(
        render_md(rows, common, versions, lb_version, info_text, n_docs, mb, n_shingles, max_dev, missed_by_exact,
                  len(sample), len(truth), len(truth05), args), encoding="utf-8")
    log(f"wrote {out_csv} and {args.out_md}")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def fmt_csv(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def f(v, spec):
    return "n/a" if v is None or v == "" else format(v, spec)


def summary_lines(rows) -> list[str]:
    """A few plain sentences computed from this run's rows (no figure is written by hand)."""
    def row(section, tool, variant_start, **kw):
        for r in rows:
            if (r["section"] == section and r["tool"] == tool and str(r.get("variant", "")).startswith(variant_start)
                    and not r.get("status") and all(r.get(k) == v for k, v in kw.items())):
                return r
        return None

    out = []
    ds = row("throughput", "datasketch", "MinHash.bulk, scheme affine32")
    rm = row("throughput", "rensa", "RMinHash.digest_matrix")
    if ds and rm and ds.get("cpu_seconds") and rm.get("cpu_seconds"):
        out.append(f"Signing the pre-split shingles took datasketch {ds['cpu_seconds']:.1f} CPU s and rensa's "
                   f"RMinHash matrix API {rm['cpu_seconds']:.2f} CPU s ({ds['cpu_seconds'] / rm['cpu_seconds']:.0f}x).")
    sp = row("throughput", "python", "split char:5")
    lbs = [r for r in rows if r["section"] == "throughput" and r["tool"] == "lshbench" and not r.get("status")
           and r["variant"].startswith("sketch --kernel") and r.get("cpu_seconds") is not None]
    if lbs and sp:
        best = min(lbs, key=lambda r: r["cpu_seconds"])
        out.append(f"The whole `lshbench {best['variant']}` process (reading, shingling and signing) took "
                   f"{best['cpu_seconds']:.2f} CPU s, while splitting the shingles alone took Python "
                   f"{sp['cpu_seconds']:.2f} CPU s.")
    lp = row("throughput", "lshbench (Python)", "sketch(column, kernel='oph-opt'")
    rw = row("throughput", "rensa", "whole path")
    if lp and rw and rm and lp.get("cpu_seconds"):
        out.append(f"From one pyarrow column to a signature matrix, one thread: lshbench's Python `sketch` "
                   f"(oph-opt) took {lp['cpu_seconds']:.3f} CPU s, rensa's whole path (split shingles in Python, "
                   f"then sign) {rw['cpu_seconds']:.2f} CPU s ({rw['cpu_seconds'] / lp['cpu_seconds']:.0f}x), "
                   f"rensa's signing alone {rm['cpu_seconds']:.2f} CPU s "
                   f"({rm['cpu_seconds'] / lp['cpu_seconds']:.1f}x).")
    acc = [r for r in rows if r["section"] == "accuracy" and not r.get("status") and r.get("pairs", 0) >= 100
           and r.get("bias") is not None and r["j_lo"] != r["j_hi"]]
    worst = []
    for name in dict.fromkeys(f"{r['tool']} {r['variant']}" for r in acc):
        mine = [r for r in acc if f"{r['tool']} {r['variant']}" == name]
        w = max(mine, key=lambda r: abs(r["bias"]))
        worst.append(f"{name} {w['bias']:+.4f}±{w['bias_se']:.4f} in [{w['j_lo']:.1f}, {w['j_hi']:.1f})"
                     f" ({w.get('seeds', 1)} seeds)")
    if worst:
        out.append("Largest |bias| per tool over the J bins holding at least 100 pairs: " + "; ".join(worst) + ".")
    for b, r in LSH_SETTINGS:
        parts = []
        for tool, vs in (("datasketch", "MinHashLSH"), ("rensa", "RMinHashLSH"), ("lshbench", "dedup --kernel oph-opt --verify none")):
            x = row("recall", tool, vs, bands=b, rows=r)
            if x and x.get("recall") is not None:
                parts.append(f"{tool} {x['recall']:.4f} ({x['candidates']} candidates)")
        x = row("recall", "datasketch", "MinHashLSH", bands=b, rows=r) or row("recall", "lshbench", "dedup", bands=b, rows=r)
        if parts and x and x.get("expected_recall") is not None:
            out.append(f"At {b}x{r}, recall of the {x['truth_pairs']} exact pairs at J >= {LSH_THRESHOLD}: "
                       + ", ".join(parts) + f"; the S-curve predicts {x['expected_recall']:.4f}.")
    return out


def render_md(rows, common, versions, lb_version, info_text, n_docs, mb, n_shingles, max_dev, missed, n_sample,
              n_truth, n_truth05, args) -> str:
    o = io.StringIO()
    p = lambda *a: print(*a, file=o)  # noqa: E731
    p("# Peers: lshbench, datasketch and rensa on the same corpus")
    p()
    p(f"SpamAssassin bodies (`{args.input}`, {n_docs} documents, {mb:.1f} MB of UTF-8 text, {n_shingles:,} char:5 "
      f"windows), k = {K}, seed {SEED}, one thread. Generated by `experiments/peers/run_peers.py` on "
      f"{common['date_utc']} at commit `{common['git_commit']}`.")
    p()
    p(f"Machine: {common['machine']}; CPU model reported: {common['cpu_model']}. Python {common['python']}, "
      f"datasketch {versions['datasketch']}, rensa {versions['rensa']}, numpy {versions['numpy']}, "
      f"{lb_version}.")
    p()
    p("```")
    p(info_text.strip())
    p("```")
    p()
    p("## Summary")
    p()
    for line in summary_lines(rows):
        p(f"- {line}")
    p()
    p("## Signature throughput")
    p()
    p("The machine is shared with other jobs (load average in the last column), so wall times are inflated; the "
      "CPU seconds of the process (for lshbench, of the child process) are the fairer comparison, and ratios "
      "within this one run mean more than absolute figures.")
    p()
    p("| tool | variant | ISA | wall (s) | CPU (s) | MB/s | docs/s | what is timed | load avg |")
    p("|---|---|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        if r["section"] != "throughput":
            continue
        if r.get("status"):
            p(f"| {r['tool']} | {r['variant']} | {r.get('isa', '')} | {r['status']} | | | | | |")
        else:
            p(f"| {r['tool']} | {r['variant']} | {r.get('isa', '')} | {f(r['seconds'], '.3f')} | "
              f"{f(r.get('cpu_seconds'), '.3f')} | {f(r['mb_per_s'], '.1f')} | {f(r['docs_per_s'], '.0f')} | "
              f"{r['includes']} | {r.get('load_avg', '')} |")
    p()
    p("## Estimation error against exact Jaccard")
    p()
    p(f"Pairs: {n_truth} from `lshbench exact --threshold 0.3` and {n_sample} random pairs whose J is computed from "
      f"the Python shingle sets. Largest |J(Python) - J(lshbench exact)| over the exact pairs: "
      f"{f(max_dev, '.2e')}; random pairs at J >= 0.3 missing from the exact output: {missed if n_truth else 'n/a'}. "
      "Relative MSE is the mean over pairs of (estimate - J)^2 / (J(1-J)/k), 1 for classic MinHash. "
      "The ± after the bias is its standard error across seeds (the bias of each seed, averaged over the bin's "
      "pairs, is one draw); for a tool run with one seed it is the naive one across pairs, which understates it "
      "because pairs that share a document do not err independently. The ± after the relative MSE is likewise "
      "across seeds. RMSE and relative MSE pool all seeds.")
    p()
    acc = [r for r in rows if r["section"] == "accuracy" and not r.get("status")]
    names, nseeds = [], {}
    for r in acc:
        nm = f"{r['tool']} {r['variant']}"
        if nm not in names:
            names.append(nm)
            nseeds[nm] = r.get("seeds") or 1
    p("| J bin | pairs | " + " | ".join(f"{nm} (seeds: {nseeds[nm]})" for nm in names) + " |")
    p("|---|---:|" + "---|" * len(names))
    bins = J_BINS + [(1.0, 1.0)]
    for lo, hi in bins:
        cells, npairs = [], None
        for nm in names:
            r = next((x for x in acc if f"{x['tool']} {x['variant']}" == nm and x["j_lo"] == lo and x["j_hi"] == hi),
                     None)
            if r is None or not r["pairs"]:
                cells.append("")
                continue
            npairs = r["pairs"]
            rel = "" if r["rel_mse"] is None else f"; rel {r['rel_mse']:.2f}±{f(r['rel_mse_se'], '.2f')}"
            cells.append(f"bias {r['bias']:+.4f}±{f(r['bias_se'], '.4f')}; rmse {r['rmse']:.4f}{rel}")
        label = "J = 1" if lo == hi else f"[{lo:.1f}, {hi:.1f})"
        p(f"| {label} | {npairs if npairs is not None else 0} | " + " | ".join(cells) + " |")
    for r in rows:
        if r["section"] == "accuracy" and r.get("status"):
            p(f"\n{r['tool']} {r['variant']}: {r['status']}.")
    p()
    p(f"## Recall at 42x3 and 20x5 against exact pairs at J >= {LSH_THRESHOLD} ({n_truth05} pairs)")
    p()
    p("| tool | variant | k | b x r | candidates | true pairs found | recall | S-curve expected recall | "
      "precision | J of missed pairs | wall (s) | CPU (s) | what is timed |")
    p("|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
    for r in rows:
        if r["section"] != "recall":
            continue
        if r.get("status"):
            p(f"| {r['tool']} | {r['variant']} | {r['k']} | {r['bands']}x{r['rows']} | {r['status']} | | | | | | | | |")
            continue
        p(f"| {r['tool']} | {r['variant']} | {r['k']} | {r['bands']}x{r['rows']} | {r['candidates']} | "
          f"{f(r['true_found'], 'd')} | {f(r['recall'], '.4f')} | {f(r['expected_recall'], '.4f')} | "
          f"{f(r['precision'], '.4f')} | {r.get('missed_j', '')} | {f(r['seconds'], '.2f')} | "
          f"{f(r.get('cpu_seconds'), '.2f')} | {r['includes']} |")
    p()
    p("## Notes")
    p()
    p("- Peers sign shingles already split in Python; lshbench's numbers are whole processes that also read, "
      "decompress, parse and shingle the corpus, so they are an upper bound on its signing time.")
    p("- datasketch's default hash (`sha1_hash32`) takes bytes, so its input is the UTF-8 encoded windows; rensa "
      "takes the str windows. Both see every window, repeats included, as lshbench does.")
    p("- rensa's `RMinHashLSH` requires the number of bands to divide `num_perm`, so its LSH runs sign with "
      "k = b*r (126 for 42x3, 100 for 20x5); datasketch and lshbench band the first b*r of 128 slots.")
    p("- The estimate for every signature is the fraction of equal slots.")
    p("- Many pairs in this corpus come from a few clusters of near-identical messages, so their errors move "
      "together: a bin's bias with one seed says little, hence several seeds for the accuracy table. The recall "
      "rows use one seed (42) and carry the same caveat.")
    p("- `lshbench dedup` runs without `--threshold` (its default, 0.5, is the verification threshold): with "
      "`--bands 20 --rows 5` an explicit `--threshold 0.5` is refused because that banding finds pairs at 0.5 with "
      "probability 0.47. `--verify none` keeps every LSH candidate; `--verify exact` keeps those with exact J >= 0.5.")
    p("- Recall counts the exact pairs at J >= 0.5 found among a tool's candidates; precision is that count over "
      "the candidates; the S-curve column is the mean of 1 - (1 - J^r)^b over the exact pairs, what an ideal "
      "MinHash would find on average.")
    p()
    p("Regenerate (after `cargo build --release`):")
    p()
    p("```")
    p("python3 experiments/peers/run_peers.py")
    p("```")
    return o.getvalue()


if __name__ == "__main__":
    if not in_venv():
        reexec_in_venv()
    sys.exit(main())
