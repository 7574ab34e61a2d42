//! How library work runs: the one thread-pool helper, and the progress hook that long calls report through.
//!
//! The library never draws anything: a long call takes a [`Progress`] and counts documents into it; the CLI
//! implements it with a terminal progress bar, a Python binding could implement it with a callback.

/// A rayon pool of `threads` workers (every logical CPU when `None`). Fails on `Some(0)`.
pub fn thread_pool(threads: Option<usize>) -> Result<rayon::ThreadPool, ThreadsError> {
    let threads = threads.unwrap_or_else(crate::machine::logical_cpus);
    if threads == 0 {
        return Err(ThreadsError::Zero);
    }
    if threads > MAX_THREADS {
        return Err(ThreadsError::TooMany(threads));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| ThreadsError::Build(e.to_string()))
}

/// Runs `f` on a pool of `threads` workers (every logical CPU when `None`).
pub fn with_threads<T: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> T + Send,
) -> Result<T, ThreadsError> {
    Ok(thread_pool(threads)?.install(f))
}

/// The most worker threads a pool is built with (each has its own stack and buffers).
pub const MAX_THREADS: usize = 1024;

/// Why a thread pool could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadsError {
    #[error("--threads must be at least 1")]
    /// `--threads 0`.
    Zero,
    #[error("--threads must be at most {MAX_THREADS}, got {0}")]
    /// More threads than [`MAX_THREADS`].
    TooMany(usize),
    #[error("cannot start the thread pool: {0}")]
    /// The operating system refused the threads.
    Build(String),
}

/// Where a long call reports how far it got. Every method has a do-nothing default.
pub trait Progress: Sync {
    /// `n` more documents (or other units) are done.
    fn inc(&self, _n: u64) {}
    /// What is being done now.
    fn stage(&self, _what: &str) {}
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}
