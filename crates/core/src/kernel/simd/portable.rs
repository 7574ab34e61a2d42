//! The portable vector loop: `wide::u64x4` (whatever the compile target gives it).

use super::generic::{Lanes, Params};
use wide::u64x4;

impl Lanes for u64x4 {
    const LANES: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const u64) -> Self {
        // SAFETY: the caller guarantees 4 readable u64 at p; read_unaligned needs no alignment.
        u64x4::new(unsafe { p.cast::<[u64; 4]>().read_unaligned() })
    }
    #[inline(always)]
    unsafe fn splat(x: u64) -> Self {
        u64x4::splat(x)
    }
    #[inline(always)]
    unsafe fn hash(a: Self, _a_hi: Self, x: Self, b: Self) -> Self {
        // wide's u64 multiply wraps mod 2^64, like u64::wrapping_mul.
        a * x + b
    }
    #[inline(always)]
    unsafe fn min_hi(self, other: Self) -> Self {
        self.min(other)
    }
    #[inline(always)]
    unsafe fn store_hi(self, out: &mut [u32; 8]) {
        for (o, v) in out.iter_mut().zip(self.to_array()) {
            *o = (v >> 32) as u32;
        }
    }
}

pub(super) fn sign(p: &Params, keys: &[u64], out: &mut [u32]) {
    // SAFETY: u64x4 is plain Rust with no target-feature requirement; p is padded to a multiple of 8 >= 4.
    unsafe { super::generic::sign_generic::<u64x4, 4>(p, keys, out) }
}
