"""Turns the JSON lines of experiments/storage/run.sh into results/serve/storage.md (medians per store)."""
import json
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict


def cpu():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    flags = info.get("flags", "").split()
    return (
        f'{info.get("vendor_id", "?")}, family {info.get("cpu family", "?")}, model {info.get("model", "?")}, '
        f'"{info.get("model name", "?")}", {os.cpu_count()} logical CPUs; '
        f'avx2 {"yes" if "avx2" in flags else "no"}, avx512f {"yes" if "avx512f" in flags else "no"}; '
        f"Linux {platform.release()}"
    )


def filesystem(path):
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True).stdout.splitlines()[-1].split()
        return f"{out[1]} on {out[0]}"
    except (IndexError, OSError):
        return "unknown"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    root = sys.argv[2]
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    writes = defaultdict(list)
    reads = defaultdict(list)
    built = {}
    lines = None
    for r in rows:
        if r["phase"] == "write" and r["group"] == 1000:
            built[r["store"]] = r
        elif r["phase"] == "write":
            writes[(r["store"], r["group"])].append(r)
        elif r["phase"] == "read":
            reads[(r["store"], r["cache"])].append(r)
        elif r["phase"] == "lines":
            lines = r
    stores = ["log", "redb", "fjall"]
    med = statistics.median
    out = ["# The index's log against redb and fjall: the durability work alone", ""]
    out.append(
        "The same framed records (a document's id, its 128-slot signature and its zstd-compressed text, as "
        "`lshbench serve` logs them; generated documents of mean length 1,500 bytes, seed 7) written durably "
        "and read back three ways: the index's log (`lshbench_online::log`: an append and an `fdatasync` per "
        "group), redb (a write transaction per group, `Durability::Immediate`), fjall (an atomic batch per "
        "group, then `persist(SyncData)`). What it leaves out: HTTP, signing, banding and the band tables, "
        "which cost the same whichever stores the records. Source: `experiments/storage/`."
    )
    out += ["", "Regenerate: `bash experiments/storage/run.sh`", ""]
    out.append(f"Machine: {cpu()}; files on {filesystem('/tmp')}; commit {commit}.")
    out.append("")
    out.append("## Durable writes, each group synced before the next")
    out.append("")
    out.append("| store | documents per group | documents | runs | documents/s, median | vs the log | "
               "seconds, median | bytes on disk per document |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for group in (16, 1):
        base = med(r["docs_per_s"] for r in writes[("log", group)]) if writes[("log", group)] else None
        for s in stores:
            rs = writes[(s, group)]
            if not rs:
                continue
            rate = med(r["docs_per_s"] for r in rs)
            ratio = f"{rate / base:.2f}x" if base else ""
            out.append(
                f"| {s} | {group} | {rs[0]['docs']:,} | {len(rs)} | {rate:,.0f} | {ratio} | "
                f"{med(r['seconds'] for r in rs):.2f} | {med(r['disk_bytes'] for r in rs) / rs[0]['docs']:,.0f} |"
            )
    out.append("")
    out.append("## Recovery's read: every record read back, checked and decoded")
    out.append("")
    out.append("| store | documents | page cache | runs | seconds, median | vs the log | peak RSS (MiB), median | "
               "bytes on disk per document |")
    out.append("|---|---:|---|---:|---:|---:|---:|---:|")
    for cache in ("warm", "cold"):
        base = med(r["seconds"] for r in reads[("log", cache)]) if reads[("log", cache)] else None
        for s in stores:
            rs = reads[(s, cache)]
            if not rs:
                continue
            secs = med(r["seconds"] for r in rs)
            ratio = f"{secs / base:.2f}x" if base else ""
            disk = built[s]["disk_bytes"] / built[s]["docs"] if s in built else float("nan")
            out.append(
                f"| {s} | {rs[0]['docs']:,} | {cache} | {len(rs)} | {secs:.2f} | {ratio} | "
                f"{med(r['peak_rss_mib'] for r in rs):,.0f} | {disk:,.0f} |"
            )
    out.append("")
    sums = {r["sum"] for r in rows if r["phase"] == "read"}
    same = "the same" if len(sums) == 1 else "DIFFERENT"
    out.append("The stores read from were written in groups of 1,000 documents. Cold: `sync` and "
               "`echo 3 > /proc/sys/vm/drop_caches` before the read (only as root). Each decoded document is "
               "folded into a sum and dropped, so the peak RSS is the reader's and the store's own (the index's "
               f"copy of the documents is the same whichever store they come from); every read gave {same} sum "
               "and sequence numbers 1 to n.")
    if lines:
        out += ["", "## Lines of durability code", ""]
        out.append("| choice | lines of Rust |")
        out.append("|---|---:|")
        out.append(f"| the index's log: `online/log.rs` and `online/storage.rs` without their tests | "
                   f"{lines['ours_log'] + lines['ours_storage']:,} |")
        out.append(f"| {lines['redb']} (its `src/`, tests included) | {lines['redb_lines']:,} |")
        out.append(f"| {lines['fjall']} and {lines['lsm_tree']} (their `src/`) | "
                   f"{lines['fjall_lines'] + lines['lsm_tree_lines']:,} |")
        out.append("")
        out.append("Beside either, the index keeps its own writer (group commit, rollback, snapshots of the "
                   "in-memory state, recovery's replay): about 560 lines in `online/mod.rs` today, most of which "
                   "a store would not remove (see the guide's serve chapter).")
    print("\n".join(out))


main()
