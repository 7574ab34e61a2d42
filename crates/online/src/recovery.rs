//! Reading the index's files back at start: the newest snapshot, then every log record after it, group by
//! group, a torn tail cut off the last segment, everything banded once.

use crate::errors::OpenError;
use crate::log;
use crate::log::{DocRecord, Record, RecoveryError};
use crate::options::OnlineOptions;
use crate::params::{Built, IndexParams};
use crate::segment::Log;
use crate::shared::Recovery;
use crate::storage::Storage;
use crate::store::Store;
use std::io::{self};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Writes a tail about to be cut off `segment` to the first free name of `<segment>.torn`, `<segment>.torn.1`,
/// ..., synced with its directory; returns its path.
pub(crate) fn keep_torn_tail(
    storage: &dyn Storage,
    segment: &Path,
    tail: &[u8],
) -> io::Result<PathBuf> {
    let name = segment.file_name().unwrap_or_default().to_string_lossy();
    for n in 0u32.. {
        let path = segment.with_file_name(match n {
            0 => format!("{name}.torn"),
            n => format!("{name}.torn.{n}"),
        });
        let mut file = match storage.create_new(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        file.append(tail).and_then(|_| file.sync_all())?;
        storage.sync_dir(segment.parent().unwrap_or(Path::new(".")))?;
        return Ok(path);
    }
    unreachable!("some name is free")
}

pub(crate) type Recovered = (Store, Log, u64, Recovery, Option<(u64, u64)>);

/// Reads the index's files back: the newest snapshot, then every log record after it, group by group; cuts a
/// torn tail off the last segment; bands everything once. Returns the store, the log to append to, the next
/// sequence number, what was done, and the snapshot loaded.
pub(crate) fn recover(
    storage: &dyn Storage,
    dir: &Path,
    params: &IndexParams,
    built: &Built,
    options: &OnlineOptions,
) -> Result<Recovered, OpenError> {
    let k = params.num_perm;
    let (snapshots, mut segments) = index_files(storage, dir)?;
    let mut store = Store::unbanded(k, built.hasher.clone());
    let mut recovery = Recovery::default();
    let mut snapshot = None;
    let mut base = 0u64;
    if let Some((_, path)) = snapshots.last() {
        let seq = log::read_snapshot(storage, path, k, |d| {
            store.place(
                d.id.into(),
                d.seq,
                d.empty,
                &d.signature,
                d.text.map(Arc::from),
            );
        })?;
        base = seq;
        recovery.snapshot_seq = Some(seq);
        let bytes = storage.len(path).map_err(io_error(path))?;
        snapshot = Some((seq, bytes));
    }
    let covered = covered_segments(dir, &segments, base, snapshot)?;
    for (_, path) in segments.drain(..covered) {
        storage.remove(&path).map_err(io_error(&path))?;
        storage.sync_dir(dir).map_err(io_error(dir))?;
    }
    let mut last_seq = base;
    let mut damage: Option<String> = None;
    let count = segments.len();
    let mut keep: Option<(u64, PathBuf, u64)> = None;
    let mut total = 0u64;
    for (i, (first, path)) in segments.iter().enumerate() {
        if *first != last_seq + 1 {
            return Err(RecoveryError::Damaged {
                path: path.clone(),
                offset: 0,
                damage: format!(
                    "the log before it ends at sequence number {last_seq}, and this segment starts at {first}: \
                     the segment between them is missing"
                ),
            }
            .into());
        }
        let scan = log::read_segment(storage, path, k, *first, |r| {
            replay(&mut store, base, &mut damage, r)
        })?;
        if let Some(seq) = scan.last_seq {
            last_seq = seq;
        }
        if let Some(what) = damage.take() {
            return Err(RecoveryError::Damaged {
                path: path.clone(),
                offset: 0,
                damage: what,
            }
            .into());
        }
        recovery.segments += 1;
        recovery.groups += scan.groups;
        let last = i + 1 == count;
        if scan.committed_len == 0 && last {
            // Shorter than its header, even empty: the segment was being created, and holds nothing.
            recovery.cut_bytes += scan.tail_bytes;
            storage.remove(path).map_err(io_error(path))?;
            storage.sync_dir(dir).map_err(io_error(dir))?;
            continue;
        }
        if scan.tail_bytes > 0 || scan.committed_len == 0 {
            cut_torn_tail(storage, path, &scan, last, &mut recovery)?;
        }
        let len = scan.committed_len;
        total += len;
        if last {
            keep = Some((*first, path.clone(), len));
        }
    }
    store.band_all();
    recovery.documents = store.occupied as u64;
    let next_seq = last_seq + 1;
    let log = match keep {
        Some((first_seq, path, len)) => {
            let file = storage.open_append(&path).map_err(io_error(&path))?;
            Log {
                file,
                path,
                first_seq,
                len,
                total,
                since_snapshot: total,
                num_perm: k,
                faults: options.faults.clone(),
            }
        }
        None => Log::create_segment(storage, dir, k, next_seq, options.faults.clone(), total)
            .map_err(io_error(&dir.join(log::segment_name(next_seq))))?,
    };
    Ok((store, log, next_seq, recovery, snapshot))
}

/// The snapshots and log segments in `dir`, each with its first sequence number, oldest first; unfinished
/// temporary files are removed on the way.
pub(crate) fn index_files(
    storage: &dyn Storage,
    dir: &Path,
) -> Result<(SeqFiles, SeqFiles), OpenError> {
    let mut snapshots = Vec::new();
    let mut segments: Vec<(u64, PathBuf)> = Vec::new();
    for name in storage.list(dir).map_err(io_error(dir))? {
        let path = dir.join(&name);
        if name.ends_with(".tmp") {
            // An unfinished snapshot or params file: never renamed into place, so never part of the index.
            storage.remove(&path).map_err(io_error(&path))?;
        } else if let Some(seq) = log::parse_name(&name, "snapshot-", ".snap") {
            snapshots.push((seq, path));
        } else if let Some(seq) = log::parse_name(&name, "log-", ".wal") {
            segments.push((seq, path));
        }
    }
    snapshots.sort();
    segments.sort();
    Ok((snapshots, segments))
}

/// Files named by a sequence number, with their paths.
pub(crate) type SeqFiles = Vec<(u64, PathBuf)>;

/// An I/O error of recovery, naming the file.
pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> OpenError {
    let path = path.to_path_buf();
    move |cause| OpenError::Io { path, cause }
}

/// How many of the oldest segments the snapshot covers: the log goes on from the segment that starts right after
/// the snapshot (the first segment, without one); older segments are covered by the snapshot and were being
/// removed when the process stopped. A log that does not go on from the snapshot is damaged.
pub(crate) fn covered_segments(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    base: u64,
    snapshot: Option<(u64, u64)>,
) -> Result<usize, OpenError> {
    let start = segments.iter().position(|(first, _)| *first == base + 1);
    match start {
        Some(i) => Ok(i),
        None if segments.is_empty() && snapshot.is_none() => Ok(0),
        None => Err(RecoveryError::Damaged {
            path: dir.join(log::segment_name(base + 1)),
            offset: 0,
            damage: format!(
                "the log segment is missing: {}, and the log must go on from sequence number {}",
                match snapshot {
                    Some((seq, _)) => format!("the snapshot ends at sequence number {seq}"),
                    None => "there is no snapshot".to_string(),
                },
                base + 1
            ),
        }
        .into()),
    }
}

/// Applies one log record after the snapshot (`base`) to the store; the first inconsistency (an insert of an
/// id that was not deleted) goes to `damage`, and the rest of the segment is then only read.
pub(crate) fn replay(store: &mut Store, base: u64, damage: &mut Option<String>, r: Record) {
    match r {
        Record::Insert(DocRecord {
            seq,
            id,
            empty,
            signature,
            text,
        }) if seq > base => {
            if let Some(s) = store.slot_of(&id) {
                if damage.is_none() {
                    *damage = Some(format!(
                        "document `{id}` is inserted at sequence number {seq} while the one inserted at {} \
                         was not deleted",
                        store.slots[s as usize].seq
                    ));
                }
                return;
            }
            store.place(id.into(), seq, empty, &signature, text.map(Arc::from));
        }
        Record::Delete { seq, id } if seq > base => {
            if let Some(s) = store.slot_of(&id) {
                store.remove(s);
            }
        }
        _ => {}
    }
}

/// Cuts the bytes after a segment's last whole group commit: allowed only for the last segment's torn last
/// write; anything else is damage. The cut bytes are kept beside the segment first.
pub(crate) fn cut_torn_tail(
    storage: &dyn Storage,
    path: &Path,
    scan: &log::SegmentScan,
    last: bool,
    recovery: &mut Recovery,
) -> Result<(), OpenError> {
    let why = if !last {
        Some(" in a sealed segment".to_string())
    } else if scan.tail_bytes > log::MAX_WRITE_BYTES {
        Some(", more than one unfinished write can leave".to_string())
    } else {
        scan.later_commit.map(|at| {
            format!(
                ", followed by an intact commit record at byte {at}: later groups were written \
                     after these, so this is not a torn last write"
            )
        })
    };
    if let Some(why) = why {
        return Err(RecoveryError::Damaged {
            path: path.to_path_buf(),
            offset: scan.committed_len,
            damage: format!(
                "{} bytes that are not whole group commits{why}",
                scan.tail_bytes
            ),
        }
        .into());
    }
    recovery.cut_bytes += scan.tail_bytes;
    // Kept beside the segment before the cut: a tail that was in fact an acknowledged group damaged
    // at rest looks the same as a torn write, and must not be destroyed for good.
    let torn = keep_torn_tail(storage, path, &scan.tail).map_err(io_error(path))?;
    recovery.torn_files.push(torn);
    storage
        .open_append(path)
        .and_then(|mut f| f.set_len(scan.committed_len).and_then(|_| f.sync_all()))
        .map_err(io_error(path))?;
    Ok(())
}
