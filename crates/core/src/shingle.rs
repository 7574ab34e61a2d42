//! Text to shingle ids: every window of a document becomes a 64-bit id through a seeded, platform-independent
//! hash. Kinds: `char:K`, `byte:K`, `word:N`, `stopword:N`. Normalisation is opt-in.
//!
//! The id is defined on the window's UTF-8 bytes ([`shingle_id`]), so the ASCII fast path of `char:K` (a window
//! is K bytes, read as one unaligned little-endian load) and the generic path (windows cut at char boundaries)
//! give the same ids. A window of at most 8 bytes (every `char:K` window of ASCII text with K <= 8) gets a seeded
//! bijection of its zero-padded little-endian word and its length ([`mix_short`]; the kernels do the hashing);
//! longer windows get `xxh3_64_with_seed`. Both are defined on bytes and little-endian loads, so every platform
//! gives the same value.

use crate::arch::{Dispatch, Isa, Unsupported};
use crate::hash::mix64;
use crate::window::{CollectIds, ShortRun, WindowKey, low_bytes_mask};
pub use crate::window::{WindowSink, WindowSource, mix_short, shingle_id};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// Which windows of a text become shingles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShingleKind {
    /// K consecutive Unicode scalar values.
    Char(usize),
    /// K consecutive bytes of the UTF-8 encoding.
    Byte(usize),
    /// N consecutive tokens (maximal runs of non-whitespace).
    Word(usize),
    /// A stop word followed by the next N tokens.
    StopWord(usize),
}

impl FromStr for ShingleKind {
    type Err = String;
    /// Parses `char:5`, `byte:8`, `word:3`, `stopword:2`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, n) = s.split_once(':').ok_or_else(|| {
            format!("shingle `{s}`: expected KIND:N, e.g. char:5, byte:8, word:3, stopword:2")
        })?;
        let n: usize = n
            .parse()
            .map_err(|_| format!("shingle `{s}`: `{n}` is not a whole number"))?;
        if n == 0 {
            return Err(format!("shingle `{s}`: the length must be at least 1"));
        }
        match kind {
            "char" => Ok(ShingleKind::Char(n)),
            "byte" => Ok(ShingleKind::Byte(n)),
            "word" => Ok(ShingleKind::Word(n)),
            "stopword" => Ok(ShingleKind::StopWord(n)),
            other => Err(format!(
                "shingle `{s}`: unknown kind `{other}` (char, byte, word, stopword)"
            )),
        }
    }
}

impl fmt::Display for ShingleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShingleKind::Char(k) => write!(f, "char:{k}"),
            ShingleKind::Byte(k) => write!(f, "byte:{k}"),
            ShingleKind::Word(n) => write!(f, "word:{n}"),
            ShingleKind::StopWord(n) => write!(f, "stopword:{n}"),
        }
    }
}

/// Opt-in text normalisation, applied before shingling. The default leaves the text exactly as given.
///
/// Applied in this order: strip punctuation (every char that is neither alphanumeric nor whitespace, so symbols
/// go too), lowercase (Unicode `char::to_lowercase`), collapse whitespace (each run of Unicode whitespace becomes
/// one ASCII space; leading and trailing whitespace is removed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Normalization {
    /// Lowercase (Unicode).
    pub lowercase: bool,
    /// Each whitespace run becomes one space; the ends are trimmed.
    pub collapse_whitespace: bool,
    /// Drop every char that is neither alphanumeric nor whitespace.
    pub strip_punctuation: bool,
}

impl Normalization {
    /// Whether any flag is on (otherwise the text is used as given and nothing is allocated).
    pub fn any(&self) -> bool {
        self.lowercase || self.collapse_whitespace || self.strip_punctuation
    }

    /// The normalised text; borrows `text` unchanged when no flag is on.
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.any() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        // `pending_space`: a whitespace run was seen and is written only if a non-space char follows it.
        let mut pending_space = false;
        for c in text.chars() {
            if self.strip_punctuation && !c.is_alphanumeric() && !c.is_whitespace() {
                continue;
            }
            if self.collapse_whitespace && c.is_whitespace() {
                pending_space = !out.is_empty();
                continue;
            }
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            if self.lowercase {
                out.extend(c.to_lowercase());
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out)
    }
}

/// Turns texts into shingle ids. Cheap to clone and shareable across threads.
#[derive(Clone, Debug)]
pub struct Shingler {
    /// Which windows become shingles.
    pub kind: ShingleKind,
    /// Applied to the text before shingling.
    pub normalization: Normalization,
    /// Seed of the window ids.
    pub seed: u64,
    /// The instruction set of the window loops (the arithmetic is exact: every choice gives the same ids).
    dispatch: Dispatch,
}

impl Shingler {
    /// A shingler on the instruction set [`Dispatch::detect`] picks.
    pub fn new(kind: ShingleKind, normalization: Normalization, seed: u64) -> Self {
        Shingler {
            kind,
            normalization,
            seed,
            dispatch: Dispatch::detect(),
        }
    }

    /// The same shingler on the instruction set `isa` (`None`: [`Dispatch::detect`]'s choice); fails when this
    /// CPU does not run `isa`.
    pub fn with_isa(self, isa: Option<Isa>) -> Result<Self, Unsupported> {
        Ok(self.with_dispatch(Dispatch::of(isa)?))
    }

    /// The same shingler on an already checked instruction set.
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Self {
        self.dispatch = dispatch;
        self
    }

    /// The instruction set the window loops run on.
    pub fn dispatch(&self) -> Dispatch {
        self.dispatch
    }

    /// Clears `out` and pushes the id of every window of `text`, in text order, duplicates included
    /// (MinHash is idempotent under repeats, so kernels need no dedup). Text shorter than one window gives one
    /// shingle, the whole text; empty text gives none.
    pub fn hashes(&self, text: &str, out: &mut Vec<u64>) {
        self.hashes_known(text, false, out);
    }

    /// Whether `text` is shorter than one window: fewer than K characters (`char:K`) or bytes (`byte:K`), fewer
    /// than N tokens (`word:N`), or no stop word (`stopword:N`), after normalisation. Such a text's shingle set
    /// is its whole text as one shingle (or nothing, when it has no token).
    pub fn is_short(&self, text: &str) -> bool {
        let text = self.normalization.apply(text);
        match self.kind {
            ShingleKind::Char(k) => text.chars().nth(k - 1).is_none(),
            ShingleKind::Byte(k) => text.len() < k,
            ShingleKind::Word(n) => text.split_whitespace().nth(n - 1).is_none(),
            ShingleKind::StopWord(_) => !text.split_whitespace().any(is_stop_word),
        }
    }

    /// Whether this shingler's windows depend on `text` being all ASCII (`char:K` without normalisation: an
    /// ASCII text's windows are byte windows). Only then is [`KnownAscii`]'s flag worth finding.
    pub(crate) fn uses_ascii(&self) -> bool {
        matches!(self.kind, ShingleKind::Char(_)) && !self.normalization.any()
    }

    /// Whether `text` is all ASCII, checked on this shingler's instruction set.
    pub(crate) fn is_ascii(&self, text: &str) -> bool {
        is_ascii(text, self.dispatch)
    }

    /// [`Shingler::hashes`]; `known_ascii` says that `text` is all ASCII, so the check is skipped (false: check).
    fn hashes_known(&self, text: &str, known_ascii: bool, out: &mut Vec<u64>) {
        out.clear();
        // Normalisation makes a new text, which is checked itself.
        let known_ascii = known_ascii && !self.normalization.any();
        let text = self.normalization.apply(text);
        let text: &str = &text;
        if text.is_empty() {
            return;
        }
        let key = WindowKey::new(self.seed);
        let mut sink = CollectIds {
            out,
            dispatch: self.dispatch,
        };
        match self.kind {
            ShingleKind::Byte(k) => byte_windows(text.as_bytes(), k, &key, &mut sink),
            ShingleKind::Char(k) => {
                if known_ascii || is_ascii(text, self.dispatch) {
                    debug_assert!(text.is_ascii(), "a text flagged ASCII is not");
                    byte_windows(text.as_bytes(), k, &key, &mut sink)
                } else {
                    char_windows_generic(text, k, &key, self.dispatch, &mut sink)
                }
            }
            ShingleKind::Word(n) => word_windows(text, n, &key, sink.out),
            ShingleKind::StopWord(n) => stopword_windows(text, n, &key, sink.out),
        }
    }

    /// Sends the windows of `text` to `sink`, in order, when this shingler's windows are byte windows of at most
    /// 8 bytes: `byte:K` or `char:K` with K <= 8 and no normalisation. Returns false, sending nothing, for every
    /// other shingler. The ids sent (given, or implied by the runs) are exactly those [`Shingler::hashes`] pushes;
    /// an empty text sends nothing.
    pub fn stream_windows<S: WindowSink + ?Sized>(&self, text: &str, sink: &mut S) -> bool {
        self.stream_windows_known(text, false, sink)
    }

    /// [`Shingler::stream_windows`]; `known_ascii` says that `text` is all ASCII, so the check is skipped
    /// (false: check).
    fn stream_windows_known<S: WindowSink + ?Sized>(
        &self,
        text: &str,
        known_ascii: bool,
        sink: &mut S,
    ) -> bool {
        let (ShingleKind::Byte(k) | ShingleKind::Char(k)) = self.kind else {
            return false;
        };
        if k > 8 || self.normalization.any() {
            return false;
        }
        if text.is_empty() {
            return true;
        }
        let key = WindowKey::new(self.seed);
        if matches!(self.kind, ShingleKind::Char(_))
            && !known_ascii
            && !is_ascii(text, self.dispatch)
        {
            char_windows_generic(text, k, &key, self.dispatch, sink);
        } else {
            debug_assert!(
                !known_ascii || text.is_ascii(),
                "a text flagged ASCII is not"
            );
            byte_windows(text.as_bytes(), k, &key, sink);
        }
        true
    }

    /// The generic `char:K` path (char boundaries found by decoding), without the ASCII fast path. Public so
    /// tests can check that both paths agree; [`Shingler::hashes`] picks the fast path itself.
    pub fn char_hashes_generic(&self, text: &str, k: usize, out: &mut Vec<u64>) {
        out.clear();
        let text = self.normalization.apply(text);
        if !text.is_empty() {
            let mut sink = CollectIds {
                out,
                dispatch: self.dispatch,
            };
            char_windows_generic(
                &text,
                k,
                &WindowKey::new(self.seed),
                self.dispatch,
                &mut sink,
            );
        }
    }

    /// The shingle set of `text`: sorted, deduplicated ids. Exact Jaccard is computed on these.
    pub fn set(&self, text: &str) -> Vec<u64> {
        let mut ids = Vec::new();
        self.hashes(text, &mut ids);
        sort_dedup_ids(&mut ids);
        ids
    }

    /// The shingle set of `text` as [`mixed_set`] forms it, for exact Jaccard between such sets only: the
    /// same Jaccard as between [`Shingler::set`]s, built faster.
    pub fn mixed_set(&self, text: &str) -> Vec<u64> {
        let mut ids = Vec::new();
        self.hashes(text, &mut ids);
        mixed_set(&mut ids, self.dispatch);
        ids
    }
}

/// The shingle set of `ids` in the form verification compares: each id replaced by [`mix64`] of it, sorted
/// and deduplicated. `mix64` is a bijection, so two such sets have the same intersection and union sizes as
/// the sets of the ids themselves: exact Jaccard is unchanged. What changes is the cost of sorting: mixed ids
/// are spread evenly whatever the windows were (a `char:5` id varies in only 5 of its 8 bytes), so a cheap pass
/// drops most repeated ids first (a direct-mapped table of the last id per slot), and radix passes on their top
/// bits leave only the ids that share those bits out of order, which one insertion pass puts in place: one
/// counting pass on log2 n + 2 bits for up to 16,384 ids, two passes of B bits (2^(2B) well above n^2) above. About twice
/// as fast as [`sort_dedup_ids`] on mail texts (`cargo bench --bench corpus -- set`). Ids crafted to share
/// their top bits after mixing would make that last pass quadratic, so it stops after a budget of moves and
/// leaves the rest to `sort_unstable`: the worst case stays O(n log n). Compare such sets only with each
/// other: they are not sorted window ids.
pub fn mixed_set(ids: &mut Vec<u64>, dispatch: Dispatch) {
    *ids = mixed_set_of(ids, dispatch);
}

/// [`mixed_set`] of `ids` into a new vector of exactly its length, leaving `ids` (a buffer the caller reuses)
/// holding the mixed ids in no particular order.
pub fn mixed_set_of(ids: &mut [u64], dispatch: Dispatch) -> Vec<u64> {
    let kept = mixed_sort_dedup(ids, dispatch);
    ids[..kept].to_vec()
}

/// [`mixed_set`] in place: the set is `ids[..n]` for the `n` returned, the rest of `ids` is left in no
/// particular order. `dispatch` decides the instruction set of the mixing (the result is the same on any).
pub fn mixed_sort_dedup(ids: &mut [u64], dispatch: Dispatch) -> usize {
    // (Digit counts are u32: a set of 2^32 ids or more, which no document here reaches, sorts plainly.)
    if ids.len() < 128 || u32::try_from(ids.len()).is_err() {
        for x in ids.iter_mut() {
            *x = mix64(*x);
        }
        ids.sort_unstable();
        return dedup_sorted(ids).len();
    }
    let n = mix_drop_repeats(ids, dispatch);
    let ids = &mut ids[..n];
    if n <= ONE_PASS_MAX_IDS {
        return one_pass_sort_dedup(ids);
    }
    // B bits per pass: pairs of distinct ids that share their top 2B bits number about n^2 / 2^(2B + 1), under
    // n / 512 for B = ceil((log2 n + 8) / 2); at most 12 (two tables of 4,096 counts).
    let b = (n.max(1).ilog2() + 9).div_ceil(2).clamp(8, 12);
    let buckets = 1usize << b;
    let mask = (buckets - 1) as u64;
    let (low, high) = (64 - 2 * b, 64 - b);
    SCRATCH.with_borrow_mut(|scratch| {
        let (counts, by_low) = scratch.counts_and_out(2 * buckets, n);
        let (first, second) = counts.split_at_mut(buckets);
        for &x in ids.iter() {
            first[((x >> low) & mask) as usize] += 1;
            second[(x >> high) as usize] += 1;
        }
        let (mut sum_first, mut sum_second) = (0u32, 0u32);
        for (f, s) in first.iter_mut().zip(second.iter_mut()) {
            (*f, sum_first) = (sum_first, sum_first + *f);
            (*s, sum_second) = (sum_second, sum_second + *s);
        }
        for &x in ids.iter() {
            let d = ((x >> low) & mask) as usize;
            by_low[first[d] as usize] = x;
            first[d] += 1;
        }
        for &x in by_low.iter() {
            let d = (x >> high) as usize;
            ids[second[d] as usize] = x;
            second[d] += 1;
        }
    });
    insertion_finish(ids);
    dedup_sorted(ids).len()
}

/// The most ids [`mixed_sort_dedup`] sorts in one radix pass (a table of up to 2^16 counts, 256 KB).
const ONE_PASS_MAX_IDS: usize = 1 << 14;

/// Sorts and deduplicates `ids` (mixed, so spread evenly) with one counting pass on their top bits, 2 to 4
/// buckets per id, then an insertion pass for the few ids that share a bucket; the set is `ids[..returned]`.
fn one_pass_sort_dedup(ids: &mut [u64]) -> usize {
    SCRATCH.with_borrow_mut(|scratch| {
        let n = ids.len();
        let b = (n.max(1).ilog2() + 2).clamp(8, 16);
        let shift = 64 - b;
        let (counts, out) = scratch.counts_and_out(1 << b, n);
        for &x in ids.iter() {
            counts[(x >> shift) as usize] += 1;
        }
        let mut sum = 0u32;
        for c in counts.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &x in ids.iter() {
            let d = (x >> shift) as usize;
            out[counts[d] as usize] = x;
            counts[d] += 1;
        }
        insertion_finish(out);
        let (mut kept, mut prev) = (1usize, out[0]);
        ids[0] = prev;
        for &x in &out[1..] {
            ids[kept] = x;
            kept += (x != prev) as usize;
            prev = x;
        }
        kept
    })
}

/// Per-thread buffers of the sorts above, kept from one set to the next: allocating them afresh for each
/// set (zeroed, up to 256 KB of counts and 128 KB of ids) cost about a tenth of the sort.
#[derive(Default)]
struct SortScratch {
    counts: Vec<u32>,
    out: Vec<u64>,
    seen: Vec<u64>,
}

impl SortScratch {
    /// `len` zeroed counts, and `n` ids of space whose contents are left over from earlier sets (the
    /// scatter writes every one before anything reads it).
    fn counts_and_out(&mut self, len: usize, n: usize) -> (&mut [u32], &mut [u64]) {
        self.counts.clear();
        self.counts.resize(len, 0);
        if self.out.len() < n {
            // Exactly: the buffer is kept per thread, and a doubled one would hold twice the longest set.
            self.out.reserve_exact(n - self.out.len());
            self.out.resize(n, 0);
        }
        (&mut self.counts, &mut self.out[..n])
    }

    /// `slots` slots for [`mix_drop_repeats`], slot `j` holding `!j`.
    fn seen(&mut self, slots: usize) -> &mut [u64] {
        self.seen.clear();
        self.seen.extend((0..slots as u64).map(|j| !j));
        &mut self.seen
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<SortScratch> = std::cell::RefCell::new(SortScratch::default());
}

/// The most slots [`mix_drop_repeats`] remembers ids in: 32 KB, which stays in the L1 cache beside the ids.
const REPEAT_SLOTS: usize = 4096;

/// Replaces every id by its [`mix64`], 8 at a time, and returns true, where the dispatch chose AVX-512 and the
/// CPU is AMD's (Zen 4 and later run a 64-bit vector multiply as one µop); elsewhere leaves `ids` alone and
/// returns false. On Intel's AVX-512 cores that multiply is three µops, and mixing this way made the set
/// sort slower there (170 against 147 ms); on Zen 4 it made `cargo bench --bench corpus -- 'set/mixed$'` 18%
/// faster. Same bits either way.
fn premix(ids: &mut [u64], dispatch: Dispatch) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        // `cpuid` leaf 0: the vendor string, "AuthenticAMD".
        let amd = *AMD.get_or_init(|| {
            let r = std::arch::x86_64::__cpuid(0);
            (r.ebx, r.edx, r.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
        });
        if amd {
            // SAFETY: the token proves AVX-512 F/DQ.
            unsafe { mix_all_avx512(token, ids) };
            return true;
        }
    }
    let _ = (ids, dispatch);
    false
}

/// Every id replaced by its [`mix64`], 8 at a time ([`crate::arch::x86::mix64_x8`], the same arithmetic).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn mix_all_avx512(_: crate::arch::Avx512, ids: &mut [u64]) {
    use std::arch::x86_64::{_mm512_loadu_si512, _mm512_storeu_si512};
    let mut chunks = ids.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: `c` is 8 ids, 64 readable and writable bytes.
        unsafe {
            let v = _mm512_loadu_si512(c.as_ptr().cast());
            _mm512_storeu_si512(c.as_mut_ptr().cast(), crate::arch::x86::mix64_x8(v));
        }
    }
    for x in chunks.into_remainder() {
        *x = mix64(*x);
    }
}

/// Replaces each id by its [`mix64`] and moves to the front, in order, every id except those caught as a
/// repeat of an earlier one; returns how many were kept. Every distinct id is kept at least once, so sorting
/// and deduplicating the kept ids gives the same set as sorting and deduplicating them all.
///
/// Half of a mail's `char:5` windows repeat one earlier in the same mail (headers, markup, quoted lines), and
/// the radix passes that follow cost several times this pass per id. A direct-mapped table remembers the
/// last id seen in each slot (slot = the id's low bits, up to [`REPEAT_SLOTS`] of them): an id equal to
/// what its slot holds is a repeat, for certain, and is dropped; any other id is kept and takes the slot.
/// Repeats whose slot was taken by another id in between are kept, and the deduplication after the sort
/// removes them. On the mail corpus 58% of the windows are kept, against 51% distinct. The table starts
/// each set holding in slot `j` the value `!j`, which no id in slot `j` can equal (their low bits differ),
/// so nothing is carried over from one set to the next.
fn mix_drop_repeats(ids: &mut [u64], dispatch: Dispatch) -> usize {
    let slots = ids.len().next_power_of_two().min(REPEAT_SLOTS);
    let slot_mask = slots - 1;
    SCRATCH.with_borrow_mut(|scratch| {
        let seen = scratch.seen(slots);
        let mut kept = 0;
        // Branch-free: every id is written at the next kept position, which advances only past those kept. (A
        // vector form with gathers and scatters was slower on an Intel AVX-512 core, and so was mixing
        // 8 lanes at once with AVX-512 multiplies, which also slowed the radix passes after it.)
        // Where 64-bit vector multiplies are cheap, the ids are mixed 8 at a time first (the same bits).
        let premixed = premix(ids, dispatch);
        for i in 0..ids.len() {
            let x = if premixed { ids[i] } else { mix64(ids[i]) };
            let slot = x as usize & slot_mask;
            let fresh = seen[slot] != x;
            seen[slot] = x;
            ids[kept] = x;
            kept += fresh as usize;
        }
        kept
    })
}

/// Finishes sorting `ids`, already in order on their top bits, by insertion: ids crafted to share their top
/// bits would make this quadratic, so after a budget of moves the rest is left to `sort_unstable`.
fn insertion_finish(ids: &mut [u64]) {
    let n = ids.len();
    let mut budget = 4 * n + 1024;
    for i in 1..n {
        let x = ids[i];
        let mut j = i;
        while j > 0 && ids[j - 1] > x {
            ids[j] = ids[j - 1];
            j -= 1;
        }
        ids[j] = x;
        budget = budget.saturating_sub(i - j);
        if budget == 0 {
            ids.sort_unstable();
            break;
        }
    }
}

/// Deduplicates a sorted slice in place, without a branch per element (half of a mail's windows repeat), and
/// returns the distinct prefix.
fn dedup_sorted(v: &mut [u64]) -> &[u64] {
    if v.is_empty() {
        return v;
    }
    // Compared with the previous element held in a register, not read back from where it was just stored
    // (which would chain every step through a store and a load).
    let (mut kept, mut prev) = (1usize, v[0]);
    for i in 1..v.len() {
        let x = v[i];
        v[kept] = x;
        kept += (x != prev) as usize;
        prev = x;
    }
    &v[..kept]
}

/// Sorts and deduplicates shingle ids, the same as `sort_unstable` then `dedup`, in linear time.
///
/// A least-significant-digit radix sort on bytes, skipping every byte position where all ids agree: ids of
/// short windows are the packed bytes XOR a key ([`mix_short`]), so a `char:5` id has only 5 varying bytes
/// (and comparison sorts, or bucketing by the top bits, see them as badly spread). One pass counts all the
/// digits; each varying byte then costs one stable scatter. Building the shingle sets for `dedup`'s
/// verification was mostly comparison sorting before this.
pub fn sort_dedup_ids(ids: &mut Vec<u64>) {
    let n = ids.len();
    if n < 64 {
        ids.sort_unstable();
        ids.dedup();
        return;
    }
    let (mut any, mut all) = (0u64, u64::MAX);
    let mut counts = vec![[0u32; 256]; 8];
    for &x in ids.iter() {
        any |= x;
        all &= x;
        for (d, c) in counts.iter_mut().enumerate() {
            c[(x >> (8 * d)) as u8 as usize] += 1;
        }
    }
    let varying = any ^ all;
    let mut src = std::mem::take(ids);
    let mut dst = vec![0u64; n];
    for (d, c) in counts.iter().enumerate() {
        if (varying >> (8 * d)) as u8 == 0 {
            continue;
        }
        let mut next = [0u32; 256];
        let mut sum = 0u32;
        for (slot, &count) in next.iter_mut().zip(c.iter()) {
            *slot = sum;
            sum += count;
        }
        for &x in &src {
            let digit = (x >> (8 * d)) as u8 as usize;
            dst[next[digit] as usize] = x;
            next[digit] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    src.dedup();
    *ids = src;
}

impl WindowSource for Shingler {
    fn window_ids(&self, text: &str, out: &mut Vec<u64>) {
        self.hashes(text, out);
    }
    fn stream_windows(&self, text: &str, sink: &mut dyn WindowSink) -> bool {
        Shingler::stream_windows(self, text, sink)
    }
}

/// A shingler's windows for texts already known to be all ASCII: the same ids as the shingler's, without its
/// pass over each text to find out ([`Shingler::uses_ascii`]). The signing pipeline finds the flag on the
/// reading thread, while the text is still in that core's cache, and signs a flagged text through this.
///
/// Every text given to it must be all ASCII (checked in debug builds); a non-ASCII one would be cut into byte
/// windows instead of char windows.
pub(crate) struct KnownAscii<'a>(&'a Shingler);

impl<'a> KnownAscii<'a> {
    pub(crate) fn new(shingler: &'a Shingler) -> Self {
        KnownAscii(shingler)
    }
}

impl WindowSource for KnownAscii<'_> {
    fn window_ids(&self, text: &str, out: &mut Vec<u64>) {
        self.0.hashes_known(text, true, out);
    }
    fn stream_windows(&self, text: &str, sink: &mut dyn WindowSink) -> bool {
        self.0.stream_windows_known(text, true, sink)
    }
}

/// Every window of `k` bytes (ASCII `char:K` and `byte:K`). For `k <= 8` the whole text is one run of short
/// windows (each one unaligned little-endian 8-byte load, masked to `k` bytes): no allocation, no decoding.
fn byte_windows<S: WindowSink + ?Sized>(bytes: &[u8], k: usize, key: &WindowKey, out: &mut S) {
    let n = bytes.len();
    if n <= k {
        out.ids(&[key.id(bytes)]);
    } else if k > 8 {
        let mut buf = IdBuffer::new(out);
        for w in bytes.windows(k) {
            buf.push(key.id(w));
        }
    } else {
        out.run(&key.run(bytes, k, n - k + 1));
    }
}

/// Batches single ids on their way to a sink (one call per 64 ids, not per id); flushes before a run and when
/// dropped, so the sink sees every window in text order.
struct IdBuffer<'s, S: WindowSink + ?Sized> {
    sink: &'s mut S,
    ids: [u64; 64],
    len: usize,
}

impl<'s, S: WindowSink + ?Sized> IdBuffer<'s, S> {
    fn new(sink: &'s mut S) -> Self {
        IdBuffer {
            sink,
            ids: [0; 64],
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, id: u64) {
        if self.len == self.ids.len() {
            self.flush();
        }
        self.ids[self.len] = id;
        self.len += 1;
    }

    fn flush(&mut self) {
        if self.len > 0 {
            self.sink.ids(&self.ids[..self.len]);
            self.len = 0;
        }
    }

    fn run(&mut self, run: &ShortRun<'_>) {
        self.flush();
        self.sink.run(run);
    }
}

impl<S: WindowSink + ?Sized> Drop for IdBuffer<'_, S> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The byte length of the UTF-8 sequence that starts with byte `b`.
#[inline(always)]
fn utf8_width(b: u8) -> usize {
    match b {
        0x00..=0x7f => 1,
        0x80..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// The length of the longest all-ASCII prefix of `bytes`: 64 bytes per step with AVX-512BW when `dispatch`
/// chose AVX-512, else eight bytes per step.
fn ascii_prefix_len(bytes: &[u8], dispatch: Dispatch) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        // SAFETY: the token proves AVX-512 F/BW.
        return unsafe { ascii_prefix_len_avx512(token, bytes) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = dispatch;
    ascii_prefix_len_swar(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn ascii_prefix_len_avx512(_: crate::arch::Avx512, bytes: &[u8]) -> usize {
    use std::arch::x86_64::{_mm512_loadu_si512, _mm512_movepi8_mask};
    let mut blocks = bytes.chunks_exact(64);
    let mut len = 0;
    for block in &mut blocks {
        // SAFETY: `block` is 64 readable bytes.
        let high = _mm512_movepi8_mask(unsafe { _mm512_loadu_si512(block.as_ptr().cast()) });
        if high != 0 {
            return len + high.trailing_zeros() as usize;
        }
        len += 64;
    }
    len + ascii_prefix_len_swar(blocks.remainder())
}

fn ascii_prefix_len_swar(bytes: &[u8]) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut len = 0;
    for w in &mut words {
        let high = u64::from_le_bytes(w.try_into().expect("8 bytes")) & HIGH;
        if high != 0 {
            // The lowest set high bit is the first non-ASCII byte (little-endian).
            return len + (high.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    len + words
        .remainder()
        .iter()
        .position(|b| !b.is_ascii())
        .unwrap_or(words.remainder().len())
}

/// Whether `text` is all ASCII ([`ascii_prefix_len`] over the whole text).
fn is_ascii(text: &str, dispatch: Dispatch) -> bool {
    ascii_prefix_len(text.as_bytes(), dispatch) == text.len()
}

/// Every window of `k` Unicode scalar values, cut at char boundaries and hashed on its bytes.
///
/// Text with some non-ASCII characters is mostly ASCII runs: a window that lies inside an ASCII run is `k`
/// bytes, so the windows starting in a run (except its last k - 1 chars) go to the sink as one run, like the
/// ASCII fast path. Only windows that touch a non-ASCII char walk the chars one by one.
fn char_windows_generic<S: WindowSink + ?Sized>(
    text: &str,
    k: usize,
    key: &WindowKey,
    dispatch: Dispatch,
    sink: &mut S,
) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    // At most k chars: one shingle, the whole text (looking at k + 1 chars at most).
    if text.chars().nth(k).is_none() {
        sink.ids(&[key.id(bytes)]);
        return;
    }
    let mut out = IdBuffer::new(sink);
    let id = |start: usize, end: usize| -> u64 {
        let len = end - start;
        if len <= 8 && start + 8 <= n {
            let word = u64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"));
            key.short_id(word & low_bytes_mask(len), len)
        } else {
            key.id(&bytes[start..end])
        }
    };
    // The end of the window of k chars starting at `s`, if k chars remain.
    let end_of = |s: usize| -> Option<usize> {
        let mut e = s;
        for _ in 0..k {
            if e >= n {
                return None;
            }
            e += utf8_width(bytes[e]);
        }
        Some(e)
    };
    // `s` walks the char starts; `end`, when known, is the end of the window of k chars starting at `s`, and
    // moves along with it one char at a time.
    let mut s = 0usize;
    let mut end: Option<usize> = None;
    while s < n {
        if bytes[s] < 0x80 {
            let run_end = s + ascii_prefix_len(&bytes[s..], dispatch);
            if k <= 8 && run_end - s >= k {
                // Windows starting at s..s + count lie inside the run.
                let count = run_end - s - k + 1;
                out.run(&key.run(&bytes[s..], k, count));
                s += count;
                end = None;
                continue;
            }
        }
        let Some(e) = end.or_else(|| end_of(s)) else {
            break;
        };
        out.push(id(s, e));
        if e >= n {
            // The next window would need a char past the end.
            break;
        }
        s += utf8_width(bytes[s]);
        end = Some(e + utf8_width(bytes[e]));
    }
}

/// The id of tokens joined by single spaces (so `a  b` and `a b` give the same word shingle).
fn tokens_id(tokens: &[&str], scratch: &mut Vec<u8>, key: &WindowKey) -> u64 {
    scratch.clear();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            scratch.push(b' ');
        }
        scratch.extend_from_slice(t.as_bytes());
    }
    key.id(scratch)
}

/// Every window of `n` consecutive tokens (maximal runs of non-whitespace). Fewer than `n` tokens: one shingle
/// of all of them; no token (blank text): none.
fn word_windows(text: &str, n: usize, key: &WindowKey, out: &mut Vec<u64>) {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    if tokens.is_empty() {
        return;
    }
    let mut scratch = Vec::new();
    if tokens.len() <= n {
        out.push(tokens_id(&tokens, &mut scratch, key));
        return;
    }
    out.extend(tokens.windows(n).map(|w| tokens_id(w, &mut scratch, key)));
}

/// A stop word followed by the next `n` tokens (Theobald et al.'s SpotSigs, used for news articles in the
/// lecture notes). A stop word with fewer than `n` tokens after it gives the shorter window, so the last stop
/// word is never dropped. A text with tokens but no stop word gives one shingle of all its tokens (a non-blank
/// text never has an empty set). Stop words match case-insensitively against [`STOP_WORDS`]; a token with
/// punctuation attached (`the,`) matches only under `--strip-punctuation`.
fn stopword_windows(text: &str, n: usize, key: &WindowKey, out: &mut Vec<u64>) {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    if tokens.is_empty() {
        return;
    }
    let mut scratch = Vec::new();
    for i in 0..tokens.len() {
        if is_stop_word(tokens[i]) {
            let end = (i + 1 + n).min(tokens.len());
            out.push(tokens_id(&tokens[i..end], &mut scratch, key));
        }
    }
    if out.is_empty() {
        out.push(tokens_id(&tokens, &mut scratch, key));
    }
}

/// Whether `token` is in [`STOP_WORDS`], ignoring case (Unicode lowercase; the list is ASCII).
pub fn is_stop_word(token: &str) -> bool {
    if token.len() > 16 {
        return false;
    }
    if token.bytes().all(|b| !b.is_ascii_uppercase()) {
        STOP_WORDS.binary_search(&token).is_ok()
    } else {
        let lower = token.to_lowercase();
        STOP_WORDS.binary_search(&lower.as_str()).is_ok()
    }
}

/// Our built-in English stop-word list (sorted, lowercase): articles, pronouns, auxiliaries, prepositions,
/// conjunctions and the most common adverbs. 150 words.
pub static STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "even",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::unmix64;

    /// Id lists of many shapes: real `char:5` ids, then for sizes around the small-input cut-offs: spread
    /// (hash-like), many duplicates, small values (constant high bytes), three values, a descending run, and ids
    /// whose `mix64` shares its top 28 bits (all of them alike in `mixed_set`'s radix digits, so its insertion
    /// pass runs out of budget and hands over to `sort_unstable`), and the repeat filter's hard cases.
    fn id_lists() -> Vec<Vec<u64>> {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let shingler = Shingler::new(ShingleKind::Char(5), Normalization::default(), 42);
        let text = "the quick brown fox jumps over the lazy dog, again and again; ".repeat(40);
        let mut inputs: Vec<Vec<u64>> = Vec::new();
        let mut real = Vec::new();
        shingler.hashes(&text, &mut real);
        inputs.push(real);
        for n in [0usize, 1, 2, 63, 64, 65, 127, 128, 129, 1000, 5000, 70_000] {
            // Spread (hash-like), many duplicates, small values (constant high bytes), three values, and a
            // descending run.
            inputs.push((0..n).map(|_| rng.next_u64()).collect());
            inputs.push(
                (0..n)
                    .map(|_| (rng.next_u64() % 97).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                    .collect(),
            );
            inputs.push((0..n).map(|_| rng.next_u64() >> 44).collect());
            inputs.push((0..n).map(|i| [u64::MAX, 0, 5][i % 3]).collect());
            inputs.push((0..n as u64).rev().collect());
            inputs.push(
                (0..n)
                    .map(|_| unmix64(0x5a5_a5a5 << 36 | rng.next_u64() >> 28))
                    .collect(),
            );
            // For the repeat filter: ids that take turns in one slot (each evicts the other, so no repeat is
            // caught), ids whose mixes are the slots' starting values or their neighbours, and runs of one id.
            inputs.push(
                (0..n)
                    .map(|i| unmix64(((i % 5) as u64) << 40 | 0x7ff))
                    .collect(),
            );
            inputs.push((0..n).map(|i| unmix64(!((i % 4099) as u64))).collect());
            inputs.push((0..n).map(|i| unmix64((i / 7) as u64)).collect());
        }
        inputs
    }

    #[test]
    fn sort_dedup_ids_equals_a_comparison_sort() {
        for ids in id_lists() {
            let mut want = ids.clone();
            want.sort_unstable();
            want.dedup();
            let mut got = ids;
            sort_dedup_ids(&mut got);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn premix_gives_mix64_of_every_id() {
        // Whichever way `premix` goes on this CPU, the ids it mixes are `mix64`'s, remainders included.
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for n in 0..40 {
            let ids: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
            let mut got = ids.clone();
            if premix(&mut got, Dispatch::detect()) {
                assert_eq!(got, ids.iter().map(|&x| mix64(x)).collect::<Vec<_>>());
            } else {
                assert_eq!(got, ids);
            }
        }
    }

    #[test]
    fn mixed_set_equals_sorting_the_mixed_ids() {
        for ids in id_lists() {
            let mut want: Vec<u64> = ids.iter().map(|&x| mix64(x)).collect();
            want.sort_unstable();
            want.dedup();
            let mut got = ids;
            mixed_set(&mut got, Dispatch::detect());
            assert_eq!(got, want, "{} ids", want.len());
        }
    }

    #[test]
    fn stop_words_are_sorted_lowercase_and_unique() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(
            STOP_WORDS
                .iter()
                .all(|w| w.chars().all(|c| c.is_ascii_lowercase()))
        );
        assert!(
            (100..=180).contains(&STOP_WORDS.len()),
            "{}",
            STOP_WORDS.len()
        );
    }

    #[test]
    fn stop_words_match_case_insensitively() {
        assert!(is_stop_word("the") && is_stop_word("The") && is_stop_word("THE"));
        assert!(!is_stop_word("the,") && !is_stop_word("cat"));
    }

    #[test]
    fn ascii_prefix_len_finds_the_first_high_byte() {
        for len in (0..80).chain([127, 128, 129, 200]) {
            for at in 0..=len {
                let mut bytes = vec![b'a'; len];
                if at < len {
                    bytes[at] = 0xc3;
                }
                assert_eq!(ascii_prefix_len_swar(&bytes), at, "len={len} at={at}");
                for isa in Isa::ALL {
                    if let Ok(dispatch) = Dispatch::new(isa) {
                        assert_eq!(
                            ascii_prefix_len(&bytes, dispatch),
                            at,
                            "{isa} len={len} at={at}"
                        );
                    }
                }
            }
        }
    }
}
