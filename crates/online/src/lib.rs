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
mod errors;
pub mod log;
mod options;
pub mod params;
mod query;
mod recovery;
mod segment;
mod shared;
mod snapshot;
pub mod storage;
mod store;
mod writer;

pub use errors::{OpenError, WriteError};
pub use options::{
    DEFAULT_MAX_CANDIDATES, DEFAULT_MAX_QUEUED_BYTES, DEFAULT_SNAPSHOT_MIN_BYTES, Faults,
    OnlineOptions,
};
pub use shared::{Outcome, Recovery, Stats, resident_bytes};

use api::{DeleteResponse, DocIn, DocResult, DocumentResponse, InsertMode, QueryDoc};
use lshbench_core::dedup::Verify;
use lshbench_core::pipeline;
use lshbench_core::sets;
use params::{IndexParams, ParamChoices};
use query::{Stored, View, Visibility, find, precheck, stored};
use recovery::recover;
use rustc_hash::FxHashSet;
use shared::{Counters, Job, Op, Prepared, Reply, Shared, dir_bytes, wait};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use storage::FsStorage;
use writer::{Writer, job_memory};

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

// What the test modules (`use super::*`) take from here beyond the index itself.
#[cfg(test)]
use {log::RecoveryError, std::io, std::path::PathBuf};

#[cfg(test)]
mod crash;
#[cfg(test)]
mod tests;
