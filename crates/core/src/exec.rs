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

/// Machine-specific placement and scheduling that a caller may opt into. The default is none of it, and it is
/// what every library call does (the Python binding, `lshbench.spark`, another Rust program): no thread is
/// bound, no channel polled, no scheduling class changed, no memory advised, no thread started beyond the
/// call's pool and the call's own scoped reading and writing threads. Only the CLI fills it, from its flags
/// and environment; each field was kept on a gain measured end to end (BENCHMARKING.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// `sketch`'s reading and writing threads go to the CPU left over beside the signing threads, when exactly
    /// one is ([`spare_cpu`]), and poll their channels there before they sleep on them (`send_polling`).
    pub bind_helpers: bool,
    /// `dedup`'s verification sets' mappings are advised for transparent huge pages
    /// ([`crate::sets::SetArena`]).
    pub huge_pages: bool,
    /// `sketch`'s output files replace existing ones by exchanging names with them (`renameat2` with
    /// `RENAME_EXCHANGE`), sparing the flush that ext4 does in a rename over a file
    /// ([`crate::output::AtomicFile::commit_exchanging`]).
    pub exchange_rename: bool,
}

impl Tuning {
    /// The CPU that a pipeline's helper threads (reading and writing, beside `signing` signing threads) are
    /// bound to, or `None` to leave them to the scheduler (always, unless [`Tuning::bind_helpers`]). Binding
    /// never changes a result, only where threads run.
    pub fn helper_cpu(&self, signing: usize) -> Option<usize> {
        if !self.bind_helpers {
            return None;
        }
        spare_cpu(&allowed_cpus()?, signing)
    }
}

/// The rule of [`Tuning::helper_cpu`], given the CPUs the calling thread may run on (ascending): when there are
/// exactly `signing + 1` of them, the helpers must share a CPU with some thread, and sharing one with each
/// other keeps them off the signing threads' CPUs, so the last CPU; otherwise `None` (with fewer CPUs there is
/// none to spare; with more, the scheduler finds idle ones). Left to itself, the scheduler often wakes the
/// reading thread on the signing thread's core when there are just two.
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

/// How long a thread bound to the spare CPU ([`Tuning::helper_cpu`]) polls a channel before it blocks on it: about
/// the longest a reading or writing thread waits for the signing thread on SpamAssassin (a batch signed every
/// 0.2 ms, a group of four written every 0.9 ms).
pub(crate) const POLL_FOR: std::time::Duration = std::time::Duration::from_millis(2);

/// Sends `value` on `tx`, blocking while the channel is full. With `poll`, first tries again and again for up
/// to [`POLL_FOR`], yielding the CPU between tries, and blocks only after that: a sender that is not asleep
/// on the channel is one the receiver does not have to wake (waking a thread on another CPU is a system call
/// and an interprocessor interrupt per batch). Only for a thread with a CPU of its own to spin on (the
/// helpers bound through [`Tuning::bind_helpers`]); the outcome is the same either way.
pub(crate) fn send_polling<T>(
    tx: &std::sync::mpsc::SyncSender<T>,
    value: T,
    poll: bool,
) -> Result<(), std::sync::mpsc::SendError<T>> {
    use std::sync::mpsc::{SendError, TrySendError};
    let mut value = value;
    if poll {
        let deadline = std::time::Instant::now() + POLL_FOR;
        loop {
            match tx.try_send(value) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(v)) => return Err(SendError(v)),
                Err(TrySendError::Full(v)) => value = v,
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
    }
    tx.send(value)
}

/// Receives from `rx`, blocking while it is empty; with `poll`, polls first, as [`send_polling`] does.
pub(crate) fn recv_polling<T>(
    rx: &std::sync::mpsc::Receiver<T>,
    poll: bool,
) -> Result<T, std::sync::mpsc::RecvError> {
    use std::sync::mpsc::{RecvError, TryRecvError};
    if poll {
        let deadline = std::time::Instant::now() + POLL_FOR;
        loop {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
    }
    rx.recv()
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

    /// Polling or not, every value arrives once and in order, whether the other side keeps up (values taken
    /// while polling) or not (a wait longer than `POLL_FOR`, which ends in the blocking call); and a closed
    /// channel ends both calls with an error, the unsent value handed back.
    #[test]
    fn polling_channels_deliver_everything_in_order_and_see_the_other_side_go() {
        use std::time::Duration;
        for poll in [false, true] {
            for pause in [Duration::ZERO, POLL_FOR + Duration::from_millis(3)] {
                let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(2);
                let sender = std::thread::spawn(move || {
                    for i in 0..20 {
                        send_polling(&tx, i, poll).unwrap();
                    }
                });
                let mut got = Vec::new();
                for i in 0..20 {
                    // Slow down at two points: the sender, with the channel full, polls past its deadline.
                    if i == 5 || i == 12 {
                        std::thread::sleep(pause);
                    }
                    got.push(recv_polling(&rx, poll).unwrap());
                }
                sender.join().unwrap();
                assert_eq!(
                    got,
                    (0..20).collect::<Vec<_>>(),
                    "poll {poll}, pause {pause:?}"
                );
                // The sender is gone: the receiver sees it, at once or after the last value.
                assert!(recv_polling(&rx, poll).is_err());

                // A receiver that starts waiting on an empty channel gets a value sent after its deadline.
                let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
                let late = std::thread::spawn(move || {
                    std::thread::sleep(pause);
                    tx.send(7).unwrap();
                });
                assert_eq!(recv_polling(&rx, poll), Ok(7));
                late.join().unwrap();

                // The receiver is gone: the send fails and hands the value back, with the channel full or not.
                let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
                send_polling(&tx, 1, poll).unwrap();
                drop(rx);
                assert_eq!(send_polling(&tx, 2, poll).unwrap_err().0, 2);
            }
        }
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
