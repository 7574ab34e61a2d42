//! The promise of `dedup --memory-limit`: the CLI, run as a process of its own on the shipped corpus on 1 and 2
//! threads, either refuses a limit before its heavy work, saying why, or peaks under it, as the kernel counts its
//! resident set (the child's `ru_maxrss` from `wait4`), at the smallest limit it accepts and above. Alone in its
//! test binary: a child's `ru_maxrss` is at least its parent's resident set when it was started (the address
//! space it was spawned from counts until `exec`), so the parent must stay small; being at least the child's own
//! peak, it can only make the check stricter.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

fn spamassassin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz")
}

/// Runs the `lshbench` binary (`dedup` of the shipped corpus, `extra` flags) and returns its exit status, its
/// stderr and its peak resident bytes (the kernel's count for the child, from `wait4`).
// The child is reaped by `wait4` below, which also gives its peak; clippy sees no `wait()`.
#[allow(clippy::zombie_processes)]
fn cli_dedup(extra: &[&str], out: &Path) -> (bool, String, u64) {
    use std::os::unix::process::ExitStatusExt;
    let input = spamassassin();
    let pairs = out.join("pairs.csv");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lshbench"))
        .args(["dedup", "--input"])
        .arg(&input)
        .arg("--pairs")
        .arg(&pairs)
        .args(extra)
        .args(
            extra
                .contains(&"--memory-limit")
                .then_some(["--tmp-dir".as_ref(), out.as_os_str()])
                .into_iter()
                .flatten(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 reaps the child this test started and fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: `status` and `usage` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let ok = std::process::ExitStatus::from_raw(status).success();
    (ok, stderr, usage.ru_maxrss as u64 * 1024)
}

/// The bytes of "needs about 12.34 MiB" in a refusal, rounded up to the next whole MiB.
fn needed_mib(msg: &str) -> u64 {
    let after = msg
        .split("needs about ")
        .nth(1)
        .expect("a need in the message");
    let (num, unit) = after.split_once(' ').unwrap();
    let x: f64 = num.parse().unwrap();
    let mib = match &unit[..3] {
        "KiB" => x / 1024.0,
        "MiB" => x,
        "GiB" => x * 1024.0,
        _ => panic!("{msg}"),
    };
    mib.ceil() as u64 + 1
}

/// The promise of `--memory-limit`: on the shipped corpus, at the smallest limit the CLI accepts (found by
/// raising the limit to each refusal's stated need), 8 MiB above it, 64M and 96M, on 1 and 2 threads, a run is
/// either refused before its heavy work with the reason, or peaks under its limit; an accepted run's pairs are
/// the in-memory run's; and every limit 8 MiB or more above the floor is accepted. The binary is this build's (a debug build's code is larger than a release build's, and
/// counted as such).
#[test]
fn the_cli_peaks_under_its_memory_limit_or_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err, _) = cli_dedup(&["--threads", "2"], dir.path());
    assert!(ok, "{err}");
    let in_memory = std::fs::read(dir.path().join("pairs.csv")).unwrap();
    for threads in ["1", "2"] {
        // The floor: start far below it, and raise the limit to each refusal's need until a run is accepted.
        let mut limit = 1u64;
        let mut refusals = Vec::new();
        let floor = loop {
            let arg = format!("{limit}M");
            let (ok, err, peak) =
                cli_dedup(&["--threads", threads, "--memory-limit", &arg], dir.path());
            if ok {
                assert!(
                    peak < limit << 20,
                    "{threads} threads, --memory-limit {arg}: peak {peak} bytes"
                );
                break limit;
            }
            assert!(
                err.contains("Raise --memory-limit"),
                "{threads} threads, {arg}: {err}"
            );
            let next = needed_mib(&err);
            assert!(next > limit, "{threads} threads, {arg}: no progress: {err}");
            refusals.push(err);
            limit = next;
        };
        assert!(refusals[0].contains("starting the run"), "{}", refusals[0]);
        for limit in [floor, floor + 8, 64, 96] {
            let arg = format!("{limit}M");
            let (ok, err, peak) =
                cli_dedup(&["--threads", threads, "--memory-limit", &arg], dir.path());
            if !ok {
                // The estimate counts the process's resident set as measured at the start of the run, which
                // differs between runs by a megabyte or two (thread start-up, the gzip read-ahead): a limit
                // accepted once at the floor may be refused the next time, never one 8 MiB above it.
                assert!(
                    limit <= floor && err.contains("Raise --memory-limit"),
                    "{threads} threads, {arg}: {err}"
                );
                continue;
            }
            assert!(
                peak < limit << 20,
                "{threads} threads, --memory-limit {arg}: peak resident {peak} bytes over the limit"
            );
            let pairs = std::fs::read(dir.path().join("pairs.csv")).unwrap();
            assert!(
                pairs == in_memory,
                "{threads} threads, {arg}: pairs differ from the in-memory run's"
            );
        }
        eprintln!("{threads} threads: smallest accepted --memory-limit {floor}M");
    }
}
