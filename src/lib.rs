//! lshbench: near-duplicate detection with MinHash and LSH, as a library and a workbench.
//!
//! The modules are layers; each imports only from the layers below it (`tests/layers.rs` fails on an upward
//! import), and the guide's Architecture page (`docs/src/architecture.md`) draws them:
//!
//! | layer | modules | what |
//! |---|---|---|
//! | 0 | [`hash`], [`machine`], [`output`] | mixers and their constants; the machine a result came from; output files written whole (temporary name, then rename) |
//! | 1 | [`arch`], [`exec`] | instruction-set detection, dispatch and tokens; the thread pool and the progress hook |
//! | 2 | [`window`], [`corpus`] | the window stream and the one definition of a window's id; readers and generators |
//! | 3 | [`shingle`], [`kernel`] | text to windows; ids to signatures (the registry) |
//! | 4 | [`lsh`], [`sets`] | S-curve theory, tuning, banding, union-find groups; shingle-id sets and their intersections |
//! | 5 | [`pipeline`] | the only module that knows both a shingler and a kernel |
//! | 6 | [`exact`], [`sketch`] | the exact all-pairs join, the ground truth; signatures of a corpus to files |
//! | 7 | [`dedup`] | the end-to-end job |
//! | 8 | [`experiment`], `online` (feature `online`) | the research harness; the durable online index |
//! | 9 | `server` (feature `server`) | the HTTP service over the online index |
//! | 10 | `cli` (feature `cli`) | flags, printing, progress bars |
//!
//! Two modules on one layer do not import each other.

#![warn(missing_docs)]

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
#[cfg(feature = "online")]
pub mod online;
pub mod output;
pub mod pipeline;
#[cfg(feature = "server")]
pub mod server;
pub mod sets;
pub mod shingle;
pub mod sketch;
pub mod window;
