//! Corpora: streaming readers for real files, the seeded synthetic corpus generator, and synthetic set pairs
//! with known Jaccard for the statistical tests.

mod jsonl;
pub mod pairs;
#[cfg(feature = "parquet")]
pub(crate) mod parquet;
pub mod reader;
mod record;
pub mod synth;
#[cfg(feature = "parquet")]
mod thrift_guard;

pub use reader::{
    CorpusReader, DEFAULT_MAX_RECORD_BYTES, Document, FieldValue, InputFormat, OnError, RawRecord,
    ReadError, ReadStats, ReaderOptions,
};
