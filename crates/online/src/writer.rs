//! The writer thread: it takes every queued job, applies the group to the tables in arrival order, appends it
//! to the log with one write, syncs, and only then answers (group commit); it takes snapshots when the log
//! outgrows the live data.

use crate::api::{DeleteResponse, DocResult, InsertMode};
use crate::errors::WriteError;
use crate::log;
use crate::options::DEFAULT_SNAPSHOT_MIN_BYTES;
use crate::query::{Stored, View, Visibility, find, stored};
use crate::segment::{AppendError, Log};
use crate::shared::{Job, Op, Outcome, Reply, Shared, dir_bytes};
use crate::snapshot::write_snapshot;
use crate::store::LIVE;
use rustc_hash::FxHashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

/// An applied change, undone in reverse order when its group fails.
pub(crate) enum Undo {
    Insert { slot: u32, prev: Option<u32> },
    Delete { slot: u32 },
}

pub(crate) struct Writer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) rx: mpsc::Receiver<Job>,
    pub(crate) log: Log,
    pub(crate) next_seq: u64,
    pub(crate) buf: Vec<u8>,
    pub(crate) keys: Vec<u64>,
    pub(crate) snapshot_thread: Option<std::thread::JoinHandle<Result<(u64, u64), String>>>,
}

/// A group takes no more jobs once it holds this many writes (the job that crosses it still joins).
pub(crate) const MAX_GROUP_OPS: usize = 4096;
/// A group takes no more jobs once their records take this many bytes (the job that crosses it still joins).
pub(crate) const MAX_GROUP_BYTES: usize = 32 << 20;

impl Writer {
    pub(crate) fn run(mut self) {
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
    pub(crate) fn taken(&self, job: Job) -> Job {
        self.shared
            .queued
            .fetch_sub(job_memory(&job), Ordering::AcqRel);
        job
    }

    pub(crate) fn group(&mut self, jobs: Vec<Job>) {
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

    pub(crate) fn apply_job(
        &mut self,
        ops: Vec<Op>,
        undo: &mut Vec<Undo>,
        deleted: &mut Vec<u32>,
    ) -> Outcome {
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
    pub(crate) fn rollback(
        &mut self,
        undo: Vec<Undo>,
        start_len: u64,
        start_seq: u64,
        err: &WriteError,
    ) {
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
    pub(crate) fn reap_snapshot(&mut self, wait: bool) -> bool {
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
    pub(crate) fn maybe_snapshot(&mut self) {
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
pub(crate) fn job_memory(job: &Job) -> u64 {
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
pub(crate) fn job_bytes(job: &Job) -> usize {
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
pub(crate) fn job_ids(job: &Job) -> impl Iterator<Item = &str> {
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
