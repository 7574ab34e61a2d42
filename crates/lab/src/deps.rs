//! The harness's view of the rest of the crate, in one place: the tuner, kernels, shingles, corpora. Experiments
//! call these, so an interface change elsewhere is absorbed here. (S-curve formulas are
//! [`lshbench_core::lsh::scurve::Banding`]'s methods, called directly.) Whatever runs vector code takes the run's
//! [`Dispatch`] (`lshbench run --isa`), so every kernel, shingler and reader of a run uses the one choice.

use crate::error::ExperimentError;
use lshbench_core::arch::Dispatch;
use lshbench_core::kernel::{Kernel, KernelParams};
use lshbench_core::lsh::scurve::Banding;

/// datasketch's integral-based choice as `lshbench tune --method datasketch` computes it (weights 0.5, 0.5).
pub fn datasketch_choice(num_perm: usize, t: f64) -> Banding {
    lshbench_core::lsh::tune::datasketch_optimal(num_perm, t, (0.5, 0.5))
}

/// Builds a kernel by registry name, on the instruction set of `dispatch` (the run's, [`super::runner::Ctx`]'s).
pub fn kernel(
    name: &str,
    num_perm: usize,
    seed: u64,
    dispatch: Dispatch,
) -> Result<Box<dyn Kernel>, ExperimentError> {
    Ok(lshbench_core::kernel::build(
        name,
        &params(num_perm, seed, dispatch),
    )?)
}

fn params(num_perm: usize, seed: u64, dispatch: Dispatch) -> KernelParams {
    KernelParams {
        num_perm,
        seed,
        isa: Some(dispatch.isa()),
    }
}

/// lshbench tune's choice of (b, r) for k = `num_perm` at threshold `t`, when the tuner is available.
/// (`dedup --threshold t` without explicit bands uses the same rule.)
pub fn tune_choice(num_perm: usize, t: f64) -> Option<Banding> {
    lshbench_core::lsh::tune::default_banding(num_perm, t).ok()
}

/// A corpus loaded into memory: the texts in input order, and what the reader counted.
pub struct Texts {
    /// The documents' texts.
    pub texts: Vec<String>,
    /// Records the reader rejected (a failing record stops the load, so this is 0 unless skipping).
    pub rejected: u64,
    /// Bytes of text.
    pub bytes: usize,
}

/// Loads a dataset: a corpus file through [`lshbench_core::corpus::CorpusReader`] (failing on the first malformed
/// record, with file and line; its JSONL fast path on `dispatch`), or the synthetic generator with its defaults
/// and the given size and seed.
pub fn load_texts(
    spec: &super::config::DatasetSpec,
    default_seed: u64,
    dispatch: Dispatch,
) -> Result<Texts, ExperimentError> {
    let limit = spec.limit.unwrap_or(usize::MAX);
    let mut texts = Vec::new();
    let mut rejected = 0;
    if let Some(path) = &spec.path {
        let options = lshbench_core::corpus::ReaderOptions {
            dispatch,
            ..Default::default()
        };
        let mut reader = lshbench_core::corpus::CorpusReader::open(path, &options)?;
        for doc in reader.by_ref() {
            if texts.len() >= limit {
                break;
            }
            texts.push(doc?.text);
        }
        rejected = reader.stats().rejected;
    } else {
        let config = lshbench_core::corpus::synth::GenConfig {
            docs: spec.docs.unwrap_or(0).min(limit),
            seed: spec.seed.unwrap_or(default_seed),
            ..Default::default()
        };
        lshbench_core::corpus::synth::generate(&config, |doc| texts.push(doc.text)).map_err(
            |e| ExperimentError::Generator {
                dataset: spec.name.clone(),
                message: format!("{e:#}"),
            },
        )?;
    }
    let bytes = texts.iter().map(|t| t.len()).sum();
    Ok(Texts {
        texts,
        rejected,
        bytes,
    })
}

/// The shingler for a shingle spec (`char:5`), optionally lowercasing, on the instruction set of `dispatch`.
pub fn shingler(
    shingle: &str,
    lowercase: bool,
    seed: u64,
    dispatch: Dispatch,
) -> Result<lshbench_core::shingle::Shingler, ExperimentError> {
    let kind: lshbench_core::shingle::ShingleKind = shingle.parse().map_err(
        |e: <lshbench_core::shingle::ShingleKind as std::str::FromStr>::Err| {
            ExperimentError::Shingle(e.to_string())
        },
    )?;
    let normalization = lshbench_core::shingle::Normalization {
        lowercase,
        ..Default::default()
    };
    Ok(lshbench_core::shingle::Shingler::new(kind, normalization, seed).with_dispatch(dispatch))
}

/// Builds the kernel of a registry entry (also one outside the registry, as the fault-injection run's), on the
/// instruction set of `dispatch`.
pub fn kernel_of(
    spec: &lshbench_core::kernel::KernelSpec,
    num_perm: usize,
    seed: u64,
    dispatch: Dispatch,
) -> Result<Box<dyn Kernel>, ExperimentError> {
    Ok(lshbench_core::kernel::build_spec(
        spec,
        &params(num_perm, seed, dispatch),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_and_shinglers_run_on_the_dispatch_they_are_given() {
        let scalar = Dispatch::scalar();
        assert_eq!(
            shingler("char:5", false, 1, scalar).unwrap().dispatch(),
            scalar
        );
        assert_eq!(kernel("simd", 64, 1, scalar).unwrap().isa(), scalar.isa());
        let spec = lshbench_core::kernel::spec("oph-opt").unwrap();
        assert_eq!(kernel_of(spec, 64, 1, scalar).unwrap().isa(), scalar.isa());
        let widest = Dispatch::detect();
        assert_eq!(
            shingler("word:2", true, 1, widest).unwrap().dispatch(),
            widest
        );
        assert_eq!(kernel("simd", 64, 1, widest).unwrap().isa(), widest.isa());
    }
}
