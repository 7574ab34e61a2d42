//! The errors of a dedup run.

use super::state::StateError;
use super::{kept, memory, survivor};
use crate::corpus::ReadError;
use crate::lsh::choice::{ChoiceError, MAX_BUCKET_CAP};
use crate::lsh::index::TooManyCandidates;
use crate::lsh::scurve::{Banding, BandingError};
use crate::output::OutputError;

/// Why a dedup run failed.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// The corpus could not be read (the message names file, line and field).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The banding or the threshold is out of range.
    #[error(transparent)]
    Banding(#[from] BandingError),
    /// A slot width that is not one of 1, 2, 4, 8, 16 or 32 bits.
    #[error(transparent)]
    Bits(#[from] crate::kernel::bbit::BadBits),
    /// The banding asked for contradicts the threshold, or only one of bands and rows was given.
    #[error(transparent)]
    Choice(#[from] ChoiceError),
    /// The state to load could not be read or does not match this run, or the state could not be saved.
    #[error(transparent)]
    State(#[from] StateError),
    /// A bucket cap below 2.
    #[error("--bucket-cap must be at least 2")]
    BucketCap,
    /// A bucket cap above [`MAX_BUCKET_CAP`].
    #[error("--bucket-cap {0} is above the limit {MAX_BUCKET_CAP}")]
    BucketCapTooLarge(usize),
    /// The banding let through more candidate pairs than allowed.
    #[error("banding {} bands x {} rows: {cause}", banding.bands, banding.rows)]
    TooManyCandidates {
        /// The banding that did it.
        banding: Banding,
        /// The limit it crossed.
        cause: TooManyCandidates,
    },
    /// An output file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The survivor policy could not rank the documents.
    #[error(transparent)]
    Survivor(#[from] survivor::SurvivorError),
    /// A survivor column the reader was not opened to collect.
    #[error(
        "--keep {0}: the corpus reader must collect that field (ReaderOptions::rank_field); the command line does \
         this itself"
    )]
    RankFieldNotRead(String),
    /// The out-of-core run (`--memory-limit`) could not go on: the limit is too small, a spill file is damaged, or
    /// the corpus changed between its two passes.
    #[error(transparent)]
    OutOfCore(#[from] memory::OutOfCoreError),
    /// The kept corpus could not be written.
    #[error(transparent)]
    Kept(#[from] kept::KeptError),
}
