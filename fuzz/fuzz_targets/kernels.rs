//! Every kernel in the registry on arbitrary id sets (8 fuzz bytes per id): on every instruction set this CPU
//! has, the signature equals the scalar reference bit for bit; it does not depend on the order or repeats of
//! the ids; the empty set gives every slot `u32::MAX`; a kernel with `same_output_as` equals its reference.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::arch::Isa;
use lshbench_core::kernel::{self, KERNELS, KernelParams};

fuzz_target!(|data: &[u8]| {
    let [k0, k1, s, rot, body @ ..] = data else {
        return;
    };
    let k = usize::from(u16::from_le_bytes([*k0, *k1]) % 520) + 1;
    let seed = u64::from(*s);
    let ids: Vec<u64> = body
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    let mut shuffled = ids.clone();
    shuffled.reverse();
    if !shuffled.is_empty() {
        let at = usize::from(*rot) % shuffled.len();
        shuffled.rotate_left(at);
    }
    let mut repeated = ids.clone();
    repeated.extend(ids.iter().step_by(2));
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.supported()).collect();
    let mut got = vec![0u32; k];
    for spec in KERNELS {
        let params = |isa| KernelParams {
            num_perm: k,
            seed,
            isa: Some(isa),
        };
        let reference = kernel::build_spec(spec, &params(Isa::Scalar)).unwrap();
        let mut want = vec![0u32; k];
        reference.sign(&ids, &mut want);
        if ids.is_empty() {
            assert_eq!(want, vec![u32::MAX; k], "{} empty set", spec.name);
        }
        if let Some(other) = spec.same_output_as {
            let other = kernel::build(other, &params(Isa::Scalar)).unwrap();
            other.sign(&ids, &mut got);
            assert_eq!(got, want, "{} equals {}", spec.name, other.name());
        }
        for &isa in &isas {
            let kern = kernel::build_spec(spec, &params(isa)).unwrap();
            kern.sign(&ids, &mut got);
            assert_eq!(got, want, "{} k={k} n={} on {isa:?}", spec.name, ids.len());
            kern.sign(&shuffled, &mut got);
            assert_eq!(got, want, "{} order on {isa:?}", spec.name);
            kern.sign(&repeated, &mut got);
            assert_eq!(got, want, "{} repeats on {isa:?}", spec.name);
        }
    }
});
