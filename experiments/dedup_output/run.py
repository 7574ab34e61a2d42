#!/usr/bin/env python3
"""Input JSONL to deduplicated JSONL: `lshbench dedup --kept` against datatrove 0.10.1's MinHash pipeline.

One run measures both tools on the same machine, the same corpus and the same word n-gram size and banding, and
scores each tool's kept documents against the exact all-pairs join.

Run from the repository root (after `cargo build --release`):

    python3 experiments/dedup_output/run.py --corpus spam                       # data/spamassassin.jsonl.gz
    python3 experiments/dedup_output/run.py --corpus gen --gen-docs 1000000     # `lshbench gen`, seeded
    python3 experiments/dedup_output/run.py --corpus spam --repeats 3

The first run creates experiments/dedup_output/.venv (pip, pinned requirements.txt) and re-executes itself in it.
Options: --repeats N (runs per tool, medians reported), --workdir DIR (corpora, shards and outputs; default a
folder under /tmp, kept), --lshbench PATH, --skip-datatrove, --threshold T.

Writes results/dedup_output/<corpus>.csv (one row per tool and run), <corpus>-problems.csv (every residual pair
and unjustified removal of each run, with ids) and summary.md (rebuilt from every <corpus>.csv present).

The two pipelines
-----------------
datatrove (datatrove_pipeline.py, one LocalPipelineExecutor per stage, at most 2 tasks at a time):
  MinhashDedupSignature (2 tasks, one per JSONL shard: the corpus cut into two contiguous halves),
  MinhashDedupBuckets (14 tasks: datatrove requires a multiple of num_buckets), MinhashDedupCluster (1 task),
  MinhashDedupFilter + JsonlWriter (2 tasks). MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8),
  everything else its default (64-bit xxhash of each n-gram, seed 1, English word tokenizer).
  A document is removed when it falls in a connected component of LSH collisions (two documents whose 8 hashes
  agree in any of the 14 buckets) and is not that component's union-find root. There is no verification step.
lshbench: `lshbench dedup --input corpus.jsonl --shingle word:5 --lowercase --strip-punctuation --num-perm 112
  --bands 14 --rows 8 --threshold T --groups center --kept OUT --threads 2`. Candidates from the same banding are
  verified by exact Jaccard >= T on the shingle sets, and star groups keep each group's centre.

Shingling: what differs
  datatrove (simplify_text, then spaCy's blank English tokenizer, then word n-grams): lowercase; every run of
  digits (with one optional decimal part) becomes "0"; a fixed list of punctuation characters becomes a space;
  whitespace is collapsed; diacritics are stripped (NFD, combining marks dropped); spaCy then splits the result,
  which also cuts symbols and emoji off the words they touch. A document with fewer than n tokens has no n-gram
  and is never removed.
  lshbench (word:5 --lowercase --strip-punctuation): lowercase; every character that is neither alphanumeric
  nor whitespace is deleted (not replaced by a space, so "e-mail" is one word, "email"; datatrove makes it
  "e mail"); digits and diacritics are kept; words are whitespace-separated tokens. A document with fewer than
  5 words is one shingle.
  So the sets differ in places: numbers, punctuation inside words, accents. The truth (`lshbench exact`) uses
  lshbench's shingles, which is the definition of a near-duplicate this benchmark scores both tools against.

Threshold
  datatrove's 14 x 8 banding puts the S-curve's midpoint at (1/14)^(1/8) = 0.719 (its source says ~0.72);
  P(candidate) is 0.57 at J = 0.7, 0.92 at 0.8. T = 0.72 is used for lshbench's verification and for the truth.

Measurements (per tool, per run)
  wall: from spawning the process (lshbench, or the Python process running datatrove's four stages) to its exit.
  memory: a thread samples the whole process tree every 50 ms (psutil: the process and all its descendants,
  found again at every sample, so datatrove's forkserver, Manager and pool workers are counted) and records the
  largest sum of RSS and the largest sum of PSS over the tree. RSS sums count pages shared between forked
  processes once per process; PSS divides them among their sharers. Also recorded: ru_maxrss from wait4 (the
  largest single process, exact; the peak for lshbench, which is one process).
  CPU: user + system seconds over the tree (wait4's for lshbench; for datatrove each process's own time as last
  sampled, as its pool workers are reaped by the forkserver), and the 1-minute load average at the start.
  kept/removed: ids in the tool's output (each line a JSON object with an `id`) against the input's ids.
  residual pairs: pairs of the truth (exact Jaccard >= T on lshbench's shingles) with both documents kept.
  unjustified removals: removed documents with no truth partner among the kept documents; split into those with
  no truth partner at all (false positives) and those whose partners were all removed too (chains).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
RESULTS = ROOT / "results" / "dedup_output"
SPAM = ROOT / "data" / "spamassassin.jsonl.gz"

N_GRAMS = 5
BANDS = 14
ROWS = 8
THRESHOLD = 0.72
WORKERS = 2
SHINGLE_ARGS = ["--shingle", f"word:{N_GRAMS}", "--lowercase", "--strip-punctuation"]
# The generated corpus: 20% of the documents are planted copies in clusters of 2 to 5, each copy with 0-10% of
# its words edited (substituted, inserted, deleted) and up to 2 block moves, 20% of clusters template-style
# (shared text, own slot values). Pairs then spread across the threshold: on 20,000 documents, of the 6,815 pairs
# at word 5-gram Jaccard >= 0.3, 897 are at >= 0.72 (copies of one base, each edited, are further apart).
GEN_ARGS = ["--dup-fraction", "0.2", "--cluster-size", "2..5", "--edit-rate", "0..0.1", "--seed", "42"]
SAMPLE_S = 0.05

CSV_FIELDS = [
    "corpus", "docs", "input_mb", "tool", "version", "run", "wall_s", "peak_rss_tree_mb", "peak_pss_tree_mb",
    "max_process_rss_mb", "processes_seen", "cpu_s", "load_before", "kept", "removed", "residual_pairs", "unjustified_removals",
    "unjustified_no_true_partner", "unjustified_chained", "truth_pairs", "truth_docs", "stage_times_s",
    "threshold", "bands", "rows", "n_grams", "workers", "isa", "command", "date_utc", "git_commit",
]


# --------------------------------------------------------------------------------------------------- venv


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def reexec_in_venv() -> None:
    py = VENV / "bin" / "python"
    stamp = VENV / ".requirements"
    if not py.exists():
        print(f"creating {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.read_text() != REQUIREMENTS.read_text():
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(REQUIREMENTS.read_text())
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


# ------------------------------------------------------------------------------------------ measurement


class TreeSampler(threading.Thread):
    """Samples the RSS and PSS sums of a process and all its descendants until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        import psutil

        self.psutil = psutil
        self.root = psutil.Process(pid)
        self.stop_event = threading.Event()
        self.peak_rss = 0
        self.peak_pss = 0
        self.pids: set[int] = set()
        # Own user + system seconds of every process seen, as last sampled (children's times are left out: a
        # worker's would otherwise count again in its parent once reaped).
        self.cpu: dict[int, float] = {}

    def sample(self) -> None:
        ps = self.psutil
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except ps.Error:
            return
        rss = pss = 0
        for p in procs:
            try:
                m = p.memory_full_info()
            except ps.Error:
                continue
            rss += m.rss
            pss += getattr(m, "pss", m.rss)
            self.pids.add(p.pid)
            try:
                t = p.cpu_times()
                self.cpu[p.pid] = t.user + t.system
            except ps.Error:
                pass
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(SAMPLE_S)


def measure(cmd: list[str], log: Path, cwd: Path | None = None) -> dict:
    """Runs cmd with its output to log; wall time, sampled tree memory and CPU, wait4's ru_maxrss."""
    load = os.getloadavg()[0]
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop_event.set()
        sampler.join()
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    max_proc = rusage.ru_maxrss * 1024  # KiB on Linux
    # wait4 counts the child and the descendants it reaped exactly; the sampled sum also sees processes reaped by
    # others (datatrove's pool workers are the forkserver's children) but misses each one's last 50 ms.
    cpu = max(rusage.ru_utime + rusage.ru_stime, sum(sampler.cpu.values()))
    return {
        "wall_s": wall,
        "peak_rss_tree_mb": max(sampler.peak_rss, max_proc) / 1e6,
        "peak_pss_tree_mb": sampler.peak_pss / 1e6,
        "max_process_rss_mb": max_proc / 1e6,
        "processes_seen": len(sampler.pids),
        "cpu_s": round(cpu, 2),
        "load_before": round(load, 2),
    }


# ------------------------------------------------------------------------------------------------ corpus


def sh(cmd: list[str], **kw) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def prepare_corpus(args, work: Path) -> tuple[Path, str]:
    """The corpus as one uncompressed JSONL file (lshbench's input) and the command that made it."""
    if args.corpus == "spam":
        dst = work / "input.jsonl"
        if not dst.exists():
            with gzip.open(SPAM, "rb") as src, open(dst, "wb") as out:
                shutil.copyfileobj(src, out)
        return dst, f"gunzip < {SPAM.relative_to(ROOT)}"
    dst = work / "input.jsonl"
    cmd = [args.lshbench, "gen", "--docs", str(args.gen_docs), *GEN_ARGS, "--output", str(dst)]
    if not dst.exists():
        print("generating:", " ".join(cmd), file=sys.stderr)
        sh(cmd)
    return dst, " ".join(["lshbench", *cmd[1:-2]])


def split_shards(src: Path, dst: Path, parts: int) -> None:
    """Cuts the corpus into `parts` contiguous JSONL shards of (almost) equal line counts."""
    if dst.exists() and len(list(dst.glob("*.jsonl"))) == parts:
        return
    dst.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as f:
        total = sum(1 for _ in f)
    with open(src, "rb") as f:
        for i in range(parts):
            n = total // parts + (1 if i < total % parts else 0)
            with open(dst / f"{i:05d}.jsonl", "wb") as out:
                for _ in range(n):
                    out.write(f.readline())


def read_ids(paths: list[Path]) -> list[str]:
    ids = []
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    ids.append(str(json.loads(line)["id"]))
    return ids


def load_truth(path: Path) -> list[tuple[str, str, float]]:
    with open(path, newline="") as f:
        return [(r["id_a"], r["id_b"], float(r["jaccard"])) for r in csv.DictReader(f)]


def evaluate(all_ids: list[str], kept: list[str], truth: list[tuple[str, str, float]]) -> tuple[dict, list[dict]]:
    """Scores one kept id list against the truth pairs; also returns every problem found, with ids."""
    kept_set = set(kept)
    unknown = kept_set - set(all_ids)
    if unknown:
        raise SystemExit(f"{len(unknown)} kept ids are not in the input, e.g. {sorted(unknown)[:5]}")
    if len(kept_set) != len(kept):
        raise SystemExit(f"{len(kept) - len(kept_set)} ids are written more than once")
    partners: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for a, b, j in truth:
        partners[a].append((b, j))
        partners[b].append((a, j))
    problems = []
    residual = 0
    for a, b, j in truth:
        if a in kept_set and b in kept_set:
            residual += 1
            problems.append({"kind": "residual_pair", "id": a, "other": b, "jaccard": j})
    removed = [i for i in all_ids if i not in kept_set]
    no_partner = chained = 0
    for r in removed:
        ps = partners.get(r, [])
        if any(p in kept_set for p, _ in ps):
            continue
        if ps:
            chained += 1
            best = max(ps, key=lambda x: x[1])
            problems.append({"kind": "unjustified_chained", "id": r, "other": best[0], "jaccard": best[1]})
        else:
            no_partner += 1
            problems.append({"kind": "unjustified_no_true_partner", "id": r, "other": "", "jaccard": ""})
    return {
        "kept": len(kept_set),
        "removed": len(removed),
        "residual_pairs": residual,
        "unjustified_removals": no_partner + chained,
        "unjustified_no_true_partner": no_partner,
        "unjustified_chained": chained,
    }, problems


# ----------------------------------------------------------------------------------------------- machine


def machine_info(lshbench: str) -> dict:
    info = {}
    try:
        for line in sh(["lscpu"]).splitlines():
            key, _, val = line.partition(":")
            info[key.strip()] = val.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    flags = set(info.get("Flags", "").split())
    isa = ""
    for line in sh([lshbench, "info"]).splitlines():
        if line.startswith("detected ISA:"):
            isa = line.split(":", 1)[1].strip()
    return {
        "vendor": info.get("Vendor ID", ""),
        "family": info.get("CPU family", ""),
        "model": info.get("Model", ""),
        "model_name": info.get("Model name", ""),
        "cpus": info.get("CPU(s)", str(os.cpu_count())),
        "avx2": "avx2" in flags,
        "avx512": sorted(f for f in flags if f.startswith("avx512")),
        "kernel": platform.release(),
        "isa": isa,
    }


def git_commit() -> str:
    try:
        return sh(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"]).strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


# ------------------------------------------------------------------------------------------------ runs


def run_lshbench(args, inp: Path, out_dir: Path, threshold: float) -> tuple[dict, list[Path], str]:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    kept = out_dir / "kept.jsonl"
    cmd = [
        args.lshbench, "dedup", "--input", str(inp), *SHINGLE_ARGS, "--num-perm", str(BANDS * ROWS),
        "--bands", str(BANDS), "--rows", str(ROWS), "--threshold", str(threshold), "--groups", "center",
        "--kept", str(kept), "--threads", str(WORKERS),
    ]
    m = measure(cmd, out_dir / "log.txt")
    shown = " ".join(["lshbench", *cmd[1:]]).replace(str(inp), "corpus.jsonl").replace(str(kept), "kept.jsonl")
    return m, [kept], shown


def run_datatrove(args, shards: Path, out_dir: Path) -> tuple[dict, list[Path], str]:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    timings = out_dir / "timings.json"
    cmd = [
        sys.executable, str(HERE / "datatrove_pipeline.py"), "--shards", str(shards), "--work", str(out_dir / "work"),
        "--output", str(out_dir / "kept"), "--workers", str(WORKERS), "--n-grams", str(N_GRAMS),
        "--buckets", str(BANDS), "--rows", str(ROWS), "--timings", str(timings),
    ]
    m = measure(cmd, out_dir / "log.txt")
    m["stage_times_s"] = json.dumps({k: round(v, 3) for k, v in json.loads(timings.read_text()).items()})
    shown = (
        f"python datatrove_pipeline.py --shards SHARDS --work WORK --output KEPT --workers {WORKERS} "
        f"--n-grams {N_GRAMS} --buckets {BANDS} --rows {ROWS}"
    )
    return m, sorted((out_dir / "kept").glob("*.jsonl")), shown


def tool_version(tool: str, lshbench: str) -> str:
    if tool == "lshbench":
        return sh([lshbench, "--version"]).strip().split()[-1]
    from importlib.metadata import version

    return version("datatrove")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=["spam", "gen"], required=True)
    ap.add_argument("--gen-docs", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threshold", type=float, default=THRESHOLD)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--lshbench", default=str(ROOT / "target" / "release" / "lshbench"))
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args()

    name = "spam" if args.corpus == "spam" else f"gen-{args.gen_docs}"
    work = args.workdir or Path("/tmp") / "lshbench-dedup-output" / name
    work.mkdir(parents=True, exist_ok=True)
    inp, corpus_cmd = prepare_corpus(args, work)
    all_ids = read_ids([inp])
    input_mb = inp.stat().st_size / 1e6
    print(f"{name}: {len(all_ids)} documents, {input_mb:.1f} MB", file=sys.stderr)
    if len(set(all_ids)) != len(all_ids):
        raise SystemExit("the corpus repeats ids")
    shards = work / "shards"
    if not args.skip_datatrove:
        split_shards(inp, shards, WORKERS)

    # The truth: every pair at exact Jaccard >= threshold on lshbench's shingles.
    truth_csv = work / f"truth-{args.threshold}.csv"
    truth_cmd = [
        args.lshbench, "exact", "--input", str(inp), *SHINGLE_ARGS, "--threshold", str(args.threshold),
        "--output", str(truth_csv), "--threads", str(WORKERS),
    ]
    if not truth_csv.exists():
        print("truth:", " ".join(truth_cmd), file=sys.stderr)
        tm = measure(truth_cmd, work / "exact.log")
        print(f"  exact join: {tm['wall_s']:.1f} s", file=sys.stderr)
    truth = load_truth(truth_csv)
    truth_docs = len({a for a, _, _ in truth} | {b for _, b, _ in truth})
    print(f"  {len(truth)} true pairs over {truth_docs} documents", file=sys.stderr)

    machine = machine_info(args.lshbench)
    commit = git_commit()
    tools = ["lshbench"] + ([] if args.skip_datatrove else ["datatrove"])
    rows, problems = [], []
    for run in range(1, args.repeats + 1):
        for tool in tools:
            out_dir = work / f"{tool}-run{run}"
            print(f"run {run}: {tool}", file=sys.stderr)
            if tool == "lshbench":
                m, kept_files, shown = run_lshbench(args, inp, out_dir, args.threshold)
            else:
                m, kept_files, shown = run_datatrove(args, shards, out_dir)
            scores, probs = evaluate(all_ids, read_ids(kept_files), truth)
            row = {
                "corpus": name, "docs": len(all_ids), "input_mb": round(input_mb, 1), "tool": tool,
                "version": tool_version(tool, args.lshbench), "run": run, **m, **scores,
                "truth_pairs": len(truth), "truth_docs": truth_docs, "threshold": args.threshold, "bands": BANDS,
                "rows": ROWS, "n_grams": N_GRAMS, "workers": WORKERS, "isa": machine["isa"], "command": shown,
                "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "git_commit": commit,
            }
            row.setdefault("stage_times_s", "")
            for k in ("wall_s", "peak_rss_tree_mb", "peak_pss_tree_mb", "max_process_rss_mb"):
                row[k] = round(row[k], 3 if k == "wall_s" else 1)
            rows.append(row)
            problems += [{"corpus": name, "tool": tool, "run": run, **p} for p in probs]
            print(
                f"  {m['wall_s']:.2f} s, peak RSS {row['peak_rss_tree_mb']} MB (tree), kept {scores['kept']}, "
                f"residual {scores['residual_pairs']}, unjustified {scores['unjustified_removals']}",
                file=sys.stderr,
            )

    args.results.mkdir(parents=True, exist_ok=True)
    # Rows of a tool this invocation did not run (--skip-datatrove) are kept from the previous CSVs.
    rows = keep_other_tools(args.results / f"{name}.csv", tools) + rows
    problems = keep_other_tools(args.results / f"{name}-problems.csv", tools) + problems
    with open(args.results / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, restval="")
        w.writeheader()
        w.writerows(rows)
    write_problems(args.results / f"{name}-problems.csv", problems)
    meta = {
        "machine": machine, "corpus_command": corpus_cmd,
        "truth_command": " ".join(["lshbench", *truth_cmd[1:]]).replace(str(inp), "corpus.jsonl").replace(
            str(truth_csv), "truth.csv"),
        "regenerate": regenerate_command(any(r["tool"] == "datatrove" for r in rows)),
    }
    (args.results / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    write_summary(args.results)
    return 0


def regenerate_command(has_datatrove: bool) -> str:
    """This invocation's command line without --workdir, and without --skip-datatrove when the CSV holds datatrove
    rows from an earlier invocation (the command then regenerates both)."""
    argv, out = sys.argv[1:], []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--workdir":
            i += 2
            continue
        if not a.startswith("--workdir=") and not (a == "--skip-datatrove" and has_datatrove):
            out.append(a)
        i += 1
    return " ".join(["python3 experiments/dedup_output/run.py", *out])


def write_problems(path: Path, problems: list[dict]) -> None:
    """One row per distinct problem, naming the runs that had it (repeats usually agree: this keeps the file
    small)."""
    runs: dict[tuple, list[str]] = defaultdict(list)
    for p in problems:
        key = (p["corpus"], p["tool"], p["kind"], p["id"], p["other"], p["jaccard"])
        for r in str(p.get("run", p.get("runs", ""))).split(";"):
            if r and r not in runs[key]:
                runs[key].append(r)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["corpus", "tool", "kind", "id", "other", "jaccard", "runs"])
        for key, rs in runs.items():
            w.writerow([*key, ";".join(rs)])


def keep_other_tools(path: Path, tools: list[str]) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["tool"] not in tools]


# ----------------------------------------------------------------------------------------------- summary


def med(rows: list[dict], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def med_opt(rows: list[dict], key: str) -> float | None:
    """The median of a column that older CSVs may lack (None then)."""
    vals = [float(r[key]) for r in rows if r.get(key)]
    return statistics.median(vals) if vals else None


def write_summary(results: Path) -> None:
    """summary.md from every <corpus>.csv and <corpus>.json in the results folder."""
    corpora = []
    for p in sorted(results.glob("*.csv")):
        if p.stem.endswith("-problems"):
            continue
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
        meta_path = p.with_suffix(".json")
        if rows and meta_path.exists():
            corpora.append((p.stem, rows, json.loads(meta_path.read_text())))
    corpora.sort(key=lambda c: int(c[1][0]["docs"]))
    if not corpora:
        return
    out = ["# Input JSONL to deduplicated JSONL: lshbench against datatrove 0.10.1", ""]
    out += [
        "Both tools read the same corpus and write the documents they keep as JSONL; the kept ids are scored "
        "against the exact all-pairs join. Word 5-grams, 14 bands x 8 rows, threshold "
        f"{corpora[0][1][0]['threshold']}, 2 workers. Setup, shingling differences and how memory is counted: "
        "the docstring of `experiments/dedup_output/run.py`.",
        "",
        "Regenerate (one command per corpus; each rewrites its own CSV and this file):",
        "",
        "```",
        "cargo build --release",
    ]
    out += [c[2]["regenerate"] for c in corpora]
    out += ["```", ""]
    # Each corpus's run records its machine; a corpus rerun on another machine says so here.
    def describe(m: dict) -> str:
        avx512 = ", ".join(m["avx512"]) or "none"
        return (
            f"{m['vendor']}, family {m['family']}, model {m['model']}, \"{m['model_name']}\", {m['cpus']} logical "
            f"CPUs; avx2 {'yes' if m['avx2'] else 'no'}; avx512: {avx512}; Linux {m['kernel']}; lshbench ISA: "
            f"{m['isa']}"
        )

    machines = defaultdict(list)
    for name, _, meta in corpora:
        machines[describe(meta["machine"])].append(name)
    if len(machines) == 1:
        out += [f"Machine: {next(iter(machines))}.", ""]
    else:
        out += ["Machines (each corpus's tools ran side by side on one):", ""]
        out += [f"- {', '.join(names)}: {m}." for m, names in machines.items()]
        out += [""]
    out += [
        "| corpus | docs | tool | runs | wall (s), median | wall min-max | datatrove / lshbench, wall | CPU (s), "
        "median | datatrove / lshbench, CPU | load before | peak RSS, tree sum (MB) | peak PSS, tree sum (MB) | kept "
        "| removed | residual pairs | unjustified removals (no true partner / chained) |",
        "|---|---:|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    notes = []
    for name, rows, meta in corpora:
        by_tool = defaultdict(list)
        for r in rows:
            by_tool[r["tool"]].append(r)
        base = med(by_tool["lshbench"], "wall_s") if by_tool.get("lshbench") else None
        cpu_base = med_opt(by_tool.get("lshbench", []), "cpu_s")
        for tool in ("lshbench", "datatrove"):
            rs = by_tool.get(tool)
            if not rs:
                continue
            wall = med(rs, "wall_s")
            ratio = f"{wall / base:.1f}x" if tool == "datatrove" and base else ""
            cpu = med_opt(rs, "cpu_s")
            cpu_ratio = f"{cpu / cpu_base:.1f}x" if tool == "datatrove" and cpu and cpu_base else ""
            loads = "/".join(r["load_before"] for r in rs if r.get("load_before")) or "n/a"
            walls = [float(r["wall_s"]) for r in rs]
            unj = [(int(r["unjustified_removals"]), int(r["unjustified_no_true_partner"]),
                    int(r["unjustified_chained"])) for r in rs]
            same = len(set(unj)) == 1 and len({(r["kept"], r["residual_pairs"]) for r in rs}) == 1
            u = sorted(unj)[len(unj) // 2]
            out.append(
                f"| {name} | {int(rs[0]['docs']):,} | {tool} {rs[0]['version']} | {len(rs)} | {wall:.2f} | "
                f"{min(walls):.2f}-{max(walls):.2f} | {ratio} | {f'{cpu:.2f}' if cpu else 'n/a'} | {cpu_ratio} | "
                f"{loads} | {med(rs, 'peak_rss_tree_mb'):.0f} | "
                f"{med(rs, 'peak_pss_tree_mb'):.0f} | {int(med(rs, 'kept')):,} | {int(med(rs, 'removed')):,} | "
                f"{int(med(rs, 'residual_pairs')):,} | {u[0]:,} ({u[1]:,} / {u[2]:,}) |"
            )
            if not same:
                notes.append(f"- {name}, {tool}: kept/residual/unjustified differ between runs (see {name}.csv).")
            if tool == "datatrove":
                stages = defaultdict(list)
                for r in rs:
                    for k, v in json.loads(r["stage_times_s"]).items():
                        stages[k].append(v)
                notes.append(
                    f"- {name}, datatrove stage times (median s): "
                    + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())
                    + f"; {rs[0]['processes_seen']} processes seen in its tree."
                )
        notes.append(
            f"- {name}: truth {int(rows[0]['truth_pairs']):,} pairs over {int(rows[0]['truth_docs']):,} documents "
            f"(`{meta['truth_command']}`); corpus: `{meta['corpus_command']}`."
        )
    out += ["", *notes, ""]
    out += [
        "The machine is shared with other work: `load before` is the 1-minute load average when each run started "
        "(2 logical CPUs), so wall times carry noise; CPU seconds (user + system over the process tree: wait4 for "
        "lshbench, psutil samples of every process for datatrove) are less sensitive to it.",
        "",
        "Residual pairs: true pairs (exact Jaccard >= threshold on lshbench's shingles) with both documents kept. "
        "Unjustified removals: removed documents with no true partner among the kept ones. Every such pair and "
        "id, per tool and run, is in `<corpus>-problems.csv`; raw measurements in `<corpus>.csv`.",
        "",
    ]
    (results / "summary.md").write_text("\n".join(out))


if __name__ == "__main__":
    if not in_venv():
        reexec_in_venv()
    sys.exit(main())
