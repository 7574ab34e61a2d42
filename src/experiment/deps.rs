//! The harness's view of the rest of the crate, in one place: S-curve formulas, the tuner, kernels, shingles,
//! corpora and ground truth. Experiments call these, so an interface change elsewhere is absorbed here.

use super::config::BandsRows;
use crate::kernel::{Kernel, KernelParams};
use crate::lsh::scurve::Banding;

fn banding(br: BandsRows) -> Banding {
    Banding {
        bands: br.bands,
        rows: br.rows,
    }
}

/// P(s; b, r) = 1 - (1 - s^r)^b: the probability that a pair of similarity s shares at least one band
/// (`lshbench::lsh::scurve`).
pub fn p_candidate(s: f64, br: BandsRows) -> f64 {
    banding(br).probability(s)
}

/// The rule-of-thumb threshold (1/b)^(1/r).
pub fn rule_threshold(br: BandsRows) -> f64 {
    banding(br).rule_of_thumb()
}

/// The steepest point of the S-curve, ((r-1)/(rb-1))^(1/r).
pub fn steepest(br: BandsRows) -> f64 {
    banding(br).steepest_point()
}

/// The s where P = 1/2: (1 - 2^(-1/b))^(1/r).
pub fn half_point(br: BandsRows) -> f64 {
    banding(br).half_point()
}

/// datasketch's integral-based choice as `lshbench tune --method datasketch` computes it (weights 0.5, 0.5).
pub fn datasketch_choice(num_perm: usize, t: f64) -> BandsRows {
    let b = crate::lsh::tune::datasketch_optimal(num_perm, t, (0.5, 0.5));
    BandsRows {
        bands: b.bands,
        rows: b.rows,
    }
}

/// Builds a kernel by registry name.
pub fn kernel(name: &str, num_perm: usize, seed: u64) -> anyhow::Result<Box<dyn Kernel>> {
    crate::kernel::build(
        name,
        &KernelParams {
            num_perm,
            seed,
            isa: None,
        },
    )
    .map_err(Into::into)
}

/// lshbench tune's choice of (b, r) for k = `num_perm` at threshold `t`, when the tuner is available.
/// (`dedup --threshold t` without explicit bands uses the same rule.)
pub fn tune_choice(num_perm: usize, t: f64) -> Option<BandsRows> {
    crate::lsh::tune::default_banding(num_perm, t)
        .ok()
        .map(|b| BandsRows {
            bands: b.bands,
            rows: b.rows,
        })
}

/// A corpus loaded into memory: the texts in input order, and what the reader counted.
pub struct Texts {
    pub texts: Vec<String>,
    /// Records the reader rejected (a failing record stops the load, so this is 0 unless skipping).
    pub rejected: u64,
    pub bytes: usize,
}

/// Loads a dataset: a corpus file through [`crate::corpus::CorpusReader`] (failing on the first malformed
/// record, with file and line), or the synthetic generator with its defaults and the given size and seed.
pub fn load_texts(spec: &super::config::DatasetSpec, default_seed: u64) -> anyhow::Result<Texts> {
    use anyhow::Context;
    let limit = spec.limit.unwrap_or(usize::MAX);
    let mut texts = Vec::new();
    let mut rejected = 0;
    if let Some(path) = &spec.path {
        let mut reader =
            crate::corpus::CorpusReader::open(path, &crate::corpus::ReaderOptions::default())
                .with_context(|| format!("dataset `{}`", spec.name))?;
        for doc in reader.by_ref() {
            if texts.len() >= limit {
                break;
            }
            let doc = doc.with_context(|| format!("dataset `{}`", spec.name))?;
            texts.push(doc.text);
        }
        rejected = reader.stats().rejected;
    } else {
        let config = crate::corpus::synth::GenConfig {
            docs: spec.docs.unwrap_or(0).min(limit),
            seed: spec.seed.unwrap_or(default_seed),
            ..Default::default()
        };
        crate::corpus::synth::generate(&config, |doc| texts.push(doc.text))
            .with_context(|| format!("dataset `{}`: generator", spec.name))?;
    }
    let bytes = texts.iter().map(|t| t.len()).sum();
    Ok(Texts {
        texts,
        rejected,
        bytes,
    })
}

/// The shingler for a shingle spec (`char:5`), optionally lowercasing.
pub fn shingler(
    shingle: &str,
    lowercase: bool,
    seed: u64,
) -> anyhow::Result<crate::shingle::Shingler> {
    let kind: crate::shingle::ShingleKind =
        shingle.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let normalization = crate::shingle::Normalization {
        lowercase,
        ..Default::default()
    };
    Ok(crate::shingle::Shingler::new(kind, normalization, seed))
}
