//! The pieces every kept pass writes with: the documents of the second pass with their keep flags, byte streams
//! gzip-compressed or not, directories staged under a temporary name, and the shards' names.

use super::target::{KeptError, create_error, parent, write_error};
use crate::corpus::CorpusReader;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The documents of a kept pass, each with its place in the mask.
pub(crate) struct Docs<'a> {
    pub(crate) reader: CorpusReader,
    keep: &'a [bool],
    documents: u64,
}

impl<'a> Docs<'a> {
    /// The documents of `reader` (capturing raw records), each with its flag in `keep`.
    pub(crate) fn new(reader: CorpusReader, keep: &'a [bool]) -> Docs<'a> {
        Docs {
            reader,
            keep,
            documents: 0,
        }
    }

    /// The next document's keep flag (its record is then [`CorpusReader::raw`]); `None` at the end, after
    /// checking that the corpus yielded as many documents as the mask has.
    pub(crate) fn next(&mut self) -> Result<Option<bool>, KeptError> {
        match self.reader.next() {
            Some(Ok(doc)) => {
                self.documents += 1;
                // Read with the first pass's options so records are rejected alike; a survivor column's values
                // were used by the first pass and are not kept here.
                if self.reader.options().rank_field.is_some() {
                    drop(self.reader.take_rank_values());
                }
                match self.keep.get(doc.index as usize) {
                    Some(&keep) => Ok(Some(keep)),
                    None => Err(self.mismatch()),
                }
            }
            Some(Err(e)) => Err(e.into()),
            None if self.documents != self.keep.len() as u64 => Err(self.mismatch()),
            None => Ok(None),
        }
    }

    fn mismatch(&self) -> KeptError {
        KeptError::Mismatch {
            path: self.reader.path().to_path_buf(),
            detail: format!(
                "the corpus yields {}{} documents now, the keep mask was made for {} (did the corpus change \
                 since it was read?)",
                if self.documents > self.keep.len() as u64 {
                    "at least "
                } else {
                    ""
                },
                self.documents,
                self.keep.len()
            ),
        }
    }

    pub(crate) fn documents(&self) -> u64 {
        self.documents
    }
}

/// A byte stream, gzip-compressed or not.
// Boxed: the encoder's state is large, and most outputs are plain.
pub(crate) enum Encoded<W: Write> {
    Plain(W),
    Gzip(Box<flate2::write::GzEncoder<W>>),
}

impl<W: Write> Encoded<W> {
    pub(crate) fn new(inner: W, gzip: bool) -> Encoded<W> {
        if gzip {
            Encoded::Gzip(Box::new(flate2::write::GzEncoder::new(
                inner,
                flate2::Compression::default(),
            )))
        } else {
            Encoded::Plain(inner)
        }
    }

    /// Ends the stream (the gzip trailer) and gives the inner writer back.
    pub(crate) fn finish(self) -> io::Result<W> {
        match self {
            Encoded::Plain(w) => Ok(w),
            Encoded::Gzip(g) => (*g).finish(),
        }
    }
}

impl<W: Write> Write for Encoded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoded::Plain(w) => w.write(buf),
            Encoded::Gzip(g) => g.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Encoded::Plain(w) => w.write_all(buf),
            Encoded::Gzip(g) => g.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoded::Plain(w) => w.flush(),
            Encoded::Gzip(g) => g.flush(),
        }
    }
}

/// A directory being built under a temporary name beside its target, renamed into place by [`Staged::commit`]
/// (over an empty directory of that name); dropped before, it is removed.
pub(crate) struct Staged {
    dir: tempfile::TempDir,
    target: PathBuf,
}

impl Staged {
    pub(crate) fn new(target: &Path) -> Result<Staged, KeptError> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut builder = tempfile::Builder::new();
        let prefix = format!(".{name}.");
        builder.prefix(&prefix).suffix(".tmp");
        // The final directory gets the usual permissions (0777 less the umask), not the 0700 of a temporary one.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o777));
        }
        let dir = builder
            .tempdir_in(parent(target))
            .map_err(|cause| create_error(target, cause))?;
        Ok(Staged {
            dir,
            target: target.to_path_buf(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The path of shard `i` with extension `ext`.
    pub(crate) fn shard(&self, i: u64, ext: &str) -> PathBuf {
        self.dir.path().join(format!("part-{i:05}.{ext}"))
    }

    pub(crate) fn commit(self) -> Result<(), KeptError> {
        let temp = self.dir.path().to_path_buf();
        std::fs::rename(&temp, &self.target).map_err(|cause| write_error(&self.target, cause))?;
        // Renamed: nothing is left to remove under the temporary name.
        let _ = self.dir.keep();
        Ok(())
    }
}

/// Flushes a finished shard and syncs it, so that the directory renamed into place holds its bytes.
pub(crate) fn finish_shard(file: BufWriter<File>, path: &Path) -> Result<(), KeptError> {
    file.into_inner()
        .map_err(|e| write_error(path, e.into_error()))?
        .sync_all()
        .map_err(|cause| write_error(path, cause))
}
