//! The durable online index: check each incoming document against everything seen before, insert it, and keep
//! the index across restarts and crashes. A plain library (threads and files, no async): the HTTP
//! service (`lshbench-server`, `lshbench serve`) is a thin layer on top, and any Rust program can use it alone.
//!
//! **Parameters** are fixed when the index is created ([`params`]): a document is signed, banded and verified
//! exactly as `lshbench dedup` with the same flags would (the same shingler, kernel, band keys and
//! verification), so checking a corpus in order reports exactly `dedup`'s pairs.
//!
//! **Durability.** Writes go to one writer thread through a queue. The writer takes everything queued, applies
//! it to the in-memory tables in arrival order, appends its records to the write-ahead log ([`log`]) with one
//! write, syncs the file (`fdatasync`), and only then answers: an answered write survives kill -9 and a power
//! cut. What arrived while one group was being synced is the next group (group commit), so one sync serves
//! many writers. Snapshots of the live documents replace old log segments once the log since the last one
//! outgrows it, which bounds both the disk and the recovery time to a constant factor of the live data.
//! Recovery loads the newest snapshot, replays the log after it group by group, cuts a torn tail off the last
//! segment, and bands every document once, the bands in parallel.
//!
//! **Concurrency.** A check (query, then insert) is atomic per document: the writer is the only one who
//! inserts, one document at a time, and its queries see every document it inserted before, durable or not. So
//! of two near-duplicates sent at once, exactly one is reported as the other's duplicate. Readers (query, get)
//! never wait for a sync: every document carries the sequence number of its insertion (and of its deletion),
//! and readers see exactly the documents whose insertion is durable and whose deletion is not. The writer holds
//! the table lock only while it changes the tables, never while it syncs.
//!
//! **Failures.** A write that fails (a full disk: [`WriteError::DiskFull`]) is rolled back in memory and cut off
//! the log, so the index stays as it was before the group; if even that fails, the index refuses writes until
//! it is restarted, and recovery then reads whatever is on disk. A sync that fails after its write went
//! through leaves the group's outcome unknown ([`WriteError::OutcomeUnknown`]): the group is undone in memory
//! but not cut, and the index refuses writes until a restart decides from the disk. Memory is bounded by
//! [`OnlineOptions::max_memory`]: a write that would start past it is refused.

#![warn(missing_docs)]

pub mod api;
pub mod log;
pub mod params;
pub mod storage;
mod store;

use api::{DeleteResponse, DocIn, DocResult, DocumentResponse, Duplicate, InsertMode, QueryDoc};
use log::{DocRecord, Record, RecoveryError};
use lshbench_core::dedup::{self, Verify};
use lshbench_core::pipeline;
use lshbench_core::sets::{self, SplitSet};
use params::{Built, IndexParams, ParamChoices, ParamsError};
use rustc_hash::FxHashSet;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use storage::{FsStorage, Storage, StorageFile};
use store::{LIVE, Slot, Store};

/// What an index does besides its parameters: limits, snapshot policy and test hooks. These may change
/// from one start to the next.
#[derive(Clone, Default)]
pub struct OnlineOptions {
    /// Writes are refused (with [`WriteError::MemoryFull`]) once the index's memory reaches this many bytes.
    pub max_memory: Option<u64>,
    /// A snapshot is taken once the log since the last one holds more than this many bytes and more than the
    /// last snapshot (default [`DEFAULT_SNAPSHOT_MIN_BYTES`] when 0).
    pub snapshot_min_bytes: u64,
    /// A check or query of several documents that have more candidates than this to verify, in all, is
    /// refused (default [`DEFAULT_MAX_CANDIDATES`] when 0). It bounds the work of one request, and the
    /// duplicates its answer can list; a request of one document is bounded by the bucket cap instead.
    pub max_candidates: u64,
    /// Writes waiting for the writer may hold this many bytes (documents signed, texts compressed); a write
    /// that would go past it is refused with [`WriteError::Busy`] (default [`DEFAULT_MAX_QUEUED_BYTES`] when
    /// 0). The queued bytes count towards [`OnlineOptions::max_memory`].
    pub max_queued_bytes: u64,
    /// The instruction set of shingling, signing and verifying (default: the widest this CPU runs). Every
    /// instruction set gives the same bits, so it may change between starts.
    pub isa: Option<lshbench_core::arch::Isa>,
    /// Where the log segments and snapshots live: the real file system (`None`), or another
    /// [`Storage`] (the tests' simulated one).
    pub storage: Option<Arc<dyn Storage>>,
    /// Fault injection, for tests.
    pub faults: Faults,
}

/// The default of [`OnlineOptions::snapshot_min_bytes`].
pub const DEFAULT_SNAPSHOT_MIN_BYTES: u64 = 64 << 20;
/// The default of [`OnlineOptions::max_candidates`].
pub const DEFAULT_MAX_CANDIDATES: u64 = 20_000;
/// The default of [`OnlineOptions::max_queued_bytes`].
pub const DEFAULT_MAX_QUEUED_BYTES: u64 = 256 << 20;

/// Faults the log can be told to suffer, so that tests of failure paths never depend on the machine (no
/// silently skipped test when a small file system cannot be mounted).
#[derive(Clone, Default)]
pub struct Faults {
    /// Log writes fail with "no space left on device" once the log files would hold more than this many
    /// bytes (the part that fits is written first, as a real full disk does).
    pub disk_full_after: Option<u64>,
    /// Called by the writer after a group's write and before its sync (a test holds the writer there).
    pub before_sync: Option<Arc<dyn Fn() + Send + Sync>>,
    /// While set, the log's sync fails with EIO after its write went through.
    pub fail_sync: Option<Arc<AtomicBool>>,
    /// The writer waits for each snapshot it starts, so that a test sees one order of file operations.
    pub wait_for_snapshots: bool,
}

/// Why an index could not be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The parameters are refused or contradict the index's.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The files could not be read back.
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    /// A file or directory could not be created, read or written.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        cause: io::Error,
    },
    /// Another process has the index open.
    #[error("{} is in use by another process (another lshbench serve?); only one may open an index", dir.display())]
    Locked {
        /// The index directory.
        dir: PathBuf,
    },
    /// `--create` on a directory that already holds something.
    #[error("{} already exists and is not empty: drop --create to open the index in it, or choose a new directory", dir.display())]
    Exists {
        /// The directory.
        dir: PathBuf,
    },
    /// Opening a directory that holds no index.
    #[error("{} holds no index ({} is missing): create one with --create", dir.display(), params::PARAMS_FILE)]
    Missing {
        /// The directory.
        dir: PathBuf,
    },
}

/// Why a write was refused. The index is unchanged by a refused write.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WriteError {
    /// The disk is full (ENOSPC or a quota): the group was rolled back in memory and cut off the log.
    #[error(
        "no space left on the index's disk ({0}): the write was rolled back and the index is unchanged"
    )]
    DiskFull(String),
    /// Another I/O error while writing the log; rolled back likewise.
    #[error("writing the log failed ({0}): the write was rolled back and the index is unchanged")]
    Io(String),
    /// The memory limit is reached.
    #[error(
        "the index is at its memory limit: {used} bytes in use for {documents} documents, limit {limit} \
         (--max-memory); delete documents or restart with a larger limit"
    )]
    MemoryFull {
        /// Bytes in use.
        used: u64,
        /// The limit.
        limit: u64,
        /// Documents in the index.
        documents: u64,
    },
    /// The group's records would take more bytes than one group commit may write
    /// ([`log::MAX_WRITE_BYTES`]: a torn tail is bounded by it); rolled back likewise.
    #[error(
        "the write's records take {bytes} bytes, over the {limit} bytes one log write may take: the write was \
         rolled back and the index is unchanged; send fewer or smaller documents at once"
    )]
    TooLarge {
        /// Bytes the group's records take.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The log's sync failed after its write went through: the group may or may not be durable. Readers keep
    /// seeing the index as it was before the group, and the index refuses writes until a restart decides from
    /// what is on disk (as PostgreSQL and SQLite stop after a failed fsync).
    #[error(
        "syncing the log failed ({0}): the write may or may not be durable; the index takes no writes until it \
         is restarted, and recovery then keeps the write if it reached the disk whole"
    )]
    OutcomeUnknown(String),
    /// A rollback itself failed: the index refuses writes until restarted (recovery reads the disk).
    #[error("the index refuses writes until it is restarted: {0}")]
    Poisoned(String),
    /// The index is closing.
    #[error("the index is shutting down")]
    Closed,
    /// The request's documents have too many candidates to verify (nothing was changed).
    #[error(
        "the request's documents have {candidates} or more candidates to verify (counted up to documents[{document}]), \
         over the limit of {limit} per request (--max-candidates): send fewer documents per request"
    )]
    TooManyCandidates {
        /// Candidates counted so far.
        candidates: u64,
        /// The limit.
        limit: u64,
        /// The document at which the count passed the limit.
        document: usize,
    },
    /// The writer's queue is full: retry later (nothing was changed).
    #[error(
        "the index's write queue is full ({queued} bytes waiting, limit {limit}, --max-queued-bytes): retry \
         in a moment"
    )]
    Busy {
        /// Bytes waiting.
        queued: u64,
        /// The limit.
        limit: u64,
    },
}

impl WriteError {
    /// The HTTP status of the error: 507 for a full disk or the memory limit, 503 when closing, poisoned or
    /// busy, 413 for a request with too many candidates or a group too large to write at once, 500 for other
    /// I/O errors and an unknown outcome.
    pub fn status(&self) -> u16 {
        match self {
            WriteError::DiskFull(_) | WriteError::MemoryFull { .. } => 507,
            WriteError::Poisoned(_) | WriteError::Closed | WriteError::Busy { .. } => 503,
            WriteError::Io(_) | WriteError::OutcomeUnknown(_) => 500,
            WriteError::TooManyCandidates { .. } | WriteError::TooLarge { .. } => 413,
        }
    }

    fn from_io(e: &io::Error) -> WriteError {
        if matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        ) {
            WriteError::DiskFull(e.to_string())
        } else {
            WriteError::Io(e.to_string())
        }
    }
}

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
struct Counters {
    checked: AtomicU64,
    inserted: AtomicU64,
    queried: AtomicU64,
    deleted: AtomicU64,
    duplicates: AtomicU64,
    groups: AtomicU64,
    group_ops: AtomicU64,
    refused: AtomicU64,
    /// Candidate pairs verified on the clients' threads ([`precheck`]) and on the writer's.
    verified_before: AtomicU64,
    verified_by_writer: AtomicU64,
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

type Reply = Box<dyn FnOnce(Result<Outcome, WriteError>) + Send>;

/// Submits a job through `submit`, which is given the reply callback, and waits for its answer (a writer that
/// stops without answering counts as closed).
fn wait(submit: impl FnOnce(Reply)) -> Result<Outcome, WriteError> {
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
struct Prepared {
    id: String,
    empty: bool,
    signature: Vec<u32>,
    text: Option<Arc<[u8]>>,
    set: Option<SplitSet>,
    /// Candidates already verified ([`precheck`]), by slot and sequence number: the duplicate or `None`.
    checked: rustc_hash::FxHashMap<(u32, u64), Option<Duplicate>>,
}

enum Op {
    Put {
        doc: Prepared,
        query: bool,
        mode: InsertMode,
    },
    Delete(String),
}

struct Job {
    ops: Vec<Op>,
    reply: Reply,
}

struct Shared {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    params: IndexParams,
    built: Built,
    store: RwLock<Store>,
    /// The last durable sequence number; changed only under the store's write lock.
    durable: AtomicU64,
    /// Documents readers see; changed with `durable`.
    visible: AtomicU64,
    options: OnlineOptions,
    counters: Counters,
    poisoned: Mutex<Option<String>>,
    recovery: Recovery,
    /// The newest snapshot (seq, bytes).
    snapshot: Mutex<Option<(u64, u64)>>,
    cancel_snapshot: AtomicBool,
    /// Bytes of the jobs queued for the writer ([`job_memory`]).
    queued: AtomicU64,
    /// Held for the index's lifetime: the advisory lock that keeps a second process out.
    _lock: File,
}

/// A durable online index. Cheap to share by reference across threads; dropped or [`OnlineIndex::close`]d,
/// it finishes the writes queued, syncs and stops its threads.
pub struct OnlineIndex {
    shared: Arc<Shared>,
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl OnlineIndex {
    /// Creates an index in `dir` (which must not exist or be empty) with `choices` (defaults for the rest),
    /// and opens it.
    pub fn create(
        dir: &Path,
        choices: &ParamChoices,
        options: OnlineOptions,
    ) -> Result<OnlineIndex, OpenError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| OpenError::Io { path, cause }
        };
        let params = choices.create()?;
        if dir.exists() {
            let mut entries = std::fs::read_dir(dir).map_err(io_err(dir))?;
            if entries.next().is_some() {
                return Err(OpenError::Exists {
                    dir: dir.to_path_buf(),
                });
            }
        }
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(params::PARAMS_FILE);
        let json = serde_json::to_string_pretty(&params).expect("parameters serialise") + "\n";
        let tmp = dir.join("params.json.tmp");
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(json.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
        log::sync_dir(dir).map_err(io_err(dir))?;
        // The parent too, so the directory itself survives a power cut.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            log::sync_dir(parent).map_err(io_err(parent))?;
        }
        OnlineIndex::open(dir, &ParamChoices::default(), options)
    }

    /// Opens the index in `dir`: checks `choices` against its parameters, recovers its documents and starts
    /// the writer.
    pub fn open(
        dir: &Path,
        choices: &ParamChoices,
        options: OnlineOptions,
    ) -> Result<OnlineIndex, OpenError> {
        let t0 = Instant::now();
        if !dir.join(params::PARAMS_FILE).exists() {
            return Err(OpenError::Missing {
                dir: dir.to_path_buf(),
            });
        }
        let lock_path = dir.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|cause| OpenError::Io {
                path: lock_path.clone(),
                cause,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OpenError::Locked {
                    dir: dir.to_path_buf(),
                });
            }
            Err(std::fs::TryLockError::Error(cause)) => {
                return Err(OpenError::Io {
                    path: lock_path,
                    cause,
                });
            }
        }
        let params = IndexParams::load(dir)?;
        choices.resolve(&params, dir)?;
        let built = params.build(&dir.join(params::PARAMS_FILE), options.isa)?;
        let storage = options
            .storage
            .clone()
            .unwrap_or_else(|| Arc::new(FsStorage));
        let (store, log, next_seq, recovery, snapshot) =
            recover(&*storage, dir, &params, &built, &options)?;
        let mut recovery = recovery;
        recovery.seconds = t0.elapsed().as_secs_f64();
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            storage,
            params,
            built,
            store: RwLock::new(store),
            durable: AtomicU64::new(next_seq - 1),
            visible: AtomicU64::new(recovery.documents),
            options,
            counters: Counters::default(),
            poisoned: Mutex::new(None),
            recovery,
            snapshot: Mutex::new(snapshot),
            cancel_snapshot: AtomicBool::new(false),
            queued: AtomicU64::new(0),
            _lock: lock,
        });
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            shared: shared.clone(),
            rx,
            log,
            next_seq,
            buf: Vec::new(),
            keys: Vec::new(),
            snapshot_thread: None,
        };
        let handle = std::thread::Builder::new()
            .name("lshbench-writer".into())
            .spawn(move || writer.run())
            .map_err(|cause| OpenError::Io {
                path: dir.to_path_buf(),
                cause,
            })?;
        Ok(OnlineIndex {
            shared,
            sender: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
        })
    }

    /// The index's fixed parameters.
    pub fn params(&self) -> &IndexParams {
        &self.shared.params
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// What recovery did when the index was opened.
    pub fn recovery(&self) -> &Recovery {
        &self.shared.recovery
    }

    /// Signs `text` (and builds its verification set when `with_set` and verification is exact).
    fn prepare(&self, id: String, text: &str, with_set: bool) -> Prepared {
        let b = &self.shared.built;
        let mut signature = vec![0u32; b.kernel.num_perm()];
        let empty = pipeline::sign_text(b.kernel.as_ref(), &b.shingler, text, &mut signature);
        let set = (with_set && !empty && b.verify == Verify::Exact)
            .then(|| sets::verification_split_set(&b.shingler, text));
        let text = self
            .shared
            .params
            .keep_texts
            .then(|| Arc::from(store::compress(text)));
        Prepared {
            id,
            empty,
            signature,
            text,
            set,
            checked: Default::default(),
        }
    }

    fn submit(&self, ops: Vec<Op>, reply: Reply) {
        let sh = &self.shared;
        let job = Job { ops, reply };
        let bytes = job_memory(&job);
        let limit = match sh.options.max_queued_bytes {
            0 => DEFAULT_MAX_QUEUED_BYTES,
            n => n,
        };
        // One job alone is always taken, whatever its size (the request limits bound it).
        let queued = sh.queued.fetch_add(bytes, Ordering::AcqRel);
        if queued > 0 && queued + bytes > limit {
            sh.queued.fetch_sub(bytes, Ordering::AcqRel);
            sh.counters.refused.fetch_add(1, Ordering::Relaxed);
            return (job.reply)(Err(WriteError::Busy { queued, limit }));
        }
        let sender = self.sender.lock().unwrap();
        let unsent = match sender.as_ref() {
            Some(tx) => tx.send(job).err().map(|mpsc::SendError(job)| job),
            None => Some(job),
        };
        if let Some(job) = unsent {
            sh.queued.fetch_sub(bytes, Ordering::AcqRel);
            (job.reply)(Err(WriteError::Closed));
        }
    }

    /// Checks `docs` in order (each queried, then inserted as `mode` says) and calls `reply` once they are
    /// durable, with one result per document, or with the reason the whole batch was refused. Signing runs on
    /// the calling thread; `reply` runs on the writer's.
    pub fn submit_check(
        &self,
        docs: Vec<DocIn>,
        mode: InsertMode,
        reply: impl FnOnce(Result<Outcome, WriteError>) + Send + 'static,
    ) {
        self.submit_puts(docs, true, mode, Box::new(reply));
    }

    /// Inserts `docs` in order without looking for their near-duplicates; `reply` as [`OnlineIndex::submit_check`].
    pub fn submit_insert(
        &self,
        docs: Vec<DocIn>,
        reply: impl FnOnce(Result<Outcome, WriteError>) + Send + 'static,
    ) {
        self.submit_puts(docs, false, InsertMode::Always, Box::new(reply));
    }

    /// One write job of `docs`, each looked up first when `query` (and only then with its verification set).
    fn submit_puts(&self, docs: Vec<DocIn>, query: bool, mode: InsertMode, reply: Reply) {
        let mut prepared: Vec<Prepared> = docs
            .into_iter()
            .map(|d| self.prepare(d.id, &d.text, query))
            .collect();
        if query {
            if let Err(e) = self.within_budget(&prepared, mode != InsertMode::Never) {
                return reply(Err(e));
            }
            let mut keys = Vec::new();
            for p in prepared.iter_mut().filter(|p| p.set.is_some()) {
                precheck(&self.shared, p, &mut keys);
            }
        }
        let ops = prepared
            .into_iter()
            .map(|doc| Op::Put { doc, query, mode })
            .collect();
        self.submit(ops, reply);
    }

    /// Deletes the document `id`; `reply` once the deletion is durable.
    pub fn submit_delete(
        &self,
        id: String,
        reply: impl FnOnce(Result<Outcome, WriteError>) + Send + 'static,
    ) {
        self.submit(vec![Op::Delete(id)], Box::new(reply));
    }

    /// [`OnlineIndex::submit_check`], waiting for the answer.
    pub fn check(&self, docs: Vec<DocIn>, mode: InsertMode) -> Result<Vec<DocResult>, WriteError> {
        match wait(|reply| self.submit_check(docs, mode, reply))? {
            Outcome::Docs(d) => Ok(d),
            Outcome::Deleted(_) => unreachable!("a check answers with documents"),
        }
    }

    /// [`OnlineIndex::submit_insert`], waiting for the answer.
    pub fn insert(&self, docs: Vec<DocIn>) -> Result<Vec<DocResult>, WriteError> {
        match wait(|reply| self.submit_insert(docs, reply))? {
            Outcome::Docs(d) => Ok(d),
            Outcome::Deleted(_) => unreachable!("an insert answers with documents"),
        }
    }

    /// [`OnlineIndex::submit_delete`], waiting for the answer.
    pub fn delete(&self, id: &str) -> Result<DeleteResponse, WriteError> {
        match wait(|reply| self.submit_delete(id.to_string(), reply))? {
            Outcome::Deleted(d) => Ok(d),
            Outcome::Docs(_) => unreachable!("a delete answers with a deletion"),
        }
    }

    /// The near-duplicates of each document among the durable ones, without inserting anything. Never waits
    /// for a sync.
    pub fn query(&self, docs: &[QueryDoc]) -> Result<Vec<DocResult>, WriteError> {
        let prepared: Vec<Prepared> = docs
            .iter()
            .map(|d| self.prepare(d.id.clone().unwrap_or_default(), &d.text, true))
            .collect();
        self.within_budget(&prepared, false)?;
        let mut keys = Vec::new();
        let out = docs
            .iter()
            .zip(&prepared)
            .map(|(d, p)| {
                // A document given with the id of a stored one is never its own duplicate; the stored
                // document itself gets the answer its check got.
                let view = match d.id.as_ref().map(|_| {
                    let store = self.shared.store.read().unwrap();
                    let durable = self.shared.durable.load(Ordering::Acquire);
                    stored(&store, p, Visibility::Durable, durable)
                }) {
                    Some(Stored::Same { slot, seq }) => {
                        View::before(Visibility::Durable, slot, seq)
                    }
                    Some(Stored::Other { slot }) => View::except(Visibility::Durable, slot),
                    _ => View::all(Visibility::Durable),
                };
                let (duplicates, unchecked) = if p.empty {
                    (Vec::new(), 0)
                } else {
                    find(&self.shared, p, view, &mut keys)
                };
                DocResult {
                    id: d.id.clone(),
                    duplicates,
                    unchecked,
                    empty: p.empty,
                    inserted: None,
                    seq: None,
                    reason: None,
                }
            })
            .collect();
        self.shared
            .counters
            .queried
            .fetch_add(docs.len() as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// Refuses a batch whose documents have more candidates to verify than [`OnlineOptions::max_candidates`]:
    /// each document's among the documents in the index and, when the batch inserts (`inserts`), among the
    /// batch's earlier documents. Counting walks the buckets only; nothing is decompressed or verified.
    fn within_budget(&self, docs: &[Prepared], inserts: bool) -> Result<(), WriteError> {
        let sh = &self.shared;
        if docs.len() <= 1 {
            // One document's work is bounded by the bucket cap; refusing it would leave a client no way on.
            return Ok(());
        }
        let limit = match sh.options.max_candidates {
            0 => DEFAULT_MAX_CANDIDATES,
            n => n,
        };
        let mut keys = Vec::new();
        let mut total = 0u64;
        // (band, key) -> the batch's earlier documents in that bucket.
        let mut batch: rustc_hash::FxHashMap<(usize, u64), Vec<u32>> = Default::default();
        let mut earlier = FxHashSet::default();
        for (i, d) in docs.iter().enumerate() {
            if d.empty {
                continue;
            }
            let found = {
                let store = sh.store.read().unwrap();
                store
                    .candidates(
                        &d.signature,
                        sh.params.bucket_cap,
                        |s| Visibility::Writer.sees(s, 0),
                        &mut keys,
                    )
                    .0
                    .len() as u64
            };
            total += found;
            if inserts {
                earlier.clear();
                for (band, key) in keys.iter().enumerate() {
                    let members = batch.entry((band, *key)).or_default();
                    earlier.extend(members.iter().copied());
                    members.push(i as u32);
                }
                total += earlier.len() as u64;
            }
            if total > limit {
                sh.counters.refused.fetch_add(1, Ordering::Relaxed);
                return Err(WriteError::TooManyCandidates {
                    candidates: total,
                    limit,
                    document: i,
                });
            }
        }
        Ok(())
    }

    /// The durable document `id`, with its text when texts are kept.
    pub fn get(&self, id: &str) -> Option<DocumentResponse> {
        let store = self.shared.store.read().unwrap();
        let durable = self.shared.durable.load(Ordering::Acquire);
        let s = store.slot_of(id)?;
        let slot = &store.slots[s as usize];
        if !Visibility::Durable.sees(slot, durable) {
            return None;
        }
        let text = slot.text.clone();
        let (seq, empty) = (slot.seq, slot.empty);
        drop(store);
        Some(DocumentResponse {
            id: id.to_string(),
            seq,
            empty,
            text: text
                .map(|t| store::decompress(&t).unwrap_or_else(|e| format!("<damaged text: {e}>"))),
        })
    }

    /// Documents readers see.
    pub fn len(&self) -> u64 {
        self.shared.visible.load(Ordering::Acquire)
    }

    /// Whether readers see no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Why writes are refused until a restart, if they are: [`Stats::poisoned`] without the rest of the
    /// statistics (no scan of the directory), for health checks.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poisoned.lock().unwrap().clone()
    }

    /// The index's state and counts.
    pub fn stats(&self) -> Stats {
        let sh = &self.shared;
        let (documents, memory, durable) = {
            let store = sh.store.read().unwrap();
            let durable = sh.durable.load(Ordering::Acquire);
            (
                sh.visible.load(Ordering::Acquire),
                store.memory_bytes() as u64 + sh.queued.load(Ordering::Acquire),
                durable,
            )
        };
        let (disk, log_bytes) = dir_bytes(&*sh.storage, &sh.dir);
        let per = |x: u64| {
            if documents == 0 {
                0.0
            } else {
                x as f64 / documents as f64
            }
        };
        let c = &sh.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let choice = sh.built.choice;
        Stats {
            documents,
            durable_seq: durable,
            memory_bytes: memory,
            memory_bytes_per_document: per(memory),
            resident_bytes: resident_bytes(),
            memory_limit: sh.options.max_memory,
            disk_bytes: disk,
            disk_bytes_per_document: per(disk),
            log_bytes,
            snapshot: *sh.snapshot.lock().unwrap(),
            counts: serde_json::json!({
                "checked": get(&c.checked),
                "inserted": get(&c.inserted),
                "queried": get(&c.queried),
                "deleted": get(&c.deleted),
                "duplicates_reported": get(&c.duplicates),
                "writes_refused": get(&c.refused),
                "pairs_verified_before_the_writer": get(&c.verified_before),
                "pairs_verified_by_the_writer": get(&c.verified_by_writer),
            }),
            group_commits: get(&c.groups),
            group_writes: get(&c.group_ops),
            poisoned: sh.poisoned.lock().unwrap().clone(),
            params: sh.params.clone(),
            scurve: (0..=100)
                .map(|i| {
                    let s = i as f64 / 100.0;
                    (s, choice.probability(s))
                })
                .collect(),
            recovery: sh.recovery.clone(),
        }
    }

    /// Finishes the writes queued (each answered), syncs, stops the writer and any snapshot in progress.
    /// Later writes are refused with [`WriteError::Closed`]. Idempotent.
    pub fn close(&self) {
        drop(self.sender.lock().unwrap().take());
        self.shared.cancel_snapshot.store(true, Ordering::Relaxed);
        if let Some(h) = self.writer.lock().unwrap().take() {
            let _ = h.join();
        }
    }
}

impl Drop for OnlineIndex {
    fn drop(&mut self) {
        self.close();
    }
}

/// Which documents a lookup sees.
#[derive(Clone, Copy)]
enum Visibility {
    /// Readers: inserted durably, not deleted durably.
    Durable,
    /// The writer: everything it has applied.
    Writer,
}

impl Visibility {
    fn sees(self, slot: &Slot, durable: u64) -> bool {
        match self {
            Visibility::Durable => slot.seq <= durable && slot.deleted > durable,
            Visibility::Writer => slot.deleted == LIVE,
        }
    }
}

/// The documents a lookup reports: those `vis` sees, inserted before `before`, except the slot `exclude`.
///
/// A stored document's answer is about its past: a check that is sent again for a document already stored
/// (a client's retry) sees only what was inserted before it, and never the document itself, so it gets the
/// answer the first check got.
#[derive(Clone, Copy)]
struct View {
    vis: Visibility,
    /// Only documents whose sequence number is below this.
    before: u64,
    /// The document itself, when it is stored.
    exclude: Option<u32>,
}

impl View {
    /// Everything `vis` sees.
    fn all(vis: Visibility) -> View {
        View {
            vis,
            before: u64::MAX,
            exclude: None,
        }
    }

    /// What the stored document in `slot` saw when it was inserted (its own first answer).
    fn before(vis: Visibility, slot: u32, seq: u64) -> View {
        View {
            vis,
            before: seq,
            exclude: Some(slot),
        }
    }

    /// Everything `vis` sees but the slot `slot` (a stored document of the same id with another text).
    fn except(vis: Visibility, slot: u32) -> View {
        View {
            vis,
            before: u64::MAX,
            exclude: Some(slot),
        }
    }
}

/// How a document to put or query stands to a stored document of the same id.
enum Stored {
    /// No live document has its id.
    Absent,
    /// The stored document has the same signature and text: the request is a retry of the one that stored it.
    Same { slot: u32, seq: u64 },
    /// The id holds another document.
    Other { slot: u32 },
}

/// How `doc` stands to the live document of its id that `vis` sees, if any.
fn stored(store: &Store, doc: &Prepared, vis: Visibility, durable: u64) -> Stored {
    let Some(s) = store.slot_of(&doc.id) else {
        return Stored::Absent;
    };
    let slot = &store.slots[s as usize];
    if !vis.sees(slot, durable) {
        return Stored::Absent;
    }
    let same = slot.empty == doc.empty
        && store.signature(s) == doc.signature.as_slice()
        && slot.text.as_deref() == doc.text.as_deref();
    if same {
        Stored::Same {
            slot: s,
            seq: slot.seq,
        }
    } else {
        Stored::Other { slot: s }
    }
}

/// A candidate's data, copied out under the lock so that verification runs without it.
struct Candidate {
    slot: u32,
    id: Arc<str>,
    seq: u64,
    estimate: f64,
    text: Option<Arc<[u8]>>,
}

/// The near-duplicates of a prepared document among the documents `view` reports, verified as `dedup` verifies
/// (`dedup::check_pair`), earliest first; and the bucket members left unread by the cap.
fn find(shared: &Shared, doc: &Prepared, view: View, keys: &mut Vec<u64>) -> (Vec<Duplicate>, u64) {
    let (candidates, unchecked) = candidates(shared, doc, view, keys);
    let mut fresh = 0;
    let mut out: Vec<Duplicate> = candidates
        .iter()
        .filter_map(|c| match doc.checked.get(&(c.slot, c.seq)) {
            Some(known) => known.clone(),
            None => {
                fresh += 1;
                verify(&shared.built, doc, c)
            }
        })
        .collect();
    if matches!(view.vis, Visibility::Writer) {
        shared
            .counters
            .verified_by_writer
            .fetch_add(fresh, Ordering::Relaxed);
    }
    out.sort_by_key(|d| d.seq);
    (out, unchecked)
}

/// The candidates of a prepared document among the documents `view` reports, copied out under the read lock,
/// and the bucket members left unread by the cap.
fn candidates(
    shared: &Shared,
    doc: &Prepared,
    view: View,
    keys: &mut Vec<u64>,
) -> (Vec<Candidate>, u64) {
    let b = &shared.built;
    let store = shared.store.read().unwrap();
    let durable = shared.durable.load(Ordering::Acquire);
    let (mut slots, unchecked) = store.candidates(
        &doc.signature,
        shared.params.bucket_cap,
        |s| s.seq < view.before && view.vis.sees(s, durable),
        keys,
    );
    if let Some(me) = view.exclude {
        slots.retain(|&s| s != me);
    }
    let c = slots
        .iter()
        .map(|&s| {
            let slot = &store.slots[s as usize];
            Candidate {
                slot: s,
                id: slot.id.clone().expect("a candidate is an occupied slot"),
                seq: slot.seq,
                estimate: b.kernel.estimate(store.signature(s), &doc.signature),
                text: slot.text.clone(),
            }
        })
        .collect();
    (c, unchecked)
}

/// Verifies one candidate pair as `dedup` does (`dedup::check_pair`): the duplicate, or `None`.
fn verify(b: &Built, doc: &Prepared, c: &Candidate) -> Option<Duplicate> {
    let other = match (&doc.set, &c.text) {
        (Some(_), Some(text)) => store::decompress(text)
            .ok()
            .map(|text| sets::verification_split_set(&b.shingler, &text)),
        _ => None,
    };
    let sets = match (&other, &doc.set) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let pair = dedup::check_pair(
        b.verify,
        b.choice.threshold,
        0,
        0,
        || c.estimate,
        sets,
        b.shingler.dispatch(),
    )?;
    Some(Duplicate {
        id: c.id.to_string(),
        seq: c.seq,
        estimate: pair.estimate,
        jaccard: pair.jaccard,
    })
}

/// Verifies a document against its candidates among the durable documents before it goes to the writer, on
/// the calling thread, and keeps each outcome by (slot, sequence number), which names one stored document for
/// good. The writer then finds the document's candidates as before (the same ones, and the answer is the
/// same) but verifies only those this did not see: the batch's own earlier documents and what was written
/// meanwhile. Verification, the costly part of a check, thus runs in the clients' threads, in parallel,
/// instead of on the single writer.
fn precheck(shared: &Shared, doc: &mut Prepared, keys: &mut Vec<u64>) {
    let (candidates, _) = candidates(shared, doc, View::all(Visibility::Durable), keys);
    let checked = candidates
        .iter()
        .map(|c| ((c.slot, c.seq), verify(&shared.built, doc, c)))
        .collect();
    doc.checked = checked;
    shared
        .counters
        .verified_before
        .fetch_add(doc.checked.len() as u64, Ordering::Relaxed);
}

/// Bytes of the index directory's files, and of its log segments.
fn dir_bytes(storage: &dyn Storage, dir: &Path) -> (u64, u64) {
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

/// The open log segment the writer appends to.
struct Log {
    file: Box<dyn StorageFile>,
    path: PathBuf,
    /// The sequence number its name and header give its first record.
    first_seq: u64,
    /// Bytes of the current segment.
    len: u64,
    /// Bytes of every segment.
    total: u64,
    /// Bytes written to segments since the last snapshot began.
    since_snapshot: u64,
    num_perm: usize,
    faults: Faults,
}

impl Log {
    /// Creates the segment whose first record will be `first_seq`, syncing it and the directory.
    fn create_segment(
        storage: &dyn Storage,
        dir: &Path,
        num_perm: usize,
        first_seq: u64,
        faults: Faults,
        total: u64,
    ) -> io::Result<Log> {
        let path = dir.join(log::segment_name(first_seq));
        let mut file = storage.create_new(&path)?;
        let ready = file
            .append(&log::segment_header(num_perm, first_seq))
            .and_then(|_| file.sync_all())
            .and_then(|_| storage.sync_dir(dir));
        if let Err(e) = ready {
            // This call created the file, so it may remove it; a name that existed before is never touched.
            drop(file);
            let _ = storage.remove(&path);
            let _ = storage.sync_dir(dir);
            return Err(e);
        }
        Ok(Log {
            file,
            path,
            first_seq,
            len: log::SEGMENT_HEADER as u64,
            total: total + log::SEGMENT_HEADER as u64,
            since_snapshot: 0,
            num_perm,
            faults,
        })
    }

    /// Appends `bytes` and syncs them.
    fn append(&mut self, bytes: &[u8]) -> Result<(), AppendError> {
        if let Some(limit) = self.faults.disk_full_after
            && self.total + bytes.len() as u64 > limit
        {
            let fit = limit.saturating_sub(self.total) as usize;
            self.file
                .append(&bytes[..fit.min(bytes.len())])
                .map_err(AppendError::Write)?;
            return Err(AppendError::Write(io::Error::from_raw_os_error(28)));
        }
        self.file.append(bytes).map_err(AppendError::Write)?;
        if let Some(hook) = &self.faults.before_sync {
            hook();
        }
        if self
            .faults
            .fail_sync
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
        {
            return Err(AppendError::Sync(io::Error::from_raw_os_error(5)));
        }
        self.file.sync_data().map_err(AppendError::Sync)?;
        self.len += bytes.len() as u64;
        self.total += bytes.len() as u64;
        self.since_snapshot += bytes.len() as u64;
        Ok(())
    }

    /// Cuts the segment back to `len` bytes and syncs it.
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_data()
    }
}

/// How appending a group to the log failed.
enum AppendError {
    /// The write failed: the file may hold a part of the bytes but never all of them, so never the commit
    /// record that ends them, and recovery would never apply them.
    Write(io::Error),
    /// The write went through and the sync failed: the bytes may or may not be durable (Linux may even have
    /// dropped the dirty pages and cleared the error), so no later sync can tell, and a cut may not undo them.
    Sync(io::Error),
}

/// An applied change, undone in reverse order when its group fails.
enum Undo {
    Insert { slot: u32, prev: Option<u32> },
    Delete { slot: u32 },
}

struct Writer {
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Job>,
    log: Log,
    next_seq: u64,
    buf: Vec<u8>,
    keys: Vec<u64>,
    snapshot_thread: Option<std::thread::JoinHandle<Result<(u64, u64), String>>>,
}

/// A group takes no more jobs once it holds this many writes (the job that crosses it still joins).
const MAX_GROUP_OPS: usize = 4096;
/// A group takes no more jobs once their records take this many bytes (the job that crosses it still joins).
const MAX_GROUP_BYTES: usize = 32 << 20;

impl Writer {
    fn run(mut self) {
        let mut pending: Option<Job> = None;
        loop {
            let first = match pending.take() {
                Some(j) => j,
                None => match self.rx.recv() {
                    Ok(j) => self.taken(j),
                    Err(_) => break,
                },
            };
            let mut jobs = vec![first];
            let mut touched: FxHashSet<String> = FxHashSet::default();
            for id in job_ids(&jobs[0]) {
                touched.insert(id.to_string());
            }
            let mut ops = jobs[0].ops.len();
            let mut bytes = job_bytes(&jobs[0]);
            // Everything that arrived meanwhile joins the group, unless it touches an id the group already
            // changes (a group changes each id at most once, so its undo and its readers stay simple).
            while ops < MAX_GROUP_OPS && bytes < MAX_GROUP_BYTES {
                let Ok(job) = self.rx.try_recv() else { break };
                let job = self.taken(job);
                if job_ids(&job).any(|id| touched.contains(id)) {
                    pending = Some(job);
                    break;
                }
                for id in job_ids(&job) {
                    touched.insert(id.to_string());
                }
                ops += job.ops.len();
                bytes += job_bytes(&job);
                jobs.push(job);
            }
            self.group(jobs);
            self.maybe_snapshot();
        }
        if let Some(h) = self.snapshot_thread.take() {
            self.shared.cancel_snapshot.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
    }

    /// A job taken off the queue: its bytes no longer count as queued.
    fn taken(&self, job: Job) -> Job {
        self.shared
            .queued
            .fetch_sub(job_memory(&job), Ordering::AcqRel);
        job
    }

    fn group(&mut self, jobs: Vec<Job>) {
        let sh = self.shared.clone();
        let start_len = self.log.len;
        let start_seq = self.next_seq;
        let mut undo: Vec<Undo> = Vec::new();
        let mut deleted: Vec<u32> = Vec::new();
        let mut answers: Vec<(Reply, Result<Outcome, WriteError>)> = Vec::new();
        self.buf.clear();
        for job in jobs {
            let Job { ops, reply } = job;
            if let Some(p) = sh.poisoned.lock().unwrap().clone() {
                answers.push((reply, Err(WriteError::Poisoned(p))));
                continue;
            }
            let writes = ops.iter().any(|o| {
                matches!(
                    o,
                    Op::Put {
                        mode: InsertMode::Always | InsertMode::IfUnique,
                        ..
                    }
                )
            });
            if let (Some(limit), true) = (sh.options.max_memory, writes) {
                let store = sh.store.read().unwrap();
                let used = store.memory_bytes() as u64 + sh.queued.load(Ordering::Acquire);
                if used >= limit {
                    let documents = store.occupied as u64;
                    drop(store);
                    sh.counters.refused.fetch_add(1, Ordering::Relaxed);
                    answers.push((
                        reply,
                        Err(WriteError::MemoryFull {
                            used,
                            limit,
                            documents,
                        }),
                    ));
                    continue;
                }
            }
            let outcome = self.apply_job(ops, &mut undo, &mut deleted);
            answers.push((reply, Ok(outcome)));
        }
        let mut failure = None;
        if self.next_seq > start_seq {
            log::encode_commit(&mut self.buf, self.next_seq - 1);
            if self.buf.len() as u64 > log::MAX_WRITE_BYTES {
                failure = Some(WriteError::TooLarge {
                    bytes: self.buf.len() as u64,
                    limit: log::MAX_WRITE_BYTES,
                });
            } else {
                match self.log.append(&self.buf) {
                    Ok(()) => {}
                    Err(AppendError::Write(e)) => failure = Some(WriteError::from_io(&e)),
                    Err(AppendError::Sync(e)) => {
                        failure = Some(WriteError::OutcomeUnknown(e.to_string()))
                    }
                }
            }
        }
        match failure {
            Some(err) => {
                self.rollback(undo, start_len, start_seq, &err);
                sh.counters.refused.fetch_add(1, Ordering::Relaxed);
                for (reply, answer) in answers {
                    reply(answer.and(Err(err.clone())));
                }
            }
            None => {
                {
                    let mut store = sh.store.write().unwrap();
                    let removed = deleted.len() as u64;
                    for s in deleted {
                        store.remove(s);
                    }
                    let inserted = self.next_seq - start_seq - removed;
                    // Only the writer changes the count, under the write lock.
                    let v = sh.visible.load(Ordering::Acquire);
                    sh.visible.store(v + inserted - removed, Ordering::Release);
                    sh.durable.store(self.next_seq - 1, Ordering::Release);
                    // Counted from the records written: a replayed retry inserts nothing.
                    sh.counters.inserted.fetch_add(inserted, Ordering::Relaxed);
                }
                if self.next_seq > start_seq {
                    sh.counters.groups.fetch_add(1, Ordering::Relaxed);
                    sh.counters
                        .group_ops
                        .fetch_add(self.next_seq - start_seq, Ordering::Relaxed);
                }
                for (reply, answer) in answers {
                    if let Ok(Outcome::Docs(docs)) = &answer {
                        let c = &sh.counters;
                        c.duplicates.fetch_add(
                            docs.iter().map(|d| d.duplicates.len() as u64).sum(),
                            Ordering::Relaxed,
                        );
                    }
                    reply(answer);
                }
            }
        }
    }

    fn apply_job(&mut self, ops: Vec<Op>, undo: &mut Vec<Undo>, deleted: &mut Vec<u32>) -> Outcome {
        let sh = self.shared.clone();
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                Op::Put { doc, query, mode } => {
                    if query {
                        sh.counters.checked.fetch_add(1, Ordering::Relaxed);
                    }
                    let stored = {
                        let store = sh.store.read().unwrap();
                        stored(&store, &doc, Visibility::Writer, 0)
                    };
                    // A retry (the id stored with this very document) is answered as the first request was:
                    // its duplicates among the documents before it, and its sequence number. Another document
                    // under a stored id is refused and compared with everything but that document.
                    let (view, replay) = match stored {
                        Stored::Absent => (View::all(Visibility::Writer), None),
                        Stored::Same { slot, seq } => {
                            (View::before(Visibility::Writer, slot, seq), Some(seq))
                        }
                        Stored::Other { slot } => (View::except(Visibility::Writer, slot), None),
                    };
                    let (duplicates, unchecked) = if query && !doc.empty {
                        find(&sh, &doc, view, &mut self.keys)
                    } else {
                        (Vec::new(), 0)
                    };
                    let reason = match (mode, &stored) {
                        (InsertMode::Never, _) => Some("never"),
                        (_, Stored::Same { .. }) => None,
                        (_, Stored::Other { .. }) => Some("exists"),
                        (InsertMode::IfUnique, _) if !duplicates.is_empty() => Some("duplicate"),
                        _ => None,
                    };
                    let mut result = DocResult {
                        id: Some(doc.id.clone()),
                        duplicates,
                        unchecked,
                        empty: doc.empty,
                        inserted: Some(reason.is_none()),
                        seq: None,
                        reason: reason.map(str::to_string),
                    };
                    if let (None, Some(seq)) = (reason, replay) {
                        result.seq = Some(seq);
                    } else if reason.is_none() {
                        let seq = self.next_seq;
                        self.next_seq += 1;
                        log::encode_insert(
                            &mut self.buf,
                            seq,
                            &doc.id,
                            doc.empty,
                            &doc.signature,
                            doc.text.as_deref(),
                        );
                        let id: Arc<str> = Arc::from(doc.id.as_str());
                        let mut store = sh.store.write().unwrap();
                        let prev = store.slot_of(&id);
                        let slot = store.insert(id, seq, doc.empty, &doc.signature, doc.text);
                        undo.push(Undo::Insert { slot, prev });
                        result.seq = Some(seq);
                    }
                    results.push(result);
                }
                Op::Delete(id) => {
                    let mut store = sh.store.write().unwrap();
                    let slot = store
                        .slot_of(&id)
                        .filter(|&s| store.slots[s as usize].deleted == LIVE);
                    let seq = slot.map(|s| {
                        let seq = self.next_seq;
                        self.next_seq += 1;
                        store.slots[s as usize].deleted = seq;
                        undo.push(Undo::Delete { slot: s });
                        deleted.push(s);
                        log::encode_delete(&mut self.buf, seq, &id);
                        sh.counters.deleted.fetch_add(1, Ordering::Relaxed);
                        seq
                    });
                    return Outcome::Deleted(DeleteResponse {
                        id,
                        deleted: seq.is_some(),
                        seq,
                    });
                }
            }
        }
        Outcome::Docs(results)
    }

    /// Undoes a failed group in memory and, unless its outcome is unknown, cuts its bytes off the log. The index
    /// refuses writes from then on if the log cannot be cut, or if the outcome is unknown: whether the group
    /// is durable is then only known to recovery, which reads the disk.
    fn rollback(&mut self, undo: Vec<Undo>, start_len: u64, start_seq: u64, err: &WriteError) {
        let sh = &self.shared;
        {
            let mut store = sh.store.write().unwrap();
            for u in undo.into_iter().rev() {
                match u {
                    Undo::Insert { slot, prev } => {
                        let id = store.slots[slot as usize]
                            .id
                            .clone()
                            .expect("an undone insert");
                        store.remove(slot);
                        if let Some(p) = prev {
                            store.ids.insert(id, p);
                        }
                    }
                    Undo::Delete { slot } => store.slots[slot as usize].deleted = LIVE,
                }
            }
        }
        self.next_seq = start_seq;
        if let WriteError::OutcomeUnknown(_) = err {
            *sh.poisoned.lock().unwrap() = Some(err.to_string());
        } else if let Err(e) = self.log.truncate(start_len) {
            *sh.poisoned.lock().unwrap() = Some(format!(
                "{err}; then cutting the failed write off {} failed too: {e}",
                self.log.path.display()
            ));
        }
    }

    /// Joins the snapshot thread once it has finished (at once when `wait`), reporting a failure; returns
    /// whether no snapshot is running.
    fn reap_snapshot(&mut self, wait: bool) -> bool {
        let Some(h) = self.snapshot_thread.take() else {
            return true;
        };
        if !wait && !h.is_finished() {
            self.snapshot_thread = Some(h);
            return false;
        }
        match h.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                eprintln!("lshbench serve: snapshot failed (the log keeps everything): {e}")
            }
            Err(_) => {
                eprintln!("lshbench serve: the snapshot thread panicked (the log keeps everything)")
            }
        }
        self.log.total = dir_bytes(&*self.shared.storage, &self.shared.dir).1;
        true
    }

    /// Starts a snapshot when the log since the last one outgrew both the minimum and the last snapshot.
    fn maybe_snapshot(&mut self) {
        let sh = self.shared.clone();
        if !self.reap_snapshot(false) {
            return;
        }
        let min = match sh.options.snapshot_min_bytes {
            0 => DEFAULT_SNAPSHOT_MIN_BYTES,
            n => n,
        };
        let last = sh.snapshot.lock().unwrap().map_or(0, |s| s.1);
        if self.log.since_snapshot <= min.max(last) || sh.poisoned.lock().unwrap().is_some() {
            return;
        }
        let seq = self.next_seq - 1;
        // A snapshot needs room for the live documents: at most the last snapshot and the log since. Started
        // without it, it would take the space writes need and fail; tried again after the log has grown by the
        // trigger once more, not after every write.
        let need = last + self.log.total;
        if let Some(free) = sh.storage.free_bytes(&sh.dir)
            && free < need
        {
            eprintln!(
                "lshbench serve: no snapshot: {free} bytes free, and it may need {need}; trying again once \
                 the log has grown by {} bytes",
                min.max(last)
            );
            self.log.since_snapshot = 0;
            return;
        }
        if self.log.len == log::SEGMENT_HEADER as u64 && self.log.first_seq == self.next_seq {
            // The segment holds no record and starts right after `seq` (a rotation whose snapshot never
            // finished): the snapshot covers every older segment without a new one.
            self.log.since_snapshot = 0;
        } else {
            // A new segment starts after the snapshot's sequence number, so every older segment is covered by it.
            match Log::create_segment(
                &*sh.storage,
                &sh.dir,
                self.log.num_perm,
                self.next_seq,
                self.log.faults.clone(),
                self.log.total,
            ) {
                Ok(new) => self.log = new,
                Err(e) => {
                    eprintln!(
                        "lshbench serve: no snapshot: a new log segment could not be created ({e}); \
                         trying again once the log has grown by {} bytes",
                        min.max(last)
                    );
                    self.log.since_snapshot = 0;
                    return;
                }
            }
        }
        let thread_shared = sh.clone();
        self.snapshot_thread = std::thread::Builder::new()
            .name("lshbench-snapshot".into())
            .spawn(move || write_snapshot(&thread_shared, seq))
            .ok();
        if sh.options.faults.wait_for_snapshots {
            self.reap_snapshot(true);
        }
    }
}

/// About the bytes a queued job holds in memory: its records, and the verification sets of its documents.
fn job_memory(job: &Job) -> u64 {
    let sets: usize = job
        .ops
        .iter()
        .map(|op| match op {
            Op::Put { doc, .. } => {
                doc.set.as_ref().map_or(0, |s| 10 * s.len() + 64) + 64 * doc.checked.len()
            }
            Op::Delete(_) => 0,
        })
        .sum();
    (job_bytes(job) + sets) as u64
}

/// About the bytes a job's records take in the log.
fn job_bytes(job: &Job) -> usize {
    job.ops
        .iter()
        .map(|op| match op {
            Op::Put { doc, .. } => {
                64 + doc.id.len()
                    + 4 * doc.signature.len()
                    + doc.text.as_ref().map_or(0, |t| t.len())
            }
            Op::Delete(id) => 32 + id.len(),
        })
        .sum()
}

/// The ids a job changes or may change.
fn job_ids(job: &Job) -> impl Iterator<Item = &str> {
    job.ops.iter().filter_map(|op| match op {
        Op::Put {
            doc,
            mode: InsertMode::Always | InsertMode::IfUnique,
            ..
        } => Some(doc.id.as_str()),
        Op::Put { .. } => None,
        Op::Delete(id) => Some(id.as_str()),
    })
}

/// Writes the snapshot of the documents live at `seq` (in sequence order), then removes older snapshots and the
/// segments it covers; returns its sequence number and size.
fn write_snapshot(sh: &Shared, seq: u64) -> Result<(u64, u64), String> {
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

/// Writes a tail about to be cut off `segment` to the first free name of `<segment>.torn`, `<segment>.torn.1`,
/// ..., synced with its directory; returns its path.
fn keep_torn_tail(storage: &dyn Storage, segment: &Path, tail: &[u8]) -> io::Result<PathBuf> {
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

type Recovered = (Store, Log, u64, Recovery, Option<(u64, u64)>);

/// Reads the index's files back: the newest snapshot, then every log record after it, group by group; cuts a
/// torn tail off the last segment; bands everything once. Returns the store, the log to append to, the next
/// sequence number, what was done, and the snapshot loaded.
fn recover(
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
fn index_files(storage: &dyn Storage, dir: &Path) -> Result<(SeqFiles, SeqFiles), OpenError> {
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
type SeqFiles = Vec<(u64, PathBuf)>;

/// An I/O error of recovery, naming the file.
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> OpenError {
    let path = path.to_path_buf();
    move |cause| OpenError::Io { path, cause }
}

/// How many of the oldest segments the snapshot covers: the log goes on from the segment that starts right after
/// the snapshot (the first segment, without one); older segments are covered by the snapshot and were being
/// removed when the process stopped. A log that does not go on from the snapshot is damaged.
fn covered_segments(
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
fn replay(store: &mut Store, base: u64, damage: &mut Option<String>, r: Record) {
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
fn cut_torn_tail(
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

#[cfg(test)]
mod crash;
#[cfg(test)]
mod tests;
