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

#[cfg(test)]
mod tests {
    use super::*;

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
