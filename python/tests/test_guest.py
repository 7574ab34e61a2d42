"""The Python package is a good guest in its host process: ``sketch`` and ``dedup`` bind no thread, change no
thread's scheduling policy and leave no thread behind but the one pool they reuse. Each check runs in a fresh
interpreter (``sys.executable``), so no other test's threads (a Spark gateway's, pytest's) are counted; a
watcher thread looks at every thread of the process while the calls run, and again afterwards. Linux only
(``/proc/self/task``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")

SCRIPT = textwrap.dedent(
    """
    import gzip, json, os, sys, threading, time
    import lshbench

    def tasks():
        return sorted(int(t) for t in os.listdir("/proc/self/task"))

    def placement(tid):
        try:
            return os.sched_getaffinity(tid), os.sched_getscheduler(tid)
        except OSError:  # the thread ended while it was looked at
            return None

    cpus = os.sched_getaffinity(0)
    seen = set()
    stop = threading.Event()

    def look():
        for tid in tasks():
            p = placement(tid)
            if p is not None and (p[0] != cpus or p[1] != os.SCHED_OTHER):
                seen.add((tid, tuple(sorted(p[0])), p[1]))

    def watch():
        while not stop.is_set():
            look()
            time.sleep(0.001)

    with gzip.open(sys.argv[1], "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    threads = int(sys.argv[2])
    # pyarrow's allocator starts a thread of its own (jemalloc's background thread) at its first large
    # allocation: have it start before the count, so that only lshbench's threads are counted.
    import pyarrow as pa
    pa.array(texts)
    watcher = threading.Thread(target=watch)
    before = len(tasks())
    watcher.start()
    counts = []
    for _ in range(3):
        lshbench.sketch(texts, kernel="oph-opt", threads=threads)
        pairs, clusters = lshbench.dedup(texts, bands=42, rows=3, threshold=0.5, threads=threads)
        assert pairs.num_rows > 1000
        counts.append(len(tasks()) - 1)  # less the watcher
    stop.set()
    watcher.join()
    look()
    print(json.dumps({"before": before, "after": counts, "seen": sorted(seen), "cpus": len(cpus)}))
    """
)


@pytest.mark.parametrize("threads", [1, 2])
def test_sketch_and_dedup_bind_nothing_and_reuse_one_pool(corpus_path, threads):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(corpus_path), str(threads)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["seen"] == [], f"threads moved or rescheduled during or after the calls: {got['seen']}"
    # The pool's workers are the only threads added, and the same ones on every call.
    assert got["after"] == [got["before"] + threads] * 3, got
