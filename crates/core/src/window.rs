//! The window stream: how a shingler hands the windows of a text to whoever consumes them, and the one
//! definition of a window's 64-bit id.
//!
//! A window is a run of bytes of a text (what a shingle kind cuts it into is the shingler's business). Its id
//! ([`WindowKey::id`]) is defined on its UTF-8 bytes: a window of at most 8 bytes gets a seeded bijection of its
//! zero-padded little-endian word and its length ([`mix_short`]; the kernels do the hashing), a longer one
//! `xxh3_64_with_seed`. Both are defined on bytes and little-endian loads, so every platform gives the same
//! value.
//!
//! Consumers implement [`WindowSink`]: they get runs of consecutive short windows straight from the text
//! ([`ShortRun`], whose ids they compute with the run's own methods, never by re-deriving the definition) and
//! batches of ids. Producers implement [`WindowSource`]. A kernel sees only these two traits, never a shingler.

use crate::arch::Dispatch;

/// The seed-derived constants of window ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowKey {
    seed: u64,
    /// XORed into a short window's word: a SplitMix64 output of the seed, so nearby seeds give unrelated keys.
    short: u64,
}

impl WindowKey {
    /// The constants of `seed`.
    pub fn new(seed: u64) -> WindowKey {
        WindowKey {
            seed,
            short: crate::hash::splitmix64(seed ^ 0x5348_494e_474c_4521),
        }
    }

    /// The id of the window `bytes`: [`mix_short`] of the zero-padded little-endian word for at most 8 bytes,
    /// `xxh3_64_with_seed(bytes, seed)` beyond.
    #[inline]
    pub fn id(&self, bytes: &[u8]) -> u64 {
        if bytes.len() <= 8 {
            let mut word = [0u8; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            self.short_id(u64::from_le_bytes(word), bytes.len())
        } else {
            xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed)
        }
    }

    /// The id of a window of `len <= 8` bytes packed little-endian into `word` (upper bytes zero).
    #[inline(always)]
    pub fn short_id(&self, word: u64, len: usize) -> u64 {
        mix_short(word, len as u64, self.short)
    }

    /// The run of windows `bytes[i..i + k]`, `i < count` (`1 <= k <= 8`, `count + k - 1 <= bytes.len()`).
    #[inline]
    pub fn run<'a>(&self, bytes: &'a [u8], k: usize, count: usize) -> ShortRun<'a> {
        assert!(
            (1..=8).contains(&k) && count + k <= bytes.len() + 1,
            "a run of {count} windows of {k} bytes in {} bytes",
            bytes.len()
        );
        ShortRun {
            bytes,
            k,
            count,
            key: self.short,
        }
    }
}

/// The seeded 64-bit id of one window, defined on its bytes ([`WindowKey::id`]).
pub fn shingle_id(bytes: &[u8], seed: u64) -> u64 {
    WindowKey::new(seed).id(bytes)
}

/// The id of a window of `len <= 8` bytes packed little-endian into `word` (upper bytes zero):
/// `word ^ key ^ len * G`, with `G` = [`crate::hash::GOLDEN`] and `key` a SplitMix64 output of the seed.
///
/// Such a window needs no compression: its bytes already fit the 64-bit id, so the id is a seeded bijection of
/// them. Two distinct windows of the same length never collide, and windows of different lengths (which only
/// meet when a text is shorter than one window) collide only if their words differ by exactly the
/// length-term pattern. The hashing proper happens once per shingle, in the kernel, with the kernel's own
/// seeded mixer (`mix64` in `oph` and `fss`, the key fold of `scalar`/`simd`); every kernel is tested on
/// structured ids (consecutive integers), so none relies on the ids looking random. Keeping the multiplies out
/// of the id keeps the fused text-to-sketch loop of `oph` within its budget.
#[inline(always)]
pub fn mix_short(word: u64, len: u64, key: u64) -> u64 {
    word ^ key ^ len.wrapping_mul(crate::hash::GOLDEN)
}

/// The mask keeping the low `len` bytes of a little-endian word, `1 <= len <= 8`.
#[inline(always)]
pub fn low_bytes_mask(len: usize) -> u64 {
    u64::MAX >> (64 - 8 * len)
}

/// A run of `count` consecutive windows of `k <= 8` bytes: window i is `bytes[i..i + k]`. `bytes` may run past
/// the last window (so 8-byte loads stay in bounds longer). Made by [`WindowKey::run`].
#[derive(Clone, Copy, Debug)]
pub struct ShortRun<'a> {
    bytes: &'a [u8],
    k: usize,
    count: usize,
    key: u64,
}

impl<'a> ShortRun<'a> {
    /// The text bytes the windows start in (may run past the last window).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// The window length in bytes, 1 to 8.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The number of windows.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The id of window `i` (`i < count`).
    #[inline]
    pub fn id(&self, i: usize) -> u64 {
        debug_assert!(i < self.count);
        let mut word = [0u8; 8];
        let end = (i + 8).min(self.bytes.len());
        word[..end - i].copy_from_slice(&self.bytes[i..end]);
        mix_short(
            u64::from_le_bytes(word) & low_bytes_mask(self.k),
            self.k as u64,
            self.key,
        )
    }

    /// Appends the id of every window to `out`, in order: 8 at a time with AVX-512, 4 with AVX2, when `dispatch`
    /// chose it (exact integer arithmetic, so the same ids; a test checks).
    pub fn push_ids(&self, out: &mut Vec<u64>, dispatch: Dispatch) {
        // Windows whose 8-byte load stays inside `bytes` are done in one batch; the rest one by one.
        let direct = self.count.min(self.bytes.len().saturating_sub(7));
        let base = out.len();
        out.resize(base + direct, 0);
        let dst = &mut out[base..];
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = dispatch.avx512() {
            x86::short_ids(token, self.bytes, self.k, self.key, dst);
        } else if let Some(token) = dispatch.avx2() {
            x86::short_ids_x4(token, self.bytes, self.k, self.key, dst);
        } else {
            short_ids_plain(self.bytes, self.k, self.key, dst);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = dispatch;
            short_ids_plain(self.bytes, self.k, self.key, dst);
        }
        out.extend((direct..self.count).map(|i| self.id(i)));
    }

    /// The AVX2 id builder of this run's windows.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn x4(&self, token: crate::arch::Avx2) -> x86::WindowsX4 {
        x86::WindowsX4::new(token, self.k, self.key)
    }

    /// The AVX-512 id builder of this run's windows.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn x8(&self, token: crate::arch::Avx512) -> x86::WindowsX8 {
        x86::WindowsX8::new(token, self.k, self.key)
    }
}

/// `out[i]` = id of `bytes[i..i + k]`, for `i + 8 <= bytes.len()`: a loop the compiler vectorises.
#[inline(always)]
fn short_ids_plain(bytes: &[u8], k: usize, key: u64, out: &mut [u64]) {
    assert!(out.is_empty() || out.len() + 7 <= bytes.len());
    let mask = low_bytes_mask(k);
    let len = k as u64;
    let p = bytes.as_ptr();
    for (i, slot) in out.iter_mut().enumerate() {
        // SAFETY: i + 8 <= out.len() + 7 <= bytes.len() (asserted above), so the 8 bytes at p + i are in bounds.
        let word = u64::from_le(unsafe { p.add(i).cast::<u64>().read_unaligned() });
        *slot = mix_short(word & mask, len, key);
    }
}

/// Receives the windows of one text, in text order: runs of short windows taken straight from the text, and
/// batches of ids (windows of other kinds, or windows that touch a non-ASCII character).
pub trait WindowSink {
    /// A run of consecutive short windows; their ids are [`ShortRun::id`] (or [`ShortRun::push_ids`], or
    /// [`ShortRun::x8`]).
    fn run(&mut self, run: &ShortRun<'_>);
    /// Windows given by their ids, in order.
    fn ids(&mut self, ids: &[u64]);
}

/// The sink that collects every id into a vector, in order.
pub struct CollectIds<'a> {
    /// Where the ids go.
    pub out: &'a mut Vec<u64>,
    /// The instruction set short runs are hashed with.
    pub dispatch: Dispatch,
}

impl WindowSink for CollectIds<'_> {
    fn run(&mut self, run: &ShortRun<'_>) {
        run.push_ids(self.out, self.dispatch);
    }
    fn ids(&mut self, ids: &[u64]) {
        self.out.extend_from_slice(ids);
    }
}

/// A producer of windows: what a kernel signs a text through (the shingler implements it).
pub trait WindowSource: Sync {
    /// Clears `out` and pushes the id of every window of `text`, in text order, duplicates included.
    fn window_ids(&self, text: &str, out: &mut Vec<u64>);
    /// Sends the windows of `text` to `sink`, in order, when this source's windows are short byte windows (at
    /// most 8 bytes, no normalisation), and returns true; returns false, sending nothing, otherwise. The ids
    /// sent (given, or implied by the runs) are exactly those [`WindowSource::window_ids`] pushes.
    fn stream_windows(&self, text: &str, sink: &mut dyn WindowSink) -> bool;
}

/// AVX-512 and AVX2 forms of the window ids.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::short_ids_plain;
    use crate::arch::{Avx2, Avx512};
    use std::arch::x86_64::*;

    /// The ids of `LANES` consecutive windows in one vector register, from one 16-byte load: the lane trait the
    /// window loops (here and in the OPH kernel's sign loops) are written over once, implemented by
    /// [`WindowsX8`] (AVX-512) and [`WindowsX4`] (AVX2). Its methods are `unsafe fn`s that always inline, called
    /// only inside a `#[target_feature]` function of the implementation's instruction set.
    pub trait WindowLanes: Copy {
        /// The register type.
        type Vector: Copy;
        /// The token that proves the CPU runs the instruction set.
        type Token: Copy;
        /// Windows per vector.
        const LANES: usize;

        /// The windows' bytes before the XOR that makes them ids: [`WindowLanes::ids`] is `raw(p) ^ key()`.
        ///
        /// # Safety
        /// `p` is valid for reading 16 bytes, and the CPU supports the implementation's instruction set.
        unsafe fn raw(&self, p: *const u8) -> Self::Vector;

        /// What [`WindowLanes::ids`] XORs into [`WindowLanes::raw`] (the key, the length and anything
        /// [`WindowLanes::xored`] added), in every lane.
        fn key(&self) -> Self::Vector;

        /// The ids of the windows starting at `p`, `p + 1`, ..., `p + LANES - 1`.
        ///
        /// # Safety
        /// As for [`WindowLanes::raw`].
        unsafe fn ids(&self, p: *const u8) -> Self::Vector;

        /// These windows with `x` XORed into every id, in the same XOR as the key (a sign loop folds its seed
        /// in here, one vector XOR fewer per vector).
        fn xored(self, token: Self::Token, x: u64) -> Self;

        /// Writes the `LANES` ids of `v` to `out`.
        ///
        /// # Safety
        /// `out` is valid for writing `LANES` u64s, and the CPU supports the implementation's instruction set.
        unsafe fn store(v: Self::Vector, out: *mut u64);
    }

    /// `out[i]` = id of `bytes[i..i + k]`, for `i + 8 <= bytes.len()`, `W::LANES` windows per step from one
    /// 16-byte load; the last few windows (whose 16 bytes would run past the end) go through the plain loop.
    ///
    /// # Safety
    /// The CPU supports `W`'s instruction set.
    #[inline(always)]
    unsafe fn short_ids_with<W: WindowLanes>(
        w: W,
        bytes: &[u8],
        k: usize,
        key: u64,
        out: &mut [u64],
    ) {
        assert!(out.is_empty() || out.len() + 7 <= bytes.len());
        let p = bytes.as_ptr();
        let mut i = 0;
        while i + W::LANES <= out.len() && i + 16 <= bytes.len() {
            // SAFETY: i + 16 <= bytes.len() and i + LANES <= out.len() (loop condition); the CPU by the
            // caller's contract.
            unsafe { W::store(w.ids(p.add(i)), out.as_mut_ptr().add(i)) };
            i += W::LANES;
        }
        short_ids_plain(&bytes[i..], k, key, &mut out[i..]);
    }

    /// The ids of 8 consecutive `k`-byte windows (`k <= 8`) at once, in AVX-512 registers: one 16-byte load
    /// broadcast to the four 128-bit lanes, one `vpshufb` that puts window j's bytes in 64-bit lane j (bytes past
    /// k zeroed, so no mask is needed), then [`super::mix_short`]'s XOR. The same ids as [`super::ShortRun::id`].
    #[derive(Clone, Copy)]
    pub struct WindowsX8 {
        shuffle: __m512i,
        /// `key ^ k * G`: everything `mix_short` XORs into the word.
        key_len: __m512i,
    }

    impl WindowsX8 {
        /// # Panics
        /// If `k` is not in `1..=8`.
        #[inline(always)]
        pub fn new(token: Avx512, k: usize, short_key: u64) -> Self {
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
            let key_len = super::mix_short(0, k as u64, short_key);
            let _ = token;
            // SAFETY: the token proves AVX-512F; `idx` is 64 readable bytes.
            unsafe {
                WindowsX8 {
                    shuffle: _mm512_loadu_si512(idx.as_ptr().cast()),
                    key_len: _mm512_set1_epi64(key_len as i64),
                }
            }
        }
    }

    impl WindowLanes for WindowsX8 {
        type Vector = __m512i;
        type Token = Avx512;
        const LANES: usize = 8;

        #[inline(always)]
        unsafe fn raw(&self, p: *const u8) -> __m512i {
            // SAFETY: 16 readable bytes at p and AVX-512 F/BW, by the caller's contract.
            unsafe {
                _mm512_shuffle_epi8(
                    _mm512_broadcast_i32x4(_mm_loadu_si128(p.cast())),
                    self.shuffle,
                )
            }
        }

        #[inline(always)]
        fn key(&self) -> __m512i {
            self.key_len
        }

        #[inline(always)]
        unsafe fn ids(&self, p: *const u8) -> __m512i {
            // SAFETY: 16 readable bytes at p and AVX-512 F/BW, by the caller's contract.
            unsafe { _mm512_xor_si512(self.raw(p), self.key_len) }
        }

        #[inline(always)]
        fn xored(self, token: Avx512, x: u64) -> Self {
            let _ = token;
            // SAFETY: the token proves AVX-512F; register operations only.
            let key_len = unsafe { _mm512_xor_si512(self.key_len, _mm512_set1_epi64(x as i64)) };
            WindowsX8 { key_len, ..self }
        }

        #[inline(always)]
        unsafe fn store(v: __m512i, out: *mut u64) {
            // SAFETY: 64 writable bytes at out and AVX-512F, by the caller's contract.
            unsafe { _mm512_storeu_si512(out.cast(), v) }
        }
    }

    /// The ids of 4 consecutive `k`-byte windows (`k <= 8`) at once, in AVX2 registers: one 16-byte load
    /// broadcast to both 128-bit lanes, one `vpshufb` that puts window j's bytes in 64-bit lane j (bytes past k
    /// zeroed), then [`super::mix_short`]'s XOR. The same ids as [`super::ShortRun::id`].
    #[derive(Clone, Copy)]
    pub struct WindowsX4 {
        shuffle: __m256i,
        key_len: __m256i,
    }

    impl WindowsX4 {
        /// # Panics
        /// If `k` is not in `1..=8`.
        #[inline(always)]
        pub fn new(token: Avx2, k: usize, short_key: u64) -> Self {
            assert!(
                (1..=8).contains(&k),
                "window of {k} bytes: the vector path takes 1 to 8"
            );
            let mut idx = [0u8; 32];
            for (j, lane) in idx.chunks_exact_mut(8).enumerate() {
                // Window j starts at byte j of the 16 loaded bytes, which each 128-bit lane holds whole.
                for (b, x) in lane.iter_mut().enumerate() {
                    *x = if b < k { (j + b) as u8 } else { 0x80 };
                }
            }
            let key_len = super::mix_short(0, k as u64, short_key);
            let _ = token;
            // SAFETY: the token proves AVX2; `idx` is 32 readable bytes.
            unsafe {
                WindowsX4 {
                    shuffle: _mm256_loadu_si256(idx.as_ptr().cast()),
                    key_len: _mm256_set1_epi64x(key_len as i64),
                }
            }
        }
    }

    impl WindowLanes for WindowsX4 {
        type Vector = __m256i;
        type Token = Avx2;
        const LANES: usize = 4;

        #[inline(always)]
        unsafe fn raw(&self, p: *const u8) -> __m256i {
            // SAFETY: 16 readable bytes at p and AVX2, by the caller's contract.
            unsafe {
                let src = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast()));
                _mm256_shuffle_epi8(src, self.shuffle)
            }
        }

        #[inline(always)]
        fn key(&self) -> __m256i {
            self.key_len
        }

        #[inline(always)]
        unsafe fn ids(&self, p: *const u8) -> __m256i {
            // SAFETY: 16 readable bytes at p and AVX2, by the caller's contract.
            unsafe { _mm256_xor_si256(self.raw(p), self.key_len) }
        }

        #[inline(always)]
        fn xored(self, token: Avx2, x: u64) -> Self {
            let _ = token;
            // SAFETY: the token proves AVX2; register operations only.
            let key_len = unsafe { _mm256_xor_si256(self.key_len, _mm256_set1_epi64x(x as i64)) };
            WindowsX4 { key_len, ..self }
        }

        #[inline(always)]
        unsafe fn store(v: __m256i, out: *mut u64) {
            // SAFETY: 32 writable bytes at out and AVX2, by the caller's contract.
            unsafe { _mm256_storeu_si256(out.cast(), v) }
        }
    }

    /// `out[i]` = id of `bytes[i..i + k]`, for `i + 8 <= bytes.len()`, 8 windows per step.
    pub fn short_ids(token: Avx512, bytes: &[u8], k: usize, key: u64, out: &mut [u64]) {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
        unsafe { short_ids_avx512(token, bytes, k, key, out) }
    }

    /// `out[i]` = id of `bytes[i..i + k]`, for `i + 8 <= bytes.len()`, 4 windows per step.
    pub fn short_ids_x4(token: Avx2, bytes: &[u8], k: usize, key: u64, out: &mut [u64]) {
        // SAFETY: the token proves AVX2.
        unsafe { short_ids_avx2(token, bytes, k, key, out) }
    }

    #[target_feature(enable = "avx2")]
    fn short_ids_avx2(token: Avx2, bytes: &[u8], k: usize, key: u64, out: &mut [u64]) {
        // SAFETY: the CPU features are this function's.
        unsafe { short_ids_with(WindowsX4::new(token, k, key), bytes, k, key, out) }
    }

    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn short_ids_avx512(token: Avx512, bytes: &[u8], k: usize, key: u64, out: &mut [u64]) {
        // SAFETY: the CPU features are this function's.
        unsafe { short_ids_with(WindowsX8::new(token, k, key), bytes, k, key, out) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_plain_window_loops_agree() {
        let bytes: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let key = WindowKey::new(99);
        // Lengths around the 8-window steps and the 16-byte loads; every window count up to the maximum.
        for len in (8..=40).chain([299, 300]) {
            let bytes = &bytes[..len];
            for k in 1..=8 {
                for count in [0, 1, len - 8, len - 7, len + 1 - k] {
                    let run = key.run(bytes, k, count);
                    let one_by_one: Vec<u64> = (0..count).map(|i| run.id(i)).collect();
                    let by_def: Vec<u64> = (0..count).map(|i| key.id(&bytes[i..i + k])).collect();
                    assert_eq!(one_by_one, by_def, "len={len} k={k} count={count}");
                    for isa in crate::arch::Isa::ALL {
                        let Ok(dispatch) = Dispatch::new(isa) else {
                            continue;
                        };
                        let mut got = Vec::new();
                        run.push_ids(&mut got, dispatch);
                        assert_eq!(got, by_def, "{isa} len={len} k={k} count={count}");
                    }
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
