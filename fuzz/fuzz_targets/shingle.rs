//! The shingler on arbitrary text (arbitrary bytes, invalid UTF-8 replaced), every kind and normalisation the
//! first bytes pick: every instruction set gives the scalar ids, `char:K`'s ASCII fast path equals the generic
//! path, and for every kernel in the registry on every instruction set, `sign_text` equals scalar shingling then
//! scalar `sign` (and reports the empty set exactly when there are no ids).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::arch::Isa;
use lshbench_core::kernel::{self, KERNELS, KernelParams};
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};

fuzz_target!(|data: &[u8]| {
    let [kind, n, norm, kbyte, body @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(body);
    let n = usize::from(n % 12) + 1;
    let kind = match kind % 4 {
        0 => ShingleKind::Char(n),
        1 => ShingleKind::Byte(n),
        2 => ShingleKind::Word(n.min(4)),
        _ => ShingleKind::StopWord(n.min(4)),
    };
    let normalization = Normalization {
        lowercase: norm & 1 != 0,
        collapse_whitespace: norm & 2 != 0,
        strip_punctuation: norm & 4 != 0,
    };
    let seed = u64::from(*norm >> 3);
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.supported()).collect();
    let scalar = Shingler::new(kind, normalization, seed)
        .with_isa(Some(Isa::Scalar))
        .unwrap();
    let mut want = Vec::new();
    scalar.hashes(&text, &mut want);
    let mut got = Vec::new();
    for &isa in &isas {
        let sh = Shingler::new(kind, normalization, seed)
            .with_isa(Some(isa))
            .unwrap();
        sh.hashes(&text, &mut got);
        assert_eq!(got, want, "{kind} ids on {isa:?}");
        if let ShingleKind::Char(k) = kind {
            sh.char_hashes_generic(&text, k, &mut got);
            assert_eq!(got, want, "{kind} generic path on {isa:?}");
        }
    }
    let k = usize::from(kbyte % 40) + 1;
    let (mut scratch, mut sig) = (Vec::new(), vec![0u32; k]);
    for spec in KERNELS {
        let params = |isa| KernelParams {
            num_perm: k,
            seed,
            isa: Some(isa),
        };
        let reference = kernel::build_spec(spec, &params(Isa::Scalar)).unwrap();
        let mut expected = vec![0u32; k];
        reference.sign(&want, &mut expected);
        for &isa in &isas {
            let kern = kernel::build_spec(spec, &params(isa)).unwrap();
            let sh = Shingler::new(kind, normalization, seed)
                .with_isa(Some(isa))
                .unwrap();
            let empty = kern.sign_text(&sh, &text, &mut scratch, &mut sig);
            assert_eq!(
                sig, expected,
                "{} sign_text {kind} k={k} on {isa:?}",
                spec.name
            );
            assert_eq!(empty, want.is_empty(), "{} empty flag", spec.name);
        }
    }
});
