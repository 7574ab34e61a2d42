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
//! Memory: what stays resident is estimated before each phase from the document count, the thread count and
//! the configuration, and a run whose resident part cannot fit stops with [`OutOfCoreError::TooSmall`] before
//! allocating it. The estimate's fixed part ([`base_bytes`]) covers the process as it stands and its code yet
//! to run, the workers and the read batches; the workers' buffers grow with the longest text
//! ([`SCRATCH_PER_TEXT_BYTE`]); a bucket's pairs are counted when a bucket that large is met, not for the
//! largest the bucket cap allows. Peak resident memory is checked against the limit by
//! `tests/memory_limit.rs` (the CLI) and `tests/memory_floor.rs` (the library).

use super::error::DedupError;
pub use super::memory::{MemoryLimit, OutOfCoreError, format_size, parse_size};
use super::options::{DedupConfig, DedupOptions, Verify};
use super::outcome::{CheckedPair, DedupOutcome, DedupReport};
use super::spill::{RecordFile, RecordWriter, SeqFile, Sorter, SpillDir, SpillError};
use super::steps::{
    check_pair, check_rank_field, group_verified, short_removals, text_length, unband_short,
};
use super::write::write_outputs;
use crate::corpus::{CorpusReader, Document};
use crate::exec::Progress;
use crate::kernel::Kernel;
use crate::lsh::choice::band_hasher;
use crate::lsh::cluster::{self, Group, GroupStats};
use crate::lsh::index::{BandHasher, CandidateStats, TooManyCandidates, emit_group};
use crate::sets;
use crate::shingle::Shingler;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

impl From<SpillError> for DedupError {
    fn from(e: SpillError) -> DedupError {
        DedupError::OutOfCore(OutOfCoreError::Spill(e))
    }
}

/// The fixed part of every estimate for a run on `threads` workers, measured when it is called: the process as
/// it stands ([`process_bytes`]: the code, the libraries, and whatever the caller holds), each worker's stack,
/// small buffers and allocator arena ([`PER_THREAD_BYTES`]), and two corpus readers' text in flight (the
/// second pass reads while the first reader is still open: [`READ_BYTES`] each).
pub fn base_bytes(threads: u64) -> u64 {
    process_bytes() + threads * PER_THREAD_BYTES + 2 * READ_BYTES
}

/// The process's share of an estimate: on Linux, its resident bytes now plus the executable code it has not run
/// yet (each executable file mapping's size less its resident part, from `/proc/self/smaps`: the code of the
/// later phases, paged in as they run, counts in the peak too); elsewhere, or when that file cannot be read,
/// [`FIXED_BYTES`]. A debug build's code alone is about 20 MB resident, a release build's about 6 MB.
pub fn process_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|smaps| resident_and_unrun_code(&smaps))
        .unwrap_or(FIXED_BYTES)
}

/// From the text of `/proc/self/smaps`: the resident bytes of every mapping, plus the bytes not resident of
/// the executable file mappings. `None` if no mapping was found.
fn resident_and_unrun_code(smaps: &str) -> Option<u64> {
    let kb = |line: &str, key: &str| -> Option<u64> {
        line.strip_prefix(key)?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse::<u64>()
            .ok()
            .map(|k| k << 10)
    };
    let (mut resident, mut unrun, mut mappings) = (0u64, 0u64, 0u64);
    // The mapping whose fields follow: whether it maps a file's code, and its size.
    let (mut code, mut size) = (false, 0u64);
    for line in smaps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let first = fields.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: `start-end perms offset dev inode [path]`.
            let perms = fields.next().unwrap_or("");
            let inode = fields.nth(2).unwrap_or("0");
            code = perms.contains('x') && inode != "0";
            mappings += 1;
        } else if let Some(b) = kb(line, "Size:") {
            size = b;
        } else if let Some(b) = kb(line, "Rss:") {
            resident += b;
            if code {
                unrun += size.saturating_sub(b);
            }
        }
    }
    (mappings > 0).then_some(resident + unrun)
}

/// See [`process_bytes`].
pub const FIXED_BYTES: u64 = 24 << 20;
/// See [`base_bytes`].
pub const PER_THREAD_BYTES: u64 = 4 << 20;
/// See [`base_bytes`]: a few 256-KB batches of text and the gzip read-ahead's chunks (two in flight, four
/// spare, 512 KB each).
pub const READ_BYTES: u64 = 4 << 20;

/// Bytes each worker may hold per byte of the longest text read (as long as the run lasts: the buffers are
/// per-thread and kept from one document to the next): the first pass's window ids (a `u64` per window, at
/// most one window per byte, in a vector that may have doubled: 16), the second pass's window ids and the
/// sort buffer of its verification set (8 each: both are reserved exactly) and a normalised copy of the
/// text (2).
pub const SCRATCH_PER_TEXT_BYTE: u64 = 16 + 8 + 8 + 2;

/// Text bytes of the documents the second pass holds in one batch (it stops at the first document that reaches
/// this): their records, about 8 bytes per byte of text, are in memory together before they are stored.
const SECOND_PASS_BATCH_BYTES: u64 = 256 << 10;

/// Bytes of the group phase's cache of documents read back, per worker (the group's centre and the pair being
/// compared stay beside it).
const GROUP_CACHE_BYTES: u64 = 1 << 20;

/// Bytes glibc's malloc uses for an allocation of `len` bytes (16-byte chunks with an 8-byte header, 32 at
/// least; nothing for an empty string).
fn heap_bytes(len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ((len as u64 + 8).div_ceil(16) * 16).max(32)
    }
}

/// One band's keys, one per document in input order: in memory (in fixed-size chunks, so growth never doubles a
/// buffer) or in a spill file.
enum Column {
    Memory(Vec<Vec<u64>>),
    Disk(SeqFile<u64>),
}

const CHUNK: usize = 1 << 16;

/// Per-document state of the first pass, and the band columns it filled.
#[derive(Default)]
struct FirstPass {
    columns: Vec<Column>,
    ids: Vec<String>,
    id_heap: u64,
    empty: Vec<bool>,
    /// Two independent hashes of the banded slots (the class key).
    full: Vec<(u64, u64)>,
    /// Text lengths for a length survivor policy.
    rank_inputs: super::survivor::RankInputs,
    /// Short documents taken out of banding (`--short keep|drop`).
    short_docs: Vec<u32>,
    /// Resident bytes of the reader's survivor-column values.
    rank_values_bytes: u64,
    /// Bytes of the longest text read.
    longest: u64,
}

impl FirstPass {
    /// Resident bytes of the ids.
    fn ids_bytes(&self) -> u64 {
        self.id_heap + self.ids.capacity() as u64 * 24
    }

    /// Resident bytes of this state (capacities, so a pending doubling is counted when it happens).
    fn resident(&self) -> u64 {
        self.id_heap
            + self.ids.capacity() as u64 * 24
            + self.empty.capacity() as u64
            + self.full.capacity() as u64 * 16
            + self.rank_inputs.lengths.capacity() as u64 * 4
            + self.short_docs.capacity() as u64 * 4
            + self.rank_values_bytes
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

/// What every stage of a run needs to know: the limit, the banding and its hashes, and the sizes that the
/// memory estimates are made of.
struct Plan<'a> {
    limit: &'a MemoryLimit,
    config: &'a DedupConfig,
    /// Worker threads (each may hold a band, a bucket's pairs or a batch's records at once).
    threads: u64,
    /// Slots per signature.
    k: usize,
    hasher: BandHasher,
    /// The seeds of the two independent hashes of a document's banded slots (its class key).
    seed_full: u64,
    seed_check: u64,
    /// The fixed part of every estimate ([`base_bytes`]), and from the end of the first pass, the workers'
    /// buffers for the longest text ([`Plan::scratch`]).
    base: u64,
}

/// Resident bytes per document after the first pass and during banding, besides the id: the empty flag and
/// class hashes (17), the class tables (12) and the sort of the class keys (16).
const PER_DOC_BANDING: u64 = 17 + 12 + 16;

impl Plan<'_> {
    /// Stops the run with [`OutOfCoreError::TooSmall`] when `need` bytes do not fit under the limit.
    fn check(
        &self,
        need: u64,
        what: &'static str,
        detail: impl FnOnce() -> String,
    ) -> Result<(), DedupError> {
        if need > self.limit.bytes {
            return Err(DedupError::OutOfCore(OutOfCoreError::TooSmall {
                limit: self.limit.bytes,
                need,
                what,
                detail: detail(),
            }));
        }
        Ok(())
    }

    /// Bytes a band in flight holds for `n` documents' `(key, class)` records, over all workers.
    fn band_work(&self, n: u64) -> u64 {
        n * 16 * self.threads
    }

    /// Bytes the workers' per-thread buffers may hold for texts of up to `longest` bytes
    /// ([`SCRATCH_PER_TEXT_BYTE`]), and the two readers' line buffers for them (a line longer than a reader's
    /// buffer is copied out whole, into a vector that may have doubled).
    fn scratch(&self, longest: u64) -> u64 {
        longest * (self.threads * SCRATCH_PER_TEXT_BYTE + 2 * 2)
    }

    /// Bytes of one document's record read back in the verification and group phases: its signature and its
    /// verification set (a `u64` per window at most, so 8 per byte of the longest text).
    fn record_bytes(&self, longest: u64) -> u64 {
        self.k as u64 * 4 + 8 * longest + 64
    }

    /// Checks that enumerating a bucket of `size` documents (all its pairs up to the cap, a star above it) fits
    /// beside `resident`, on every worker at once: the pairs are in memory together until they are sorted.
    fn check_bucket(&self, resident: u64, size: usize) -> Result<(), DedupError> {
        let cap = self.config.bucket_cap;
        let pairs = if size <= cap {
            size as u64 * (size as u64).saturating_sub(1) / 2
        } else {
            size as u64
        };
        // 8 bytes a pair, twice for the buffer's growth.
        let burst = pairs * 16 * self.threads;
        self.check(resident + burst, "enumerating a bucket", || {
            format!(
                "a bucket of {size} documents: {} for {} workers' pairs at --bucket-cap {cap}, beside {} resident",
                format_size(burst),
                self.threads,
                format_size(resident)
            )
        })
    }
}

/// The out-of-core [`super::run`] (called from it when `options.memory_limit` is set, with the configuration
/// the two runs share), stage by stage: sign and spill the band keys ([`first_pass`]), find the classes of
/// identical banded slots ([`find_classes`]), band them into candidate pairs ([`band_candidates`]), reread the
/// candidates ([`second_pass`]), verify ([`verify_candidates`]), group ([`group_candidates`]) and write.
pub(super) fn run(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    options: &DedupOptions,
    limit: &MemoryLimit,
    config: DedupConfig,
    progress: &dyn Progress,
) -> Result<DedupReport, DedupError> {
    let t0 = Instant::now();
    refuse_unsupported(options)?;
    let threads = rayon::current_num_threads() as u64;
    let hasher = band_hasher(config.choice.banding, config.seed);
    let mut plan = Plan {
        limit,
        config: &config,
        threads,
        k: kernel.num_perm(),
        seed_full: hasher.seed ^ 0x9e37_79b9_7f4a_7c15,
        seed_check: hasher.seed ^ 0x2545_f491_4f6c_dd1d,
        hasher,
        base: base_bytes(threads),
    };
    plan.check(plan.base, "starting the run", || {
        format!(
            "the process as it stands and its code yet to run, {threads} workers' stacks and buffers and the \
             read batches in flight"
        )
    })?;
    let dir = SpillDir::new(limit.tmp_dir.as_deref())?;

    check_rank_field(options, reader)?;
    let mut first = first_pass(reader, shingler, kernel, options, &plan, &dir, progress)?;
    let read = reader.stats().clone();
    let n = first.ids.len();
    assert!(n <= u32::MAX as usize, "document positions are u32");
    // The workers' buffers for the longest text stay from here on.
    plan.base += plan.scratch(first.longest);
    first.rank_values_bytes = reader.rank_values_bytes();
    plan.check(plan.base + first.resident(), "ranking survivors", || {
        format!("{n} documents' ids, flags, class hashes and survivor values")
    })?;
    first.rank_inputs.values = reader.take_rank_values();
    let rank = super::survivor::ranking(&options.keep, 0, n, &first.rank_inputs, &first.ids)?;
    first.rank_inputs = Default::default();
    first.rank_values_bytes = 0;
    let short_docs = std::mem::take(&mut first.short_docs);
    let mut stages = vec![("read+shingle+sign", t0.elapsed().as_secs_f64())];
    progress.stage("banding, verifying, grouping");

    let t_band = Instant::now();
    let columns = std::mem::take(&mut first.columns);
    let classes = find_classes(&mut first, &columns, &plan)?;
    let (cands, stats) = band_candidates(columns, classes, &first, &plan, &dir)?;
    stages.push(("band", t_band.elapsed().as_secs_f64()));

    let t_sets = Instant::now();
    let mut needed: Vec<u32> = cands.iter().flat_map(|&(a, b)| [a, b]).collect();
    needed.par_sort_unstable();
    needed.dedup();
    needed.shrink_to_fit();
    let record_budget = reread_budget(&plan, &first, cands.len() as u64, needed.len())?;
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

    let store = Store {
        records: &records,
        needed: &needed,
        k: plan.k,
        exact: config.verify == Verify::Exact,
        dispatch: shingler.dispatch(),
    };
    let t_verify = Instant::now();
    let verified = verify_candidates(cands, &store, kernel, &config)?;
    stages.push(("verify", t_verify.elapsed().as_secs_f64()));

    let t_group = Instant::now();
    let (groups, group_stats, to_center) =
        group_candidates(n, &verified, &store, kernel, &config, rank.as_deref())?;
    drop(records);
    stages.push(("group", t_group.elapsed().as_secs_f64()));
    let empty_documents = first.empty.iter().filter(|&&e| e).count() as u64;
    let short_removed = short_removals(options.short, &short_docs);

    let mut outcome = DedupOutcome {
        ids: first.ids,
        loaded: 0,
        empty_documents,
        candidates: stats,
        verified,
        groups,
        group_stats,
        to_center,
        keep: options.keep.clone(),
        short: options.short,
        short_removed,
        config,
        stage_seconds: stages,
    };
    progress.stage("writing");
    let t_write = Instant::now();
    write_outputs(&options.outputs, &outcome, reader)?;
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

/// The memory left for the reread records once verifying and grouping are provided for (0 when the limit
/// asks for a run file): refuses the run when even that does not fit the limit.
fn reread_budget(
    plan: &Plan,
    first: &FirstPass,
    candidates: u64,
    needed: usize,
) -> Result<u64, DedupError> {
    let n = first.ids.len();
    let (nn, nc) = (n as u64, candidates);
    let threads = plan.threads;
    let checked = std::mem::size_of::<CheckedPair>() as u64;
    // Ids, candidates, the verified pairs (at most one per candidate: the workers' lists, then the one they
    // are gathered into, which may have doubled), the needed list and the record index (4 bytes, and 12 or 8
    // in vectors that may have doubled), the grouping's per-document arrays (degree, weight, union-find,
    // slots, group of: 28 bytes each), the groups' members and their similarities to the centre (16) and edges.
    let verify_need = plan.base
        + first.ids_bytes()
        + nn
        + nc * (8 + 3 * checked + 16 + 8)
        + needed as u64 * (4 + 2 * 12)
        + nn * (28 + 16);
    // Beside that, the second pass holds two batches of texts and one of records (about 8 bytes per byte of
    // text, and a signature each) and its spill file's 1-MB buffer; verifying and grouping hold a few
    // documents read back per worker, and the group cache; writing, the output files' buffers.
    let longest = first.longest;
    let second_work = 10 * (SECOND_PASS_BATCH_BYTES + longest)
        + 2 * crate::pipeline::BATCH_DOCS as u64 * (plan.k as u64 * 4 + 128)
        + (1 << 20);
    let verify_work = threads * (4 * plan.record_bytes(longest) + GROUP_CACHE_BYTES);
    // Writing the outputs: a buffer per file.
    let write_work = 3 * (1 << 20);
    let work = second_work.max(verify_work).max(write_work);
    plan.check(verify_need + work, "verifying and grouping", || {
        format!(
            "{n} documents, {nc} candidate pairs over {} documents: ids, candidates, verified pairs, grouping \
             tables, and {} to reread, verify and group texts of up to {longest} bytes",
            needed,
            format_size(work)
        )
    })?;
    // What is left under the limit holds records in memory; the rest go to a spill file.
    Ok(match plan.limit.run_records {
        Some(_) => 0,
        None => plan.limit.bytes.saturating_sub(verify_need + work),
    })
}

/// The options an out-of-core run cannot honour: it keeps no signatures.
fn refuse_unsupported(options: &DedupOptions) -> Result<(), DedupError> {
    let refused = [
        (options.load.is_some(), "--load"),
        (options.save.is_some(), "--save"),
    ];
    match refused.into_iter().find(|(set, _)| *set) {
        Some((_, what)) => Err(DedupError::OutOfCore(OutOfCoreError::Unsupported(what))),
        None => Ok(()),
    }
}

/// Pass 1: reads, shingles and signs the corpus; keeps each document's id, empty flag and class hashes, and
/// puts its band keys in one column per band, in memory while the estimate of the whole run allows and on
/// disk from then on.
fn first_pass(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    options: &DedupOptions,
    plan: &Plan<'_>,
    dir: &SpillDir,
    progress: &dyn Progress,
) -> Result<FirstPass, DedupError> {
    let (k, bands) = (plan.k, plan.hasher.banding.bands);
    let used = plan.hasher.banding.hashes();
    let mut first = FirstPass {
        columns: (0..bands).map(|_| Column::Memory(Vec::new())).collect(),
        ..FirstPass::default()
    };
    let mut writers: Option<Vec<super::spill::SeqWriter<'_, u64>>> = None;
    let mut keys_batch: Vec<u64> = Vec::new();
    crate::pipeline::sketch_corpus(reader, shingler, kernel, |batch| {
        progress.inc(batch.docs.len() as u64);
        let m = batch.docs.len();
        let at = first.ids.len();
        first.short_docs.extend(
            unband_short(batch, shingler, options.short)
                .into_iter()
                .map(|i| (at + i) as u32),
        );
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
                    hash_slots(&sig[..used], plan.seed_full),
                    hash_slots(&sig[..used], plan.seed_check),
                );
                for (band, key) in keys.iter_mut().enumerate() {
                    *key = plan.hasher.key(band, sig);
                }
            });
        first.full.extend_from_slice(&full);
        first.empty.extend_from_slice(&batch.empty);
        for doc in &mut batch.docs {
            if options.keep.needs_lengths() {
                first.rank_inputs.lengths.push(text_length(&doc.text));
            }
            first.longest = first.longest.max(doc.text.len() as u64);
            first.id_heap += heap_bytes(doc.id.capacity());
            first.ids.push(std::mem::take(&mut doc.id));
        }
        let n = first.ids.len() as u64;
        if options.keep.field().is_some() {
            // The reader holds one value per document (text values' bytes are counted after the pass).
            first.rank_values_bytes = n * std::mem::size_of::<crate::corpus::FieldValue>() as u64;
        }
        let writers_bytes = if writers.is_some() {
            bands as u64 * super::spill::BUF_BYTES
        } else {
            0
        };
        let resident = plan.base + plan.scratch(first.longest) + first.resident() + writers_bytes;
        plan.check(resident, "reading the corpus", || {
            format!(
                "{n} documents so far: their ids and 17 bytes each of flags and class hashes, {} of \
                 buffers for texts of up to {} bytes, plus {} fixed",
                format_size(plan.scratch(first.longest)),
                first.longest,
                format_size(plan.base)
            )
        })?;
        if writers.is_none() {
            // Columns grow a chunk at a time: the chunks' full size is what they hold.
            let in_memory = n.div_ceil(CHUNK as u64) * CHUNK as u64 * bands as u64 * 8;
            let later = n * PER_DOC_BANDING + plan.band_work(n);
            if resident + in_memory + later > plan.limit.bytes || plan.limit.run_records.is_some() {
                writers = Some(spill_columns(&mut first.columns, dir)?);
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
                for (band, c) in first.columns.iter_mut().enumerate() {
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
        for (c, w) in first.columns.iter_mut().zip(ws) {
            *c = Column::Disk(w.finish()?);
        }
    }
    Ok(first)
}

/// Moves the band columns to spill files: writers holding every key so far, for every later key to follow.
fn spill_columns<'d>(
    columns: &mut [Column],
    dir: &'d SpillDir,
) -> Result<Vec<super::spill::SeqWriter<'d, u64>>, DedupError> {
    let mut ws = Vec::with_capacity(columns.len());
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
    Ok(ws)
}

/// Documents with identical banded slots, as the in-memory run finds them: each class's members in order,
/// and the class each representative (first member) stands for.
struct Classes {
    reps: Vec<u32>,
    starts: Vec<u32>,
    members: Vec<u32>,
    /// The class of each representative, `u32::MAX` for every other document.
    rep_class: Vec<u32>,
}

impl Classes {
    fn members(&self, c: usize) -> &[u32] {
        &self.members[self.starts[c] as usize..self.starts[c + 1] as usize]
    }
}

/// Resident bytes of the band columns held in memory.
fn columns_bytes(columns: &[Column]) -> u64 {
    columns
        .iter()
        .map(|c| match c {
            Column::Memory(chunks) => (chunks.len() * CHUNK * 8) as u64,
            Column::Disk(_) => 0,
        })
        .sum()
}

/// Classes of identical banded slots, in the in-memory order: by (hash, position), a hash run split by slot
/// equality (here: the second, independent hash, so that a collision of the first does not merge) in order of
/// first member. Frees the class hashes.
fn find_classes(
    first: &mut FirstPass,
    columns: &[Column],
    plan: &Plan<'_>,
) -> Result<Classes, DedupError> {
    let n = first.ids.len();
    let held = plan.base + first.ids_bytes() + columns_bytes(columns);
    plan.check(held + n as u64 * PER_DOC_BANDING, "finding classes", || {
        format!("{n} documents: ids, band keys held in memory, 45 bytes each of class tables")
    })?;
    let mut by_full: Vec<(u64, u32)> = (0..n)
        .into_par_iter()
        .filter(|&i| !first.empty[i])
        .map(|i| (first.full[i].0, i as u32))
        .collect();
    by_full.par_sort_unstable();
    let mut classes = Classes {
        reps: Vec::new(),
        starts: vec![0],
        members: Vec::with_capacity(by_full.len()),
        rep_class: vec![u32::MAX; n],
    };
    crate::lsh::index::hash_classes(
        &by_full,
        |a, b| first.full[a as usize].1 == first.full[b as usize].1,
        |same| {
            classes.reps.push(same[0]);
            classes.members.extend_from_slice(&same);
            classes.starts.push(classes.members.len() as u32);
        },
    );
    drop(by_full);
    first.full = Vec::new();
    for (c, &r) in classes.reps.iter().enumerate() {
        classes.rep_class[r as usize] = c as u32;
    }
    Ok(classes)
}

/// What one band's walk over its buckets counted.
#[derive(Default)]
struct BandCounts {
    shared: u64,
    largest: u64,
    capped: u64,
    skipped: u64,
}

/// Candidate pairs, sorted and without repeats, and the counts of the in-memory run's banding: first the pairs
/// within each class, then band by band (each band on one worker) the pairs of every bucket, all through an
/// external sorter.
fn band_candidates(
    columns: Vec<Column>,
    classes: Classes,
    first: &FirstPass,
    plan: &Plan<'_>,
    dir: &SpillDir,
) -> Result<(Vec<(u32, u32)>, CandidateStats), DedupError> {
    let (n, threads) = (first.ids.len() as u64, plan.threads);
    let config = plan.config;
    let held = plan.base
        + first.ids_bytes()
        + columns_bytes(&columns)
        + n * 13
        + classes.reps.len() as u64 * 8;
    let avail = plan.limit.bytes.saturating_sub(held);
    // Half of what is left for the bands in flight, a quarter for the pair sorter.
    let band_run = plan
        .limit
        .run_records
        .unwrap_or((avail / 2 / (16 * threads)) as usize)
        .max(1);
    let pair_run = plan
        .limit
        .run_records
        .unwrap_or((avail / 4 / 8) as usize)
        .max(1);
    // A band in flight also holds a reader per sorted run to merge, its column's reader and a run's writer, and
    // its walk's pairs before they go to the pair sorter (up to 2^16 of them).
    let reps = classes.reps.len() as u64;
    let band_extra =
        threads * ((reps.div_ceil(band_run as u64) + 2) * super::spill::BUF_BYTES + (8 << 16));
    let band_need = plan.band_work((band_run as u64).min(reps).max(1)) + band_extra;
    plan.check(held + band_need, "banding", || {
        format!(
            "{n} documents: ids, band keys held in memory, class tables, {} for {threads} bands in flight",
            format_size(band_need)
        )
    })?;
    let mut stats = CandidateStats {
        documents: classes.members.len() as u64,
        ..CandidateStats::default()
    };
    let pairs = Mutex::new(Sorter::<u64>::new(dir, "pairs", pair_run, true));
    let emitted = AtomicU64::new(0);
    let too_many = || DedupError::TooManyCandidates {
        banding: config.choice.banding,
        cause: TooManyCandidates {
            limit: config.max_candidates,
        },
    };
    let mut out = Vec::new();
    for c in 0..classes.reps.len() {
        let m = classes.members(c);
        if m.len() > 1 {
            stats.duplicate_classes += 1;
            stats.documents_in_duplicate_classes += m.len() as u64;
            stats.largest_duplicate_class = stats.largest_duplicate_class.max(m.len() as u64);
            plan.check_bucket(held, m.len())?;
            stats.pairs_not_enumerated += emit_group(&[m], config.bucket_cap, &mut out);
            if m.len() > config.bucket_cap {
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
    drop(out);
    let columns: Vec<Mutex<Option<Column>>> =
        columns.into_iter().map(|c| Mutex::new(Some(c))).collect();
    // Each band on one worker, no nested parallelism: at most `threads` bands are in memory at once.
    let per_band: Vec<Result<BandCounts, DedupError>> = {
        let walker = BandWalker {
            classes: &classes,
            plan,
            held: held + band_need,
            pairs: &pairs,
            emitted: &emitted,
            too_many: &too_many,
        };
        (0..columns.len())
            .into_par_iter()
            .with_max_len(1)
            .map(|band| {
                let column = columns[band]
                    .lock()
                    .expect("no panic")
                    .take()
                    .expect("each band once");
                let sorted = sort_band(column, &classes.rep_class, dir, band_run)?;
                walker.walk(sorted)
            })
            .collect()
    };
    for r in per_band {
        let counts = r?;
        stats.shared_buckets += counts.shared;
        stats.largest_bucket = stats.largest_bucket.max(counts.largest);
        stats.capped_groups += counts.capped;
        stats.pairs_not_enumerated += counts.skipped;
    }
    if emitted.load(Ordering::Relaxed) > config.max_candidates {
        return Err(too_many());
    }
    drop(classes);
    let pairs = pairs.into_inner().expect("no panic");
    // The merge reads every sorted run of pairs at once, beside the pairs kept in memory.
    let merge = (pairs.runs() as u64 + 1) * super::spill::BUF_BYTES + pair_run as u64 * 8;
    plan.check(held + merge, "merging candidate pairs", || {
        format!("{} sorted runs of candidate pairs to merge", pairs.runs())
    })?;
    let mut merged = pairs.finish()?;
    let mut cands: Vec<(u32, u32)> = Vec::new();
    while let Some(p) = merged.next_record()? {
        cands.push(((p >> 32) as u32, p as u32));
    }
    stats.candidates = cands.len() as u64;
    Ok((cands, stats))
}

/// One band's `(key, class)` records of the class representatives, sorted by key (through sorted runs of
/// `run_records` on disk, merged); the column is consumed (its spill file removed).
fn sort_band(
    column: Column,
    rep_class: &[u32],
    dir: &SpillDir,
    run_records: usize,
) -> Result<super::spill::Merge<(u64, u32)>, DedupError> {
    let mut sorter = Sorter::<(u64, u32)>::new(dir, "band-run", run_records, false);
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
            if doc != rep_class.len() {
                return Err(SpillError::Corrupt {
                    path: file.path().to_path_buf(),
                    what: "wrong record count",
                }
                .into());
            }
            file.remove();
        }
    }
    Ok(sorter.finish()?)
}

/// Walks a band's sorted records bucket by bucket and emits each shared bucket's pairs as
/// [`crate::lsh::index`] does (the same star rule over the bucket cap, the same counts).
struct BandWalker<'a, 'd, F: Fn() -> DedupError> {
    classes: &'a Classes,
    plan: &'a Plan<'a>,
    /// Resident bytes beside a bucket's pairs.
    held: u64,
    pairs: &'a Mutex<Sorter<'d, u64>>,
    emitted: &'a AtomicU64,
    too_many: &'a F,
}

impl<F: Fn() -> DedupError + Sync> BandWalker<'_, '_, F> {
    fn walk(&self, mut sorted: super::spill::Merge<(u64, u32)>) -> Result<BandCounts, DedupError> {
        let mut counts = BandCounts::default();
        let mut out: Vec<u64> = Vec::new();
        let mut bucket: Vec<u32> = Vec::new();
        let mut current: Option<u64> = None;
        while let Some((key, c)) = sorted.next_record()? {
            if current != Some(key) {
                self.bucket(&mut bucket, &mut out, &mut counts)?;
                current = Some(key);
            }
            bucket.push(c);
        }
        self.bucket(&mut bucket, &mut out, &mut counts)?;
        self.pairs.lock().expect("no panic").extend(&out)?;
        Ok(counts)
    }

    /// The pairs of one bucket of classes (none for a bucket of one).
    fn bucket(
        &self,
        bucket: &mut Vec<u32>,
        out: &mut Vec<u64>,
        counts: &mut BandCounts,
    ) -> Result<(), DedupError> {
        if bucket.len() > 1 {
            let classes: Vec<&[u32]> = bucket
                .iter()
                .map(|&c| self.classes.members(c as usize))
                .collect();
            let size: usize = classes.iter().map(|c| c.len()).sum();
            counts.shared += 1;
            counts.largest = counts.largest.max(size as u64);
            let cap = self.plan.config.bucket_cap;
            if size > cap {
                counts.capped += 1;
            }
            self.plan.check_bucket(self.held, size)?;
            let before = out.len();
            counts.skipped += emit_group(&classes, cap, out);
            let added = (out.len() - before) as u64;
            if self.emitted.fetch_add(added, Ordering::Relaxed) + added
                > self.plan.config.max_candidates
            {
                return Err((self.too_many)());
            }
            if out.len() >= 1 << 16 {
                self.pairs.lock().expect("no panic").extend(out)?;
                out.clear();
            }
        }
        bucket.clear();
        Ok(())
    }
}

/// Each candidate pair checked as the in-memory run checks it, the documents read back from the record file.
fn verify_candidates(
    cands: Vec<(u32, u32)>,
    store: &Store<'_>,
    kernel: &dyn Kernel,
    config: &DedupConfig,
) -> Result<Vec<CheckedPair>, DedupError> {
    let t = config.choice.threshold;
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
                let sets = store
                    .exact
                    .then_some((da.set.as_slice(), db.set.as_slice()));
                out.extend(check_pair(
                    config.verify,
                    t,
                    a,
                    b,
                    estimate,
                    sets,
                    store.dispatch,
                ));
            }
            Ok(out)
        })
        .collect();
    drop(cands);
    let mut verified = Vec::new();
    for c in chunks {
        verified.extend(c?);
    }
    Ok(verified)
}

/// Documents of one group read back from the record file, kept while they fit in [`GROUP_CACHE_BYTES`] (the
/// group's centre always).
struct GroupCache {
    center: u32,
    docs: FxHashMap<u32, Doc>,
    bytes: u64,
}

impl GroupCache {
    fn keep(&mut self, d: u32, doc: Doc) {
        let size = doc.sig.len() as u64 * 4 + doc.set.len() as u64 * 8 + 64;
        if d == self.center || self.bytes + size <= GROUP_CACHE_BYTES {
            self.bytes += size;
            self.docs.insert(d, doc);
        }
    }
}

/// Groups, each group's statistics and its members' similarities to the centre, as the in-memory run computes
/// them, with similarities read back from the record file (through a per-group cache of
/// [`GROUP_CACHE_BYTES`]).
#[allow(clippy::type_complexity)]
fn group_candidates(
    n: usize,
    verified: &[CheckedPair],
    store: &Store<'_>,
    kernel: &dyn Kernel,
    config: &DedupConfig,
    rank: Option<&[u32]>,
) -> Result<(Vec<Group>, Vec<GroupStats>, Vec<Vec<f64>>), DedupError> {
    let (groups, edges_by_group) = group_verified(n, verified, config.groups, rank);
    let failure: Mutex<Option<DedupError>> = Mutex::new(None);
    let similarity = |cache: &mut GroupCache, buf: &mut Vec<u8>, a: u32, b: u32| -> f64 {
        // The documents not cached, read back for this pair (and kept after it if the cache has room).
        let mut fresh: [Option<Doc>; 2] = [None, None];
        for (slot, d) in fresh.iter_mut().zip([a, b]) {
            if !cache.docs.contains_key(&d) {
                match store.load(d, buf) {
                    Ok(doc) => *slot = Some(doc),
                    Err(e) => {
                        failure.lock().expect("no panic").get_or_insert(e);
                        return f64::NAN;
                    }
                }
            }
        }
        let s = {
            let [x, y] = [(&fresh[0], a), (&fresh[1], b)]
                .map(|(f, d)| f.as_ref().unwrap_or_else(|| &cache.docs[&d]));
            if store.exact {
                sets::jaccard_ids(&x.set, &y.set, store.dispatch)
            } else {
                kernel.estimate(&x.sig, &y.sig)
            }
        };
        for (f, d) in fresh.into_iter().zip([a, b]) {
            if let Some(doc) = f {
                cache.keep(d, doc);
            }
        }
        s
    };
    let t = config.choice.threshold;
    let (group_stats, to_center): (Vec<GroupStats>, Vec<Vec<f64>>) = groups
        .par_iter()
        .zip(edges_by_group.par_iter())
        .map(|(g, es)| {
            let mut cache = GroupCache {
                center: g.center,
                docs: FxHashMap::default(),
                bytes: 0,
            };
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
                        similarity(&mut cache, &mut buf, m, g.center)
                    }
                })
                .collect();
            (stats, sims)
        })
        .unzip();
    if let Some(e) = failure.into_inner().expect("no panic") {
        return Err(e);
    }
    Ok((groups, group_stats, to_center))
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
    /// The instruction set the sets are intersected on (the shingler's).
    dispatch: crate::arch::Dispatch,
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
        let mut bytes = 0;
        while seen < crate::pipeline::BATCH_DOCS
            && bytes < SECOND_PASS_BATCH_BYTES
            && *next < needed.len()
        {
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
                bytes += doc.text.len() as u64;
                out.push(doc);
                *next += 1;
            }
            *pos += 1;
            seen += 1;
        }
        Ok(out)
    };
    // One per-thread buffer for the window ids of both the signature and the verification set.
    let encode = |doc: &Document| -> Vec<u8> {
        let mut sig = vec![0u32; k];
        SCRATCH.with_borrow_mut(|scratch| {
            // Room for a window per byte at once, so that the buffer never doubles.
            scratch.clear();
            scratch.reserve_exact(doc.text.len());
            kernel.sign_text(shingler, &doc.text, scratch, &mut sig);
            let set = if verify == Verify::Exact {
                let kept = sets::verification_ids(shingler, &doc.text, scratch);
                &scratch[..kept]
            } else {
                &[]
            };
            let mut bytes = Vec::with_capacity(k * 4 + set.len() * 8);
            for s in sig {
                bytes.extend_from_slice(&s.to_le_bytes());
            }
            for x in set {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            bytes
        })
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
