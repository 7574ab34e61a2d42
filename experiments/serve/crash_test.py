#!/usr/bin/env python3
"""Crash test of `lshbench serve`: kill -9 at random moments under load from several clients, and check what
survives.

    python3 experiments/serve/crash_test.py --bin target/release/lshbench --kills 100 --out results/serve/crash.md

Each round starts the server on the same index directory, loads it from CLIENTS threads (each its own
connection, paced: checks of 1 to 8 mails, half of them edited into near-duplicates, under fresh ids, and now and
then a deletion of a document it inserted), and SIGKILLs it after a random 0.1 to 1.2 s (every --sigterm-every-th
round SIGTERMs it instead). The server snapshots whenever its log passes --snapshot-min (256 KiB by default), so
many kills land during a snapshot, and SIGTERM cancels one. After the restart:

- every insertion acknowledged since the last round (and 1,000 older ones drawn at random; all of them after
  the last kill) is present with the sequence number and text it was acknowledged with, every deletion
  acknowledged since then is absent (all of them after the last kill), and the index holds exactly as many
  documents as the clients know of;
- every insertion sent but not acknowledged (cut off by the kill) is absent or present whole, with its text;
- query answers (near-duplicates, estimates and exact Jaccard) for 100 texts drawn from the corpus equal those of
  a reference index, in another directory, that holds exactly the documents the recovered index should (the
  acknowledged ones and the unacknowledged ones that made it whole), inserted fresh in sequence order.

Exit status 0 when every round passes. Needs the lshbench Python package (for lshbench.Client) and the CLI.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lshbench import Client

ROOT = Path(__file__).resolve().parents[2]


class Server:
    def __init__(self, binary: str, index: Path, *args: str):
        self.proc = subprocess.Popen(
            [binary, "serve", "--index", str(index), "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.wait(timeout=60)
            raise SystemExit(f"serve did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split()[-1]
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=120)


def read_corpus(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


class State:
    """What the clients were told, over all rounds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}  # id -> (seq, text): acknowledged insertions not deleted since
        self.deleted = set()  # ids whose deletion was acknowledged
        self.unsure_insert = {}  # id -> text: sent, no answer
        self.unsure_delete = set()  # ids whose deletion was sent, no answer
        self.fresh = set()  # ids acknowledged since the last checks
        self.deleted_now = set()  # deletions acknowledged since the last checks


def client_load(url, texts, state, rng_seed, round_no, client_no, stop, budget, errors):
    rng = random.Random(rng_seed)
    c = Client(url, timeout=30)
    mine = []
    n = 0
    try:
        while not stop.is_set() and budget[0] > 0:
            if mine and rng.random() < 0.1:
                victim = mine.pop(rng.randrange(len(mine)))
                with state.lock:
                    state.unsure_delete.add(victim)
                ok = c.delete(victim)
                with state.lock:
                    state.unsure_delete.discard(victim)
                    assert ok, f"deleting {victim}, which this client inserted"
                    state.acked.pop(victim)
                    state.deleted.add(victim)
                    state.deleted_now.add(victim)
                    state.fresh.discard(victim)
                continue
            k = rng.randint(1, 8)
            batch = []
            for _ in range(k):
                text = rng.choice(texts)
                if rng.random() < 0.5:
                    # A near-duplicate of a mail: a few characters changed.
                    cut = rng.randrange(max(1, len(text)))
                    text = text[:cut] + rng.choice(["!", " x ", "\n", ""]) + text[cut + 1 :]
                batch.append((f"k{round_no}-c{client_no}-{n}", text))
                n += 1
            with state.lock:
                budget[0] -= k
                for i, t in batch:
                    state.unsure_insert[i] = t
            results = c.check(batch)
            with state.lock:
                for (i, t), r in zip(batch, results):
                    assert r["inserted"] and r["id"] == i, r
                    del state.unsure_insert[i]
                    state.acked[i] = (r["seq"], t)
                    state.fresh.add(i)
                    mine.append(i)
            # Paced, so that a round's kill lands while the clients are sending.
            time.sleep(rng.uniform(0, 0.02))
    except OSError:  # the kill: whatever was in flight stays unsure
        pass
    except Exception as e:  # noqa: BLE001 - anything else (a refused request, a wrong answer) fails the test
        errors.append(f"client {client_no} in round {round_no}: {type(e).__name__}: {e}")


def verify(server, reference, state, fresh, texts, rng, round_no, full):
    """The checks after a restart; returns a line of counts. Raises AssertionError on a violation.

    `fresh` are the ids acknowledged since the last round's checks; they are all looked up, and so is a sample
    of 1,000 older ones (all of them when `full`); the index's document count must equal the clients' count
    whatever the sample. `reference` holds exactly what the recovered index should: it is brought up to date
    here (insertions in sequence order, deletions) and answers the same queries."""
    c = Client(server.url, timeout=120)
    older = [i for i in state.acked if i not in fresh]
    look = list(fresh) + (older if full else rng.sample(older, min(1000, len(older))))
    for i in look:
        # A document whose deletion was in flight may be either present or gone: it is looked at below.
        if i not in state.acked or i in state.unsure_delete:
            continue
        seq, text = state.acked[i]
        d = c.get(i)
        assert d is not None, f"round {round_no}: acknowledged document {i} is missing"
        assert d["seq"] == seq and d["text"] == text, f"round {round_no}: {i} came back changed: {d}"
    for i in state.deleted if full else state.deleted_now:
        assert c.get(i) is None, f"round {round_no}: the acknowledged deletion of {i} was lost"
    whole = lost = 0
    new_docs = [i for i in fresh if i in state.acked]
    for i, text in list(state.unsure_insert.items()):
        d = c.get(i)
        if d is None:
            lost += 1
        else:
            assert d["text"] == text, f"round {round_no}: unacknowledged {i} is half present: {d}"
            state.acked[i] = (d["seq"], text)
            new_docs.append(i)
            whole += 1
    state.unsure_insert.clear()
    gone = list(state.deleted_now)
    for i in list(state.unsure_delete):
        if c.get(i) is None:
            state.acked.pop(i, None)
            state.deleted.add(i)
            gone.append(i)
            if i in new_docs:
                new_docs.remove(i)
    state.unsure_delete.clear()
    state.deleted_now = set()
    stats = c.stats()
    assert stats["documents"] == len(state.acked), (
        f"round {round_no}: the index holds {stats['documents']} documents, the clients know of {len(state.acked)}"
    )
    # The reference: the same documents, inserted fresh in sequence order, the deleted ones deleted.
    rc = Client(reference.url, timeout=300)
    new_docs.sort(key=lambda i: state.acked[i][0])
    for start in range(0, len(new_docs), 1000):
        rc.insert([(i, state.acked[i][1]) for i in new_docs[start : start + 1000]])
    for i in gone:
        rc.delete(i)
    assert rc.stats()["documents"] == len(state.acked)
    sample = [rng.choice(texts) for _ in range(100)]

    def answers(client):
        return [sorted((d["id"], d["estimate"], d.get("jaccard")) for d in r["duplicates"]) for r in client.query(sample)]

    got, want = answers(c), answers(rc)
    assert got == want, f"round {round_no}: query answers differ from the rebuilt index's"
    found = sum(len(a) for a in got)
    recovery = stats["recovery"]
    return (
        f"{len(state.acked)} present ({len(look)} looked up), {len(state.deleted)} deletions held, {whole} "
        f"unacknowledged whole, {lost} unacknowledged absent; {found} near-duplicates in 100 queries, as the "
        f"rebuilt index; recovery {recovery['seconds']:.3f} s, {recovery['cut_bytes']} bytes cut"
    )


def run_rounds(args, rng, texts, state, lines, tmp, live):
    """The kills; `live` holds the servers running, for the caller to stop whatever happens."""
    index = tmp / "index"
    serve_args = ("--snapshot-min", args.snapshot_min)
    live["server"] = Server(args.bin, index, "--create", *serve_args)
    live["reference"] = Server(args.bin, tmp / "reference", "--create")
    for round_no in range(1, args.kills + 1):
        server = live["server"]
        stop = threading.Event()
        budget = [args.docs_per_round]
        errors = []
        threads = [
            threading.Thread(
                target=client_load,
                args=(server.url, texts, state, rng.random(), round_no, k, stop, budget, errors),
                daemon=True,
            )
            for k in range(args.clients)
        ]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.1, 1.2))
        # Every --sigterm-every-th round stops the server with SIGTERM instead, which cancels a snapshot in
        # progress; the others kill -9, often during a snapshot (--snapshot-min is small).
        term = args.sigterm_every > 0 and round_no % args.sigterm_every == 0
        if term:
            assert server.stop() == 0, "SIGTERM under load exits 0"
        else:
            server.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not errors, "\n".join(errors)
        in_flight = len(state.unsure_insert) + len(state.unsure_delete)
        live["server"] = server = Server(args.bin, index, *serve_args)
        fresh, state.fresh = state.fresh, set()
        how = "SIGTERM" if term else "kill"
        line = f"{how} {round_no} ({in_flight} writes in flight): " + verify(
            server, live["reference"], state, fresh, texts, rng, round_no, full=round_no == args.kills
        )
        print(line, flush=True)
        lines.append(line)
    assert live.pop("server").stop() == 0, "SIGTERM after the last round exits 0"
    live.pop("reference").stop()


def _cpu() -> str:
    """The CPU as /proc/cpuinfo names it: model name, vendor, family and model, and whether it runs AVX-512."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    avx512 = "avx512f" in fields.get("flags", "").split()
    return (
        f"{fields.get('model name', '?')} ({fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} "
        f"model {fields.get('model', '?')}, {'AVX-512' if avx512 else 'AVX2, no AVX-512'})"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target/release/lshbench"))
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--docs-per-round", type=int, default=1500, help="at most this many documents sent per round")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--snapshot-min",
        default="256K",
        help="the server's --snapshot-min: small, so that many kills land while a snapshot runs",
    )
    ap.add_argument(
        "--sigterm-every", type=int, default=5, help="stop with SIGTERM instead of kill -9 every N-th round (0: never)"
    )
    ap.add_argument("--corpus", default=str(ROOT / "data/spamassassin.jsonl.gz"))
    ap.add_argument("--out", help="also write the log as markdown here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = read_corpus(Path(args.corpus))
    state = State()
    lines = []
    t_all = time.time()
    with tempfile.TemporaryDirectory(prefix="lshbench-crash-") as tmp:
        live = {}
        try:
            run_rounds(args, rng, texts, state, lines, Path(tmp), live)
        finally:
            for s in live.values():
                if s.proc.poll() is None:
                    s.proc.kill()
                    s.proc.wait()
    total = time.time() - t_all
    terms = args.kills // args.sigterm_every if args.sigterm_every > 0 else 0
    summary = (
        f"{args.kills} rounds ({args.kills - terms} kill -9, {terms} SIGTERM), {args.clients} clients, "
        f"--snapshot-min {args.snapshot_min}, {total:.1f} s: every check passed"
    )
    print(summary)
    if args.out:
        cpu = _cpu()
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        Path(args.out).write_text(
            "# Crash test of lshbench serve\n\n"
            f"Command: `python3 experiments/serve/crash_test.py --bin {args.bin} --kills {args.kills} "
            f"--clients {args.clients} --docs-per-round {args.docs_per_round} --seed {args.seed} "
            f"--snapshot-min {args.snapshot_min} --sigterm-every {args.sigterm_every} --out {args.out}`\n\n"
            f"Machine: {os.cpu_count()} logical CPUs, {cpu}, Linux {platform.release()}; commit {commit}.\n\n"
            f"{summary}.\n\n```text\n" + "\n".join(lines) + "\n```\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
