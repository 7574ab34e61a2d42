//! b-bit slots (Li and König, WWW 2010, "b-Bit Minwise Hashing"): keep only the lowest b bits of every slot,
//! and correct the estimate for the chance that two different minima agree in those bits.
//!
//! Estimator. Two slots whose full values are equal agree in their low b bits; two that differ agree by
//! chance with probability C. So P(b-bit slots equal) = C + (1 - C) J, and
//! `R = (P_hat - C) / (1 - C)` is unbiased for J with
//! `Var R = P (1 - P) / (k (1 - C)^2)` (P_hat is a mean of k Bernoulli(P) slots for kernels whose slots are
//! independent, as classic MinHash's are). Li and König give C exactly in terms of the set sizes relative to the
//! universe (their r1 = |A|/D, r2 = |B|/D); here ids are hashed to 32 bits or more, so r1, r2 -> 0 and C is
//! the large-universe (sparse-data) limit of their form, C = 2^-b, which is what this module uses. At b = 32
//! it is 2^-32, the same chance collision every full-width slot has.
//!
//! Packed layout ([`pack`]): slot i's b bits sit at bit `(i * b) mod 64` of little-endian u64 word
//! `i * b / 64` (b divides 64, so no slot straddles two words); a signature of k slots takes
//! `ceil(k b / 64)` words, and unused high bits of the last word are zero. [`BBit`] wraps any registered
//! kernel so that `sketch` and `dedup` band and estimate on the b-bit values.

use super::contract::Kernel;
use crate::arch::Isa;
use crate::window::WindowSource;

/// The slot widths `--bits` takes.
pub const BITS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// A slot width that is not one of [`BITS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--bits {0}: a slot keeps 1, 2, 4, 8, 16 or 32 bits")]
pub struct BadBits(pub u32);

/// Checks that `bits` is one of [`BITS`].
pub fn check_bits(bits: u32) -> Result<u32, BadBits> {
    if BITS.contains(&bits) {
        Ok(bits)
    } else {
        Err(BadBits(bits))
    }
}

/// The mask of the low `bits` bits.
#[inline]
pub fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// C, the probability that two different slot values agree in their low `bits` bits (large-universe limit).
pub fn chance_collision(bits: u32) -> f64 {
    (-(bits as f64)).exp2()
}

/// The corrected estimate `(P - C) / (1 - C)` from the fraction `p_equal` of equal b-bit slots.
pub fn corrected(p_equal: f64, bits: u32) -> f64 {
    let c = chance_collision(bits);
    (p_equal - c) / (1.0 - c)
}

/// The variance of the corrected estimator at Jaccard `j` with `k` independent slots:
/// `P (1 - P) / (k (1 - C)^2)` with `P = C + (1 - C) j`.
pub fn variance(j: f64, k: usize, bits: u32) -> f64 {
    let c = chance_collision(bits);
    let p = c + (1.0 - c) * j;
    p * (1.0 - p) / (k as f64 * (1.0 - c) * (1.0 - c))
}

/// Bytes a packed signature of `k` slots takes: `ceil(k b / 64)` u64 words.
pub fn packed_bytes(k: usize, bits: u32) -> usize {
    8 * words(k, bits)
}

/// u64 words per packed signature of `k` slots.
pub fn words(k: usize, bits: u32) -> usize {
    (k * bits as usize).div_ceil(64)
}

/// Appends the packed form of `sig` (low `bits` of every slot, layout in the module docs) to `out`.
pub fn pack(sig: &[u32], bits: u32, out: &mut Vec<u64>) {
    let start = out.len();
    out.resize(start + words(sig.len(), bits), 0);
    pack_into(sig, bits, &mut out[start..]);
}

/// Writes the packed form of `sig` into `out`, which holds exactly [`words`]`(sig.len(), bits)` words.
pub fn pack_into(sig: &[u32], bits: u32, out: &mut [u64]) {
    assert_eq!(
        out.len(),
        words(sig.len(), bits),
        "packed buffer of the wrong length"
    );
    out.fill(0);
    let m = mask(bits) as u64;
    for (i, &v) in sig.iter().enumerate() {
        let bit = i * bits as usize;
        out[bit / 64] |= (v as u64 & m) << (bit % 64);
    }
}

/// Slot `i` of a packed signature.
pub fn unpack_slot(words: &[u64], bits: u32, i: usize) -> u32 {
    let bit = i * bits as usize;
    ((words[bit / 64] >> (bit % 64)) as u32) & mask(bits)
}

/// The number of equal slots among the first `k` of two packed signatures, a word at a time: the XOR of the
/// words is OR-folded within every b-bit field onto its lowest bit, and the zero fields are counted.
pub fn equal_slots_packed(a: &[u64], b: &[u64], k: usize, bits: u32) -> usize {
    assert_eq!(a.len(), b.len(), "packed signatures of different length");
    let per_word = 64 / bits as usize;
    // The lowest bit of every field.
    let mut low = 0u64;
    for f in 0..per_word {
        low |= 1 << (f * bits as usize);
    }
    let mut equal = 0;
    for (w, (&x, &y)) in a.iter().zip(b).enumerate() {
        let mut t = x ^ y;
        // After folding by 1, 2, ..., b/2 the lowest bit of each field is the OR of the field's b bits.
        let mut s = 1;
        while s < bits {
            t |= t >> s;
            s *= 2;
        }
        let fields = (k - w * per_word).min(per_word);
        let valid = if fields == per_word {
            low
        } else {
            low & ((1u64 << (fields * bits as usize)) - 1)
        };
        equal += (!t & valid).count_ones() as usize;
    }
    equal
}

/// Any kernel with its slots cut to their low `bits` bits, and the corrected estimator.
///
/// The empty set keeps the all-`u32::MAX` signature (callers flag empty documents, which never become
/// candidates); every other slot holds its low `bits` bits.
pub struct BBit {
    inner: Box<dyn Kernel>,
    bits: u32,
    name: &'static str,
}

impl BBit {
    /// Wraps `inner`; `bits` must be one of [`BITS`]. At 32 bits the kernel is returned unchanged.
    pub fn wrap(inner: Box<dyn Kernel>, bits: u32) -> Result<Box<dyn Kernel>, BadBits> {
        check_bits(bits)?;
        if bits == 32 {
            return Ok(inner);
        }
        // The name is built once per wrapped kernel (a handful per process) and lives as long as it.
        let name: &'static str = Box::leak(format!("{}/b{bits}", inner.name()).into_boxed_str());
        Ok(Box::new(BBit { inner, bits, name }))
    }

    fn cut(&self, out: &mut [u32]) {
        let m = mask(self.bits);
        if out.iter().all(|&v| v == u32::MAX) {
            return;
        }
        for v in out {
            *v &= m;
        }
    }
}

impl Kernel for BBit {
    fn name(&self) -> &'static str {
        self.name
    }
    fn num_perm(&self) -> usize {
        self.inner.num_perm()
    }
    fn isa(&self) -> Isa {
        self.inner.isa()
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        self.inner.sign(ids, out);
        if !ids.is_empty() {
            self.cut(out);
        }
    }
    fn sign_text(
        &self,
        windows: &dyn WindowSource,
        text: &str,
        ids: &mut Vec<u64>,
        out: &mut [u32],
    ) -> bool {
        let empty = self.inner.sign_text(windows, text, ids, out);
        if !empty {
            self.cut(out);
        }
        empty
    }
    fn estimate(&self, a: &[u32], b: &[u32]) -> f64 {
        corrected(super::contract::fraction_equal(a, b), self.bits)
    }
    fn slot_bits(&self) -> u32 {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_and_packed_equality_agree_with_the_slots() {
        let mut state = 7u64;
        let mut next = || {
            state = crate::hash::splitmix64(state);
            state as u32
        };
        for bits in BITS {
            for k in [1usize, 2, 3, 31, 32, 33, 64, 65, 100, 128] {
                let a: Vec<u32> = (0..k).map(|_| next()).collect();
                // b agrees with a on about half the slots.
                let b: Vec<u32> = a
                    .iter()
                    .map(|&v| if next() & 1 == 0 { v } else { next() })
                    .collect();
                let (mut pa, mut pb) = (Vec::new(), Vec::new());
                pack(&a, bits, &mut pa);
                pack(&b, bits, &mut pb);
                assert_eq!(pa.len(), words(k, bits));
                for (i, &v) in a.iter().enumerate() {
                    assert_eq!(unpack_slot(&pa, bits, i), v & mask(bits));
                }
                let want = a
                    .iter()
                    .zip(&b)
                    .filter(|(x, y)| *x & mask(bits) == *y & mask(bits))
                    .count();
                assert_eq!(
                    equal_slots_packed(&pa, &pb, k, bits),
                    want,
                    "b={bits} k={k}"
                );
            }
        }
    }

    #[test]
    fn bits_outside_the_list_are_refused() {
        assert!(check_bits(3).is_err());
        assert!(check_bits(0).is_err());
        assert_eq!(check_bits(8), Ok(8));
        assert!(BadBits(3).to_string().contains("--bits 3"));
    }

    #[test]
    fn the_corrected_estimator_inverts_the_collision_probability() {
        for bits in BITS {
            for j in [0.0, 0.3, 1.0] {
                let c = chance_collision(bits);
                assert!((corrected(c + (1.0 - c) * j, bits) - j).abs() < 1e-12);
            }
        }
        // b = 1: Var = (1 - J^2)/k ... at C = 1/2: P(1-P)/(k/4) with P = (1+J)/2 gives (1-J^2)/k.
        assert!((variance(0.4, 10, 1) - (1.0 - 0.16) / 10.0).abs() < 1e-12);
    }
}
