"""Shared fixtures: the repository, the `lshbench` CLI binary and the shipped SpamAssassin corpus."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "spamassassin.jsonl.gz"

# Every Spark these tests start (in this process, and in the subprocesses of the command-line tests, which inherit
# the environment) runs its JVM with the first JIT tier only: the jobs here last seconds, and the optimising
# compiler's work on Spark's own code was about a third of the Spark tests' CPU. A caller's own setting is kept.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")


def _find_cli() -> Path:
    env = os.environ.get("LSHBENCH_BIN")
    if env:
        return Path(env)
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "lshbench"
        if p.exists():
            return p
    raise RuntimeError(
        "the lshbench CLI is not built: run `cargo build --release` at the repository root or set LSHBENCH_BIN"
    )


@pytest.fixture(scope="session")
def cli():
    """Runs the CLI; returns the completed process (check=True unless told otherwise)."""
    path = _find_cli()

    def run(*args, check=True):
        return subprocess.run(
            [str(path), *map(str, args)], capture_output=True, text=True, check=check
        )

    return run


@pytest.fixture(scope="session")
def corpus():
    """(ids, texts) of data/spamassassin.jsonl.gz, as the CLI reads them."""
    ids, texts = [], []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            ids.append(str(rec["id"]))
            texts.append(rec["text"])
    return ids, texts


@pytest.fixture(scope="session")
def corpus_path():
    return CORPUS


@pytest.fixture()
def write_jsonl(tmp_path):
    def write(name, ids, texts):
        p = tmp_path / name
        with open(p, "w", encoding="utf-8") as f:
            for i, t in zip(ids, texts):
                f.write(json.dumps({"id": i, "text": t}) + "\n")
        return p

    return write
