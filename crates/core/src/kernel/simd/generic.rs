//! The algorithm of `simd`, written once against the [`Lanes`] trait that each instruction set's module
//! implements: the parameters' vector layout and the blocked loop over slots and keys.

/// The widest vector has 8 u64 lanes; parameters are padded to a multiple of it.
pub(super) const PAD: usize = 8;

/// The family's parameters laid out for vector loads, padded to a multiple of [`PAD`] slots.
pub(crate) struct Params {
    pub a: Vec<u64>,
    /// `a >> 32`, for instruction sets that multiply 32 x 32 -> 64 bits.
    pub a_hi: Vec<u64>,
    pub b: Vec<u64>,
}

/// One vector of u64 lanes. Every method is a thin `#[inline(always)]` wrapper of one or two instructions;
/// implementations are only called from inside a `#[target_feature]` function of their instruction set.
pub(crate) trait Lanes: Copy {
    const LANES: usize;
    /// # Safety
    /// `p` is valid for reading `LANES` u64 (no alignment needed), and the CPU supports the instruction set.
    unsafe fn load(p: *const u64) -> Self;
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn splat(x: u64) -> Self;
    /// `(a * x + b) mod 2^64` lane-wise, for `x < 2^32` in every lane.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn hash(a: Self, a_hi: Self, x: Self, b: Self) -> Self;
    /// A lane-wise minimum whose high 32 bits are the minimum of the high 32 bits.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn min_hi(self, other: Self) -> Self;
    /// Writes the high 32 bits of every lane to `out[..LANES]`.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn store_hi(self, out: &mut [u32; 8]);
}

/// Signs one document given its keys (zero-extended to u64). `out.len()` slots are written.
///
/// # Safety
/// The CPU supports `V`'s instruction set, and `p`'s vectors hold at least `out.len()` rounded up to [`PAD`].
#[inline(always)]
pub(crate) unsafe fn sign_generic<V: Lanes, const U: usize>(
    p: &Params,
    keys: &[u64],
    out: &mut [u32],
) {
    let k = out.len();
    let vectors = k.div_ceil(V::LANES);
    debug_assert!(vectors * V::LANES <= p.a.len());
    let mut v = 0;
    while v < vectors {
        // A full block of U vectors, or the remaining vectors one at a time.
        if v + U <= vectors {
            // SAFETY: vectors v..v+U lie inside the padded parameter arrays (checked above); the caller
            // guarantees the instruction set.
            unsafe { block::<V, U>(p, v, keys, out) };
            v += U;
        } else {
            // SAFETY: as above, for one vector.
            unsafe { block::<V, 1>(p, v, keys, out) };
            v += 1;
        }
    }
}

/// Slot vectors `first..first + U`, over every key.
///
/// # Safety
/// As [`sign_generic`], and `(first + U) * LANES <= p.a.len()`.
#[inline(always)]
unsafe fn block<V: Lanes, const U: usize>(p: &Params, first: usize, keys: &[u64], out: &mut [u32]) {
    let at = |j: usize| (first + j) * V::LANES;
    // SAFETY (all loads below): at(j) + LANES <= p.a.len() == p.a_hi.len() == p.b.len() by the caller's contract.
    let a: [V; U] = std::array::from_fn(|j| unsafe { V::load(p.a.as_ptr().add(at(j))) });
    let a_hi: [V; U] = std::array::from_fn(|j| unsafe { V::load(p.a_hi.as_ptr().add(at(j))) });
    let b: [V; U] = std::array::from_fn(|j| unsafe { V::load(p.b.as_ptr().add(at(j))) });
    // SAFETY (splat, hash, min_hi, store_hi): the caller guarantees the instruction set of `V`.
    let mut m: [V; U] = [unsafe { V::splat(u64::MAX) }; U];
    for &x in keys {
        let x = unsafe { V::splat(x) };
        for j in 0..U {
            m[j] = unsafe { m[j].min_hi(V::hash(a[j], a_hi[j], x, b[j])) };
        }
    }
    let mut lanes = [0u32; 8];
    for (j, mj) in m.iter().enumerate() {
        // SAFETY: the caller guarantees the instruction set; `lanes` holds 8 u32.
        unsafe { mj.store_hi(&mut lanes) };
        let start = at(j);
        let end = (start + V::LANES).min(out.len());
        if start < end {
            out[start..end].copy_from_slice(&lanes[..end - start]);
        }
    }
}
