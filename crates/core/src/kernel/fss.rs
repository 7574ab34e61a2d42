//! `fss`: Fast Similarity Sketching (Dahlgaard, Knudsen, Thorup, FOCS 2017).
//!
//! k bins, rounds `i = 0, 1, ..., 2k-1`. In round `i < k` every element x goes to bin `h_i(x)`, uniform over
//! `0..k`; in round `i >= k` every element goes to bin `i - k`. The value an element offers in round i is
//! `i + u_i(x)`, the round number plus a uniform fraction, and each bin keeps its minimum. A value from round i
//! always beats one from a later round, so once every bin holds something no later round can change the
//! sketch: we stop there and get exactly the full 2k-round output. Rounds `>= k` guarantee termination (round
//! `k + j` fills bin j for any non-empty set). When |A| is well above k ln k, round 0 alone fills every bin
//! (it is then one-permutation hashing), so the cost is one mix per element; for smaller sets the expected
//! number of rounds is about `k ln k / |A|`, for an expected time of O(|A| + k log k) (coupon collector).
//!
//! Hashing: `round_seed[i]` is the i-th `next_u64` of xoshiro256++ seeded with `seed_from_u64(seed)`, and
//! `h = mix64(id ^ round_seed[i])` (the SplitMix64 finaliser, a strong bijective mixer, so structured ids such
//! as consecutive integers behave like random ones). The bin is the multiply-range reduction of the high 32
//! bits, `(hi32(h) * k) >> 32` (uniform for any k, not only powers of two); the fraction is the top
//! `F = 32 - B` bits of the low 32 bits, `lo32(h) >> B`.
//!
//! Encoding: a slot is the 32-bit word `(i << F) | fraction`, with `B = ceil(log2(2k))` bits for the round
//! (rounds run to 2k - 1) and `F = 32 - B` for the fraction (24 bits at k = 128). Comparing words compares
//! `(round, fraction)` lexicographically, which is the order of `i + u_i(x)`. The one word `u32::MAX` (round
//! 2k - 1 with an all-ones fraction, possible when 2k is a power of two) is capped to `u32::MAX - 1`, so that
//! `u32::MAX` marks an empty bin while signing and the empty set's signature (every slot `u32::MAX`) is never
//! produced by a non-empty set.
//!
//! Why slots collide with probability J: for fully random hashing, each element x of A u B has in bin j its
//! best value `v_j(x) = min over rounds i that send x to j of (i, u_i(x))`, and the `v_j(x)` are i.i.d. over
//! elements, so the argmin over A u B is uniform over A u B. Slot j of A equals slot j of B when that argmin
//! lies in A n B, probability J. The only other way is a tie: two distinct elements with the same round and the
//! same F-bit fraction at the minimum, which can only add agreements: `J <= Pr[slot_j(A) = slot_j(B)] <=
//! J + Pr[tie at the minimum]`. If N elements land in the bin in its deciding round, the smallest two of N
//! uniform F-bit fractions coincide with probability about `N / 2^F`; in the common case (round 0) N has mean
//! |A u B| / k, so the excess is about `|A u B| / (k 2^F)`: 5e-5 for 10^5 elements at k = 128. k is capped at
//! [`MAX_NUM_PERM`] so that F >= 16.
//!
//! The estimator is the fraction of equal slots. Bins filled by different elements of one round are
//! negatively dependent (an element lands in one bin per round), which makes the variance at most classic
//! MinHash's J(1-J)/k and lower on small sets, where each element wins several bins; the closed form is
//! [`super::variance::rel_mse_fss`].

use super::bins::{self, CHUNK};
use super::contract::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
use super::oph::{Densify, Oph};
#[cfg(target_arch = "x86_64")]
use crate::arch::Avx512;
use crate::arch::Dispatch;
use crate::arch::Isa;
use crate::hash::mix64;
use crate::window::WindowSource;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// The registry entry of `fss`.
pub const SPEC: KernelSpec = KernelSpec {
    name: "fss",
    about: "Fast Similarity Sketching (Dahlgaard-Knudsen-Thorup 2017): k bins, rounds until all are filled",
    family: SketchFamily::FastSimilarity,
    same_output_as: None,
    build: build_fss,
};

/// The largest k: 2k rounds need `B = ceil(log2(2k))` bits, and we keep at least 16 fraction bits.
pub const MAX_NUM_PERM: usize = 1 << 15;

/// The marker of a bin not yet filled while signing.
const EMPTY: u32 = u32::MAX;

fn build_fss(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    if p.num_perm > MAX_NUM_PERM {
        return Err(KernelError::NumPerm(format!(
            "fss supports num_perm up to {MAX_NUM_PERM} (a slot keeps at least 16 fraction bits beside the round)"
        )));
    }
    Ok(Box::new(
        Fss::new(p.num_perm, p.seed).with_dispatch(p.dispatch()?),
    ))
}

/// `out[i] = bin << 32 | value` for `ids[i]` in one round: `h = mix64(id ^ seed)`,
/// `bin = (hi32(h) * k) >> 32`, `value = round_bits | (lo32(h) >> frac_shift)` (see the module docs).
/// Runs the AVX-512 compilation of the same code when `dispatch` chose it (exact integer arithmetic: same
/// output).
#[inline]
fn round_values(
    ids: &[u64],
    seed: u64,
    k: u64,
    round_bits: u32,
    frac_shift: u32,
    dispatch: Dispatch,
    out: &mut [u64],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
        unsafe { round_values_avx512(token, ids, seed, k, round_bits, frac_shift, out) };
        return;
    }
    round_values_plain(ids, seed, k, round_bits, frac_shift, out)
}

/// Written out for 8 lanes of 64 bits rather than left to the compiler, whose version moved the values through
/// 32-bit lanes and back (about 10% slower). Per lane: `p = hi32(h) * k`, whose high half is the bin; the
/// value, `lo32(h) >> B | round_bits`, is formed in the low half (a 32-bit shift of both halves, whose high
/// half is then dropped), and one bitwise select joins the two halves. The cap at `EMPTY - 1` is left out: it
/// can only bind in a round whose largest value would be `EMPTY` (round 2k - 1 when 2k is a power of two),
/// which goes to the plain loop instead.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn round_values_avx512(
    _: Avx512,
    ids: &[u64],
    seed: u64,
    k: u64,
    round_bits: u32,
    frac_shift: u32,
    out: &mut [u64],
) {
    use crate::arch::x86::mix64_x8;
    use std::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_mul_epu32, _mm512_or_si512, _mm512_set1_epi32,
        _mm512_set1_epi64, _mm512_srli_epi64, _mm512_srlv_epi32, _mm512_storeu_si512,
        _mm512_ternarylogic_epi64, _mm512_xor_si512,
    };
    let out = &mut out[..ids.len()];
    let capped = round_bits | (u32::MAX >> frac_shift) == EMPTY;
    let vectors = if capped { 0 } else { ids.len() / 8 };
    let (seed_v, k_v) = (_mm512_set1_epi64(seed as i64), _mm512_set1_epi64(k as i64));
    let (round_v, shift_v) = (
        _mm512_set1_epi64(round_bits as i64),
        _mm512_set1_epi32(frac_shift as i32),
    );
    let high = _mm512_set1_epi64((u64::MAX << 32) as i64);
    for (i8, o8) in ids
        .chunks_exact(8)
        .zip(out.chunks_exact_mut(8))
        .take(vectors)
    {
        // SAFETY: `i8` and `o8` hold 8 u64 each (unaligned access allowed).
        unsafe {
            let h = mix64_x8(_mm512_xor_si512(
                _mm512_loadu_si512(i8.as_ptr() as *const __m512i),
                seed_v,
            ));
            let p = _mm512_mul_epu32(_mm512_srli_epi64::<32>(h), k_v);
            let v = _mm512_or_si512(_mm512_srlv_epi32(h, shift_v), round_v);
            // high ? p : v, bit by bit: the bin from p's high half, the value from v's low half.
            let packed = _mm512_ternarylogic_epi64::<0xCA>(high, p, v);
            _mm512_storeu_si512(o8.as_mut_ptr() as *mut __m512i, packed);
        }
    }
    let done = vectors * 8;
    round_values_plain(
        &ids[done..],
        seed,
        k,
        round_bits,
        frac_shift,
        &mut out[done..],
    )
}

#[inline(always)]
fn round_values_plain(
    ids: &[u64],
    seed: u64,
    k: u64,
    round_bits: u32,
    frac_shift: u32,
    out: &mut [u64],
) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let h = mix64(id ^ seed);
        // A 32 x 32 -> 64-bit product (k < 2^32): one vpmuludq instead of a 64-bit vpmullq.
        let bin = (((h >> 32) as u32 as u64) * (k as u32 as u64)) >> 32;
        let value = (round_bits | ((h as u32) >> frac_shift)).min(EMPTY - 1) as u64;
        *o = (bin << 32) | value;
    }
}

/// [`bins::min_update`] that also returns how many bins it filled: how many held [`EMPTY`] before.
///
/// # Safety
/// Every packed bin must be `< out.len()`.
#[inline(always)]
unsafe fn fill_min_update(packed: &[u64], out: &mut [u32]) -> usize {
    let mut filled = 0;
    for &bv in packed {
        let bin = (bv >> 32) as usize;
        debug_assert!(bin < out.len());
        // SAFETY: bin < out.len() by the caller's contract.
        let slot = unsafe { out.get_unchecked_mut(bin) };
        // Branch-free; values are < EMPTY, so a slot is counted once, when it is first filled.
        filled += (*slot == EMPTY) as usize;
        *slot = (*slot).min(bv as u32);
    }
    filled
}

/// [`fill_min_update`] that also clears from `empty` each bin it fills.
///
/// # Safety
/// Every packed bin must be `< out.len()` and `< MASK_BINS`.
#[inline(always)]
unsafe fn fill_min_update_mask(
    packed: &[u64],
    out: &mut [u32],
    empty: &mut bins::BinMask,
) -> usize {
    let mut filled = 0;
    for &bv in packed {
        let bin = (bv >> 32) as usize;
        debug_assert!(bin < out.len() && bin < bins::MASK_BINS);
        // SAFETY: bin < out.len() by the caller's contract.
        let slot = unsafe { out.get_unchecked_mut(bin) };
        let was_empty = (*slot == EMPTY) as u64;
        filled += was_empty as usize;
        // SAFETY: bin < MASK_BINS by the caller's contract, so bin / 64 < MASK_BINS / 64.
        unsafe { *empty.get_unchecked_mut(bin / 64) &= !(was_empty << (bin % 64)) };
        *slot = (*slot).min(bv as u32);
    }
    filled
}

/// The buffers of one signature: a chunk's mixed values and the candidates kept from them.
struct Scratch {
    packed: [u64; CHUNK],
    cand: [u64; CHUNK],
}

thread_local! {
    /// Each thread's [`Scratch`]: a signature of a short text would otherwise spend a good part of its time
    /// clearing 4 KB of fresh buffers.
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            packed: [0; CHUNK],
            cand: [0; CHUNK],
        })
    };
}

/// Fast Similarity Sketching.
pub struct Fss {
    num_perm: usize,
    /// One mixing seed per round, 2k of them.
    round_seeds: Vec<u64>,
    /// B, the bits of the round number; the fraction is `lo32(h) >> B`.
    frac_shift: u32,
    /// F = 32 - B; the round number sits at `i << F`.
    round_shift: u32,
    /// The instruction set of the mixing loop (same output on every one).
    dispatch: Dispatch,
    /// Round 0 is one-permutation hashing with `round_seeds[0]` as its mixing seed: this `Oph` (made with the
    /// same seed, so its mixing seed is that same first xoshiro draw) streams it from text (see `sign_text`).
    round0: Oph,
    /// `floor(k ln k)`: texts of fewer bytes go straight to the ids (see `sign_text`).
    short_text: usize,
}

impl Fss {
    /// Panics if `num_perm` is 0 or above [`MAX_NUM_PERM`] (the registry's builder reports both as errors).
    pub fn new(num_perm: usize, seed: u64) -> Fss {
        assert!(
            (1..=MAX_NUM_PERM).contains(&num_perm),
            "fss: num_perm must be in 1..={MAX_NUM_PERM}"
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let round_seeds = (0..2 * num_perm).map(|_| rng.next_u64()).collect();
        let frac_shift = Fss::round_bits(num_perm);
        Fss {
            num_perm,
            round_seeds,
            frac_shift,
            round_shift: 32 - frac_shift,
            dispatch: Dispatch::detect(),
            round0: Oph::new(num_perm, seed, Densify::Optimal),
            short_text: (num_perm as f64 * (num_perm as f64).ln()) as usize,
        }
    }

    /// B = ceil(log2(2k)): the bits that hold round numbers 0..2k-1.
    pub fn round_bits(num_perm: usize) -> u32 {
        usize::BITS - (2 * num_perm - 1).leading_zeros()
    }

    /// The same kernel on a checked instruction set: AVX-512 runs the vector loops, any other choice the plain
    /// code.
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Fss {
        self.dispatch = dispatch;
        self.round0 = self.round0.with_dispatch(dispatch);
        self
    }

    /// [`Fss::with_dispatch`] for `isa` (`None`: [`Dispatch::detect`]); an instruction set this CPU lacks falls
    /// back to the plain code (the registry's builder refuses it before this).
    pub fn with_isa(self, isa: Option<Isa>) -> Fss {
        let dispatch = Dispatch::of(isa).unwrap_or_else(|_| Dispatch::scalar());
        self.with_dispatch(dispatch)
    }

    /// Signs `ids` into `out` and returns the number of rounds run (the last round that filled a bin, plus
    /// one; 0 for the empty set). Rounds `>= k` that find their bin already filled are skipped without hashing.
    pub fn sign_counting_rounds(&self, ids: &[u64], out: &mut [u32]) -> usize {
        let k = self.num_perm;
        assert_eq!(out.len(), k, "output length must be num_perm");
        out.fill(EMPTY);
        if ids.is_empty() {
            return 0;
        }
        SCRATCH.with_borrow_mut(|scratch| self.all_rounds(ids, out, scratch))
    }

    /// [`Fss::sign_counting_rounds`] past its checks: `out` is all [`EMPTY`] and `ids` is not empty.
    fn all_rounds(&self, ids: &[u64], out: &mut [u32], scratch: &mut Scratch) -> usize {
        let Scratch { packed, cand } = scratch;
        #[cfg(not(target_arch = "x86_64"))]
        let _ = cand;
        // Round 0, the common case: one-permutation hashing, with `oph`'s min update (filtered on AVX-512).
        for chunk in ids.chunks(CHUNK) {
            let packed = &mut packed[..chunk.len()];
            self.mix(chunk, 0, packed);
            #[cfg(target_arch = "x86_64")]
            if let Some(token) = self.dispatch.avx512() {
                // SAFETY: bin = (hi32(h) * k) >> 32 < k = out.len() (asserted at the top), as hi32(h) < 2^32.
                unsafe { bins::filtered_min_update(token, packed, out, cand) };
                continue;
            }
            // SAFETY: bin = (hi32(h) * k) >> 32 < k = out.len() (asserted at the top), as hi32(h) < 2^32.
            unsafe { bins::min_update(packed, out) };
        }
        self.later_rounds(ids, out, scratch)
    }

    /// Rounds 1 and on, given round 0's bins in `out` (filled or [`EMPTY`]); returns the rounds run, as
    /// [`Fss::sign_counting_rounds`] does.
    fn later_rounds(&self, ids: &[u64], out: &mut [u32], scratch: &mut Scratch) -> usize {
        let k = self.num_perm;
        assert_eq!(out.len(), k, "output length must be num_perm");
        let Scratch { packed, cand } = scratch;
        #[cfg(not(target_arch = "x86_64"))]
        let _ = cand;
        let mut filled = out.iter().filter(|&&v| v != EMPTY).count();
        let mut rounds = 1;
        // On AVX-512, the bins still empty, built once and cleared bit by bit as the rounds fill them.
        #[cfg(target_arch = "x86_64")]
        let mut empty = match self.dispatch.avx512() {
            // SAFETY: the token proves AVX-512F.
            Some(token) if filled < k && k <= bins::MASK_BINS => unsafe {
                bins::empty_mask_avx512(token, out, EMPTY)
            },
            _ => [0; bins::MASK_BINS / 64],
        };
        // Rounds 1..k: random bins, counting the bins each round fills so the stop test is O(1).
        while filled < k && rounds < k {
            let round = rounds;
            // On AVX-512, only the values whose bin was empty when the round began go on to the update: any
            // other bin holds a value of an earlier round, which every value of this round exceeds, so the min
            // would leave it as it is. After round 0 few bins are empty (about k e^(-n/k) of them for n ids),
            // so most values are dropped 8 at a time instead of each taking a scattered update.
            #[cfg(target_arch = "x86_64")]
            if let (Some(token), true) = (self.dispatch.avx512(), k <= bins::MASK_BINS) {
                // Selected by the bins empty when the round began: a bin the round fills must still take the
                // round's smaller values.
                let begun = empty;
                for chunk in ids.chunks(CHUNK) {
                    let packed = &mut packed[..chunk.len()];
                    self.mix(chunk, round, packed);
                    // SAFETY: bins are < k <= MASK_BINS (as in round 0, and tested just above).
                    let n = unsafe { bins::select_bins(token, packed, &begun, cand) };
                    // SAFETY: as in round 0.
                    filled += unsafe { fill_min_update_mask(&cand[..n], out, &mut empty) };
                }
                rounds += 1;
                continue;
            }
            for chunk in ids.chunks(CHUNK) {
                let packed = &mut packed[..chunk.len()];
                self.mix(chunk, round, packed);
                // SAFETY: as in round 0.
                filled += unsafe { fill_min_update(packed, out) };
            }
            rounds += 1;
        }
        // Rounds k..2k: round k + j sends every element to bin j; only still-empty bins need it.
        if filled < k {
            for (j, slot) in out.iter_mut().enumerate() {
                if *slot != EMPTY {
                    continue;
                }
                let round = k + j;
                let mut best = EMPTY;
                for chunk in ids.chunks(CHUNK) {
                    let packed = &mut packed[..chunk.len()];
                    self.mix(chunk, round, packed);
                    best = packed.iter().fold(best, |m, &bv| m.min(bv as u32));
                }
                *slot = best;
                filled += 1;
                rounds = round + 1;
                if filled == k {
                    break;
                }
            }
        }
        debug_assert_eq!(filled, k);
        rounds
    }

    #[inline]
    fn mix(&self, ids: &[u64], round: usize, out: &mut [u64]) {
        round_values(
            ids,
            self.round_seeds[round],
            self.num_perm as u64,
            (round as u32) << self.round_shift,
            self.frac_shift,
            self.dispatch,
            out,
        )
    }
}

impl Kernel for Fss {
    fn name(&self) -> &'static str {
        "fss"
    }
    fn num_perm(&self) -> usize {
        self.num_perm
    }
    fn isa(&self) -> Isa {
        if self.dispatch.avx512().is_some() {
            Isa::Avx512
        } else {
            Isa::Scalar
        }
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        // The empty set leaves every slot EMPTY = u32::MAX: the defined empty signature.
        self.sign_counting_rounds(ids, out);
    }
    /// The fused path: round 0 streamed from the text by `oph`'s raw sketch, which has the same bins and keeps
    /// `min(lo32(h), EMPTY - 1)` per bin where round 0 keeps `lo32(h) >> B`. Shifting is monotone, so the
    /// shifted minimum is the minimum of the shifted values (and the cap vanishes: `(EMPTY - 1) >> B =
    /// EMPTY >> B` for B >= 1). When round 0 fills every bin that is the whole sketch (module docs); else the
    /// text goes through the ids and every round, as `sign` does.
    ///
    /// A text of fewer than k ln k bytes skips the streaming and goes to the ids at once: its windows (at most
    /// one per byte, for every window source here) are too few for round 0 to fill every bin, except with
    /// probability about 1/e at most (n ids leave a given bin empty with probability (1 - 1/k)^n, about
    /// e^(-n/k), so all k bins fill with probability about exp(-k e^(-n/k)), which is 1/e at n = k ln k), so
    /// streaming it first would mostly be a second pass over the text. Both ways give the same signature; this is speed only.
    fn sign_text(
        &self,
        windows: &dyn WindowSource,
        text: &str,
        ids: &mut Vec<u64>,
        out: &mut [u32],
    ) -> bool {
        if text.len() < self.short_text {
            return super::contract::sign_via_ids(self, windows, text, ids, out);
        }
        if let Some(true) = self.round0.sign_raw_text(windows, text, out) {
            // One pass the compiler vectorises: shift each value (leaving EMPTY as it is) and count the empty
            // bins, without a branch.
            let shift = self.frac_shift;
            let mut empty = 0;
            for v in out.iter_mut() {
                let is_empty = *v == EMPTY;
                empty += is_empty as usize;
                *v = if is_empty { EMPTY } else { *v >> shift };
            }
            if empty > 0 {
                // Small sets: the later rounds need the ids; round 0 is done.
                windows.window_ids(text, ids);
                SCRATCH.with_borrow_mut(|scratch| self.later_rounds(ids, out, scratch));
            }
            return false;
        }
        super::contract::sign_via_ids(self, windows, text, ids, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_bits_hold_every_round_number() {
        for k in [1usize, 2, 3, 4, 5, 64, 100, 128, 129, 256, MAX_NUM_PERM] {
            let b = Fss::round_bits(k);
            assert!(((2 * k - 1) as u64) < (1u64 << b), "k={k}");
            assert!(
                ((2 * k - 1) as u64) >= (1u64 << (b - 1)),
                "k={k}: B={b} is not minimal"
            );
            assert!(32 - b >= 16, "k={k}");
        }
        assert_eq!(Fss::round_bits(128), 8);
    }

    /// Byte windows of `k <= 8` bytes (a text of at most k bytes is one window), streamed as one run: what
    /// the shingler does for `byte:K`, built here from the window layer.
    struct ByteWindows(usize);

    impl WindowSource for ByteWindows {
        fn window_ids(&self, text: &str, out: &mut Vec<u64>) {
            out.clear();
            let (b, key) = (text.as_bytes(), crate::window::WindowKey::new(9));
            if b.len() > self.0 {
                key.run(b, self.0, b.len() - self.0 + 1)
                    .push_ids(out, Dispatch::detect());
            } else if !b.is_empty() {
                out.push(key.id(b));
            }
        }
        fn stream_windows(&self, text: &str, sink: &mut dyn crate::window::WindowSink) -> bool {
            let (b, key) = (text.as_bytes(), crate::window::WindowKey::new(9));
            if b.len() > self.0 {
                sink.run(&key.run(b, self.0, b.len() - self.0 + 1));
            } else if !b.is_empty() {
                sink.ids(&[key.id(b)]);
            }
            true
        }
    }

    #[test]
    fn fused_text_path_equals_signing_the_ids() {
        let base = "Fast similarity sketching fills k bins in rounds; round 0 is one-permutation hashing. ";
        for width in [3usize, 5, 8] {
            let windows = ByteWindows(width);
            for k in [1usize, 7, 64, 128, 200] {
                let fss = Fss::new(k, 11);
                // Texts from empty through sizes where round 0 leaves bins empty to sizes where it fills all.
                for len in [0usize, 1, 4, 5, 9, 40, 300, 2000, 9000] {
                    let text: String = base.chars().cycle().take(len).collect();
                    let text = format!("{text}{len}\u{e9}");
                    let mut ids = Vec::new();
                    windows.window_ids(&text, &mut ids);
                    let mut want = vec![0u32; k];
                    fss.sign(&ids, &mut want);
                    let mut got = vec![0u32; k];
                    let empty = fss.sign_text(&windows, &text, &mut Vec::new(), &mut got);
                    assert_eq!(got, want, "width {width} k={k} len={len}");
                    assert_eq!(empty, ids.is_empty());
                }
                let mut got = vec![0u32; k];
                assert!(fss.sign_text(&windows, "", &mut Vec::new(), &mut got));
                assert!(got.iter().all(|&v| v == u32::MAX));
            }
        }
    }

    #[test]
    fn avx512_and_plain_round_loops_agree() {
        let mut ids: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(crate::hash::GOLDEN) ^ i)
            .collect();
        // Ids whose hash under seed 5 has an all-ones low half: in round 2k - 1 with 2k a power of two their
        // value would be EMPTY and must be capped. Four of them, at different lanes.
        for i in [3usize, 12, 500, 997] {
            ids[i] = crate::hash::unmix64(0x1234_5678_ffff_ffff ^ ((i as u64) << 40)) ^ 5;
        }
        // k = 128 and 1000: round 2k - 1 with and without values capped at EMPTY - 1 (2k a power of two or not).
        for k in [1u64, 7, 100, 128, 1000] {
            let b = Fss::round_bits(k as usize);
            for round in [0u32, 1, (k - 1) as u32, k as u32, (2 * k - 1) as u32] {
                let bits = round << (32 - b);
                // Lengths around the 8 lanes, so that the plain tail after the vectors is covered too.
                for len in [0usize, 1, 7, 8, 9, 15, 17, 1000] {
                    let ids = &ids[..len];
                    let mut plain = vec![0u64; len];
                    round_values_plain(ids, 5, k, bits, b, &mut plain);
                    assert!(
                        plain
                            .iter()
                            .all(|&bv| (bv >> 32) < k && (bv as u32) >> (32 - b) == round)
                    );
                    #[cfg(target_arch = "x86_64")]
                    if let Some(token) = Avx512::detect() {
                        let mut wide = vec![0u64; len];
                        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
                        unsafe { round_values_avx512(token, ids, 5, k, bits, b, &mut wide) };
                        assert_eq!(plain, wide, "k={k} round={round} len={len}");
                    }
                }
            }
        }
    }
}
