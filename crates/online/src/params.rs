//! The parameters an online index is created with: everything that decides which documents are near-duplicates
//! (shingles, normalisation, kernel, k, seed, slot bits, banding, threshold, verification) and what is stored
//! (texts or not). They are fixed at creation and written to `params.json` in the index directory; a later open
//! reads them, and any parameter given again must agree ([`ParamChoices::resolve`]).

use lshbench_core::dedup::Verify;
use lshbench_core::kernel::{self, Kernel, KernelParams};
use lshbench_core::lsh::choice::{self, BandingChoice};
use lshbench_core::lsh::index::BandHasher;
use lshbench_core::lsh::scurve::Banding;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version of the index directory's layout (params, log segments, snapshots) this build reads and writes.
pub const FORMAT: u32 = 1;

/// The name of the parameters file in an index directory.
pub const PARAMS_FILE: &str = "params.json";

/// The fixed parameters of an index, as stored in `params.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexParams {
    /// The directory layout's version ([`FORMAT`]).
    pub format: u32,
    /// The shingle kind, as `char:5`.
    pub shingle: String,
    /// Normalisation: lowercase.
    pub lowercase: bool,
    /// Normalisation: collapse whitespace.
    pub collapse_whitespace: bool,
    /// Normalisation: strip punctuation.
    pub strip_punctuation: bool,
    /// The kernel's registry name.
    pub kernel: String,
    /// k, slots per signature.
    pub num_perm: usize,
    /// The seed of the shingle ids, the kernel and the band keys (as `dedup --seed`).
    pub seed: u64,
    /// Bits kept per slot (32: the whole slot), as `dedup --bits`.
    pub bits: u32,
    /// b, the number of bands.
    pub bands: usize,
    /// r, rows per band.
    pub rows: usize,
    /// The similarity threshold verification applies.
    pub threshold: f64,
    /// `exact`, `estimate` or `none`, as `dedup --verify`.
    pub verify: String,
    /// Whether texts are stored (compressed): needed by exact verification and returned by `GET`.
    pub keep_texts: bool,
    /// A query reads at most this many members of one bucket (the most recent); the rest are counted as
    /// unchecked in its answer.
    pub bucket_cap: usize,
}

/// The parameters given on a command line or by a program: `None` is "not given" (at creation the default,
/// at a later open whatever the index has).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamChoices {
    /// `--shingle`.
    pub shingle: Option<ShingleKind>,
    /// `--lowercase` (only `Some(true)` can be given on a command line).
    pub lowercase: Option<bool>,
    /// `--collapse-whitespace`.
    pub collapse_whitespace: Option<bool>,
    /// `--strip-punctuation`.
    pub strip_punctuation: Option<bool>,
    /// `--kernel`.
    pub kernel: Option<String>,
    /// `--num-perm`.
    pub num_perm: Option<usize>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--bits`.
    pub bits: Option<u32>,
    /// `--bands` (with `rows`).
    pub bands: Option<usize>,
    /// `--rows` (with `bands`).
    pub rows: Option<usize>,
    /// `--threshold`.
    pub threshold: Option<f64>,
    /// `--verify`.
    pub verify: Option<Verify>,
    /// `--keep-texts true|false`.
    pub keep_texts: Option<bool>,
    /// `--bucket-cap`.
    pub bucket_cap: Option<usize>,
}

/// Defaults at creation: those of `lshbench dedup`, so that an index and a `dedup` run with the same flags
/// find the same pairs.
pub const DEFAULT_KERNEL: &str = lshbench_core::defaults::KERNEL;
/// The default bucket cap: `dedup`'s.
pub const DEFAULT_BUCKET_CAP: usize = lshbench_core::lsh::index::DEFAULT_BUCKET_CAP;

/// Why parameters were refused.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// A value given again at a later open differs from the one the index was created with.
    #[error(
        "{} was created with other parameters; they are fixed at --create: {}. Drop these flags, or create \
         a new index in another directory",
        dir.display(),
        differences.join("; ")
    )]
    Contradiction {
        /// The index directory.
        dir: std::path::PathBuf,
        /// Each difference, as `--flag X given, the index has Y`.
        differences: Vec<String>,
    },
    /// The banding, threshold or bits are out of range (the message says which).
    #[error(transparent)]
    Banding(#[from] choice::ChoiceError),
    /// The kernel could not be built.
    #[error(transparent)]
    Kernel(#[from] kernel::KernelError),
    /// A bad slot width.
    #[error(transparent)]
    Bits(#[from] kernel::bbit::BadBits),
    /// `--isa` names an instruction set this CPU does not run.
    #[error(transparent)]
    Isa(#[from] lshbench_core::arch::Unsupported),
    /// A stored value that does not parse (a damaged or hand-edited params.json).
    #[error("{}: {what}", path.display())]
    Stored {
        /// The params file.
        path: std::path::PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Exact verification without texts.
    #[error(
        "--verify exact needs the texts (exact Jaccard is computed on them): drop --keep-texts false, or use \
         --verify estimate"
    )]
    ExactWithoutTexts,
    /// A bucket cap below 1 or above dedup's limit.
    #[error("--bucket-cap {0} is outside 1..={max}", max = choice::MAX_BUCKET_CAP)]
    BucketCap(usize),
}

impl ParamChoices {
    /// The parameters of a new index: each choice, or its default (those of `lshbench dedup`). The banding is
    /// resolved as `dedup` resolves it ([`choice::choose_banding`]).
    pub fn create(&self) -> Result<IndexParams, ParamsError> {
        let num_perm = self.num_perm.unwrap_or(128);
        let bits = kernel::bbit::check_bits(self.bits.unwrap_or(32))?;
        let choice = choice::choose_banding(self.bands, self.rows, self.threshold, num_perm, bits)?;
        let verify = self.verify.unwrap_or_default();
        let keep_texts = self.keep_texts.unwrap_or(true);
        if verify == Verify::Exact && !keep_texts {
            return Err(ParamsError::ExactWithoutTexts);
        }
        let bucket_cap = self.bucket_cap.unwrap_or(DEFAULT_BUCKET_CAP);
        if bucket_cap == 0 || bucket_cap > choice::MAX_BUCKET_CAP {
            return Err(ParamsError::BucketCap(bucket_cap));
        }
        let params = IndexParams {
            format: FORMAT,
            shingle: self.shingle.unwrap_or(ShingleKind::Char(5)).to_string(),
            lowercase: self.lowercase.unwrap_or(false),
            collapse_whitespace: self.collapse_whitespace.unwrap_or(false),
            strip_punctuation: self.strip_punctuation.unwrap_or(false),
            kernel: self
                .kernel
                .clone()
                .unwrap_or_else(|| DEFAULT_KERNEL.to_string()),
            num_perm,
            seed: self.seed.unwrap_or(42),
            bits,
            bands: choice.banding.bands,
            rows: choice.banding.rows,
            threshold: choice.threshold,
            verify: verify.name().to_string(),
            keep_texts,
            bucket_cap,
        };
        // Build once to refuse an unknown kernel or a k out of its range now, not at the first document.
        params.build(Path::new(PARAMS_FILE), None)?;
        Ok(params)
    }

    /// Checks the choices against the parameters `stored` in `dir`: every value given must equal the stored
    /// one. A threshold alone (without bands and rows) picks a banding: that banding must be the stored one.
    pub fn resolve(&self, stored: &IndexParams, dir: &Path) -> Result<(), ParamsError> {
        let mut differences = Vec::new();
        let mut differ = |flag: &str, given: String, has: String| {
            if given != has {
                differences.push(format!("{flag} {given} given, the index has {has}"));
            }
        };
        if let Some(v) = self.shingle {
            differ("--shingle", v.to_string(), stored.shingle.clone());
        }
        let flags = [
            ("--lowercase", self.lowercase, stored.lowercase),
            (
                "--collapse-whitespace",
                self.collapse_whitespace,
                stored.collapse_whitespace,
            ),
            (
                "--strip-punctuation",
                self.strip_punctuation,
                stored.strip_punctuation,
            ),
            ("--keep-texts", self.keep_texts, stored.keep_texts),
        ];
        for (flag, given, has) in flags {
            if let Some(v) = given {
                differ(flag, v.to_string(), has.to_string());
            }
        }
        if let Some(v) = &self.kernel {
            differ("--kernel", v.clone(), stored.kernel.clone());
        }
        let numbers = [
            ("--num-perm", self.num_perm, stored.num_perm),
            ("--bands", self.bands, stored.bands),
            ("--rows", self.rows, stored.rows),
            ("--bucket-cap", self.bucket_cap, stored.bucket_cap),
        ];
        for (flag, given, has) in numbers {
            if let Some(v) = given {
                differ(flag, v.to_string(), has.to_string());
            }
        }
        if let Some(v) = self.seed {
            differ("--seed", v.to_string(), stored.seed.to_string());
        }
        if let Some(v) = self.bits {
            differ("--bits", v.to_string(), stored.bits.to_string());
        }
        if let Some(v) = self.threshold {
            differ("--threshold", v.to_string(), stored.threshold.to_string());
        }
        if let Some(v) = self.verify {
            differ("--verify", v.name().to_string(), stored.verify.clone());
        }
        if differences.is_empty() {
            Ok(())
        } else {
            Err(ParamsError::Contradiction {
                dir: dir.to_path_buf(),
                differences,
            })
        }
    }
}

/// What an index computes with, built from its [`IndexParams`].
pub struct Built {
    /// Text to window ids.
    pub shingler: Shingler,
    /// Window ids to signatures.
    pub kernel: Box<dyn Kernel>,
    /// The banding, the threshold and the slot bits.
    pub choice: BandingChoice,
    /// Band keys: `dedup`'s ([`choice::band_hasher`]), so an index and `dedup` band alike.
    pub hasher: BandHasher,
    /// How candidates are confirmed.
    pub verify: Verify,
}

impl IndexParams {
    /// The shingler, kernel, banding and band hasher these parameters describe; `path` names the params file
    /// in errors.
    pub fn build(
        &self,
        path: &Path,
        isa: Option<lshbench_core::arch::Isa>,
    ) -> Result<Built, ParamsError> {
        let stored = |what: String| ParamsError::Stored {
            path: path.to_path_buf(),
            what,
        };
        if self.format != FORMAT {
            return Err(stored(format!(
                "index format {}; this lshbench reads format {FORMAT}",
                self.format
            )));
        }
        let kind: ShingleKind = self.shingle.parse().map_err(stored)?;
        let normalization = Normalization {
            lowercase: self.lowercase,
            collapse_whitespace: self.collapse_whitespace,
            strip_punctuation: self.strip_punctuation,
        };
        let shingler = Shingler::new(kind, normalization, self.seed).with_isa(isa)?;
        let kernel = kernel::bbit::BBit::wrap(
            kernel::build(
                &self.kernel,
                &KernelParams {
                    num_perm: self.num_perm,
                    seed: self.seed,
                    isa,
                },
            )?,
            self.bits,
        )?;
        let verify = match self.verify.as_str() {
            "exact" => Verify::Exact,
            "estimate" => Verify::Estimate,
            "none" => Verify::None,
            other => return Err(stored(format!("unknown verification `{other}`"))),
        };
        if verify == Verify::Exact && !self.keep_texts {
            return Err(ParamsError::ExactWithoutTexts);
        }
        let banding = Banding::new(self.bands, self.rows, self.num_perm)
            .map_err(|e| stored(e.to_string()))?;
        let threshold = lshbench_core::lsh::scurve::check_threshold(self.threshold)
            .map_err(|e| stored(e.to_string()))?;
        if self.bucket_cap == 0 || self.bucket_cap > choice::MAX_BUCKET_CAP {
            return Err(ParamsError::BucketCap(self.bucket_cap));
        }
        Ok(Built {
            hasher: choice::band_hasher(banding, self.seed),
            choice: BandingChoice {
                banding,
                threshold,
                explicit: true,
                bits: self.bits,
            },
            shingler,
            kernel,
            verify,
        })
    }

    /// Reads `params.json` from `dir`.
    pub fn load(dir: &Path) -> Result<IndexParams, ParamsError> {
        let path = dir.join(PARAMS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ParamsError::Stored {
            path: path.clone(),
            what: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| ParamsError::Stored {
            path,
            what: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_takes_dedups_defaults_and_banding_rule() {
        let p = ParamChoices::default().create().unwrap();
        assert_eq!(
            (p.bands, p.rows),
            (35, 3),
            "dedup's default rule for 0.5 at k = 128"
        );
        assert_eq!(p.kernel, "oph-opt");
        assert_eq!((p.verify.as_str(), p.keep_texts), ("exact", true));
        let p = ParamChoices {
            threshold: Some(0.8),
            num_perm: Some(64),
            ..Default::default()
        }
        .create()
        .unwrap();
        let want = lshbench_core::lsh::tune::default_banding(64, 0.8).unwrap();
        assert_eq!((p.bands, p.rows), (want.bands, want.rows));
    }

    #[test]
    fn bad_choices_are_refused_with_the_flag_named() {
        let e = |c: ParamChoices| c.create().unwrap_err().to_string();
        assert!(
            e(ParamChoices {
                keep_texts: Some(false),
                ..Default::default()
            })
            .contains("--verify exact needs the texts")
        );
        assert!(
            e(ParamChoices {
                kernel: Some("nope".into()),
                ..Default::default()
            })
            .contains("unknown kernel `nope`")
        );
        assert!(
            e(ParamChoices {
                bands: Some(5),
                ..Default::default()
            })
            .contains("--bands needs --rows")
        );
        assert!(
            e(ParamChoices {
                bucket_cap: Some(0),
                ..Default::default()
            })
            .contains("--bucket-cap 0")
        );
    }

    #[test]
    fn a_later_open_refuses_every_contradicting_flag_and_accepts_equal_ones() {
        let stored = ParamChoices::default().create().unwrap();
        let dir = Path::new("/idx");
        let same = ParamChoices {
            num_perm: Some(128),
            bands: Some(35),
            rows: Some(3),
            threshold: Some(0.5),
            verify: Some(Verify::Exact),
            shingle: Some(ShingleKind::Char(5)),
            ..Default::default()
        };
        same.resolve(&stored, dir).unwrap();
        let other = ParamChoices {
            num_perm: Some(64),
            lowercase: Some(true),
            verify: Some(Verify::Estimate),
            ..Default::default()
        };
        let msg = other.resolve(&stored, dir).unwrap_err().to_string();
        assert!(
            msg.contains("--num-perm 64 given, the index has 128"),
            "{msg}"
        );
        assert!(
            msg.contains("--lowercase true given, the index has false"),
            "{msg}"
        );
        assert!(
            msg.contains("--verify estimate given, the index has exact"),
            "{msg}"
        );
        assert!(
            msg.contains("/idx was created with other parameters"),
            "{msg}"
        );
    }

    #[test]
    fn stored_params_round_trip_and_unknown_fields_are_refused() {
        let p = ParamChoices::default().create().unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<IndexParams>(&text).unwrap(), p);
        let extra = text.replacen('{', "{\"colour\":1,", 1);
        assert!(serde_json::from_str::<IndexParams>(&extra).is_err());
        let mut bad = p.clone();
        bad.format = 99;
        let msg = bad
            .build(Path::new("x/params.json"), None)
            .err()
            .unwrap()
            .to_string();
        assert!(msg.contains("index format 99"), "{msg}");
    }
}
