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

/// The CPU that a pipeline's helper threads (reading and writing, beside `signing` signing threads) are bound
/// to, or `None` to leave them to the scheduler: see [`spare_cpu`] for the rule. `LSHBENCH_PIN=0` in the
/// environment turns it off. Binding never changes a result, only where threads run.
pub fn helper_cpu(signing: usize) -> Option<usize> {
    if std::env::var_os("LSHBENCH_PIN").is_some_and(|v| v == "0") {
        return None;
    }
    spare_cpu(&allowed_cpus()?, signing)
}

/// The rule of [`helper_cpu`], given the CPUs the calling thread may run on (ascending): when there are
/// exactly `signing + 1` of them, the helpers must share a CPU with some thread, and sharing one with each
/// other keeps them off the signing threads' CPUs, so the last CPU; otherwise `None` (with fewer CPUs there is
/// none to spare; with more, the scheduler finds idle ones). On a 2-core machine with `--threads 1`, the
/// scheduler otherwise often woke the reading thread on the signing thread's core: BENCHMARKING.md §11, 26th
/// round.
pub fn spare_cpu(allowed: &[usize], signing: usize) -> Option<usize> {
    if allowed.len() == signing + 1 {
        allowed.last().copied()
    } else {
        None
    }
}

/// The CPUs the calling thread may run on, ascending (`None` where that cannot be asked).
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> Option<Vec<usize>> {
    use rustix::thread::{CpuSet, sched_getaffinity};
    let set = sched_getaffinity(None).ok()?;
    Some((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// The CPUs the calling thread may run on (not known on this system).
#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Option<Vec<usize>> {
    None
}

/// Binds the calling thread to `cpu`. A placement hint: returns whether it held, and callers go on either way.
#[cfg(target_os = "linux")]
pub fn bind_current_thread(cpu: usize) -> bool {
    use rustix::thread::{CpuSet, sched_setaffinity};
    if cpu >= CpuSet::MAX_CPU {
        return false;
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).is_ok()
}

/// Binds the calling thread to `cpu` (not possible on this system: returns false).
#[cfg(not(target_os = "linux"))]
pub fn bind_current_thread(_cpu: usize) -> bool {
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_cpu_only_when_exactly_one_cpu_is_left_over() {
        // One CPU more than the signing threads: the last one, wherever the allowed CPUs lie.
        assert_eq!(spare_cpu(&[0, 1], 1), Some(1));
        assert_eq!(spare_cpu(&[2, 5, 7], 2), Some(7));
        // No CPU to spare: the helpers share with signing wherever they go.
        assert_eq!(spare_cpu(&[0], 1), None);
        assert_eq!(spare_cpu(&[0, 1], 2), None);
        assert_eq!(spare_cpu(&[0, 1], 4), None);
        // CPUs to spare: the scheduler finds idle ones.
        assert_eq!(spare_cpu(&[0, 1, 2], 1), None);
        assert_eq!(spare_cpu(&(0..64).collect::<Vec<_>>(), 8), None);
        assert_eq!(spare_cpu(&[], 0), None);
    }

    /// A thread bound to one of its allowed CPUs may then run only there, and runs there.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_bound_thread_runs_on_its_cpu_alone() {
        let allowed = allowed_cpus().expect("sched_getaffinity works on Linux");
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        let (after, ran_on) = std::thread::spawn(move || {
            assert!(bind_current_thread(cpu));
            (allowed_cpus().unwrap(), rustix::thread::sched_getcpu())
        })
        .join()
        .unwrap();
        assert_eq!(after, vec![cpu]);
        assert_eq!(ran_on, cpu);
        // A CPU past what the mask can hold is refused, not a panic.
        assert!(!bind_current_thread(usize::MAX));
        // The binding was the spawned thread's own: this thread's CPUs are as before.
        assert_eq!(allowed_cpus().unwrap(), allowed);
    }
}
