//! Why an index could not open, and why a write was refused or its outcome is unknown.

use crate::log::RecoveryError;
use crate::params;
use crate::params::ParamsError;
use std::io;
use std::path::PathBuf;

/// Why an index could not be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The parameters are refused or contradict the index's.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The files could not be read back.
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    /// A file or directory could not be created, read or written.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        cause: io::Error,
    },
    /// Another process has the index open.
    #[error("{} is in use by another process (another lshbench serve?); only one may open an index", dir.display())]
    Locked {
        /// The index directory.
        dir: PathBuf,
    },
    /// `--create` on a directory that already holds something.
    #[error("{} already exists and is not empty: drop --create to open the index in it, or choose a new directory", dir.display())]
    Exists {
        /// The directory.
        dir: PathBuf,
    },
    /// Opening a directory that holds no index.
    #[error("{} holds no index ({} is missing): create one with --create", dir.display(), params::PARAMS_FILE)]
    Missing {
        /// The directory.
        dir: PathBuf,
    },
}

/// Why a write was refused. The index is unchanged by a refused write.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WriteError {
    /// The disk is full (ENOSPC or a quota): the group was rolled back in memory and cut off the log.
    #[error(
        "no space left on the index's disk ({0}): the write was rolled back and the index is unchanged"
    )]
    DiskFull(String),
    /// Another I/O error while writing the log; rolled back likewise.
    #[error("writing the log failed ({0}): the write was rolled back and the index is unchanged")]
    Io(String),
    /// The memory limit is reached.
    #[error(
        "the index is at its memory limit: {used} bytes in use for {documents} documents, limit {limit} \
         (--max-memory); delete documents or restart with a larger limit"
    )]
    MemoryFull {
        /// Bytes in use.
        used: u64,
        /// The limit.
        limit: u64,
        /// Documents in the index.
        documents: u64,
    },
    /// The group's records would take more bytes than one group commit may write
    /// ([`log::MAX_WRITE_BYTES`](crate::log::MAX_WRITE_BYTES): a torn tail is bounded by it); rolled back likewise.
    #[error(
        "the write's records take {bytes} bytes, over the {limit} bytes one log write may take: the write was \
         rolled back and the index is unchanged; send fewer or smaller documents at once"
    )]
    TooLarge {
        /// Bytes the group's records take.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The log's sync failed after its write went through: the group may or may not be durable. Readers keep
    /// seeing the index as it was before the group, and the index refuses writes until a restart decides from
    /// what is on disk (as PostgreSQL and SQLite stop after a failed fsync).
    #[error(
        "syncing the log failed ({0}): the write may or may not be durable; the index takes no writes until it \
         is restarted, and recovery then keeps the write if it reached the disk whole"
    )]
    OutcomeUnknown(String),
    /// A rollback itself failed: the index refuses writes until restarted (recovery reads the disk).
    #[error("the index refuses writes until it is restarted: {0}")]
    Poisoned(String),
    /// The index is closing.
    #[error("the index is shutting down")]
    Closed,
    /// The request's documents have too many candidates to verify (nothing was changed).
    #[error(
        "the request's documents have {candidates} or more candidates to verify (counted up to documents[{document}]), \
         over the limit of {limit} per request (--max-candidates): send fewer documents per request"
    )]
    TooManyCandidates {
        /// Candidates counted so far.
        candidates: u64,
        /// The limit.
        limit: u64,
        /// The document at which the count passed the limit.
        document: usize,
    },
    /// The writer's queue is full: retry later (nothing was changed).
    #[error(
        "the index's write queue is full ({queued} bytes waiting, limit {limit}, --max-queued-bytes): retry \
         in a moment"
    )]
    Busy {
        /// Bytes waiting.
        queued: u64,
        /// The limit.
        limit: u64,
    },
}

impl WriteError {
    /// The HTTP status of the error: 507 for a full disk or the memory limit, 503 when closing, poisoned or
    /// busy, 413 for a request with too many candidates or a group too large to write at once, 500 for other
    /// I/O errors and an unknown outcome.
    pub fn status(&self) -> u16 {
        match self {
            WriteError::DiskFull(_) | WriteError::MemoryFull { .. } => 507,
            WriteError::Poisoned(_) | WriteError::Closed | WriteError::Busy { .. } => 503,
            WriteError::Io(_) | WriteError::OutcomeUnknown(_) => 500,
            WriteError::TooManyCandidates { .. } | WriteError::TooLarge { .. } => 413,
        }
    }

    pub(crate) fn from_io(e: &io::Error) -> WriteError {
        if matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        ) {
            WriteError::DiskFull(e.to_string())
        } else {
            WriteError::Io(e.to_string())
        }
    }
}
