//! Writing a snapshot of the live documents, which lets the log segments it covers go.

use crate::log;
use crate::shared::Shared;
use crate::store::Slot;
use std::sync::atomic::Ordering;

/// Writes the snapshot of the documents live at `seq` (in sequence order), then removes older snapshots and the
/// segments it covers; returns its sequence number and size.
pub(crate) fn write_snapshot(sh: &Shared, seq: u64) -> Result<(u64, u64), String> {
    let dir = &sh.dir;
    let k = sh.params.num_perm;
    let final_path = dir.join(log::snapshot_name(seq));
    let tmp = dir.join(format!("{}.tmp", log::snapshot_name(seq)));
    let storage = &*sh.storage;
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        let _ = storage.remove(&tmp);
        format!("{what} {}: {e}", tmp.display())
    };
    let live_at = |s: &Slot| s.id.is_some() && s.seq <= seq && s.deleted > seq;
    let mut order: Vec<(u64, u32)> = {
        let store = sh.store.read().unwrap();
        store
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| live_at(s))
            .map(|(i, s)| (s.seq, i as u32))
            .collect()
    };
    order.sort_unstable();
    // A leftover of an earlier attempt at the same sequence number is this function's own file.
    let _ = storage.remove(&tmp);
    let file = storage.create_new(&tmp).map_err(|e| fail("creating", &e))?;
    let mut w = log::SnapshotWriter::new(file, k, seq).map_err(|e| fail("writing", &e))?;
    let mut buf = Vec::new();
    // Short chunks: the writer waits for each chunk's read lock.
    for chunk in order.chunks(1024) {
        if sh.cancel_snapshot.load(Ordering::Relaxed) {
            return Err(fail("cancelled (the index is closing)", &""));
        }
        buf.clear();
        let mut count = 0;
        {
            let store = sh.store.read().unwrap();
            for &(s_seq, s) in chunk {
                let slot = &store.slots[s as usize];
                // A slot removed since (its deletion came after `seq`) is skipped: the log after the snapshot
                // deletes it again, harmlessly.
                if slot.seq != s_seq || !live_at(slot) {
                    continue;
                }
                log::encode_insert(
                    &mut buf,
                    slot.seq,
                    slot.id.as_deref().expect("a live slot"),
                    slot.empty,
                    store.signature(s),
                    slot.text.as_deref(),
                );
                count += 1;
            }
        }
        w.records(&buf, count).map_err(|e| fail("writing", &e))?;
    }
    let bytes = w.finish().map_err(|e| fail("syncing", &e))?;
    storage
        .rename(&tmp, &final_path)
        .map_err(|e| fail("renaming", &e))?;
    storage
        .sync_dir(dir)
        .map_err(|e| format!("syncing {}: {e}", dir.display()))?;
    // Now older snapshots and the segments before `seq + 1` are covered.
    let mut names = storage.list(dir).unwrap_or_default();
    names.sort();
    for name in names {
        let old_snapshot = log::parse_name(&name, "snapshot-", ".snap").is_some_and(|s| s < seq);
        let old_segment = log::parse_name(&name, "log-", ".wal").is_some_and(|s| s <= seq);
        if old_snapshot || old_segment {
            let _ = storage.remove(&dir.join(name));
        }
    }
    let _ = storage.sync_dir(dir);
    *sh.snapshot.lock().unwrap() = Some((seq, bytes));
    Ok((seq, bytes))
}
