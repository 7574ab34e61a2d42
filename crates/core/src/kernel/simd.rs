//! `simd`: the `scalar` family ([`super::family`]) vectorised across the k functions, bit-identical to it.
//!
//! Layout follows memchr/BLAKE3: the algorithm is written once in `sign_generic` against the small `Lanes`
//! trait, and each instruction set is a thin module (`avx512`, `avx2`, `portable`) that implements the trait and
//! wraps the generic loop in a `#[target_feature]` function. The instruction set is chosen once, when the kernel
//! is built (`KernelParams::isa`, else [`Isa::detect`]).
//!
//! Loop order: for each block of `U` slot vectors, the block's `a`, `b` and running minima stay in registers while
//! the loop runs over every key of the document (one broadcast load per key). `U` independent accumulators
//! hide the latency of the min. Per key and lane: one multiply, one add, one min.
//!
//! Minima are kept on the 64-bit values `a*x + b`; the slot is the high 32 bits of the minimum, which equals the
//! minimum of the high 32 bits (the high half decides the order). AVX2, lacking an unsigned 64-bit min, takes
//! the unsigned 32-bit min lane-wise instead: its odd (high) 32-bit lanes are exactly the minima of the high
//! halves, and only those are read out.

use super::contract::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
use super::family::Family;
use crate::arch::Isa;
use crate::arch::{Dispatch, Loop};
use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod generic;
mod portable;

use generic::{PAD, Params};

/// The registry entry of `simd`.
pub const SPEC: KernelSpec = KernelSpec {
    name: "simd",
    about: "the scalar family vectorised across the k functions (AVX-512 / AVX2 / portable)",
    family: SketchFamily::Classic,
    same_output_as: Some("scalar"),
    build,
};

fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(SimdMinHash::new(
        p.num_perm,
        p.seed,
        p.dispatch()?,
    )))
}

/// Signs `keys` into `out` with the loop of `sign_loop`'s instruction set (the vector ones hold the token that
/// proves the CPU runs them).
fn sign_with(sign_loop: Loop, p: &Params, keys: &[u64], out: &mut [u32]) {
    match sign_loop {
        Loop::Scalar => scalar_loop(p, keys, out),
        Loop::Portable => portable::sign(p, keys, out),
        #[cfg(target_arch = "x86_64")]
        Loop::Avx2(token) => avx2::sign(token, p, keys, out),
        #[cfg(target_arch = "x86_64")]
        Loop::Avx512(token) => avx512::sign(token, p, keys, out),
    }
}

/// `Isa::Scalar` for this kernel: the reference loop on the padded parameters.
fn scalar_loop(p: &Params, keys: &[u64], out: &mut [u32]) {
    out.fill(u32::MAX);
    for &x in keys {
        for (i, slot) in out.iter_mut().enumerate() {
            let h = (p.a[i].wrapping_mul(x).wrapping_add(p.b[i]) >> 32) as u32;
            *slot = (*slot).min(h);
        }
    }
}

/// Below this many ids the key set is signed as is; above, repeated keys are dropped first (text repeats many
/// of its shingles: the SpamAssassin bodies have 10.9 M distinct char:5 windows per document among 21.1 M), since
/// dropping one costs a table probe while signing it costs k multiply-adds. The minimum is idempotent, so the
/// signature is unchanged.
const DEDUP_MIN: usize = 64;

thread_local! {
    /// Per-thread key buffer, dedup table and all-keys buffer, so signing allocates nothing in the steady state.
    static SCRATCH: RefCell<(Vec<u64>, Vec<u32>, Vec<u32>)> =
        const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// `out[i] = family.key(ids[i])` for every id, 8 at a time with AVX-512 (the same arithmetic as
/// [`Family::key`], so the same keys).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn all_keys_avx512(_: crate::arch::Avx512, family: &Family, ids: &[u64], out: &mut Vec<u32>) {
    use crate::arch::x86::mix64_x8;
    use std::arch::x86_64::*;
    out.clear();
    out.reserve(ids.len());
    let seed = _mm512_set1_epi64(family.key_seed as i64);
    let mut v8s = ids.chunks_exact(8);
    for v8 in &mut v8s {
        // SAFETY: `v8` is 8 readable u64.
        let z = _mm512_xor_si512(unsafe { _mm512_loadu_si512(v8.as_ptr().cast()) }, seed);
        let key = _mm512_cvtepi64_epi32(_mm512_srli_epi64::<32>(mix64_x8(z)));
        let mut lanes = [0u32; 8];
        // SAFETY: `lanes` is 32 writable bytes.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), key) };
        out.extend_from_slice(&lanes);
    }
    out.extend(v8s.remainder().iter().map(|&id| family.key(id)));
}

/// Computes the keys of `ids` into `keys`, each distinct key once (order of first occurrence), with AVX-512
/// when `dispatch` chose it.
fn distinct_keys(
    family: &Family,
    ids: &[u64],
    dispatch: Dispatch,
    keys: &mut Vec<u64>,
    table: &mut Vec<u32>,
    all: &mut Vec<u32>,
) {
    keys.clear();
    if ids.len() < DEDUP_MIN {
        keys.extend(ids.iter().map(|&id| family.key(id) as u64));
        return;
    }
    all.clear();
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
        unsafe { all_keys_avx512(token, family, ids, all) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = dispatch;
    if all.len() != ids.len() {
        all.clear();
        all.extend(ids.iter().map(|&id| family.key(id)));
    }
    // Open addressing with linear probing at load <= 1/4; slot value 0 means empty, so key 0 is tracked
    // apart. Keys are mixed hash values, so their top bits index the table directly. The hit-or-insert step is
    // branch-free (about half the keys repeat, unpredictably); only a collision loops.
    let bits = (4 * ids.len()).next_power_of_two().trailing_zeros();
    let mask = (1usize << bits) - 1;
    table.clear();
    table.resize(1 << bits, 0);
    let mut seen_zero = false;
    keys.resize(ids.len() + 1, 0);
    let mut len = 0usize;
    for &key in all.iter() {
        if key == 0 {
            if !seen_zero {
                seen_zero = true;
                keys[len] = 0;
                len += 1;
            }
            continue;
        }
        let mut at = (key >> (32 - bits)) as usize;
        loop {
            let slot = table[at];
            let is_new = slot == 0;
            if is_new || slot == key {
                table[at] = key;
                keys[len] = key as u64;
                len += is_new as usize;
                break;
            }
            at = (at + 1) & mask;
        }
    }
    keys.truncate(len);
}

/// MinHash with the `scalar` family, vectorised across the k functions.
pub struct SimdMinHash {
    family: Family,
    params: Params,
    dispatch: Dispatch,
    sign_loop: Loop,
}

impl SimdMinHash {
    /// The kernel on a checked instruction set.
    pub fn new(num_perm: usize, seed: u64, dispatch: Dispatch) -> Self {
        let family = Family::new(num_perm, seed);
        let padded = num_perm.div_ceil(PAD) * PAD;
        // Padding lanes compute a*x + b = u64::MAX and are never read out.
        let mut a = family.a.clone();
        let mut b = family.b.clone();
        a.resize(padded, 0);
        b.resize(padded, u64::MAX);
        let a_hi = a.iter().map(|a| a >> 32).collect();
        SimdMinHash {
            family,
            params: Params { a, a_hi, b },
            dispatch,
            sign_loop: Loop::of(dispatch),
        }
    }
}

impl Kernel for SimdMinHash {
    fn name(&self) -> &'static str {
        "simd"
    }
    fn num_perm(&self) -> usize {
        self.family.a.len()
    }
    fn isa(&self) -> Isa {
        self.sign_loop.isa()
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        assert_eq!(out.len(), self.num_perm(), "output length must be num_perm");
        SCRATCH.with_borrow_mut(|(keys, table, all)| {
            distinct_keys(&self.family, ids, self.dispatch, keys, table, all);
            sign_with(self.sign_loop, &self.params, keys, out);
        });
    }
}
