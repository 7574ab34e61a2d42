//! The bad-input table (issue 12): every case of `tests/bad_inputs/cases.toml` runs the built CLI on hostile
//! input and checks its exit code, a fragment of its message (naming the file, line, field or flag), that it
//! neither panicked, aborted, was killed by a signal nor hung, that the message says its cause once, that no
//! input file changed, and that no temporary output file was left behind.
//!
//! Inputs are the small files of `tests/bad_inputs/files/`, copied afresh for every case into `{in}` (so a case
//! that wrongly overwrote its input cannot damage the repository); `{out}` is an empty directory for outputs.
//! Large or special inputs (FIFOs, symbolic-link loops, unreadable files, a gzip bomb, a huge document, state
//! files with lying headers) are made by the case's `setup`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lshbench");
const FILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bad_inputs/files");
const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bad_inputs/cases.toml");
/// The binary under test: this build's, or `BAD_INPUTS_BIN` (to show which cases an older build fails).
fn bin() -> String {
    std::env::var("BAD_INPUTS_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// No case may run longer than this (a hang is a failure).
const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    case: Vec<Case>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Case {
    /// A short unique name.
    name: String,
    /// The category of the list it covers.
    category: String,
    /// The command line after `lshbench`, with `{in}` and `{out}` substituted.
    args: Vec<String>,
    /// The expected exit code (1: a refused input; 2: a flag clap refuses; 0: accepted, e.g. counted).
    exit: i32,
    /// A fragment the output must contain (stderr, or stdout+stderr when `exit` is 0).
    message: String,
    /// Special inputs to make first (see [`setup`]).
    #[serde(default)]
    setup: Option<String>,
}

fn load_table() -> Vec<Case> {
    let text = std::fs::read_to_string(TABLE).expect("tests/bad_inputs/cases.toml");
    let table: Table = toml::from_str(&text).expect("the table parses");
    table.case
}

/// Copies the committed inputs into `dst`.
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// Every regular file under `dir` with its sha256 (FIFOs, devices and dangling links are left out).
fn digests(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    use sha2::Digest;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            digests(&entry.path(), out);
        } else if kind.is_file()
            && let Ok(bytes) = std::fs::read(entry.path())
        {
            out.insert(entry.path(), sha2::Sha256::digest(&bytes).to_vec());
        }
    }
}

/// Temporary files left anywhere under `dir` (the atomic writer's `.NAME.XXXX.tmp`).
fn leftovers(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            leftovers(&entry.path(), out);
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            out.push(entry.path());
        }
    }
}

/// A state file of the six documents of `good.jsonl` (k = 16), made by the CLI itself.
fn make_state(dir: &Path) -> Vec<u8> {
    let state = dir.join("state.bin");
    let out = Command::new(bin())
        .args(["dedup", "--input"])
        .arg(dir.join("good.jsonl"))
        .args(["--num-perm", "16", "--bands", "4", "--rows", "4", "--save"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&state).unwrap()
}

/// Rewrites a state file's JSON header with `edit` and seals it with a correct checksum (layout in
/// `crates/core/src/dedup/state.rs`: magic 16, version 4, header length 4, header, ..., xxh3 checksum 8).
fn reseal(bytes: &[u8], edit: impl Fn(&str) -> String) -> Vec<u8> {
    let hlen = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[24..24 + hlen]).unwrap();
    let new = edit(header);
    assert_ne!(new, header, "the edit changed the header");
    let mut out = bytes[..20].to_vec();
    out.extend_from_slice(&(new.len() as u32).to_le_bytes());
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&bytes[24 + hlen..bytes.len() - 8]);
    let checksum = xxhash_rust::xxh3::xxh3_64(&out[16..]);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// Whether this process can read a file whose permissions deny it (root can).
fn permissions_ignored(path: &Path) -> bool {
    std::fs::File::open(path).is_ok()
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Makes the special inputs of `setup` in `input`/`output`. Returns `Err(reason)` to skip the case (with the
/// reason printed), e.g. an unreadable file when running as root.
fn setup(
    kind: &str,
    input: &Path,
    output: &Path,
) -> Result<Option<std::thread::JoinHandle<()>>, String> {
    match kind {
        "state" => {
            let good = make_state(input);
            let n = good.len();
            std::fs::write(input.join("state_truncated.bin"), &good[..n / 2]).unwrap();
            let mut flipped = good.clone();
            flipped[n - 20] ^= 0x10;
            std::fs::write(input.join("state_bitflip.bin"), &flipped).unwrap();
            let mut v1 = good.clone();
            v1[16..20].copy_from_slice(&1u32.to_le_bytes());
            std::fs::write(input.join("state_version1.bin"), &v1).unwrap();
            let lying = reseal(&good, |h| {
                h.replace("\"documents\":6", "\"documents\":1099511627776")
            });
            std::fs::write(input.join("state_lying.bin"), &lying).unwrap();
            let lying_k = reseal(&good, |h| {
                h.replace("\"num_perm\":16", "\"num_perm\":4611686018427387904")
            });
            std::fs::write(input.join("state_lying_k.bin"), &lying_k).unwrap();
            let mut extra = good.clone();
            extra.extend_from_slice(b"junk");
            std::fs::write(input.join("state_trailing.bin"), &extra).unwrap();
        }
        "fifo" => {
            let fifo = input.join("fifo.jsonl");
            let made = Command::new("mkfifo").arg(&fifo).status();
            if !made.is_ok_and(|s| s.success()) {
                return Err("mkfifo is not available".into());
            }
            // A writer that feeds one malformed record and closes: the reader must stream it and report it.
            return Ok(Some(std::thread::spawn(move || {
                if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) {
                    let _ = f.write_all(b"{\"id\": \"a\", \"text\": 5}\n");
                }
            })));
        }
        "unreadable" => {
            let path = input.join("unreadable.jsonl");
            std::fs::write(&path, "{\"text\": \"secret\"}\n").unwrap();
            chmod(&path, 0o000);
            if permissions_ignored(&path) {
                chmod(&path, 0o644);
                return Err("running as root: chmod 000 does not deny reads".into());
            }
        }
        "unwritable" => {
            let dir = output.join("readonly");
            std::fs::create_dir(&dir).unwrap();
            chmod(&dir, 0o555);
            let probe = dir.join("probe");
            if std::fs::write(&probe, "x").is_ok() {
                let _ = std::fs::remove_file(&probe);
                chmod(&dir, 0o755);
                return Err("running as root: chmod 555 does not deny writes".into());
            }
        }
        "symlink_loop" => {
            let dir = input.join("loopdir");
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("a.txt"), "a document").unwrap();
            std::os::unix::fs::symlink("self.txt", dir.join("self.txt")).unwrap();
        }
        "dangling" => {
            let dir = input.join("dangdir");
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("a.txt"), "a document").unwrap();
            std::os::unix::fs::symlink("missing.txt", dir.join("gone.txt")).unwrap();
        }
        "dir_cycle" => {
            let dir = input.join("cycledir");
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            std::fs::write(dir.join("a.txt"), "a document").unwrap();
            std::fs::write(dir.join("sub/b.txt"), "another document").unwrap();
            std::os::unix::fs::symlink("..", dir.join("sub/up")).unwrap();
        }
        "docs_dir" => {
            let dir = input.join("docs");
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("a.txt"), "a document").unwrap();
        }
        "links" => {
            std::fs::hard_link(input.join("good.csv"), input.join("hard.csv")).unwrap();
            std::os::unix::fs::symlink("good.csv", input.join("link.csv")).unwrap();
            std::fs::copy(input.join("good.csv"), input.join("sigs.ids.csv")).unwrap();
        }
        "full_disk_link" => {
            // 3,000 documents whose CSV rows (about 1.4 KB each) overflow the output's 1-MB buffer long before
            // the end, written through a link to /dev/full: the write fails in the middle of the corpus.
            let lines: String = (0..3000)
                .map(|i| {
                    format!(
                        "{{\"id\": \"d{i}\", \"text\": \"text {i} of many, {}\"}}\n",
                        i * 7919
                    )
                })
                .collect();
            std::fs::write(input.join("many.jsonl"), &lines).unwrap();
            // The same gzip'd: `sketch` writes a plain input's output on a thread of its own and a gzip
            // input's on the signing thread, so both ways of failing are cases.
            let file = std::fs::File::create(input.join("many.jsonl.gz")).unwrap();
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            std::io::Write::write_all(&mut gz, lines.as_bytes()).unwrap();
            gz.finish().unwrap();
            std::os::unix::fs::symlink("/dev/full", output.join("sig.csv")).unwrap();
        }
        "huge_doc" => {
            // One 16 MiB document without a newline.
            let word = b"lorem ipsum dolor sit amet consectetur ";
            let text: Vec<u8> = word.iter().copied().cycle().take(16 << 20).collect();
            std::fs::write(input.join("huge.txt"), text).unwrap();
        }
        "gzip_bomb" => {
            // 256 MiB of zeros in about 256 KB of gzip.
            let file = std::fs::File::create(input.join("bomb.txt.gz")).unwrap();
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..256 {
                gz.write_all(&zeros).unwrap();
            }
            gz.finish().unwrap();
        }
        other => panic!("unknown setup `{other}`"),
    }
    Ok(None)
}

/// The `error: ...` line says each cause once: no `: X: X` repetition and one `(os error N)` at most.
fn says_cause_once(stderr: &str) -> Result<(), String> {
    for line in stderr.lines().filter(|l| l.starts_with("error:")) {
        let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
        if let Some(w) = parts.windows(2).find(|w| w[0] == w[1] && !w[0].is_empty()) {
            return Err(format!("`{}` is said twice in: {line}", w[0]));
        }
        if line.matches("(os error").count() > 1 {
            return Err(format!("the OS error is said twice in: {line}"));
        }
    }
    Ok(())
}

/// Runs one case; `Ok(None)` when it passed, `Ok(Some(reason))` when skipped, `Err` when it failed.
fn run_case(case: &Case) -> Result<Option<String>, String> {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    let output = tmp.path().join("out");
    copy_dir(Path::new(FILES), &input);
    std::fs::create_dir(&output).unwrap();
    let writer = match case.setup.as_deref().map(|s| setup(s, &input, &output)) {
        Some(Err(reason)) => return Ok(Some(reason)),
        Some(Ok(w)) => w,
        None => None,
    };
    let mut before = BTreeMap::new();
    digests(&input, &mut before);
    let subst = |a: &str| {
        a.replace("{in}", input.to_str().unwrap())
            .replace("{out}", output.to_str().unwrap())
    };
    let args: Vec<String> = case.args.iter().map(|a| subst(a)).collect();
    let started = Instant::now();
    let mut child = Command::new(bin())
        .args(&args)
        .current_dir(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes on threads so a chatty child cannot block on a full pipe while we wait.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let so = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let se = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut se, &mut v);
        String::from_utf8_lossy(&v).into_owned()
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hung: no exit after {TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (so.join().unwrap(), se.join().unwrap());
    if let Some(w) = writer {
        let _ = w.join();
    }
    let shown = format!("exit {status}\n--- stderr\n{stderr}--- stdout\n{stdout}");
    let Some(code) = status.code() else {
        return Err(format!("killed by a signal (abort?)\n{shown}"));
    };
    if code == 101 || stderr.contains("panicked") {
        return Err(format!("panicked\n{shown}"));
    }
    if code != case.exit {
        return Err(format!("expected exit {}, got {code}\n{shown}", case.exit));
    }
    let haystack = if case.exit == 0 {
        format!("{stdout}{stderr}")
    } else {
        stderr.clone()
    };
    let fragment = subst(&case.message);
    if !haystack.contains(&fragment) {
        return Err(format!("the message lacks `{fragment}`\n{shown}"));
    }
    says_cause_once(&stderr).map_err(|e| format!("{e}\n{shown}"))?;
    let mut after = BTreeMap::new();
    digests(&input, &mut after);
    for (path, digest) in &before {
        if after.get(path) != Some(digest) {
            return Err(format!("input {} was modified\n{shown}", path.display()));
        }
    }
    let mut left = Vec::new();
    leftovers(tmp.path(), &mut left);
    if !left.is_empty() {
        return Err(format!("temporary files left behind: {left:?}\n{shown}"));
    }
    // Restore permissions so the temporary directory can be removed.
    #[cfg(unix)]
    for p in [output.join("readonly"), input.join("unreadable.jsonl")] {
        if p.exists() {
            chmod(&p, 0o755);
        }
    }
    Ok(None)
}

#[test]
fn the_table_has_fifty_cases_with_unique_names_covering_every_category() {
    let cases = load_table();
    assert!(cases.len() >= 50, "only {} cases", cases.len());
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        panic!("two cases are named {}", w[0]);
    }
    for category in [
        "json",
        "csv",
        "tsv",
        "text",
        "gzip",
        "huge",
        "utf8",
        "duplicate ids",
        "directory",
        "fifo",
        "unreadable",
        "flags",
        "output",
        "state",
        "config",
    ] {
        assert!(
            cases.iter().any(|c| c.category == category),
            "no case of category `{category}`"
        );
    }
    // Every committed input file is used by some case.
    for entry in std::fs::read_dir(FILES).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            cases
                .iter()
                .any(|c| c.args.iter().any(|a| a.ends_with(&format!("/{name}")))),
            "no case reads tests/bad_inputs/files/{name}"
        );
    }
}

#[test]
fn every_bad_input_gets_a_clear_message_and_no_panic_hang_or_overwrite() {
    let cases = load_table();
    let filter = std::env::var("BAD_INPUT_CASE").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in cases
        .iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
    {
        match run_case(case) {
            Ok(None) => ran += 1,
            Ok(Some(reason)) => eprintln!("skipped {}: {reason}", case.name),
            Err(e) => failures.push(format!("case `{}`: {e}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        ran + failures.len(),
        failures.join("\n\n")
    );
    eprintln!("{ran} bad-input cases passed");
}
