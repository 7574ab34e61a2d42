#!/usr/bin/env bash
# The durability work of `lshbench serve` on its own log, on redb and on fjall, side by side in one run:
#   - durable writes, each group synced before the next: groups of 16 documents (the writer's group commit under
#     16 clients) and of 1 (one client);
#   - recovery's read: 1,000,000 documents read back, checked and decoded, from the page cache and after
#     dropping it (when this runs as root);
#   - the lines of durability code each choice brings.
# Stores are interleaved within each repeat; medians of REPEATS. Writes results/serve/storage.md and
# results/serve/storage.jsonl.
#
#   bash experiments/storage/run.sh                      # about 10 minutes on 2 cores
#   WRITE_DOCS=20000 READ_DOCS=100000 REPEATS=1 bash experiments/storage/run.sh   # a quick look
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${WORK:-/tmp/lshbench-storage}
write_docs=${WRITE_DOCS:-100000}
single_docs=${SINGLE_DOCS:-20000}
read_docs=${READ_DOCS:-1000000}
repeats=${REPEATS:-3}
out=${OUT:-$root/results/serve}

(cd "$here" && cargo build --release --locked --quiet)
bin=$here/target/release/storage-compare
rm -rf "$work"
mkdir -p "$work" "$out"
raw=$work/raw.jsonl
: >"$raw"

can_drop=0
if [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; fi

for store in log redb fjall; do
    echo "building the $read_docs-document $store for the reads" >&2
    "$bin" write --store "$store" --dir "$work/read-$store" --docs "$read_docs" --group 1000 >>"$raw"
done
for rep in $(seq 1 "$repeats"); do
    for store in log redb fjall; do
        echo "repeat $rep: $store" >&2
        for group in 16 1; do
            docs=$write_docs
            [ "$group" = 1 ] && docs=$single_docs
            rm -rf "$work/w-$store"
            "$bin" write --store "$store" --dir "$work/w-$store" --docs "$docs" --group "$group" >>"$raw"
        done
        rm -rf "$work/w-$store"
    done
done
sync
for rep in $(seq 1 "$repeats"); do
    for store in log redb fjall; do
        echo "repeat $rep: reading the $store" >&2
        # Warm: a first read brings the files into the page cache, the second is timed.
        "$bin" read --store "$store" --dir "$work/read-$store" >/dev/null
        "$bin" read --store "$store" --dir "$work/read-$store" | sed 's/^{/{"cache":"warm",/' >>"$raw"
        if [ "$can_drop" = 1 ]; then
            sync
            echo 3 >/proc/sys/vm/drop_caches
            "$bin" read --store "$store" --dir "$work/read-$store" | sed 's/^{/{"cache":"cold",/' >>"$raw"
        fi
    done
done

# Lines of Rust in the durability code each choice brings: ours (without tests), and each store's crates.
registry=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ | head -1)
count() { find "$@" -name '*.rs' -print0 | xargs -0 cat | wc -l; }
ours_log=$(sed '/^#\[cfg(test)\]/,$d' "$root/crates/online/src/log.rs" | wc -l)
ours_storage=$(sed '/^#\[cfg(test)\]/,$d' "$root/crates/online/src/storage.rs" | wc -l)
redb_dir=$(ls -d "$registry"redb-[0-9]* | sort -V | tail -1)
fjall_dir=$(ls -d "$registry"fjall-[0-9]* | sort -V | tail -1)
lsm_dir=$(ls -d "$registry"lsm-tree-[0-9]* | sort -V | tail -1)
printf '{"phase":"lines","ours_log":%s,"ours_storage":%s,"redb":"%s","redb_lines":%s,"fjall":"%s","fjall_lines":%s,"lsm_tree":"%s","lsm_tree_lines":%s}\n' \
    "$ours_log" "$ours_storage" "$(basename "$redb_dir")" "$(count "$redb_dir/src")" \
    "$(basename "$fjall_dir")" "$(count "$fjall_dir/src")" "$(basename "$lsm_dir")" "$(count "$lsm_dir/src")" >>"$raw"

cp "$raw" "$out/storage.jsonl"
python3 "$here/summarize.py" "$out/storage.jsonl" "$root" >"$out/storage.md"
echo "wrote $out/storage.md" >&2
