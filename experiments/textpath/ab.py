#!/usr/bin/env python3
"""Whole-process A/B timing (BENCHMARKING.md §11): runs each command N times, alternating between them, and
prints the median wall time and the median CPU time (user + sys of the child, from wait4) of each, and the
ratios of the first command to the others.

    python3 experiments/textpath/ab.py 15 '["/tmp/lshbench-base", "sketch", ...]' '["target/release/lshbench", "sketch", ...]'

`--pause=MS` first sleeps MS milliseconds before each run, so that work the previous run left to the system
(writeback of its outputs, freeing its memory) is done before the next one starts.

`{run}` in an argument is replaced by the run's number, so that each run writes a file of its own (no output
replaces a previous one); after each run, the arguments that held `{run}` are removed as files (with
`<stem>.ids.csv` beside a `.npy`), outside the timed part.

Leading `NAME=value` items of a command set environment variables for that command alone (as `env` would, without
starting another program inside the timed part).
"""
import json
import os
import statistics
import subprocess
import sys
import time


def split_env(cmd):
    """The environment for `cmd` (this process's, with its leading `NAME=value` items set) and its argv."""
    env = dict(os.environ)
    n = 0
    while n < len(cmd) and "=" in cmd[n] and not cmd[n].startswith(("/", ".", "-")):
        name, value = cmd[n].split("=", 1)
        env[name] = value
        n += 1
    return env, cmd[n:]


def main():
    args = sys.argv[1:]
    pause = 0.0
    if args[0].startswith("--pause="):
        pause = float(args[0].split("=", 1)[1]) / 1e3
        args = args[1:]
    runs = int(args[0])
    cmds = [json.loads(a) for a in args[1:]]
    wall = [[] for _ in cmds]
    cpu = [[] for _ in cmds]
    for run in range(runs):
        for i, cmd in enumerate(cmds):
            if pause:
                time.sleep(pause)
            run_cmd = [a.replace("{run}", str(run)) for a in cmd]
            env, argv = split_env(run_cmd)
            t0 = time.perf_counter()
            p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(p.pid, 0)
            wall[i].append(time.perf_counter() - t0)
            cpu[i].append(usage.ru_utime + usage.ru_stime)
            if status != 0:
                sys.exit(f"failed: {' '.join(run_cmd)}")
            for a, r in zip(cmd, run_cmd):
                if a != r:
                    for f in (r, r[:-4] + ".ids.csv" if r.endswith(".npy") else None):
                        if f and os.path.isfile(f):
                            os.unlink(f)
    med = statistics.median
    for i, cmd in enumerate(cmds):
        print(f"[{i}] wall median {med(wall[i]) * 1e3:.1f} ms (min {min(wall[i]) * 1e3:.1f}), "
              f"cpu median {med(cpu[i]) * 1e3:.1f} ms (min {min(cpu[i]) * 1e3:.1f})  {' '.join(cmd)}")
    for i in range(1, len(cmds)):
        print(f"[0]/[{i}]: wall {med(wall[0]) / med(wall[i]):.2f}x, cpu {med(cpu[0]) / med(cpu[i]):.2f}x")


if __name__ == "__main__":
    main()
