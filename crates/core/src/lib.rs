//! lshbench's core: near-duplicate detection with MinHash and LSH, from bytes to verified pairs and groups.
//!
//! The workspace's other crates sit on this one (the durable index `lshbench-online`, the HTTP service
//! `lshbench-server`, the research harness `lshbench-lab`, the command line `lshbench`, the Python binding);
//! nothing here knows them. Within the crate the modules are layers; each imports only from the layers below
//! it (`tests/layers.rs` fails on an upward import), and the guide's Architecture page
//! (`docs/src/architecture.md`) draws them:
//!
//! | layer | modules | what |
//! |---|---|---|
//! | 0 | [`hash`], [`machine`], [`output`], [`defaults`] | mixers and their constants; the machine a result came from; output files written whole (temporary name, then rename); the defaults every front end shares |
//! | 1 | [`arch`], [`exec`] | instruction-set detection, dispatch and tokens; the thread pool and the progress hook |
//! | 2 | [`window`], [`corpus`] | the window stream and the one definition of a window's id; readers and generators |
//! | 3 | [`shingle`], [`kernel`] | text to windows; ids to signatures (the registry) |
//! | 4 | [`lsh`], [`sets`] | S-curve theory, tuning, banding, union-find groups; shingle-id sets and their intersections |
//! | 5 | [`pipeline`] | the only module that knows both a shingler and a kernel |
//! | 6 | [`exact`], [`sketch`] | the exact all-pairs join, the ground truth; signatures of a corpus to files |
//! | 7 | [`dedup`] | the end-to-end job |
//!
//! Two modules on one layer do not import each other.

#![warn(missing_docs)]

pub mod arch;
pub mod corpus;
pub mod dedup;
pub mod defaults;
pub mod exact;
pub mod exec;
pub mod hash;
pub mod kernel;
pub mod lsh;
pub mod machine;
pub mod output;
pub mod pipeline;
pub mod sets;
pub mod shingle;
pub mod sketch;
pub mod window;
