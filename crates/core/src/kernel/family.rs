//! The hash family shared by `scalar` and `simd`: multiply-add-shift on 32-bit keys.
//!
//! Each 64-bit shingle id is first folded to a 32-bit key `x = high32(mix(id ^ s))` with a seeded SplitMix64
//! finaliser, so structured ids (consecutive integers) reach the family as well-spread keys. Then
//! `h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32` with `a_i`, `b_i` uniform 64-bit values drawn from the seed with
//! xoshiro256++. This is Dietzfelbinger's multiply-add-shift; Thorup ("High speed hashing for integers and
//! strings", 2015) shows it is 2-independent (strongly universal) from w-bit keys to l-bit values when a and b
//! have at least w + l - 1 bits: here w = l = 32 and a, b have 64 bits.
//!
//! Why not `(a*x + b) mod (2^61 - 1)`: it needs a 64x64 -> 128-bit product and a Mersenne reduction per slot,
//! which has no cheap vector form (no 128-bit lanes), and computing that product in u64 silently wraps before
//! the reduction (the datasketch bug, issues #99 and #239). Multiply-add-shift is one 64-bit multiply-add whose
//! wrap-around *is* the definition, so the vector kernels compute exactly the same bits as the reference.

use crate::hash::mix64;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// The k functions of one seed.
#[derive(Clone, Debug)]
pub struct Family {
    /// Seed of the id -> key fold.
    pub key_seed: u64,
    /// The multipliers `a_i`.
    pub a: Vec<u64>,
    /// The offsets `b_i`.
    pub b: Vec<u64>,
}

impl Family {
    /// The k functions drawn from `seed`.
    pub fn new(num_perm: usize, seed: u64) -> Family {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let key_seed = rng.next_u64();
        let mut a = Vec::with_capacity(num_perm);
        let mut b = Vec::with_capacity(num_perm);
        for _ in 0..num_perm {
            a.push(rng.next_u64());
            b.push(rng.next_u64());
        }
        Family { key_seed, a, b }
    }

    /// The 32-bit key of a shingle id.
    #[inline(always)]
    pub fn key(&self, id: u64) -> u32 {
        (mix64(id ^ self.key_seed) >> 32) as u32
    }

    /// `h_i(x)`.
    #[inline(always)]
    pub fn hash(&self, i: usize, x: u32) -> u32 {
        (self.a[i].wrapping_mul(x as u64).wrapping_add(self.b[i]) >> 32) as u32
    }
}
