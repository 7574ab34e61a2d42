//! Output files written whole or not at all, and the check that no output overwrites an input.
//!
//! [`AtomicFile`] writes to a temporary file beside the target (same directory, so the same file system) and
//! renames it into place (over an existing file on Linux, by exchanging the two names and then removing the
//! previous file) only when [`AtomicFile::commit`] is called after the last byte: an interrupted or
//! failed run leaves the old file (or none) under the final name, never a half-written one, and the temporary
//! file is removed when the writer is dropped. A target that exists and is not a regular file (`/dev/null`,
//! `/dev/full`, a FIFO) is written in place, since it cannot be replaced by a rename. A symbolic link is
//! followed, so the link keeps pointing at the new file.
//!
//! [`check_outputs`] refuses, before anything is read, an output path that resolves to an input (the same
//! path, a symbolic link or a hard link to it), lies inside an input directory, names the same file as another
//! output, or sits in a directory that does not exist.
//!
//! Every error names the file and says the operating system's cause once.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Why an output file could not be written, or an output path was refused. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file (or its temporary twin in the same directory) could not be created.
    #[error("cannot create {}: {cause}", path.display())]
    Create {
        /// The output path.
        path: PathBuf,
        /// What the operating system said.
        cause: io::Error,
    },
    /// Writing, flushing or renaming the file into place failed (the final name is left as it was).
    #[error("writing {}: {cause}", path.display())]
    Write {
        /// The output path.
        path: PathBuf,
        /// What went wrong.
        cause: io::Error,
    },
    /// An output path refused before anything was read.
    #[error("{flag} {}: {reason}", path.display())]
    Refused {
        /// The flag that named it (e.g. `--pairs`).
        flag: String,
        /// The refused path.
        path: PathBuf,
        /// Why (e.g. `is the input corpus data.csv`).
        reason: String,
    },
}

enum Target {
    /// A regular file: a temporary file beside it, renamed into place by `commit`.
    Temporary(BufWriter<tempfile::NamedTempFile>),
    /// A device or FIFO: written in place.
    InPlace(BufWriter<File>),
}

/// An output file being written under a temporary name (see the module docs). Dropped without
/// [`AtomicFile::commit`], it removes its temporary file and leaves the final name untouched.
pub struct AtomicFile {
    path: PathBuf,
    /// Where the rename goes: `path`, or the file a symbolic link at `path` points to.
    destination: PathBuf,
    target: Target,
}

/// The buffer size of output files.
const BUFFER: usize = 1 << 20;

impl AtomicFile {
    /// Starts writing `path`: creates a temporary file in its directory (or opens a device or FIFO in place).
    pub fn create(path: &Path) -> Result<AtomicFile, OutputError> {
        let create_err = |cause| OutputError::Create {
            path: path.to_path_buf(),
            cause,
        };
        let existing = std::fs::metadata(path).ok();
        if let Some(meta) = &existing {
            if meta.is_dir() {
                return Err(create_err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "is a directory",
                )));
            }
            if !meta.is_file() {
                let file = File::create(path).map_err(create_err)?;
                return Ok(AtomicFile {
                    path: path.to_path_buf(),
                    destination: path.to_path_buf(),
                    target: Target::InPlace(BufWriter::with_capacity(BUFFER, file)),
                });
            }
        }
        // Follow a symbolic link so that the link survives and points at the new file.
        let destination = match existing {
            Some(_) => std::fs::canonicalize(path).map_err(create_err)?,
            None => path.to_path_buf(),
        };
        let dir = match destination.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = destination
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // The final file gets the usual permissions (0666 less the umask), not the 0600 of a temporary file.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        // tempfile appends the temporary file's name to its errors; the message names the output instead.
        let temp = builder
            .tempfile_in(&dir)
            .map_err(|e| create_err(without_temporary_name(e)))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            destination,
            target: Target::Temporary(BufWriter::with_capacity(BUFFER, temp)),
        })
    }

    /// The output path this writer was created for.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error for a failed write to this file (naming it).
    pub fn write_error(&self, cause: io::Error) -> OutputError {
        OutputError::Write {
            path: self.path.clone(),
            cause,
        }
    }

    /// Whether the file is written in place (a device or FIFO, see the module docs): then nothing written can
    /// be rewritten, and [`AtomicFile::overwrite_start`] fails.
    pub fn in_place(&self) -> bool {
        matches!(self.target, Target::InPlace(_))
    }

    /// Overwrites the first `bytes.len()` bytes written (a header whose size was known when its placeholder was
    /// written) and goes on writing at the end. Fails on a file written [in place](AtomicFile::in_place).
    pub fn overwrite_start(&mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        match &mut self.target {
            Target::Temporary(w) => {
                // BufWriter's seek writes out its buffer first.
                w.seek(SeekFrom::Start(0))?;
                w.write_all(bytes)?;
                w.seek(SeekFrom::End(0))?;
                Ok(())
            }
            Target::InPlace(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a device or FIFO cannot be rewritten",
            )),
        }
    }

    /// Flushes the file and renames it into place. Until this returns `Ok`, the final name is untouched.
    pub fn commit(self) -> Result<(), OutputError> {
        self.commit_exchanging(false)
    }

    /// [`AtomicFile::commit`]; with `exchange`, over an existing regular file on Linux, the two names are
    /// exchanged (`renameat2` with `RENAME_EXCHANGE`, atomic like a rename) and the previous file, now under the
    /// temporary name, is then removed. A plain rename over an existing file makes ext4 (`auto_da_alloc`)
    /// allocate and submit the new file's pages inside the rename, which an exchange does not: on a 3-MB `.npy`
    /// the rename takes several times as long as the exchange and the removal together. Where the file system
    /// cannot exchange (or the file is gone), it is a plain rename. The CLI's `sketch` asks for it
    /// (`exec::Tuning::exchange_rename`).
    pub fn commit_exchanging(self, exchange: bool) -> Result<(), OutputError> {
        let write_err = |cause| OutputError::Write {
            path: self.path.clone(),
            cause,
        };
        match self.target {
            Target::InPlace(mut w) => w.flush().map_err(write_err),
            Target::Temporary(w) => {
                let temp = w.into_inner().map_err(|e| write_err(e.into_error()))?;
                #[cfg(target_os = "linux")]
                if exchange && exchanged(temp.path(), &self.destination) {
                    // The temporary name holds the previous file now; the new one is in place.
                    let moved = temp.path().to_path_buf();
                    return temp.close().map_err(|cause| {
                        write_err(io::Error::new(
                            cause.kind(),
                            format!(
                                "written, but the previous file, moved to {}, could not be removed: {cause}",
                                moved.display()
                            ),
                        ))
                    });
                }
                let _ = exchange;
                temp.persist(&self.destination)
                    .map_err(|e| write_err(e.error))?;
                Ok(())
            }
        }
    }
}

/// Exchanges `temp` (the finished output) with the regular file at `destination`; false, with nothing
/// changed, where `destination` is not a regular file or the file system cannot exchange (then a rename
/// follows). A directory swapped in at `destination` after the check is swapped back.
#[cfg(target_os = "linux")]
fn exchanged(temp: &Path, destination: &Path) -> bool {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let regular = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file());
    if !regular(destination)
        || renameat_with(CWD, temp, CWD, destination, RenameFlags::EXCHANGE).is_err()
    {
        return false;
    }
    if regular(temp) {
        return true;
    }
    // Not a regular file after all (replaced between the check and the exchange): undo, and let the rename
    // report it. If the undo fails, the names stay exchanged and `commit` reports the rename's error.
    let _ = renameat_with(CWD, temp, CWD, destination, RenameFlags::EXCHANGE);
    false
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.target {
            Target::Temporary(w) => w.write(buf),
            Target::InPlace(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.target {
            Target::Temporary(w) => w.write_all(buf),
            Target::InPlace(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.target {
            Target::Temporary(w) => w.flush(),
            Target::InPlace(w) => w.flush(),
        }
    }
}

/// tempfile's error without the temporary file's name it appends (`... at path "/dir/.x.tmp"`).
fn without_temporary_name(e: io::Error) -> io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    // tempfile's wrapper is private and hides the OS error's source: cut its suffix from the text.
    let text = e.to_string();
    match text.rfind(" at path \"") {
        Some(at) => io::Error::new(e.kind(), text[..at].to_string()),
        None => e,
    }
}

/// Writes `path` whole or not at all: `write` fills an [`AtomicFile`], which is committed if it returns `Ok`.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> io::Result<()>,
) -> Result<(), OutputError> {
    let mut file = AtomicFile::create(path)?;
    match write(&mut file) {
        Ok(()) => file.commit(),
        Err(cause) => Err(file.write_error(cause)),
    }
}

/// Where a path is or would be: the canonical path of an existing file, else its canonical directory joined
/// with its name. `None` when the directory does not exist either.
fn location(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(name))
}

/// Whether two paths name the same file or place (through `..`, symbolic links or hard links).
pub fn same_place(a: &Path, b: &Path) -> bool {
    if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b))
        && same_file(&ma, &mb)
    {
        return true;
    }
    matches!((location(a), location(b)), (Some(x), Some(y)) if x == y)
}

/// The same file (device and inode), so hard links are caught.
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// Refuses, before anything is read, output paths that would overwrite an input or each other. `inputs` and
/// `outputs` are `(flag, path)`. An output is refused when it resolves (through `..`, symbolic links or a hard
/// link) to an input file, lies inside an input directory, resolves to the same place as an earlier output,
/// or lives in a directory that does not exist. A device or FIFO output (`/dev/null`) is never refused.
pub fn check_outputs(
    inputs: &[(&str, &Path)],
    outputs: &[(&str, &Path)],
) -> Result<(), OutputError> {
    let inputs: Vec<_> = inputs
        .iter()
        .map(|&(flag, p)| (flag, p, location(p), std::fs::metadata(p).ok()))
        .collect();
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for &(flag, out) in outputs {
        let refuse = |reason: String| OutputError::Refused {
            flag: flag.to_string(),
            path: out.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(out).ok();
        if meta.as_ref().is_some_and(|m| !m.is_file() && !m.is_dir()) {
            continue; // a device or FIFO is written in place and is nobody's input file
        }
        let Some(loc) = location(out) else {
            let dir = out.parent().unwrap_or(Path::new("."));
            return Err(refuse(format!(
                "the directory {} does not exist",
                dir.display()
            )));
        };
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(refuse("is a directory".into()));
        }
        for (in_flag, in_path, in_loc, in_meta) in &inputs {
            let same = match (&meta, in_meta) {
                (Some(a), Some(b)) if same_file(a, b) => true,
                _ => in_loc.as_ref() == Some(&loc),
            };
            if same {
                return Err(refuse(format!(
                    "is the input ({in_flag} {}); refusing to overwrite it",
                    in_path.display()
                )));
            }
            if in_meta.as_ref().is_some_and(|m| m.is_dir())
                && in_loc.as_ref().is_some_and(|d| loc.starts_with(d))
            {
                return Err(refuse(format!(
                    "lies inside the input directory ({in_flag} {})",
                    in_path.display()
                )));
            }
        }
        if let Some((other, _)) = seen.iter().find(|(_, l)| *l == loc) {
            return Err(refuse(format!("is also the output of {other}")));
        }
        seen.push((flag, loc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_renames_and_drop_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        {
            let mut f = AtomicFile::create(&path).unwrap();
            f.write_all(b"half").unwrap();
            // Dropped without commit: an interrupted run.
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let failed = write_atomic(&path, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("stopped"))
        });
        assert!(failed.unwrap_err().to_string().contains("out.csv: stopped"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    /// Replacing a file (by exchange on Linux) keeps a rename's meaning: a symbolic link at the path still
    /// points at the new file, another hard link to the old file keeps the old content, the previous file
    /// leaves no temporary name behind, and the new file has the usual permissions.
    #[cfg(unix)]
    #[test]
    fn replacing_a_file_keeps_links_and_leaves_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.csv");
        let link = dir.path().join("link.csv");
        let other = dir.path().join("other-name.csv");
        std::fs::write(&real, "old").unwrap();
        std::fs::hard_link(&real, &other).unwrap();
        std::os::unix::fs::symlink("real.csv", &link).unwrap();
        write_atomic(&link, |w| w.write_all(b"new")).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "old");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["link.csv", "other-name.csv", "real.csv"]);
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_ne!(mode, 0o600, "a temporary file's mode");
        // Replacing it again (the file the first commit put in place is replaced in turn).
        write_atomic(&real, |w| w.write_all(b"newer")).unwrap();
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "newer");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    /// The exchange is only for a regular file at the destination: a directory (or nothing) there is left as
    /// it is, and the rename that follows reports it.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_a_regular_file_is_exchanged() {
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join(".t.tmp");
        std::fs::write(&temp, "new").unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("keep"), "x").unwrap();
        assert!(!exchanged(&temp, &sub));
        assert!(!exchanged(&temp, &dir.path().join("missing")));
        assert_eq!(std::fs::read_to_string(&temp).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(sub.join("keep")).unwrap(), "x");
        let file = dir.path().join("file");
        std::fs::write(&file, "old").unwrap();
        // A file system without exchange (some network and overlay ones) gets the rename instead.
        let (probe_a, probe_b) = (dir.path().join("probe-a"), dir.path().join("probe-b"));
        std::fs::write(&probe_a, "").unwrap();
        std::fs::write(&probe_b, "").unwrap();
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        if let Err(e) = renameat_with(CWD, &probe_a, CWD, &probe_b, RenameFlags::EXCHANGE) {
            eprintln!("skipped: the temporary directory's file system cannot exchange ({e})");
            return;
        }
        assert!(exchanged(&temp, &file));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&temp).unwrap(), "old");
    }

    /// The header rewritten after more than a buffer's worth of body: the body stays whole and in order, and
    /// writing goes on at the end. A device cannot be rewritten, and says so.
    #[test]
    fn overwrite_start_rewrites_the_header_and_keeps_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let body: Vec<u8> = (0..BUFFER + 12_345).map(|i| (i % 251) as u8).collect();
        let mut f = AtomicFile::create(&path).unwrap();
        assert!(!f.in_place());
        f.write_all(b"????").unwrap();
        f.write_all(&body[..1000]).unwrap();
        f.overwrite_start(b"HEAD").unwrap();
        f.write_all(&body[1000..]).unwrap();
        f.overwrite_start(b"head").unwrap();
        f.write_all(b"tail").unwrap();
        f.commit().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..got.len() - 4], &body[..]);
        assert_eq!(&got[got.len() - 4..], b"tail");
        #[cfg(target_os = "linux")]
        {
            let mut null = AtomicFile::create(Path::new("/dev/null")).unwrap();
            assert!(null.in_place());
            let err = null.overwrite_start(b"x").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::Unsupported);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_names_the_file() {
        let err = write_atomic(Path::new("/dev/full"), |w| w.write_all(&[0; 1 << 21])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("writing /dev/full: "), "{msg}");
        assert_eq!(msg.matches("No space left").count(), 1, "{msg}");
    }

    #[cfg(unix)]
    #[test]
    fn outputs_resolving_to_inputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.csv");
        std::fs::write(&input, "id,text\n").unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.path().join("hard.csv");
        std::fs::hard_link(&input, &hard).unwrap();
        let dotted = dir.path().join(".").join("in.csv");
        let ins = [("--input", input.as_path())];
        for out in [&input, &link, &hard, &dotted] {
            let err = check_outputs(&ins, &[("--output", out)]).unwrap_err();
            assert!(err.to_string().contains("is the input"), "{err}");
        }
        let fine = dir.path().join("out.csv");
        check_outputs(&ins, &[("--output", &fine)]).unwrap();
        let twice = check_outputs(&ins, &[("--pairs", &fine), ("--clusters", &fine)]).unwrap_err();
        assert!(twice.to_string().contains("also the output of --pairs"));
        let missing = dir.path().join("no/such/dir/out.csv");
        let err = check_outputs(&ins, &[("--output", &missing)]).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let inside = dir.path().join("sigs.csv");
        let err = check_outputs(&[("--input", dir.path())], &[("--output", &inside)]).unwrap_err();
        assert!(
            err.to_string().contains("inside the input directory"),
            "{err}"
        );
        check_outputs(&ins, &[("--output", Path::new("/dev/null"))]).unwrap();
    }
}
