//! lshbench: near-duplicate detection with MinHash and LSH, as a library and a workbench.
//!
//! The pipeline is visible in the module tree:
//! `corpus` (readers, generator) -> `shingle` (text to 64-bit shingle ids) -> `kernel` (ids to k 32-bit slots)
//! -> `lsh` (S-curve theory, tuning, banding index, groups) -> `dedup` (the end-to-end job), with `exact` as
//! ground truth and `experiment` as the research harness that sweeps all of it.

pub mod cli;
pub mod corpus;
pub mod dedup;
pub mod exact;
pub mod experiment;
pub mod kernel;
pub mod lsh;
pub mod machine;
pub mod pipeline;
pub mod shingle;
pub mod sketch;
