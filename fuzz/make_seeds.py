#!/usr/bin/env python3
"""Writes the seed corpora, fuzz/seeds/<target>/: small valid inputs of each target's format, so the fuzzer starts
from inputs that get past the first checks. Run from the repository root after `cargo build --release` (or with LSHBENCH_BIN naming a current build):
    python3 fuzz/make_seeds.py
It uses the standard library, and the release CLI for the files only lshbench writes (a state file; Parquet
signatures, pairs and clusters). Each seed starts with the bytes the target reads as its options (see the
target's docs)."""
import gzip
import os
import subprocess
import tempfile

LSHBENCH = os.environ.get("LSHBENCH_BIN", "target/release/lshbench")


def put(target, name, data):
    os.makedirs(f"fuzz/seeds/{target}", exist_ok=True)
    with open(f"fuzz/seeds/{target}/{name}", "wb") as f:
        f.write(data)


JSONL = (b'{"id":"a","text":"first doc"}\n{"text":"no id","other":[1,{"x":2}]}\n\n'
         b'{"id":42,"text":"numeric \\"id\\" \\u00e9"}\r\n{"a":7,"b":"custom fields"}\n{"id":"d","text":""}')
TEXT = b"first line\nsecond line\r\n\ncaf\xc3\xa9 cr\xc3\xa8me\nbad \xff byte\nlast without newline"
CSV = b'id,text,a,b\n1,plain,x,y\n2,"quoted, with comma",x,y\n3,"multi\nline ""quote""",x,y\n4,short\n"5","","",\xff\n'
TSV = b"\xef\xbb\xbfid\ttext\n1\tone\n2\t\"two\ttabs\"\n3\tthree\textra\n"

# Reader targets: first byte = options (bit 0 fail, 1 strict, 2/3 JSONL fields a/b, 4/5 CSV columns a/b, 6 TSV).
put("reader_jsonl", "default", b"\0" + JSONL)
put("reader_jsonl", "strict_fail_ab", bytes([1 | 2 | 4 | 8]) + JSONL)
put("reader_jsonl", "bad_lines", b"\0" + b'{"id":1,"text":2}\nnot json\n{"text":"x"\n[1,2]\n{}\n')
put("reader_text", "default", b"\0" + TEXT)
put("reader_text", "strict", b"\2" + TEXT)
put("reader_csv", "csv", b"\0" + CSV)
put("reader_csv", "csv_ab", bytes([16 | 32]) + CSV)
put("reader_csv", "tsv", bytes([64]) + TSV)
put("reader_csv", "unterminated", b"\1" + b'id,text\n1,"never closed\n2,x\n')
# reader_gzip: [mode, options, split, body...]; mode bit 0: compress in the target, bit 1: JSONL, bit 2: two members.
gz = lambda b: gzip.compress(b, mtime=0)
put("reader_gzip", "raw_text", bytes([0, 0]) + gz(TEXT))
put("reader_gzip", "raw_jsonl", bytes([2, 0]) + gz(JSONL))
put("reader_gzip", "raw_two_members", bytes([0, 0]) + gz(TEXT[:20]) + gz(TEXT[20:]))
put("reader_gzip", "compress_text", bytes([1 | 4 | 0x60, 0, 100]) + TEXT)
put("reader_gzip", "compress_jsonl", bytes([1 | 2, 0, 0]) + JSONL)


# reader_dir: [options] then entries [name length][name][content length, u16 LE][content]; name bytes map to a..p
# (b % 17 < 16) or '/' (b % 17 == 16).
def entry(name, content):
    return bytes([len(name)]) + bytes(name) + len(content).to_bytes(2, "little") + content


tree = entry(b"abc", b"first file") + entry([1, 16, 2, 3], b"in a subdirectory\n") \
    + entry([1, 16, 0], b"sorted before it") + entry(b"zz", b"bad \xff utf-8")
put("reader_dir", "tree", b"\0" + tree)
put("reader_dir", "tree_strict", b"\2" + tree)
# experiment_config: [mode (bit 0 quick)] then the TOML: the shipped configs.
for name in ["theory", "accuracy", "scurve", "recall", "throughput", "faults", "all"]:
    with open(f"experiments/{name}.toml", "rb") as f:
        put("experiment_config", name, b"\1" + f.read())
# shingle: [kind, n, normalisation and seed, k] then the text.
put("shingle", "ascii_char5", bytes([0, 4, 0, 16]) + b"the quick brown fox jumps over the lazy dog")
put("shingle", "unicode_char3", bytes([0, 2, 1, 7]) + "caf\u00e9 cr\u00e8me \u4e2d\u6587\u6587".encode())
put("shingle", "byte9_norm", bytes([1, 8, 7, 39]) + b"Hello,  World!\tHELLO world?? 0123456789abcdef")
put("shingle", "word2", bytes([2, 1, 2, 1]) + b"a b  c\nd e f g")
put("shingle", "stopword", bytes([3, 1, 0, 5]) + b"the cat and the hat of the bat to a mat")
# kernels: [k - 1 (u16 LE), seed, rotation] then the ids, 8 bytes each.
ids = b"".join(((i * 0x9E3779B97F4A7C15) % 2**64).to_bytes(8, "little") for i in range(40))
put("kernels", "k128", bytes([127, 0, 3, 5]) + ids)
put("kernels", "k1", bytes([0, 0, 9, 0]) + ids[:24])
put("kernels", "k257_empty", bytes([0, 1, 1, 0]))
put("kernels", "k64_consecutive", bytes([63, 0, 0, 1]) + b"".join(i.to_bytes(8, "little") for i in range(300)))

# spill: [mode, split (u16 LE), records..., damage...]; mode bits 0-1: u64 / (u64, u32) records / record file /
# record file in memory, bits 2-3: damage none / replace / edit / reseal, bit 4: sorter dedups, bits 5-7: run cap - 1.
u64s = b"".join(((i * 0x9E3779B97F4A7C15 >> 3) % 7).to_bytes(8, "little") for i in range(20))
pairs = b"".join((i % 5).to_bytes(8, "little") + (i * 3).to_bytes(4, "little") for i in range(10))
recs = b"".join(bytes([len(r)]) + r for r in [b"hello", b"", b"world!", bytes(range(40)), b"x" * 9])
spill = lambda mode, records, tail=b"": bytes([mode]) + len(records).to_bytes(2, "little") + records + tail
put("spill", "u64_roundtrip_dedup", spill(0 | 16 | (2 << 5), u64s))
put("spill", "pairs_roundtrip", spill(1 | (7 << 5), pairs))
put("spill", "u64_edit", spill(0 | (2 << 2), u64s, bytes([5, 0, 1, 0x80, 0, 0xFF, 3])))
put("spill", "pairs_reseal", spill(1 | (3 << 2), pairs, b"arbitrary bytes behind a correct trailer"))
put("spill", "u64_replace", spill(0 | (1 << 2), u64s[:16], u64s[:16] + (2).to_bytes(8, "little") + bytes(8)))
put("spill", "records_roundtrip", spill(2, recs))
put("spill", "records_edit", spill(2 | (2 << 2), recs, bytes([7, 0, 4, 2, 0, 1, 9])))
put("spill", "records_reseal", spill(2 | (3 << 2), recs, b"new bytes"))
put("spill", "records_in_memory", spill(3 | (1 << 2), recs, b"ignored: nothing on disk"))

# From the CLI: a state file, and Parquet signatures, pairs and clusters.
with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "c.jsonl")
    with open(corpus, "wb") as f:
        f.write(b'{"id":"a","text":"the quick brown fox jumps over the lazy dog"}\n'
                b'{"id":"b","text":"the quick brown fox jumps over the lazy dog!"}\n'
                b'{"id":"caf\xc3\xa9","text":"something else entirely"}\n{"id":"e","text":""}\n')
    run = lambda *a: subprocess.run([LSHBENCH, *a], check=True, capture_output=True)
    state = os.path.join(tmp, "s.state")
    run("dedup", "--input", corpus, "--num-perm", "4", "--bands", "2", "--rows", "2", "--save", state,
        "--pairs", os.path.join(tmp, "pairs.parquet"), "--clusters", os.path.join(tmp, "clusters.parquet"))
    run("sketch", "--input", corpus, "--num-perm", "3", "--output", os.path.join(tmp, "sigs.parquet"))
    with open(state, "rb") as f:
        data = f.read()
    # state_load: [mode] then the file (mode 0) or the body between the magic bytes and the checksum (mode 1).
    put("state_load", "file", b"\0" + data)
    put("state_load", "body", b"\1" + data[16:-8])
    # reader_parquet: [options, columns (bits 0-1 text column of text/id/body/key, bit 2 id column on, bits 3-4
    # which)] then the file. These files have string columns `id`, `id_a`, `center`: read `id` as the text.
    for name in ["sigs", "pairs", "clusters"]:
        with open(os.path.join(tmp, name + ".parquet"), "rb") as f:
            put("reader_parquet", name, bytes([0, 1]) + f.read())
