//! lshbench: near-duplicate detection with MinHash and LSH, as a library and a workbench.
//!
//! The modules are layers; each imports only from the layers below it (`tests/layers.rs` fails on an upward
//! import), and the README's Architecture section draws them:
//!
//! | layer | modules | what |
//! |---|---|---|
//! | 0 | [`arch`], [`hash`], [`machine`], [`exec`] | instruction-set detection and dispatch tokens; mixers; the machine; threads and progress |
//! | 1 | [`window`], [`corpus`] | the window stream and the one definition of a window's id; readers and generators |
//! | 2 | [`shingle`], [`kernel`] | text to windows; ids to signatures (the registry) |
//! | 3 | [`lsh`] | S-curve theory, tuning, banding, union-find groups |
//! | 4 | [`pipeline`] | the only module that knows both a shingler and a kernel |
//! | 5 | [`exact`], [`sketch`] | exact Jaccard ground truth; signatures of a corpus to files |
//! | 6 | [`dedup`] | the end-to-end job |
//! | 7 | [`experiment`] | the research harness |
//! | 8 | `cli` (feature `cli`) | flags, printing, progress bars |

pub mod arch;
#[cfg(feature = "cli")]
pub mod cli;
pub mod corpus;
pub mod dedup;
pub mod exact;
pub mod exec;
pub mod experiment;
pub mod hash;
pub mod kernel;
pub mod lsh;
pub mod machine;
pub mod pipeline;
pub mod shingle;
pub mod sketch;
pub mod window;
