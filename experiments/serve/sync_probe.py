"""How long this disk takes to sync a small append, with nothing else running: the floor under `lshbench serve`'s
latency tail, since every acknowledged check waits for one `fdatasync` of the log.

    python3 experiments/serve/sync_probe.py [--dir DIR] [--seconds 120] [--out results/serve/sync-probe.md]

Appends 1,500 bytes (a document of the serve benchmark) to a new file in DIR (default: the system's temporary
directory, which is where `experiments/serve/bench.sh` puts its index) and calls `fdatasync` after each append,
for the given time, then prints the latency percentiles and writes them, with the machine, to OUT.
"""

import argparse
import os
import platform
import subprocess
import tempfile
import time


def cpu() -> str:
    info = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return (
        f"{info.get('Vendor ID', '?')} {info.get('Model name', '?')}, family {info.get('CPU family', '?')} "
        f"model {info.get('Model', '?')}, {os.cpu_count()} logical CPUs"
    )


def disk(path: str) -> str:
    out = subprocess.run(["df", "-hT", path], capture_output=True, text=True, check=True).stdout.splitlines()
    fields = out[-1].split()
    return f"{fields[1]} on {fields[0]}, {fields[2]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--out", default="results/serve/sync-probe.md")
    args = parser.parse_args()

    path = os.path.join(args.dir, f"lshbench-sync-probe-{os.getpid()}")
    record = os.urandom(1500)
    latencies = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            os.write(fd, record)
            start = time.perf_counter()
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)

    latencies.sort()
    n = len(latencies)

    def ms(q: float) -> str:
        return f"{latencies[min(n - 1, int(q * n))] * 1e3:.2f} ms"

    over = {t: sum(x > t for x in latencies) for t in (0.02, 0.1, 0.5)}
    line = (
        f"{n:,} appends of 1,500 bytes, each followed by `fdatasync`, in {args.seconds:.0f} s: p50 {ms(0.5)}, "
        f"p99 {ms(0.99)}, p99.9 {ms(0.999)}, p99.99 {ms(0.9999)}, longest {latencies[-1] * 1e3:.1f} ms; "
        f"over 20 ms: {over[0.02]}, over 100 ms: {over[0.1]}, over 500 ms: {over[0.5]}"
    )
    print(line)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("# serve: how long the disk takes to sync an append\n\n")
        out.write("```text\n")
        out.write(f"command: python3 experiments/serve/sync_probe.py --seconds {args.seconds:.0f}\n")
        out.write(f"commit: {commit}\n")
        out.write(f"date: {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}\n")
        out.write(f"cpu: {cpu()}\n")
        out.write(f"kernel: {platform.release()}\n")
        out.write(f"disk of {args.dir}: {disk(args.dir)}\n")
        out.write("```\n\n")
        out.write(line + ".\n\n")
        out.write(
            "Nothing else ran. Every check `lshbench serve` acknowledges waits for one such sync of its log (a "
            "group of checks shares one), so a stall here is a pause of every waiting check; "
            "[the serve summary](summary.md) is the server under load on the same kind of VM.\n"
        )


if __name__ == "__main__":
    main()
