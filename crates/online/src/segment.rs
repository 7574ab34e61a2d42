//! The log segment the writer appends to: one write and one sync per group, a new segment when a snapshot
//! makes room, and the cut that undoes a failed group.

use crate::log;
use crate::options::Faults;
use crate::storage::{Storage, StorageFile};
use std::io::{self};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// The open log segment the writer appends to.
pub(crate) struct Log {
    pub(crate) file: Box<dyn StorageFile>,
    pub(crate) path: PathBuf,
    /// The sequence number its name and header give its first record.
    pub(crate) first_seq: u64,
    /// Bytes of the current segment.
    pub(crate) len: u64,
    /// Bytes of every segment.
    pub(crate) total: u64,
    /// Bytes written to segments since the last snapshot began.
    pub(crate) since_snapshot: u64,
    pub(crate) num_perm: usize,
    pub(crate) faults: Faults,
}

impl Log {
    /// Creates the segment whose first record will be `first_seq`, syncing it and the directory.
    pub(crate) fn create_segment(
        storage: &dyn Storage,
        dir: &Path,
        num_perm: usize,
        first_seq: u64,
        faults: Faults,
        total: u64,
    ) -> io::Result<Log> {
        let path = dir.join(log::segment_name(first_seq));
        let mut file = storage.create_new(&path)?;
        let ready = file
            .append(&log::segment_header(num_perm, first_seq))
            .and_then(|_| file.sync_all())
            .and_then(|_| storage.sync_dir(dir));
        if let Err(e) = ready {
            // This call created the file, so it may remove it; a name that existed before is never touched.
            drop(file);
            let _ = storage.remove(&path);
            let _ = storage.sync_dir(dir);
            return Err(e);
        }
        Ok(Log {
            file,
            path,
            first_seq,
            len: log::SEGMENT_HEADER as u64,
            total: total + log::SEGMENT_HEADER as u64,
            since_snapshot: 0,
            num_perm,
            faults,
        })
    }

    /// Appends `bytes` and syncs them.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<(), AppendError> {
        if let Some(limit) = self.faults.disk_full_after
            && self.total + bytes.len() as u64 > limit
        {
            let fit = limit.saturating_sub(self.total) as usize;
            self.file
                .append(&bytes[..fit.min(bytes.len())])
                .map_err(AppendError::Write)?;
            return Err(AppendError::Write(io::Error::from_raw_os_error(28)));
        }
        self.file.append(bytes).map_err(AppendError::Write)?;
        if let Some(hook) = &self.faults.before_sync {
            hook();
        }
        if self
            .faults
            .fail_sync
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
        {
            return Err(AppendError::Sync(io::Error::from_raw_os_error(5)));
        }
        self.file.sync_data().map_err(AppendError::Sync)?;
        self.len += bytes.len() as u64;
        self.total += bytes.len() as u64;
        self.since_snapshot += bytes.len() as u64;
        Ok(())
    }

    /// Cuts the segment back to `len` bytes and syncs it.
    pub(crate) fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_data()
    }
}

/// How appending a group to the log failed.
pub(crate) enum AppendError {
    /// The write failed: the file may hold a part of the bytes but never all of them, so never the commit
    /// record that ends them, and recovery would never apply them.
    Write(io::Error),
    /// The write went through and the sync failed: the bytes may or may not be durable (Linux may even have
    /// dropped the dirty pages and cleared the error), so no later sync can tell, and a cut may not undo them.
    Sync(io::Error),
}
