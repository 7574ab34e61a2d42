//! The mixers every layer hashes with, and their constants, written once.
//!
//! [`mix64`] is SplitMix64's finaliser (Stafford's "mix13" variant, as used by Steele, Lea and Flood's SplitMix64,
//! 2014): a bijection of 64-bit words with full avalanche, two multiplies. [`splitmix64`] is the generator's
//! output function, `mix64(x + GOLDEN)`. The AVX-512 form of `mix64` ([`crate::arch::x86::mix64_x8`]) uses the
//! same constants, so it computes the same bits.

/// 2^64 / golden ratio, odd: SplitMix64's increment, and the odd multiplier used wherever a value must be spread
/// over 64 bits by one multiply.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The first multiplier of [`mix64`].
pub const MIX_C1: u64 = 0xbf58_476d_1ce4_e5b9;

/// The second multiplier of [`mix64`].
pub const MIX_C2: u64 = 0x94d0_49bb_1331_11eb;

/// SplitMix64's finaliser: a bijective 64-bit mixer, 2 multiplies.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(MIX_C1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX_C2);
    z ^ (z >> 31)
}

/// SplitMix64's output function: [`mix64`] of `x + GOLDEN`.
#[inline(always)]
pub fn splitmix64(x: u64) -> u64 {
    mix64(x.wrapping_add(GOLDEN))
}

/// The inverse of [`mix64`]: each xorshift and each odd multiplier undone, in reverse order (tests use it to
/// build ids whose mixed value they choose).
#[cfg(test)]
pub(crate) fn unmix64(mut z: u64) -> u64 {
    // x ^ (x >> s) is undone by xoring in the shifts s, 2s, ... below 64.
    let unshift = |y: u64, s: u32| {
        (1..)
            .map(|i| i * s)
            .take_while(|&t| t < 64)
            .fold(y, |x, t| x ^ (y >> t))
    };
    // The inverse of an odd c mod 2^64, by Newton's iteration (each step doubles the correct low bits).
    let inverse = |c: u64| {
        (0..6).fold(c, |x, _| {
            x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)))
        })
    };
    z = unshift(z, 31);
    z = unshift(z.wrapping_mul(inverse(MIX_C2)), 27);
    unshift(z.wrapping_mul(inverse(MIX_C1)), 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmix64_inverts_mix64() {
        for x in [0u64, 1, 42, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(unmix64(mix64(x)), x);
            assert_eq!(mix64(unmix64(x)), x);
        }
    }

    #[test]
    fn splitmix64_matches_the_reference_generator() {
        // The first outputs of SplitMix64 seeded with 0 (state advanced by GOLDEN before each output), as
        // published with the reference implementation.
        let mut state = 0u64;
        let mut next = || {
            let out = splitmix64(state);
            state = state.wrapping_add(GOLDEN);
            out
        };
        assert_eq!(next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(next(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(next(), 0x06c4_5d18_8009_454f);
    }
}
