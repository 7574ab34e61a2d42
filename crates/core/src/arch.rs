//! Instruction sets: what this CPU runs, the one dispatch decision every component takes, and the proof
//! tokens that make calling vector code sound.
//!
//! [`Dispatch`] is the choice: an instruction set that was checked against this CPU when the value was made
//! ([`Dispatch::detect`], or [`Dispatch::new`] for a forced one). Shinglers and kernels each hold one, so one
//! `--isa` governs both (and the reader's JSONL fast path and verification, which take the shingler's). From a `Dispatch` come the tokens [`Avx512`] and [`Avx2`]: a token
//! exists only when its instruction set runs here, so a safe function that takes one may call
//! `#[target_feature]` code on the strength of it. Code for an instruction set is either an `unsafe fn` or a
//! safe `#[target_feature]` function, and is reached only through such a token.

use std::fmt;

/// An instruction set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Plain scalar Rust, no explicit SIMD.
    Scalar,
    /// `wide`'s portable vectors (whatever the compile target gives them).
    Portable,
    /// AVX2 (256-bit integer vectors).
    Avx2,
    /// AVX-512 F/DQ/BW/VL, with POPCNT and BMI2 (which every AVX-512 CPU has).
    Avx512,
}

impl Isa {
    /// Every instruction set, narrowest first.
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The name `--isa` (and the CLI's `LSHBENCH_ISA`) takes.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses `scalar`, `portable`, `avx2`, `avx512`.
    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.name() == s)
    }

    /// Whether this CPU can run code for this instruction set.
    pub fn supported(self) -> bool {
        match self {
            Isa::Scalar | Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("popcnt")
                    && std::arch::is_x86_feature_detected!("bmi2")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest instruction set this CPU supports. (The library reads no environment variable: the CLI
    /// caps this by `LSHBENCH_ISA` and passes its choice.)
    pub fn detect() -> Isa {
        [Isa::Avx512, Isa::Avx2, Isa::Portable]
            .into_iter()
            .find(|isa| isa.supported())
            .unwrap_or(Isa::Portable)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An instruction set this CPU does not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instruction set {0} is not supported by this CPU")]
pub struct Unsupported(pub Isa);

/// The instruction set a component runs on, checked against this CPU when made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dispatch {
    isa: Isa,
}

impl Dispatch {
    /// [`Isa::detect`]'s choice: the widest supported. Decided once per process.
    pub fn detect() -> Dispatch {
        static DETECTED: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        Dispatch {
            isa: *DETECTED.get_or_init(Isa::detect),
        }
    }

    /// `isa`, if this CPU runs it.
    pub fn new(isa: Isa) -> Result<Dispatch, Unsupported> {
        if isa.supported() {
            Ok(Dispatch { isa })
        } else {
            Err(Unsupported(isa))
        }
    }

    /// `isa` when given, else [`Dispatch::detect`].
    pub fn of(isa: Option<Isa>) -> Result<Dispatch, Unsupported> {
        isa.map_or_else(|| Ok(Dispatch::detect()), Dispatch::new)
    }

    /// Scalar code: runs everywhere.
    pub fn scalar() -> Dispatch {
        Dispatch { isa: Isa::Scalar }
    }

    /// The instruction set chosen.
    pub fn isa(self) -> Isa {
        self.isa
    }

    /// The AVX-512 token, when this dispatch chose AVX-512 (which was checked when it was made).
    #[inline]
    pub fn avx512(self) -> Option<Avx512> {
        (self.isa == Isa::Avx512).then_some(Avx512 { _checked: () })
    }

    /// The AVX2 token, when this dispatch chose AVX2.
    #[inline]
    pub fn avx2(self) -> Option<Avx2> {
        (self.isa == Isa::Avx2).then_some(Avx2 { _checked: () })
    }
}

/// The loop a vector kernel runs, chosen once from a [`Dispatch`]: the vector variants carry the token that
/// lets the kernel call its `#[target_feature]` code without `unsafe`. Kernels with scalar, portable (`wide`),
/// AVX2 and AVX-512 loops match on it.
#[derive(Clone, Copy, Debug)]
pub enum Loop {
    /// The scalar reference.
    Scalar,
    /// The portable `wide` loop (every `--isa` between scalar and the x86 vector sets).
    Portable,
    /// The AVX2 loop.
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2),
    /// The AVX-512 loop.
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512),
}

impl Loop {
    /// The loop of a checked instruction set.
    pub fn of(dispatch: Dispatch) -> Loop {
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = dispatch.avx512() {
            return Loop::Avx512(token);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = dispatch.avx2() {
            return Loop::Avx2(token);
        }
        match dispatch.isa() {
            Isa::Scalar => Loop::Scalar,
            _ => Loop::Portable,
        }
    }

    /// The instruction set this loop runs on.
    pub fn isa(self) -> Isa {
        match self {
            Loop::Scalar => Isa::Scalar,
            Loop::Portable => Isa::Portable,
            #[cfg(target_arch = "x86_64")]
            Loop::Avx2(_) => Isa::Avx2,
            #[cfg(target_arch = "x86_64")]
            Loop::Avx512(_) => Isa::Avx512,
        }
    }
}

/// Proof that this CPU runs AVX-512 F/DQ/BW/VL, POPCNT and BMI2: only [`Dispatch::avx512`] and
/// [`Avx512::detect`] make one, after the check.
#[derive(Clone, Copy, Debug)]
pub struct Avx512 {
    _checked: (),
}

impl Avx512 {
    /// The token, if this CPU runs AVX-512, whatever a dispatch chose (for tests that compare paths).
    pub fn detect() -> Option<Avx512> {
        Isa::Avx512.supported().then_some(Avx512 { _checked: () })
    }

    /// The VBMI2 token, if this CPU also runs AVX-512 VBMI and VBMI2 (Ice Lake and later, Zen 4 and later;
    /// not Skylake-SP). Not an [`Isa`] of its own: the byte loops that use it give the same bytes as the
    /// AVX-512 loops they speed up, so `--isa avx512` takes it wherever the CPU has it.
    #[inline]
    pub fn vbmi2(self) -> Option<Vbmi2> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512vbmi")
            && std::arch::is_x86_feature_detected!("avx512vbmi2")
        {
            return Some(Vbmi2 { _checked: () });
        }
        None
    }
}

/// Proof that this CPU runs AVX-512 VBMI and VBMI2 (byte permutes, byte compress) besides everything an
/// [`Avx512`] token proves: only [`Avx512::vbmi2`] makes one.
#[derive(Clone, Copy, Debug)]
pub struct Vbmi2 {
    _checked: (),
}

impl Vbmi2 {
    /// The [`Avx512`] token this one implies.
    #[inline]
    pub fn avx512(self) -> Avx512 {
        Avx512 { _checked: () }
    }
}

/// Proof that this CPU runs AVX2: only [`Dispatch::avx2`] and [`Avx2::detect`] make one.
#[derive(Clone, Copy, Debug)]
pub struct Avx2 {
    _checked: (),
}

impl Avx2 {
    /// The token, if this CPU runs AVX2, whatever a dispatch chose.
    pub fn detect() -> Option<Avx2> {
        Isa::Avx2.supported().then_some(Avx2 { _checked: () })
    }
}

/// x86-64 vector primitives shared by several layers. Each is a safe `#[target_feature]` function: callable
/// without `unsafe` only from code compiled for the same features (itself reached through a token).
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::Avx2;
    use crate::hash::{MIX_C1, MIX_C2};
    use std::arch::x86_64::*;

    /// [`crate::hash::mix64`] on 8 lanes: the same arithmetic, so the same bits.
    ///
    /// # Safety
    /// Safe to call from code compiled for AVX-512 F/DQ; anywhere else the caller must hold an
    /// [`super::Avx512`] token (the CPU runs these instructions).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub fn mix64_x8(z: __m512i) -> __m512i {
        let z = _mm512_mullo_epi64(
            _mm512_xor_si512(z, _mm512_srli_epi64::<30>(z)),
            _mm512_set1_epi64(MIX_C1 as i64),
        );
        let z = _mm512_mullo_epi64(
            _mm512_xor_si512(z, _mm512_srli_epi64::<27>(z)),
            _mm512_set1_epi64(MIX_C2 as i64),
        );
        _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z))
    }

    /// The number of set bits of each 4-bit mask (a `movemask` of 4 lanes), for the AVX2 loops: the AVX2 token
    /// does not prove POPCNT.
    pub const BITS4: [u8; 16] = [0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4];

    /// The low 64 bits of `a * c` on 4 lanes, with AVX2 only (no 64-bit multiply): `lo(a) lo(c) + ((hi(a) lo(c)
    /// + lo(a) hi(c)) << 32)`, three 32 x 32 -> 64-bit products. `c_lo` and `c_hi` hold `c`'s low and high 32
    /// bits in every lane ([`Mix64x4::new`]). Exact integer arithmetic: the same bits as `wrapping_mul`.
    ///
    /// # Safety
    /// The CPU must support AVX2 (an `unsafe fn`, not a `#[target_feature]` one, so that it always inlines into
    /// the AVX2 loops that call it).
    #[inline(always)]
    pub unsafe fn mullo64_x4(a: __m256i, c_lo: __m256i, c_hi: __m256i) -> __m256i {
        // SAFETY: AVX2 by this function's contract; register operations only.
        unsafe {
            let ll = _mm256_mul_epu32(a, c_lo);
            let hl = _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), c_lo);
            let lh = _mm256_mul_epu32(a, c_hi);
            _mm256_add_epi64(ll, _mm256_slli_epi64::<32>(_mm256_add_epi64(hl, lh)))
        }
    }

    /// [`crate::hash::mix64`] on 4 lanes with AVX2: the same arithmetic (the multiplies as [`mullo64_x4`]), so the
    /// same bits.
    #[derive(Clone, Copy)]
    pub struct Mix64x4 {
        c1: (__m256i, __m256i),
        c2: (__m256i, __m256i),
    }

    impl Mix64x4 {
        /// The constants, for an AVX2 CPU (the token proves it).
        #[inline(always)]
        pub fn new(token: Avx2) -> Self {
            let _ = token;
            let split = |c: u64| {
                // SAFETY: the token proves AVX2 (`set1` compiles to a broadcast or a constant load).
                unsafe {
                    (
                        _mm256_set1_epi64x((c & 0xffff_ffff) as i64),
                        _mm256_set1_epi64x((c >> 32) as i64),
                    )
                }
            };
            Mix64x4 {
                c1: split(MIX_C1),
                c2: split(MIX_C2),
            }
        }

        /// `mix64` of each lane.
        ///
        /// # Safety
        /// The CPU must support AVX2 (a `Mix64x4` exists only where it does; `unsafe fn` so that it inlines).
        #[inline(always)]
        pub unsafe fn mix(&self, z: __m256i) -> __m256i {
            // SAFETY: AVX2 by this function's contract.
            unsafe { self.finish(self.second(self.first(z))) }
        }

        /// `mix64`'s first xor-shift and multiply: with [`Mix64x4::second`] and [`Mix64x4::finish`], the
        /// stages of [`Mix64x4::mix`], for loops that software-pipeline it.
        ///
        /// # Safety
        /// As [`Mix64x4::mix`].
        #[inline(always)]
        pub unsafe fn first(&self, z: __m256i) -> __m256i {
            // SAFETY: AVX2 by this function's contract; register operations only.
            unsafe {
                mullo64_x4(
                    _mm256_xor_si256(z, _mm256_srli_epi64::<30>(z)),
                    self.c1.0,
                    self.c1.1,
                )
            }
        }

        /// `mix64`'s second xor-shift and multiply.
        ///
        /// # Safety
        /// As [`Mix64x4::mix`].
        #[inline(always)]
        pub unsafe fn second(&self, z: __m256i) -> __m256i {
            // SAFETY: AVX2 by this function's contract; register operations only.
            unsafe {
                mullo64_x4(
                    _mm256_xor_si256(z, _mm256_srli_epi64::<27>(z)),
                    self.c2.0,
                    self.c2.1,
                )
            }
        }

        /// `mix64`'s last xor-shift.
        ///
        /// # Safety
        /// As [`Mix64x4::mix`].
        #[inline(always)]
        pub unsafe fn finish(&self, z: __m256i) -> __m256i {
            // SAFETY: AVX2 by this function's contract; register operations only.
            unsafe { _mm256_xor_si256(z, _mm256_srli_epi64::<31>(z)) }
        }
    }

    /// The vector constants of [`mix64_x8`]'s two multiplies, for loops that software-pipeline it.
    ///
    /// # Safety
    /// As [`mix64_x8`], for AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn mix64_constants() -> (__m512i, __m512i) {
        (
            _mm512_set1_epi64(MIX_C1 as i64),
            _mm512_set1_epi64(MIX_C2 as i64),
        )
    }

    /// Asks the CPU to bring the first `max` bytes of `bytes` into its caches (one `prefetcht0` per 64-byte
    /// line): a hint, with no effect on any result.
    ///
    /// # Safety
    /// SSE, which every x86-64 CPU has.
    #[inline]
    #[target_feature(enable = "sse")]
    pub fn prefetch(bytes: &[u8], max: usize) {
        let p = bytes.as_ptr();
        let n = bytes.len().min(max);
        let mut i = 0;
        while i < n {
            // A prefetch reads nothing and cannot fault; `p + i` is inside `bytes` (i < n <= len).
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(i).cast());
            i += 64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_only_makes_tokens_for_checked_sets() {
        for isa in Isa::ALL {
            match Dispatch::new(isa) {
                Ok(d) => {
                    assert!(isa.supported());
                    assert_eq!(d.avx512().is_some(), isa == Isa::Avx512);
                    assert_eq!(d.avx2().is_some(), isa == Isa::Avx2);
                }
                Err(Unsupported(i)) => assert!(!i.supported()),
            }
        }
        assert!(Dispatch::scalar().avx512().is_none());
    }

    #[test]
    fn isa_names_round_trip() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Some(isa));
        }
        assert_eq!(Isa::parse("neon"), None);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn mix64_x4_is_mix64_on_every_lane() {
        use std::arch::x86_64::*;
        let Some(token) = Avx2::detect() else {
            return;
        };
        #[target_feature(enable = "avx2")]
        fn lanes(token: Avx2, x: [u64; 4]) -> [u64; 4] {
            let mut out = [0u64; 4];
            let mix = x86::Mix64x4::new(token);
            // SAFETY: `x` and `out` are 32 bytes each; AVX2 is enabled on this function.
            unsafe {
                let v = _mm256_loadu_si256(x.as_ptr().cast());
                _mm256_storeu_si256(out.as_mut_ptr().cast(), mix.mix(v));
            }
            out
        }
        let mut rng = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            let x: [u64; 4] = std::array::from_fn(|_| {
                rng = crate::hash::splitmix64(rng);
                rng
            });
            // Extremes too: every bit set, none, one.
            for x in [x, [0, u64::MAX, 1, 1 << 63]] {
                // SAFETY: the token proves AVX2.
                let got = unsafe { lanes(token, x) };
                assert_eq!(got, x.map(crate::hash::mix64));
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn mix64_x8_is_mix64_on_every_lane() {
        use std::arch::x86_64::*;
        let Some(token) = Avx512::detect() else {
            return;
        };
        #[target_feature(enable = "avx512f,avx512dq")]
        fn lanes(_: Avx512, x: [u64; 8]) -> [u64; 8] {
            let mut out = [0u64; 8];
            // SAFETY: `x` and `out` are 64 bytes each; AVX-512F is enabled on this function.
            unsafe {
                let v = _mm512_loadu_si512(x.as_ptr().cast());
                _mm512_storeu_si512(out.as_mut_ptr().cast(), x86::mix64_x8(v));
            }
            out
        }
        let x: [u64; 8] =
            std::array::from_fn(|i| (i as u64).wrapping_mul(crate::hash::GOLDEN) ^ 77);
        // SAFETY: the token proves AVX-512 F/DQ.
        let got = unsafe { lanes(token, x) };
        assert_eq!(got, x.map(crate::hash::mix64));
    }
}
