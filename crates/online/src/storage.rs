//! The file operations of the log and the snapshots, behind one narrow interface: [`FsStorage`] on `std::fs`,
//! which the index uses, and a simulated file system in the tests (`crash.rs`) that records every operation
//! and can crash after, or fail, any one of them.
//!
//! Only the log segments, snapshots and the files recovery writes beside them go through it; `params.json`
//! and the `LOCK` file are the index directory's own and stay on `std::fs`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

/// A file system as the log and the snapshots use it. Every method is one system call or a few whose
/// durability is that of one (`create_new` does not sync the directory; `sync_dir` does).
pub trait Storage: Send + Sync {
    /// Creates `path`, which must not exist, for appending.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens the existing `path` for appending.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Reads `path` from its start.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// The length of `path` in bytes.
    fn len(&self, path: &Path) -> io::Result<u64>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the names created, renamed or removed in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Bytes free for new data in `dir`, where the storage can tell.
    fn free_bytes(&self, _dir: &Path) -> Option<u64> {
        None
    }
}

/// A file open for appending.
pub trait StorageFile: Send {
    /// Appends all of `bytes`; on failure a prefix of them may have been appended.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes the file's data and size durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Makes the file's data and metadata durable (`fsync`).
    fn sync_all(&mut self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsStorage;

impl StorageFile for File {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        Write::write_all(self, bytes)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

impl Storage for FsStorage {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let f = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)?;
        Ok(Box::new(f))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(OpenOptions::new().append(true).open(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(File::open(path)?))
    }
    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir)? {
            names.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
    #[cfg(target_os = "linux")]
    fn free_bytes(&self, dir: &Path) -> Option<u64> {
        // The blocks an unprivileged process may still take (`f_bavail`), as `df` counts them; rustix is the
        // crate's Linux dependency already.
        let s = rustix::fs::statvfs(dir).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }
}
