//! The `lshbench` command line: flags, printing and progress bars over the workspace's library crates
//! (`lshbench-core`, `lshbench-online`, `lshbench-server`, `lshbench-lab`). The binary (`src/main.rs`) calls
//! [`cli::main`]; the tests call the same functions.

#![warn(missing_docs)]

pub mod cli;
