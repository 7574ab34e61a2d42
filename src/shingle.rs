//! Text to shingle ids: every window of a document becomes a 64-bit id through a seeded, platform-independent
//! hash. Kinds: `char:K`, `byte:K`, `word:N`, `stopword:N`. Normalisation is opt-in.
//!
//! The id is defined on the window's UTF-8 bytes ([`shingle_id`]), so the ASCII fast path of `char:K` (a window
//! is K bytes, read as one unaligned little-endian load) and the generic path (windows cut at char boundaries)
//! give the same ids. A window of at most 8 bytes (every `char:K` window of ASCII text with K <= 8) gets a seeded
//! bijection of its zero-padded little-endian word and its length ([`mix_short`]; the kernels do the hashing);
//! longer windows get `xxh3_64_with_seed`. Both are defined on bytes and little-endian loads, so every platform
//! gives the same value.

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
    pub lowercase: bool,
    pub collapse_whitespace: bool,
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
    pub kind: ShingleKind,
    pub normalization: Normalization,
    pub seed: u64,
}

impl Shingler {
    pub fn new(kind: ShingleKind, normalization: Normalization, seed: u64) -> Self {
        Shingler {
            kind,
            normalization,
            seed,
        }
    }

    /// Clears `out` and pushes the id of every window of `text`, in text order, duplicates included
    /// (MinHash is idempotent under repeats, so kernels need no dedup). Text shorter than one window gives one
    /// shingle, the whole text; empty text gives none.
    pub fn hashes(&self, text: &str, out: &mut Vec<u64>) {
        out.clear();
        let text = self.normalization.apply(text);
        let text: &str = &text;
        if text.is_empty() {
            return;
        }
        let key = ShingleKey::new(self.seed);
        match self.kind {
            ShingleKind::Byte(k) => byte_windows(text.as_bytes(), k, &key, out),
            ShingleKind::Char(k) => {
                if is_ascii(text) {
                    byte_windows(text.as_bytes(), k, &key, out)
                } else {
                    char_windows_generic(text, k, &key, out)
                }
            }
            ShingleKind::Word(n) => word_windows(text, n, &key, out),
            ShingleKind::StopWord(n) => stopword_windows(text, n, &key, out),
        }
    }

    /// Sends the windows of `text` to `sink`, in order, when this shingler's windows are byte windows of at most
    /// 8 bytes: `byte:K` or `char:K` with K <= 8 and no normalisation. Returns false, sending nothing, for every
    /// other shingler. The ids sent (given, or implied by the runs) are exactly those [`Shingler::hashes`] pushes;
    /// an empty text sends nothing.
    pub fn stream_windows(&self, text: &str, sink: &mut impl WindowSink) -> bool {
        let (ShingleKind::Byte(k) | ShingleKind::Char(k)) = self.kind else {
            return false;
        };
        if k > 8 || self.normalization.any() {
            return false;
        }
        if text.is_empty() {
            return true;
        }
        let key = ShingleKey::new(self.seed);
        if matches!(self.kind, ShingleKind::Char(_)) && !is_ascii(text) {
            char_windows_generic(text, k, &key, sink);
        } else {
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
            char_windows_generic(&text, k, &ShingleKey::new(self.seed), out);
        }
    }

    /// The shingle set of `text`: sorted, deduplicated ids. Exact Jaccard is computed on these.
    pub fn set(&self, text: &str) -> Vec<u64> {
        let mut ids = Vec::new();
        self.hashes(text, &mut ids);
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// The shingle flags of `lshbench sketch` and friends. The seed comes from the kernel flags (`--seed`).
#[derive(clap::Args, Clone, Debug)]
pub struct ShingleArgs {
    /// Shingle kind: char:K (Unicode scalar values), byte:K, word:N (whitespace tokens) or stopword:N (a stop
    /// word and the N tokens after it).
    #[arg(long, default_value = "char:5")]
    pub shingle: ShingleKind,
    /// Lowercase the text before shingling.
    #[arg(long)]
    pub lowercase: bool,
    /// Turn each run of whitespace into one space and trim the ends.
    #[arg(long)]
    pub collapse_whitespace: bool,
    /// Remove every character that is neither alphanumeric nor whitespace (punctuation and symbols).
    #[arg(long)]
    pub strip_punctuation: bool,
}

impl ShingleArgs {
    pub fn normalization(&self) -> Normalization {
        Normalization {
            lowercase: self.lowercase,
            collapse_whitespace: self.collapse_whitespace,
            strip_punctuation: self.strip_punctuation,
        }
    }

    /// The shingler, its hash seeded with `seed` (the kernel's `--seed`).
    pub fn shingler(&self, seed: u64) -> Shingler {
        Shingler::new(self.shingle, self.normalization(), seed)
    }
}

/// The seed-derived constants of the shingle hash.
#[derive(Clone, Copy, Debug)]
struct ShingleKey {
    seed: u64,
    /// XORed into the short-window word before mixing: a SplitMix64 output of the seed, so nearby seeds give
    /// unrelated keys.
    short: u64,
}

impl ShingleKey {
    fn new(seed: u64) -> Self {
        ShingleKey {
            seed,
            short: splitmix64(seed ^ 0x5348_494e_474c_4521),
        }
    }
}

/// The seeded 64-bit id of one window, defined on its bytes. Windows of at most 8 bytes: the mixer
/// [`mix_short`] of the zero-padded little-endian word, the length and the seed; longer windows:
/// `xxh3_64_with_seed(bytes, seed)`. The value is the same on every platform.
pub fn shingle_id(bytes: &[u8], seed: u64) -> u64 {
    id_of(bytes, &ShingleKey::new(seed))
}

#[inline]
fn id_of(bytes: &[u8], key: &ShingleKey) -> u64 {
    if bytes.len() <= 8 {
        let mut word = [0u8; 8];
        word[..bytes.len()].copy_from_slice(bytes);
        mix_short(u64::from_le_bytes(word), bytes.len() as u64, key.short)
    } else {
        xxhash_rust::xxh3::xxh3_64_with_seed(bytes, key.seed)
    }
}

/// The id of a window of `len <= 8` bytes packed little-endian into `word` (upper bytes zero):
/// `word ^ key ^ len * G`, with `G` = 0x9e3779b97f4a7c15 and `key` a SplitMix64 output of the seed.
///
/// Such a window needs no compression: its bytes already fit the 64-bit id, so the id is a seeded bijection of
/// them. Two distinct windows of the same length never collide, and windows of different lengths (which only
/// meet when a text is shorter than one window) collide only if their words differ by exactly the
/// length-term pattern. The hashing proper happens once per shingle, in the kernel, with the kernel's own
/// seeded mixer (`mix64` in `oph` and `fss`, the key fold of `scalar`/`simd`, see [`crate::kernel::family`]);
/// every kernel is tested on structured ids (consecutive integers), so none relies on the ids looking random.
/// Keeping the multiplies out of the id keeps the fused text-to-sketch loop of `oph` within its budget.
#[inline(always)]
pub fn mix_short(word: u64, len: u64, key: u64) -> u64 {
    word ^ key ^ len.wrapping_mul(SHORT_LEN_MUL)
}

/// `G` of [`mix_short`].
const SHORT_LEN_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function (Steele, Lea, Flood 2014): a good 64-bit bijective mixer.
#[inline(always)]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The id of the `k`-byte window at `i` (`k <= 8`, `i + k <= bytes.len()`), as [`byte_windows`] computes it.
#[inline]
pub(crate) fn short_window_id(bytes: &[u8], i: usize, k: usize, short_key: u64) -> u64 {
    let mut word = [0u8; 8];
    let end = (i + 8).min(bytes.len());
    word[..end - i].copy_from_slice(&bytes[i..end]);
    mix_short(
        u64::from_le_bytes(word) & low_bytes_mask(k),
        k as u64,
        short_key,
    )
}

/// The mask keeping the low `len` bytes of a little-endian word, `1 <= len <= 8`.
#[inline(always)]
fn low_bytes_mask(len: usize) -> u64 {
    u64::MAX >> (64 - 8 * len)
}

/// Every window of `k` bytes (ASCII `char:K` and `byte:K`). For `k <= 8` each window is one unaligned
/// little-endian 8-byte load, masked to `k` bytes, and mixed: no allocation, no decoding.
fn byte_windows(bytes: &[u8], k: usize, key: &ShingleKey, out: &mut impl WindowSink) {
    let n = bytes.len();
    if n <= k {
        out.id(id_of(bytes, key));
    } else if k > 8 {
        for w in bytes.windows(k) {
            out.id(id_of(w, key));
        }
    } else {
        out.run(bytes, k, key.short, n - k + 1);
    }
}

/// `out[i]` = id of `bytes[i..i + k]`, for `i + 8 <= bytes.len()`. Picks the AVX-512 compilation of the same
/// code when the CPU has it (the integer arithmetic is exact, so both give the same ids; a test checks).
#[inline]
fn short_windows(bytes: &[u8], k: usize, short_key: u64, out: &mut [u64]) {
    assert!(out.is_empty() || out.len() + 7 <= bytes.len());
    #[cfg(target_arch = "x86_64")]
    if crate::kernel::wide_vectors() {
        // SAFETY: wide_vectors() checked that the CPU supports AVX-512 F/DQ/BW/VL.
        unsafe { short_windows_avx512(bytes, k, short_key, out) };
        return;
    }
    short_windows_plain(bytes, k, short_key, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn short_windows_avx512(bytes: &[u8], k: usize, short_key: u64, out: &mut [u64]) {
    assert!(out.is_empty() || out.len() + 7 <= bytes.len());
    let x8 = WindowsX8::new(k, short_key);
    let p = bytes.as_ptr();
    let mut i = 0;
    // Eight windows per step from one 16-byte load; the last few windows (whose 16 bytes would run past the
    // end) go through the plain loop.
    while i + 8 <= out.len() && i + 16 <= bytes.len() {
        // SAFETY: i + 16 <= bytes.len() (loop condition) and i + 8 <= out.len(); AVX-512 by this function's
        // target features.
        unsafe {
            let ids = x8.ids(p.add(i));
            std::arch::x86_64::_mm512_storeu_si512(out.as_mut_ptr().add(i).cast(), ids);
        }
        i += 8;
    }
    short_windows_plain(&bytes[i..], k, short_key, &mut out[i..]);
}

/// The ids of 8 consecutive `k`-byte windows (`k <= 8`) at once, in AVX-512 registers: one 16-byte load
/// broadcast to the four 128-bit lanes, one `vpshufb` that puts window j's bytes in 64-bit lane j (bytes past
/// k zeroed, so no mask is needed), then [`mix_short`]'s XOR. The same ids as [`short_windows_plain`].
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct WindowsX8 {
    shuffle: std::arch::x86_64::__m512i,
    /// `key ^ k * G`: everything [`mix_short`] XORs into the word.
    key_len: std::arch::x86_64::__m512i,
}

#[cfg(target_arch = "x86_64")]
impl WindowsX8 {
    /// # Panics
    /// If `k` is not in `1..=8`.
    #[inline(always)]
    pub(crate) fn new(k: usize, short_key: u64) -> Self {
        use std::arch::x86_64::*;
        assert!(
            (1..=8).contains(&k),
            "window of {k} bytes: the vector path takes 1 to 8"
        );
        let mut idx = [0u8; 64];
        for (j, lane) in idx.chunks_exact_mut(8).enumerate() {
            // Window j starts at byte j of the 16 loaded bytes; in the 128-bit lane that holds qword j,
            // vpshufb indexes those same 16 bytes. Index 0x80 writes a zero byte.
            for (b, x) in lane.iter_mut().enumerate() {
                *x = if b < k { (j + b) as u8 } else { 0x80 };
            }
        }
        let key_len = short_key ^ (k as u64).wrapping_mul(SHORT_LEN_MUL);
        // SAFETY: `idx` is 64 readable bytes; these intrinsics only need AVX-512F, which every caller (inside
        // an AVX-512 `target_feature` function) has.
        unsafe {
            WindowsX8 {
                shuffle: _mm512_loadu_si512(idx.as_ptr().cast()),
                key_len: _mm512_set1_epi64(key_len as i64),
            }
        }
    }

    /// The ids of the windows starting at `p`, `p + 1`, ..., `p + 7`.
    ///
    /// # Safety
    /// `p` is valid for reading 16 bytes, and the CPU supports AVX-512 F/BW.
    #[inline(always)]
    pub(crate) unsafe fn ids(&self, p: *const u8) -> std::arch::x86_64::__m512i {
        use std::arch::x86_64::*;
        // SAFETY: by the caller's contract.
        unsafe {
            let src = _mm512_broadcast_i32x4(_mm_loadu_si128(p.cast()));
            _mm512_xor_si512(_mm512_shuffle_epi8(src, self.shuffle), self.key_len)
        }
    }
}

/// The loop of [`short_windows`], written so the compiler can vectorise it.
#[inline(always)]
pub(crate) fn short_windows_plain(bytes: &[u8], k: usize, short_key: u64, out: &mut [u64]) {
    assert!(out.is_empty() || out.len() + 7 <= bytes.len());
    let mask = low_bytes_mask(k);
    let len = k as u64;
    let p = bytes.as_ptr();
    for (i, slot) in out.iter_mut().enumerate() {
        // SAFETY: i + 8 <= out.len() + 7 <= bytes.len() (asserted above), so the 8 bytes at p + i are in bounds.
        let word = u64::from_le(unsafe { p.add(i).cast::<u64>().read_unaligned() });
        *slot = mix_short(word & mask, len, short_key);
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

/// Receives the windows of one text, in text order: runs of `k`-byte windows (`k <= 8`) given by their bytes, and
/// single windows given by their id. [`Shingler::hashes`] collects ids into a `Vec<u64>`; a kernel can take the
/// runs straight from the text instead (`oph` does), and must then compute the same ids.
pub trait WindowSink {
    /// Windows `bytes[i..i + k]` for `i in 0..count`, each with id `mix_short(le_word(window), k, short_key)`
    /// (`le_word`: the bytes read little-endian, zero-padded to 8). `count + k - 1 <= bytes.len()`; the sink may
    /// read all of `bytes` (which can run past the last window).
    fn run(&mut self, bytes: &[u8], k: usize, short_key: u64, count: usize);
    /// One window, by its id.
    fn id(&mut self, id: u64);
}

impl WindowSink for Vec<u64> {
    fn run(&mut self, bytes: &[u8], k: usize, short_key: u64, count: usize) {
        debug_assert!(count + k <= bytes.len() + 1);
        // Windows whose 8-byte load stays inside `bytes` are hashed in one batch; the rest one by one.
        let direct = count.min(bytes.len().saturating_sub(7));
        let base = self.len();
        self.resize(base + direct, 0);
        short_windows(bytes, k, short_key, &mut self[base..]);
        self.extend((direct..count).map(|i| short_window_id(bytes, i, k, short_key)));
    }
    fn id(&mut self, id: u64) {
        self.push(id);
    }
}

/// The length of the longest all-ASCII prefix of `bytes`: 64 bytes per step with AVX-512BW when the CPU has it
/// (and `LSHBENCH_ISA` allows it), else eight bytes per step.
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::kernel::wide_vectors() {
        // SAFETY: wide_vectors() checked AVX-512 F/DQ/BW/VL.
        return unsafe { ascii_prefix_len_avx512(bytes) };
    }
    ascii_prefix_len_swar(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn ascii_prefix_len_avx512(bytes: &[u8]) -> usize {
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
fn is_ascii(text: &str) -> bool {
    ascii_prefix_len(text.as_bytes()) == text.len()
}

/// Every window of `k` Unicode scalar values, cut at char boundaries and hashed on its bytes.
///
/// Text with some non-ASCII characters is mostly ASCII runs: a window that lies inside an ASCII run is `k`
/// bytes, so the windows starting in a run (except its last k - 1 chars) go through the same batch loop as
/// the ASCII fast path. Only windows that touch a non-ASCII char walk the chars one by one.
fn char_windows_generic(text: &str, k: usize, key: &ShingleKey, out: &mut impl WindowSink) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    // At most k chars: one shingle, the whole text (looking at k + 1 chars at most).
    if text.chars().nth(k).is_none() {
        out.id(id_of(bytes, key));
        return;
    }
    let emit = |start: usize, end: usize, out: &mut dyn FnMut(u64)| {
        let len = end - start;
        if len <= 8 && start + 8 <= n {
            let word = u64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"));
            out(mix_short(word & low_bytes_mask(len), len as u64, key.short));
        } else {
            out(id_of(&bytes[start..end], key));
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
            let run_end = s + ascii_prefix_len(&bytes[s..]);
            if k <= 8 && run_end - s >= k {
                // Windows starting at s..s + count lie inside the run.
                let count = run_end - s - k + 1;
                out.run(&bytes[s..], k, key.short, count);
                s += count;
                end = None;
                continue;
            }
        }
        let Some(e) = end.or_else(|| end_of(s)) else {
            break;
        };
        emit(s, e, &mut |id| out.id(id));
        if e >= n {
            // The next window would need a char past the end.
            break;
        }
        s += utf8_width(bytes[s]);
        end = Some(e + utf8_width(bytes[e]));
    }
}

/// The id of tokens joined by single spaces (so `a  b` and `a b` give the same word shingle).
fn tokens_id(tokens: &[&str], scratch: &mut Vec<u8>, key: &ShingleKey) -> u64 {
    scratch.clear();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            scratch.push(b' ');
        }
        scratch.extend_from_slice(t.as_bytes());
    }
    id_of(scratch, key)
}

/// Every window of `n` consecutive tokens (maximal runs of non-whitespace). Fewer than `n` tokens: one shingle
/// of all of them; no token (blank text): none.
fn word_windows(text: &str, n: usize, key: &ShingleKey, out: &mut Vec<u64>) {
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
fn stopword_windows(text: &str, n: usize, key: &ShingleKey, out: &mut Vec<u64>) {
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
    fn avx512_and_plain_window_loops_agree() {
        let bytes: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        // Lengths around the 8-window steps and the 16-byte loads; every window count up to the maximum.
        for len in (8..=40).chain([299, 300]) {
            let bytes = &bytes[..len];
            for k in 1..=8 {
                for count in [0, 1, len - 8, len - 7] {
                    let mut plain = vec![0u64; count];
                    short_windows_plain(bytes, k, 99, &mut plain);
                    let mut picked = vec![0u64; count];
                    short_windows(bytes, k, 99, &mut picked);
                    assert_eq!(plain, picked, "len={len} k={k} count={count}");
                    #[cfg(target_arch = "x86_64")]
                    if crate::kernel::Isa::Avx512.supported() {
                        let mut wide = vec![0u64; count];
                        // SAFETY: checked just above that the CPU supports AVX-512 F/DQ/BW/VL.
                        unsafe { short_windows_avx512(bytes, k, 99, &mut wide) };
                        assert_eq!(plain, wide, "len={len} k={k} count={count}");
                    }
                }
            }
        }
    }

    #[test]
    fn ascii_prefix_len_finds_the_first_high_byte() {
        for len in (0..80).chain([127, 128, 129, 200]) {
            for at in 0..=len {
                let mut bytes = vec![b'a'; len];
                if at < len {
                    bytes[at] = 0xc3;
                }
                assert_eq!(ascii_prefix_len(&bytes), at, "len={len} at={at}");
                assert_eq!(ascii_prefix_len_swar(&bytes), at, "len={len} at={at}");
                #[cfg(target_arch = "x86_64")]
                if crate::kernel::Isa::Avx512.supported() {
                    // SAFETY: checked just above.
                    assert_eq!(
                        unsafe { ascii_prefix_len_avx512(&bytes) },
                        at,
                        "len={len} at={at}"
                    );
                }
            }
        }
    }

    #[test]
    fn mix_short_is_a_bijection_on_a_sample_of_one_length() {
        // Distinct words of the same length must give distinct ids (the map is invertible).
        let mut ids: Vec<u64> = (0..100_000u64).map(|w| mix_short(w, 5, 7)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 100_000);
    }
}
