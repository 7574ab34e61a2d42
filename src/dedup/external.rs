//! Out-of-core dedup: `dedup --memory-limit SIZE [--tmp-dir DIR]`. The same pairs, groups, centres and summary
//! counts as the in-memory [`super::run`], with peak memory held under a limit whatever the corpus size, by
//! keeping on disk what grows with the corpus times the signature size.
//!
//! Two passes over the corpus:
//! 1. Read, shingle and sign (the same batches as the in-memory run). Per document only its id, an empty flag and
//!    two 64-bit hashes of its banded slots stay resident; its b band keys go to one column per band, in memory
//!    while the budget allows and else to checksummed spill files. The signatures themselves are not kept.
//! 2. Classes of identical banded slots (the in-memory run's first step) from the slot hashes; then band by band
//!    (each band on one worker): the representatives' `(key, class)` records go through an external sorter
//!    (sorted runs on disk, merged), buckets are walked in order and their pairs emitted exactly as
//!    [`crate::lsh::index`] does (same star rule over the bucket cap, same counts); all pairs go through a second
//!    external sorter that drops repeats.
//! 3. A second read of the corpus re-signs only the documents in some candidate pair and, for `--verify exact`,
//!    builds their shingle sets; both go to a random-access spill file (a checksum per record).
//! 4. Verification and grouping as in [`super::dedup_signed`], reading each document's record back on demand.
//!
//! Exactness: the in-memory run tells identical banded slots apart by comparing the slots; this run compares two
//! independent 64-bit hashes of them (xxh3 under two seeds), so the two runs differ only if two different slot
//! vectors collide in 128 bits.
//!
//! Memory: what stays resident is estimated before each phase from the document count and the configuration,
//! and a run whose resident part cannot fit stops with [`OutOfCoreError::TooSmall`] before allocating it; the
//! estimate's fixed part ([`BASE_BYTES`]) covers the binary, the thread stacks, the read batches and the
//! allocator's slack, and was checked against `/usr/bin/time -v` (BENCHMARKING.md, "Out of core").

use super::spill::{RecordFile, RecordWriter, SeqFile, Sorter, SpillDir, SpillError};
use super::{
    BandingChoice, CheckedPair, DedupConfig, DedupError, DedupOptions, DedupOutcome, DedupReport,
    Table, Verify, band_hasher, check_pair, group_verified, write_table,
};
use crate::corpus::{CorpusReader, Document};
use crate::exact;
use crate::exec::Progress;
use crate::kernel::Kernel;
use crate::lsh::cluster::{self, GroupStats};
use crate::lsh::index::{CandidateStats, TooManyCandidates, emit_group};
use crate::shingle::Shingler;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The memory budget of an out-of-core run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Peak resident bytes the run must stay under.
    pub bytes: u64,
    /// Where spill files go (a fresh subdirectory, deleted at the end); `None`: the system temp dir.
    pub tmp_dir: Option<PathBuf>,
    /// Test knob: records per sorted run, to force spilling on a small corpus (`None`: from the budget).
    #[doc(hidden)]
    pub run_records: Option<usize>,
}

impl MemoryLimit {
    /// A limit of `bytes` with spill files in the system temp dir.
    pub fn new(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            tmp_dir: None,
            run_records: None,
        }
    }
}

/// Parses a size such as `4G`, `512M`, `1.5G`, `64K` or `1000000` (bytes). The suffixes K, M, G, T are powers of
/// 1024 (`KiB`, `MiB`, `GiB`, `TiB` and a trailing `B` are accepted too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (num, mult) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 1u64 << 10),
        Some('M') => (&body[..body.len() - 1], 1 << 20),
        Some('G') => (&body[..body.len() - 1], 1 << 30),
        Some('T') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (examples: 4G, 512M, 1.5G, 1000000)"))?;
    if !x.is_finite() || x <= 0.0 {
        return Err(format!("{s:?}: a size must be positive"));
    }
    let bytes = x * mult as f64;
    if bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as u64)
}

/// A byte count for messages: `1.50 GiB`, `512.00 MiB`, `100 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, unit) in UNITS {
        if bytes >= unit {
            return format!("{:.2} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

/// Why an out-of-core run stopped.
#[derive(Debug, thiserror::Error)]
pub enum OutOfCoreError {
    /// A spill file could not be written or read back intact.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// What must stay resident does not fit under the limit.
    #[error(
        "--memory-limit {}: {what} needs about {} resident ({detail}), more than the limit allows. Raise \
         --memory-limit (the run stopped before allocating it)",
        format_size(*limit),
        format_size(*need)
    )]
    TooSmall {
        /// The limit.
        limit: u64,
        /// The estimated need.
        need: u64,
        /// Which phase.
        what: &'static str,
        /// What the need is made of.
        detail: String,
    },
    /// An option the out-of-core run does not support.
    #[error(
        "--memory-limit cannot be combined with {0} (the out-of-core run keeps neither texts nor signatures)"
    )]
    Unsupported(&'static str),
    /// The second pass did not see the corpus the first pass read.
    #[error("{}: the corpus changed between the two passes of --memory-limit ({what})", path.display())]
    Changed {
        /// The corpus.
        path: PathBuf,
        /// What differed.
        what: String,
    },
}

impl From<SpillError> for DedupError {
    fn from(e: SpillError) -> DedupError {
        DedupError::OutOfCore(OutOfCoreError::Spill(e))
    }
}

/// The fixed part of the estimate: executable and libraries, thread stacks, two read batches in flight (the
/// reader's `BATCH_BYTES` bounds each), I/O buffers and the allocator's slack.
pub const BASE_BYTES: u64 = 160 << 20;

/// Bytes glibc's malloc uses for an allocation of `len` bytes (16-byte chunks with an 8-byte header, 32 at
/// least; nothing for an empty string).
fn heap_bytes(len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ((len as u64 + 8).div_ceil(16) * 16).max(32)
    }
}

/// The resident-memory estimate and the limit it is checked against.
struct Budget {
    limit: u64,
}

impl Budget {
    fn check(
        &self,
        need: u64,
        what: &'static str,
        detail: impl FnOnce() -> String,
    ) -> Result<(), OutOfCoreError> {
        if need > self.limit {
            return Err(OutOfCoreError::TooSmall {
                limit: self.limit,
                need,
                what,
                detail: detail(),
            });
        }
        Ok(())
    }
}

/// One band's keys, one per document in input order: in memory (in fixed-size chunks, so growth never doubles a
/// buffer) or in a spill file.
enum Column {
    Memory(Vec<Vec<u64>>),
    Disk(SeqFile<u64>),
}

const CHUNK: usize = 1 << 16;

/// Per-document state of the first pass.
struct FirstPass {
    ids: Vec<String>,
    id_heap: u64,
    empty: Vec<bool>,
    /// Two independent hashes of the banded slots (the class key).
    full: Vec<(u64, u64)>,
}

impl FirstPass {
    /// Resident bytes of this state (capacities, so a pending doubling is counted when it happens).
    fn resident(&self) -> u64 {
        self.id_heap
            + self.ids.capacity() as u64 * 24
            + self.empty.capacity() as u64
            + self.full.capacity() as u64 * 16
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Hash of the banded slots' little-endian bytes, as [`crate::lsh::index`] computes it.
fn hash_slots(slots: &[u32], seed: u64) -> u64 {
    let bytes: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();
    xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, seed)
}

/// The out-of-core [`super::run`] (called from it when `options.memory_limit` is set, after the checks the two
/// runs share).
pub(super) fn run(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    options: &DedupOptions,
    limit: &MemoryLimit,
    choice: BandingChoice,
    progress: &dyn Progress,
) -> Result<DedupReport, DedupError> {
    let t0 = Instant::now();
    let unsupported = |what| Err(DedupError::OutOfCore(OutOfCoreError::Unsupported(what)));
    if options.load.is_some() {
        return unsupported("--load");
    }
    if options.save.is_some() {
        return unsupported("--save");
    }
    if options.outputs.kept.is_some() {
        return unsupported("--kept");
    }
    let budget = Budget { limit: limit.bytes };
    let threads = rayon::current_num_threads() as u64;
    let cap = options.bucket_cap.max(2);
    // A bucket at the cap is enumerated in one piece: its pairs are in memory at once, per worker.
    let burst = (cap as u64 * (cap as u64 - 1) / 2) * 8 * threads;
    budget.check(BASE_BYTES + burst, "starting the run", || {
        format!(
            "{} fixed, {} for {threads} workers each enumerating a bucket of --bucket-cap {cap} documents",
            format_size(BASE_BYTES),
            format_size(burst)
        )
    })?;
    let dir = SpillDir::new(limit.tmp_dir.as_deref())?;
    let config = DedupConfig {
        choice,
        verify: options.verify,
        groups: options.groups,
        bucket_cap: options.bucket_cap,
        pair_budget: options.pair_budget,
        seed: options.seed,
        max_candidates: options.max_candidates,
    };
    let k = kernel.num_perm();
    let banding = choice.banding;
    let bands = banding.bands;
    let used = banding.hashes();
    let hasher = band_hasher(banding, options.seed);
    let seed_full = hasher.seed ^ 0x9e37_79b9_7f4a_7c15;
    let seed_check = hasher.seed ^ 0x2545_f491_4f6c_dd1d;
    // Resident per document after pass 1 and during banding, besides the id: the empty flag and class hashes
    // (17), the class tables (12) and the sort of the class keys (16).
    let per_doc_banding = 17 + 12 + 16;
    // A band in flight holds its (key, class) records: 16 bytes each, per worker.
    let band_work = |n: u64| n * 16 * threads;

    // Pass 1: read, shingle, sign; keep the class hashes; band keys to columns.
    let mut first = FirstPass {
        ids: Vec::new(),
        id_heap: 0,
        empty: Vec::new(),
        full: Vec::new(),
    };
    let mut columns: Vec<Column> = (0..bands).map(|_| Column::Memory(Vec::new())).collect();
    let mut writers: Option<Vec<super::spill::SeqWriter<'_, u64>>> = None;
    let mut keys_batch: Vec<u64> = Vec::new();
    crate::pipeline::sketch_corpus(reader, shingler, kernel, |batch| {
        progress.inc(batch.docs.len() as u64);
        let m = batch.docs.len();
        keys_batch.clear();
        keys_batch.resize(m * bands, 0);
        let mut full = vec![(0u64, 0u64); m];
        keys_batch
            .par_chunks_mut(bands)
            .zip(full.par_iter_mut())
            .enumerate()
            .for_each(|(i, (keys, f))| {
                if batch.empty[i] {
                    return;
                }
                let sig = batch.signature(i, k);
                *f = (
                    hash_slots(&sig[..used], seed_full),
                    hash_slots(&sig[..used], seed_check),
                );
                for (band, key) in keys.iter_mut().enumerate() {
                    *key = hasher.key(band, sig);
                }
            });
        first.full.extend_from_slice(&full);
        first.empty.extend_from_slice(&batch.empty);
        for doc in &mut batch.docs {
            first.id_heap += heap_bytes(doc.id.capacity());
            first.ids.push(std::mem::take(&mut doc.id));
        }
        let n = first.ids.len() as u64;
        let resident = BASE_BYTES + burst + first.resident();
        budget
            .check(resident, "reading the corpus", || {
                format!(
                    "{n} documents so far: their ids and 17 bytes each of flags and class hashes, plus {} fixed",
                    format_size(BASE_BYTES + burst)
                )
            })
            .map_err(DedupError::OutOfCore)?;
        if writers.is_none() {
            let in_memory = n * bands as u64 * 8;
            let later = n * per_doc_banding + band_work(n);
            if resident + in_memory + later > limit.bytes || limit.run_records.is_some() {
                // Move the columns to disk and write every later key there.
                let mut ws = Vec::with_capacity(bands);
                for c in columns.iter_mut() {
                    let mut w = dir.writer::<u64>("band-keys")?;
                    if let Column::Memory(chunks) = c {
                        for chunk in chunks.drain(..) {
                            for key in chunk {
                                w.push(&key)?;
                            }
                        }
                    }
                    ws.push(w);
                }
                writers = Some(ws);
            }
        }
        match &mut writers {
            Some(ws) => {
                for row in keys_batch.chunks(bands) {
                    for (w, key) in ws.iter_mut().zip(row) {
                        w.push(key)?;
                    }
                }
            }
            None => {
                for (band, c) in columns.iter_mut().enumerate() {
                    let Column::Memory(chunks) = c else {
                        unreachable!("columns are in memory until the writers exist")
                    };
                    for row in keys_batch.chunks(bands) {
                        if chunks.last().is_none_or(|c| c.len() == CHUNK) {
                            chunks.push(Vec::with_capacity(CHUNK));
                        }
                        chunks.last_mut().expect("pushed").push(row[band]);
                    }
                }
            }
        }
        Ok::<(), DedupError>(())
    })?;
    if let Some(ws) = writers {
        for (c, w) in columns.iter_mut().zip(ws) {
            *c = Column::Disk(w.finish()?);
        }
    }
    drop(keys_batch);
    let read = reader.stats().clone();
    let t_read = t0.elapsed().as_secs_f64();
    let n = first.ids.len();
    assert!(n <= u32::MAX as usize, "document positions are u32");
    let mut stages = vec![("read+shingle+sign", t_read)];
    progress.stage("banding, verifying, grouping");

    // Classes of identical banded slots, in the in-memory order: by (hash, position), a hash run split by slot
    // equality (here: the second hash) in order of first member.
    let t_band = Instant::now();
    let mut stats = CandidateStats::default();
    let resident_ids = first.id_heap + first.ids.capacity() as u64 * 24;
    let base = BASE_BYTES + burst + resident_ids;
    let columns_bytes: u64 = columns
        .iter()
        .map(|c| match c {
            Column::Memory(chunks) => (chunks.len() * CHUNK * 8) as u64,
            Column::Disk(_) => 0,
        })
        .sum();
    let nn = n as u64;
    budget
        .check(
            base + columns_bytes + nn * per_doc_banding,
            "finding classes",
            || {
                format!(
                    "{n} documents: ids, band keys held in memory, 45 bytes each of class tables"
                )
            },
        )
        .map_err(DedupError::OutOfCore)?;
    let mut by_full: Vec<(u64, u32)> = (0..n)
        .into_par_iter()
        .filter(|&i| !first.empty[i])
        .map(|i| (first.full[i].0, i as u32))
        .collect();
    by_full.par_sort_unstable();
    stats.documents = by_full.len() as u64;
    let mut reps: Vec<u32> = Vec::new();
    let mut starts: Vec<u32> = vec![0];
    let mut members: Vec<u32> = Vec::with_capacity(by_full.len());
    // Within a hash run, split by the second, independent hash (a collision of the first must not merge).
    crate::lsh::index::hash_classes(
        &by_full,
        |a, b| first.full[a as usize].1 == first.full[b as usize].1,
        |same| {
            reps.push(same[0]);
            members.extend_from_slice(&same);
            starts.push(members.len() as u32);
        },
    );
    drop(by_full);
    first.full = Vec::new();
    let class = |c: usize| &members[starts[c] as usize..starts[c + 1] as usize];
    let mut rep_class = vec![u32::MAX; n];
    for (c, &r) in reps.iter().enumerate() {
        rep_class[r as usize] = c as u32;
    }
    let avail = limit
        .bytes
        .saturating_sub(base + columns_bytes + nn * 13 + reps.len() as u64 * 8);
    // Half of what is left for the bands in flight, a quarter for the pair sorter.
    let band_run = limit
        .run_records
        .unwrap_or((avail / 2 / (16 * threads)) as usize)
        .max(1);
    let pair_run = limit.run_records.unwrap_or((avail / 4 / 8) as usize).max(1);
    budget
        .check(
            base + columns_bytes + nn * 13 + reps.len() as u64 * 8 + 4096 * 16 * threads,
            "banding",
            || format!("{n} documents: ids, band keys held in memory, class tables"),
        )
        .map_err(DedupError::OutOfCore)?;
    let pairs = Mutex::new(Sorter::<u64>::new(&dir, "pairs", pair_run, true));
    let emitted = AtomicU64::new(0);
    let too_many = || DedupError::TooManyCandidates {
        banding,
        cause: TooManyCandidates {
            limit: config.max_candidates,
        },
    };
    {
        let mut out = Vec::new();
        for c in 0..reps.len() {
            let m = class(c);
            if m.len() > 1 {
                stats.duplicate_classes += 1;
                stats.documents_in_duplicate_classes += m.len() as u64;
                stats.largest_duplicate_class = stats.largest_duplicate_class.max(m.len() as u64);
                stats.pairs_not_enumerated += emit_group(&[m], cap, &mut out);
                if m.len() > cap {
                    stats.capped_groups += 1;
                }
                if out.len() >= 1 << 16 {
                    emitted.fetch_add(out.len() as u64, Ordering::Relaxed);
                    pairs.lock().expect("no panic").extend(&out)?;
                    out.clear();
                }
            }
        }
        emitted.fetch_add(out.len() as u64, Ordering::Relaxed);
        pairs.lock().expect("no panic").extend(&out)?;
    }
    let columns: Vec<Mutex<Option<Column>>> =
        columns.into_iter().map(|c| Mutex::new(Some(c))).collect();
    // Each band on one worker, no nested parallelism: at most `threads` bands are in memory at once.
    let per_band: Vec<Result<(u64, u64, u64, u64), DedupError>> = (0..bands)
        .into_par_iter()
        .with_max_len(1)
        .map(|band| {
            let column = columns[band]
                .lock()
                .expect("no panic")
                .take()
                .expect("each band once");
            let mut sorter = Sorter::<(u64, u32)>::new(&dir, "band-run", band_run, false);
            let mut push = |doc: usize, key: u64| {
                let c = rep_class[doc];
                if c != u32::MAX {
                    sorter.push((key, c))
                } else {
                    Ok(())
                }
            };
            match column {
                Column::Memory(chunks) => {
                    for (ci, chunk) in chunks.into_iter().enumerate() {
                        for (j, key) in chunk.into_iter().enumerate() {
                            push(ci * CHUNK + j, key)?;
                        }
                    }
                }
                Column::Disk(file) => {
                    let mut r = file.reader()?;
                    let mut doc = 0;
                    while let Some(key) = r.next_record()? {
                        push(doc, key)?;
                        doc += 1;
                    }
                    if doc != n {
                        return Err(SpillError::Corrupt {
                            path: file.path().to_path_buf(),
                            what: "wrong record count",
                        }
                        .into());
                    }
                    file.remove();
                }
            }
            let mut merged = sorter.finish()?;
            let (mut shared, mut largest, mut capped, mut skipped) = (0u64, 0u64, 0u64, 0u64);
            let mut out: Vec<u64> = Vec::new();
            let mut bucket: Vec<u32> = Vec::new();
            let mut current: Option<u64> = None;
            let mut walk = |bucket: &mut Vec<u32>, out: &mut Vec<u64>| -> Result<(), DedupError> {
                if bucket.len() > 1 {
                    let classes: Vec<&[u32]> = bucket.iter().map(|&c| class(c as usize)).collect();
                    let size: usize = classes.iter().map(|c| c.len()).sum();
                    shared += 1;
                    largest = largest.max(size as u64);
                    if size > cap {
                        capped += 1;
                    }
                    let before = out.len();
                    skipped += emit_group(&classes, cap, out);
                    let added = (out.len() - before) as u64;
                    if emitted.fetch_add(added, Ordering::Relaxed) + added > config.max_candidates {
                        return Err(too_many());
                    }
                    if out.len() >= 1 << 16 {
                        pairs.lock().expect("no panic").extend(out)?;
                        out.clear();
                    }
                }
                bucket.clear();
                Ok(())
            };
            while let Some((key, c)) = merged.next_record()? {
                if current != Some(key) {
                    walk(&mut bucket, &mut out)?;
                    current = Some(key);
                }
                bucket.push(c);
            }
            walk(&mut bucket, &mut out)?;
            pairs.lock().expect("no panic").extend(&out)?;
            Ok((shared, largest, capped, skipped))
        })
        .collect();
    for r in per_band {
        let (shared, largest, capped, skipped) = r?;
        stats.shared_buckets += shared;
        stats.largest_bucket = stats.largest_bucket.max(largest);
        stats.capped_groups += capped;
        stats.pairs_not_enumerated += skipped;
    }
    if emitted.load(Ordering::Relaxed) > config.max_candidates {
        return Err(too_many());
    }
    drop(rep_class);
    drop(columns);
    let mut merged = pairs.into_inner().expect("no panic").finish()?;
    let mut cands: Vec<(u32, u32)> = Vec::new();
    while let Some(p) = merged.next_record()? {
        cands.push(((p >> 32) as u32, p as u32));
    }
    drop(merged);
    drop((reps, starts, members));
    stats.candidates = cands.len() as u64;
    stages.push(("band", t_band.elapsed().as_secs_f64()));

    // Pass 2: signatures (and shingle sets) of the documents in some candidate pair.
    let t_sets = Instant::now();
    let mut needed: Vec<u32> = cands.iter().flat_map(|&(a, b)| [a, b]).collect();
    needed.par_sort_unstable();
    needed.dedup();
    needed.shrink_to_fit();
    let nc = cands.len() as u64;
    // Candidates, needed list and record offsets, the verified pairs (at most one per candidate), the grouping's
    // per-document arrays (degree, weight, union-find, slots, group of: 28 bytes each) and edges.
    let verify_need = base + nn + nc * (8 + 24 + 16 + 8) + needed.len() as u64 * 12 + nn * 28;
    budget
        .check(verify_need, "verifying and grouping", || {
            format!(
                "{n} documents, {nc} candidate pairs over {} documents: ids, candidates, verified pairs, grouping \
                 tables",
                needed.len()
            )
        })
        .map_err(DedupError::OutOfCore)?;
    // What is left under the limit (less a tenth, for the allocator and what the estimate misses) holds records
    // in memory; the rest go to a spill file.
    let record_budget = match limit.run_records {
        Some(_) => 0,
        None => limit.bytes.saturating_sub(verify_need + limit.bytes / 10),
    };
    let records = second_pass(
        reader,
        &first.ids,
        &needed,
        shingler,
        kernel,
        config.verify,
        &dir,
        record_budget,
    )?;
    stages.push(("reread+shingle sets", t_sets.elapsed().as_secs_f64()));

    let t_verify = Instant::now();
    let t = choice.threshold;
    let exact_sets = config.verify == Verify::Exact;
    let store = Store {
        records: &records,
        needed: &needed,
        k,
        exact: exact_sets,
    };
    let chunks: Vec<Result<Vec<CheckedPair>, DedupError>> = cands
        .par_chunks(4096)
        .map(|chunk| {
            let mut buf = Vec::new();
            let mut cached: Option<(u32, Doc)> = None;
            let mut out = Vec::new();
            for &(a, b) in chunk {
                if cached.as_ref().is_none_or(|(d, _)| *d != a) {
                    cached = Some((a, store.load(a, &mut buf)?));
                }
                let da = &cached.as_ref().expect("loaded").1;
                let db = store.load(b, &mut buf)?;
                let estimate = || kernel.estimate(&da.sig, &db.sig);
                let sets = exact_sets.then_some((da.set.as_slice(), db.set.as_slice()));
                out.extend(check_pair(config.verify, t, a, b, estimate, sets));
            }
            Ok(out)
        })
        .collect();
    drop(cands);
    let mut verified = Vec::new();
    for c in chunks {
        verified.extend(c?);
    }
    stages.push(("verify", t_verify.elapsed().as_secs_f64()));

    // Group, as `dedup_signed` does, reading similarities back from the record file.
    let t_group = Instant::now();
    let (groups, edges_by_group) = group_verified(n, &verified, config.groups);
    let failure: Mutex<Option<DedupError>> = Mutex::new(None);
    // Similarity of two documents of one group, through a per-group cache (bounded by the pair budget).
    let similarity = |cache: &mut FxHashMap<u32, Doc>, buf: &mut Vec<u8>, a: u32, b: u32| -> f64 {
        for d in [a, b] {
            if let std::collections::hash_map::Entry::Vacant(slot) = cache.entry(d) {
                match store.load(d, buf) {
                    Ok(doc) => {
                        slot.insert(doc);
                    }
                    Err(e) => {
                        failure.lock().expect("no panic").get_or_insert(e);
                        return f64::NAN;
                    }
                }
            }
        }
        let (x, y) = (&cache[&a], &cache[&b]);
        if exact_sets {
            exact::jaccard_ids(&x.set, &y.set)
        } else {
            kernel.estimate(&x.sig, &y.sig)
        }
    };
    let (group_stats, to_center): (Vec<GroupStats>, Vec<Vec<f64>>) = groups
        .par_iter()
        .zip(edges_by_group.par_iter())
        .map(|(g, es)| {
            let mut cache = FxHashMap::default();
            let mut buf = Vec::new();
            let stats = cluster::group_stats(g, es, t, config.pair_budget, config.seed, |a, b| {
                similarity(&mut cache, &mut buf, a, b)
            });
            let sims = g
                .members
                .iter()
                .map(|&m| {
                    if m == g.center {
                        1.0
                    } else {
                        let s = similarity(&mut cache, &mut buf, m, g.center);
                        // Only the centre need stay cached.
                        if cache.len() > 64 {
                            cache.retain(|&d, _| d == g.center);
                        }
                        s
                    }
                })
                .collect();
            (stats, sims)
        })
        .unzip();
    if let Some(e) = failure.into_inner().expect("no panic") {
        return Err(e);
    }
    drop(records);
    stages.push(("group", t_group.elapsed().as_secs_f64()));

    let mut outcome = DedupOutcome {
        ids: first.ids,
        loaded: 0,
        empty_documents: first.empty.iter().filter(|&&e| e).count() as u64,
        candidates: stats,
        verified,
        groups,
        group_stats,
        to_center,
        config,
        stage_seconds: stages,
    };
    progress.stage("writing");
    let t_write = Instant::now();
    let outputs = &options.outputs;
    if let Some(p) = &outputs.pairs {
        write_table(p, Table::Pairs, &outcome)?;
    }
    if let Some(p) = &outputs.clusters {
        write_table(p, Table::Clusters, &outcome)?;
    }
    if let Some(p) = &outputs.group_report {
        write_table(p, Table::GroupReport, &outcome)?;
    }
    outcome
        .stage_seconds
        .push(("write", t_write.elapsed().as_secs_f64()));
    drop(dir);
    Ok(DedupReport {
        outcome,
        read,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// A document read back from the record file: its signature and (for exact verification) its shingle set.
struct Doc {
    sig: Vec<u32>,
    set: Vec<u64>,
}

/// The record file of pass 2 and how to find a document in it.
struct Store<'a> {
    records: &'a RecordFile,
    needed: &'a [u32],
    k: usize,
    exact: bool,
}

impl Store<'_> {
    fn load(&self, doc: u32, buf: &mut Vec<u8>) -> Result<Doc, DedupError> {
        let slot = self
            .needed
            .binary_search(&doc)
            .expect("every document of a candidate pair has a record");
        self.records.read(slot, buf)?;
        let corrupt = || SpillError::Corrupt {
            path: self.records.path().to_path_buf(),
            what: "record of the wrong size",
        };
        if buf.len() < self.k * 4
            || !(buf.len() - self.k * 4).is_multiple_of(8)
            || (!self.exact && buf.len() != self.k * 4)
        {
            return Err(corrupt().into());
        }
        let (s, rest) = buf.split_at(self.k * 4);
        Ok(Doc {
            sig: s
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
                .collect(),
            set: rest
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
                .collect(),
        })
    }
}

/// Reads the corpus again and writes, for each document of `needed` (sorted positions), its signature and, when
/// `verify` is exact, its shingle set (the first `memory_budget` bytes of records in memory). Checks that the
/// corpus is the one the first pass read (same ids in the same order).
#[allow(clippy::too_many_arguments)]
fn second_pass(
    first_reader: &CorpusReader,
    ids: &[String],
    needed: &[u32],
    shingler: &Shingler,
    kernel: &dyn Kernel,
    verify: Verify,
    dir: &SpillDir,
    memory_budget: u64,
) -> Result<RecordFile, DedupError> {
    let path = first_reader.path().to_path_buf();
    let mut reader = first_reader.reopen()?;
    let k = kernel.num_perm();
    let mut pos = 0usize;
    let mut next = 0usize;
    let changed = |what: String| {
        DedupError::OutOfCore(OutOfCoreError::Changed {
            path: path.clone(),
            what,
        })
    };
    // One batch: the needed documents among the next BATCH_DOCS read.
    let mut read_batch = |pos: &mut usize, next: &mut usize| -> Result<Vec<Document>, DedupError> {
        let mut out = Vec::new();
        let mut seen = 0;
        while seen < crate::pipeline::BATCH_DOCS && *next < needed.len() {
            let Some(doc) = reader.next() else { break };
            let doc = doc.map_err(DedupError::from)?;
            if *pos >= ids.len() || doc.id != ids[*pos] {
                return Err(changed(format!(
                    "document {} has id {:?} now, {:?} before",
                    *pos,
                    doc.id,
                    ids.get(*pos).map(String::as_str).unwrap_or("(none)")
                )));
            }
            if needed[*next] as usize == *pos {
                out.push(doc);
                *next += 1;
            }
            *pos += 1;
            seen += 1;
        }
        Ok(out)
    };
    let encode = |doc: &Document| -> Vec<u8> {
        let mut sig = vec![0u32; k];
        SCRATCH.with_borrow_mut(|scratch| {
            kernel.sign_text(shingler, &doc.text, scratch, &mut sig);
        });
        let set = if verify == Verify::Exact {
            exact::verification_set(shingler, &doc.text)
        } else {
            Vec::new()
        };
        let mut bytes = Vec::with_capacity(k * 4 + set.len() * 8);
        for s in sig {
            bytes.extend_from_slice(&s.to_le_bytes());
        }
        for x in set {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        bytes
    };
    let mut w = RecordWriter::new(dir, "documents", memory_budget);
    let mut batch = read_batch(&mut pos, &mut next)?;
    while !batch.is_empty() {
        let docs = std::mem::take(&mut batch);
        let (encoded, following) = rayon::join(
            || {
                docs.par_iter()
                    .with_min_len(8)
                    .map(encode)
                    .collect::<Vec<_>>()
            },
            || read_batch(&mut pos, &mut next),
        );
        for e in &encoded {
            w.push(e)?;
        }
        batch = following?;
    }
    if next != needed.len() {
        return Err(changed(format!(
            "it ended after {pos} documents; the first pass read {}",
            ids.len()
        )));
    }
    Ok(w.finish(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(format_size(6 << 30), "6.00 GiB");
    }
}
