//! The state the index's handles and its writer thread share, what recovery found, the counters and statistics,
//! and the jobs the handles queue for the writer.

use crate::api::{DeleteResponse, DocResult, Duplicate, InsertMode};
use crate::errors::WriteError;
use crate::options::OnlineOptions;
use crate::params::{Built, IndexParams};
use crate::storage::Storage;
use crate::store::Store;
use lshbench_core::sets::SplitSet;
use serde::Serialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};

/// What recovery did when the index was opened.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recovery {
    /// Documents in the index after recovery.
    pub documents: u64,
    /// The snapshot loaded (its sequence number), if any.
    pub snapshot_seq: Option<u64>,
    /// Log segments read.
    pub segments: u64,
    /// Group commits replayed from the log.
    pub groups: u64,
    /// Bytes cut off the last segment: a torn or unacknowledged tail.
    pub cut_bytes: u64,
    /// The files the cut bytes were kept in (`<segment>.torn`, then `.torn.1`, ...).
    pub torn_files: Vec<PathBuf>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Counts since the index was opened.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) checked: AtomicU64,
    pub(crate) inserted: AtomicU64,
    pub(crate) queried: AtomicU64,
    pub(crate) deleted: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) groups: AtomicU64,
    pub(crate) group_ops: AtomicU64,
    pub(crate) refused: AtomicU64,
    /// Candidate pairs verified on the clients' threads ([`precheck`]) and on the writer's.
    pub(crate) verified_before: AtomicU64,
    pub(crate) verified_by_writer: AtomicU64,
}

/// The index's state as `GET /v1/stats` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// Documents readers see (durable, not deleted).
    pub documents: u64,
    /// The last durable sequence number.
    pub durable_seq: u64,
    /// Bytes of memory the index holds (tables at their capacity, signatures, ids, compressed texts, and the
    /// writes queued for the writer).
    pub memory_bytes: u64,
    /// `memory_bytes` per document (0 when empty).
    pub memory_bytes_per_document: f64,
    /// The process's resident memory (Linux), bytes.
    pub resident_bytes: Option<u64>,
    /// The memory limit, if any.
    pub memory_limit: Option<u64>,
    /// Bytes of the index directory's files.
    pub disk_bytes: u64,
    /// `disk_bytes` per document (0 when empty).
    pub disk_bytes_per_document: f64,
    /// Bytes of log segments.
    pub log_bytes: u64,
    /// The newest snapshot's sequence number and size, if any.
    pub snapshot: Option<(u64, u64)>,
    /// Documents checked, inserted, queried, deleted; near-duplicates reported; writes refused.
    pub counts: serde_json::Value,
    /// Group commits (log syncs) since the index was opened.
    pub group_commits: u64,
    /// Writes (insertions and deletions) those groups carried: their ratio is the mean group size.
    pub group_writes: u64,
    /// Whether writes are refused until a restart.
    pub poisoned: Option<String>,
    /// The fixed parameters.
    pub params: IndexParams,
    /// The similarity and the probability that a pair at that similarity is found, every 0.01: the banding's
    /// S-curve (at the slot agreement of b-bit slots when `bits` < 32).
    pub scurve: Vec<(f64, f64)>,
    /// What recovery did at the last start.
    pub recovery: Recovery,
}

pub(crate) type Reply = Box<dyn FnOnce(Result<Outcome, WriteError>) + Send>;

/// Submits a job through `submit`, which is given the reply callback, and waits for its answer (a writer that
/// stops without answering counts as closed).
pub(crate) fn wait(submit: impl FnOnce(Reply)) -> Result<Outcome, WriteError> {
    let (tx, rx) = mpsc::sync_channel(1);
    submit(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv().unwrap_or(Err(WriteError::Closed))
}

/// What a write job answers.
#[derive(Debug)]
pub enum Outcome {
    /// One result per document of a check or insert.
    Docs(Vec<DocResult>),
    /// The answer of a delete.
    Deleted(DeleteResponse),
}

/// A document signed and ready for the writer.
pub(crate) struct Prepared {
    pub(crate) id: String,
    pub(crate) empty: bool,
    pub(crate) signature: Vec<u32>,
    pub(crate) text: Option<Arc<[u8]>>,
    pub(crate) set: Option<SplitSet>,
    /// Candidates already verified ([`precheck`]), by slot and sequence number: the duplicate or `None`.
    pub(crate) checked: rustc_hash::FxHashMap<(u32, u64), Option<Duplicate>>,
}

pub(crate) enum Op {
    Put {
        doc: Prepared,
        query: bool,
        mode: InsertMode,
    },
    Delete(String),
}

pub(crate) struct Job {
    pub(crate) ops: Vec<Op>,
    pub(crate) reply: Reply,
}

pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) params: IndexParams,
    pub(crate) built: Built,
    pub(crate) store: RwLock<Store>,
    /// The last durable sequence number; changed only under the store's write lock.
    pub(crate) durable: AtomicU64,
    /// Documents readers see; changed with `durable`.
    pub(crate) visible: AtomicU64,
    pub(crate) options: OnlineOptions,
    pub(crate) counters: Counters,
    pub(crate) poisoned: Mutex<Option<String>>,
    pub(crate) recovery: Recovery,
    /// The newest snapshot (seq, bytes).
    pub(crate) snapshot: Mutex<Option<(u64, u64)>>,
    pub(crate) cancel_snapshot: AtomicBool,
    /// Bytes of the jobs queued for the writer ([`job_memory`]).
    pub(crate) queued: AtomicU64,
    /// Held for the index's lifetime: the advisory lock that keeps a second process out.
    pub(crate) _lock: File,
}

/// Bytes of the index directory's files, and of its log segments.
pub(crate) fn dir_bytes(storage: &dyn Storage, dir: &Path) -> (u64, u64) {
    let (mut all, mut logs) = (0, 0);
    for name in storage.list(dir).unwrap_or_default() {
        if let Ok(len) = storage.len(&dir.join(&name)) {
            all += len;
            if name.ends_with(".wal") {
                logs += len;
            }
        }
    }
    (all, logs)
}

/// The process's resident set size from `/proc/self/status` (Linux), in bytes.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
