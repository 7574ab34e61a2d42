//! What an index does besides its parameters: limits, the snapshot policy and the test hooks.

use crate::storage::Storage;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What an index does besides its parameters: limits, snapshot policy and test hooks. These may change
/// from one start to the next.
#[derive(Clone, Default)]
pub struct OnlineOptions {
    /// Writes are refused (with [`WriteError::MemoryFull`](crate::WriteError::MemoryFull)) once the index's memory reaches this many bytes.
    pub max_memory: Option<u64>,
    /// A snapshot is taken once the log since the last one holds more than this many bytes and more than the
    /// last snapshot (default [`DEFAULT_SNAPSHOT_MIN_BYTES`] when 0).
    pub snapshot_min_bytes: u64,
    /// A check or query of several documents that have more candidates than this to verify, in all, is
    /// refused (default [`DEFAULT_MAX_CANDIDATES`] when 0). It bounds the work of one request, and the
    /// duplicates its answer can list; a request of one document is bounded by the bucket cap instead.
    pub max_candidates: u64,
    /// Writes waiting for the writer may hold this many bytes (documents signed, texts compressed); a write
    /// that would go past it is refused with [`WriteError::Busy`](crate::WriteError::Busy) (default [`DEFAULT_MAX_QUEUED_BYTES`] when
    /// 0). The queued bytes count towards [`OnlineOptions::max_memory`].
    pub max_queued_bytes: u64,
    /// The instruction set of shingling, signing and verifying (default: the widest this CPU runs). Every
    /// instruction set gives the same bits, so it may change between starts.
    pub isa: Option<lshbench_core::arch::Isa>,
    /// Where the log segments and snapshots live: the real file system (`None`), or another
    /// [`Storage`] (the tests' simulated one).
    pub storage: Option<Arc<dyn Storage>>,
    /// Fault injection, for tests.
    pub faults: Faults,
}

/// The default of [`OnlineOptions::snapshot_min_bytes`].
pub const DEFAULT_SNAPSHOT_MIN_BYTES: u64 = 64 << 20;
/// The default of [`OnlineOptions::max_candidates`].
pub const DEFAULT_MAX_CANDIDATES: u64 = 20_000;
/// The default of [`OnlineOptions::max_queued_bytes`].
pub const DEFAULT_MAX_QUEUED_BYTES: u64 = 256 << 20;

/// Faults the log can be told to suffer, so that tests of failure paths never depend on the machine (no
/// silently skipped test when a small file system cannot be mounted).
#[derive(Clone, Default)]
pub struct Faults {
    /// Log writes fail with "no space left on device" once the log files would hold more than this many
    /// bytes (the part that fits is written first, as a real full disk does).
    pub disk_full_after: Option<u64>,
    /// Called by the writer after a group's write and before its sync (a test holds the writer there).
    pub before_sync: Option<Arc<dyn Fn() + Send + Sync>>,
    /// While set, the log's sync fails with EIO after its write went through.
    pub fail_sync: Option<Arc<AtomicBool>>,
    /// The writer waits for each snapshot it starts, so that a test sees one order of file operations.
    pub wait_for_snapshots: bool,
}
