//! The write-ahead log and the snapshot files: their records, framing and checksums, and the torn-tail cut.
//!
//! Every record is framed as `len: u32 | xxh3_64(payload): u64 | payload` (little-endian). A payload starts with
//! its kind and sequence number:
//! ```text
//! insert  1 | seq u64 | id_len u32 | id | empty u8 | k u32 | k slots u32 | text_len u32 (u32::MAX: none) | text
//! delete  2 | seq u64 | id_len u32 | id
//! commit  3 | seq u64                      (the last sequence number of a group commit)
//! ```
//! A log segment (`log-<first seq>.wal`) is a 32-byte header (magic, format, k, first sequence number) and
//! records; each group commit ends with a commit record and is written with one `write` and one `fdatasync`.
//! Recovery applies a group only when its commit record is read back intact, so a group is applied whole or
//! not at all; in the last segment, everything after the last intact commit (a torn or unacknowledged tail)
//! is cut off the file. A snapshot (`snapshot-<seq>.snap`) is a header, the insert records of every document
//! live at that sequence number in sequence order, and a trailer (record count and the xxh3 of the whole
//! file before it); it is written under a temporary name, synced, and renamed into place.

use super::storage::{Storage, StorageFile};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The magic bytes of a log segment.
pub const SEGMENT_MAGIC: &[u8; 16] = b"LSHBENCH-WAL\0\0\0\0";
/// The magic bytes of a snapshot.
pub const SNAPSHOT_MAGIC: &[u8; 16] = b"LSHBENCH-SNAP\0\0\0";
/// Bytes of a segment's header.
pub const SEGMENT_HEADER: usize = 32;
/// Bytes of a snapshot's header.
pub const SNAPSHOT_HEADER: usize = 40;
/// The most bytes one group commit may write: the writer refuses a larger group, so a longer torn tail is
/// damage.
pub const MAX_WRITE_BYTES: u64 = 256 << 20;
/// The largest payload a record may announce: a document's text is limited far below this, so a larger
/// length is damage, and is never allocated.
pub const MAX_PAYLOAD: u32 = 1 << 30;

const KIND_INSERT: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_COMMIT: u8 = 3;

/// A document as logged: everything needed to put it back in the index without signing it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRecord {
    /// Its sequence number.
    pub seq: u64,
    /// Its id.
    pub id: String,
    /// Whether its shingle set was empty (it is then never banded).
    pub empty: bool,
    /// Its signature, k slots.
    pub signature: Vec<u32>,
    /// Its text, zstd-compressed behind its length, when texts are kept.
    pub text: Option<Vec<u8>>,
}

/// One log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A document inserted.
    Insert(DocRecord),
    /// A document deleted.
    Delete {
        /// The sequence number of the deletion.
        seq: u64,
        /// The id deleted.
        id: String,
    },
    /// The end of a group commit: everything up to here is applied together.
    Commit {
        /// The last sequence number of the group.
        seq: u64,
    },
}

/// Appends the framed insert record of a document to `out`.
pub fn encode_insert(
    out: &mut Vec<u8>,
    seq: u64,
    id: &str,
    empty: bool,
    signature: &[u32],
    text: Option<&[u8]>,
) {
    let start = frame_start(out);
    out.push(KIND_INSERT);
    out.extend_from_slice(&seq.to_le_bytes());
    put_bytes(out, id.as_bytes());
    out.push(empty as u8);
    out.extend_from_slice(&(signature.len() as u32).to_le_bytes());
    for s in signature {
        out.extend_from_slice(&s.to_le_bytes());
    }
    match text {
        Some(t) => put_bytes(out, t),
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
    frame_end(out, start);
}

/// Appends the framed delete record of `id` to `out`.
pub fn encode_delete(out: &mut Vec<u8>, seq: u64, id: &str) {
    let start = frame_start(out);
    out.push(KIND_DELETE);
    out.extend_from_slice(&seq.to_le_bytes());
    put_bytes(out, id.as_bytes());
    frame_end(out, start);
}

/// Appends the framed commit record of a group ending at `seq` to `out`.
pub fn encode_commit(out: &mut Vec<u8>, seq: u64) {
    let start = frame_start(out);
    out.push(KIND_COMMIT);
    out.extend_from_slice(&seq.to_le_bytes());
    frame_end(out, start);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reserves the frame's 12 bytes; returns where the frame starts.
fn frame_start(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; 12]);
    start
}

/// Fills in the frame's length and checksum once the payload is written.
fn frame_end(out: &mut [u8], start: usize) {
    let payload = &out[start + 12..];
    let len = payload.len() as u32;
    let check = xxhash_rust::xxh3::xxh3_64(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 12].copy_from_slice(&check.to_le_bytes());
}

/// Why the bytes at some offset are not an intact record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The bytes end inside the frame (a torn write).
    Truncated,
    /// The checksum does not match, or the length is impossible.
    Checksum,
    /// The checksum matches but the payload does not parse, or its k differs from the index's.
    Malformed(String),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Truncated => write!(f, "the file ends inside a record"),
            Damage::Checksum => write!(f, "a record's checksum does not match"),
            Damage::Malformed(what) => write!(f, "a record does not parse: {what}"),
        }
    }
}

/// Decodes the record at the start of `bytes`: the record and the bytes it took, `Ok(None)` at the end of
/// `bytes`, or the damage found. `k` is the index's signature length.
pub fn decode(bytes: &[u8], k: usize) -> Result<Option<(Record, usize)>, Damage> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() < 12 {
        return Err(Damage::Truncated);
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let check = u64::from_le_bytes(bytes[4..12].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return Err(Damage::Checksum);
    }
    let end = 12 + len as usize;
    if bytes.len() < end {
        return Err(Damage::Truncated);
    }
    let payload = &bytes[12..end];
    if xxhash_rust::xxh3::xxh3_64(payload) != check {
        return Err(Damage::Checksum);
    }
    let record = parse_payload(payload, k).map_err(Damage::Malformed)?;
    Ok(Some((record, end)))
}

fn parse_payload(p: &[u8], k: usize) -> Result<Record, String> {
    let mut cur = Cursor { buf: p, pos: 0 };
    let kind = cur.u8()?;
    let seq = cur.u64()?;
    let record = match kind {
        KIND_INSERT => {
            let id = cur.string()?;
            let empty = match cur.u8()? {
                0 => false,
                1 => true,
                other => return Err(format!("empty flag {other}")),
            };
            let slots = cur.u32()? as usize;
            if slots != k {
                return Err(format!("a signature of {slots} slots in an index of {k}"));
            }
            let raw = cur.take(slots.checked_mul(4).ok_or("size overflow")?)?;
            let signature = raw
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let text_len = cur.u32()?;
            let text = if text_len == u32::MAX {
                None
            } else {
                Some(cur.take(text_len as usize)?.to_vec())
            };
            Record::Insert(DocRecord {
                seq,
                id,
                empty,
                signature,
                text,
            })
        }
        KIND_DELETE => Record::Delete {
            seq,
            id: cur.string()?,
        },
        KIND_COMMIT => Record::Commit { seq },
        other => return Err(format!("unknown record kind {other}")),
    };
    if cur.pos != p.len() {
        return Err(format!("{} bytes after the record", p.len() - cur.pos));
    }
    Ok(record)
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() - self.pos < n {
            return Err("the record ends early".into());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|e| format!("an id is not UTF-8: {e}"))
    }
}

/// The header of a segment whose records start at `first_seq`.
pub fn segment_header(num_perm: usize, first_seq: u64) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..16].copy_from_slice(SEGMENT_MAGIC);
    h[16..20].copy_from_slice(&super::params::FORMAT.to_le_bytes());
    h[20..24].copy_from_slice(&(num_perm as u32).to_le_bytes());
    h[24..32].copy_from_slice(&first_seq.to_le_bytes());
    h
}

/// A segment's file name: its first sequence number, zero-padded so names sort in order.
pub fn segment_name(first_seq: u64) -> String {
    format!("log-{first_seq:020}.wal")
}

/// A snapshot's file name.
pub fn snapshot_name(seq: u64) -> String {
    format!("snapshot-{seq:020}.snap")
}

/// The number in a file name `PREFIX<20 digits>SUFFIX`.
pub fn parse_name(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Why the files of an index could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// A file could not be read, truncated or removed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        cause: io::Error,
    },
    /// A file is damaged where damage cannot come from a crash (a sealed segment, a snapshot).
    #[error(
        "{} is damaged at byte {offset}: {damage}. This is not a crash's torn tail (which is cut \
         automatically); restore the index directory from a backup",
        path.display()
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Where.
        offset: u64,
        /// What was found.
        damage: String,
    },
}

/// What reading one segment found.
#[derive(Debug, Default)]
pub struct SegmentScan {
    /// Bytes up to the end of the last intact commit record.
    pub committed_len: u64,
    /// Bytes after it (cut when the segment is the last one).
    pub tail_bytes: u64,
    /// Groups applied.
    pub groups: u64,
    /// The sequence number of the last record of the last intact group, if any.
    pub last_seq: Option<u64>,
    /// The bytes after the last intact group.
    pub tail: Vec<u8>,
    /// Where in the file an intact commit record lies after the last intact group without ending the file:
    /// proof that later groups were written, so the tail is damage and not one torn write.
    pub later_commit: Option<u64>,
}

/// Reads the segment at `path`, whose name says its records start at `first_seq`, and calls `apply` on the
/// records of each intact group in order (commit records included, each at the end of its group). A damaged or
/// unterminated group at the end is reported in the scan's `tail_bytes` (the caller cuts it from the last
/// segment and refuses it in any other); a bad header, a header whose first sequence number is not the name's,
/// and an intact record out of sequence are [`RecoveryError::Damaged`], except in a segment shorter than its
/// header, which holds no record yet.
pub fn read_segment(
    storage: &dyn Storage,
    path: &Path,
    num_perm: usize,
    first_seq: u64,
    mut apply: impl FnMut(Record),
) -> Result<SegmentScan, RecoveryError> {
    let io_err = |cause| RecoveryError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let damaged = |offset: u64, damage: String| RecoveryError::Damaged {
        path: path.to_path_buf(),
        offset,
        damage,
    };
    let file_len = storage.len(path).map_err(io_err)?;
    if file_len < SEGMENT_HEADER as u64 {
        // Created but its header not yet synced when the process died: nothing in it was acknowledged.
        return Ok(SegmentScan {
            tail_bytes: file_len,
            ..SegmentScan::default()
        });
    }
    let mut r = io::BufReader::with_capacity(READ_BYTES, storage.open_read(path).map_err(io_err)?);
    let mut header = [0u8; SEGMENT_HEADER];
    r.read_exact(&mut header).map_err(io_err)?;
    if &header[..16] != SEGMENT_MAGIC {
        return Err(damaged(
            0,
            "not an lshbench log segment (bad magic bytes)".into(),
        ));
    }
    let format = u32::from_le_bytes(header[16..20].try_into().unwrap());
    let k = u32::from_le_bytes(header[20..24].try_into().unwrap()) as usize;
    if format != super::params::FORMAT || k != num_perm {
        return Err(damaged(
            16,
            format!(
                "format {format} and k = {k}, the index has format {} and k = {num_perm}",
                super::params::FORMAT
            ),
        ));
    }
    let header_seq = u64::from_le_bytes(header[24..32].try_into().unwrap());
    if header_seq != first_seq {
        return Err(damaged(
            24,
            format!(
                "the header says the first sequence number is {header_seq}, the name {first_seq}"
            ),
        ));
    }
    let mut pos = SEGMENT_HEADER as u64;
    let mut committed = pos;
    let mut group: Vec<Record> = Vec::new();
    let mut scan = SegmentScan::default();
    let mut frame = Vec::new();
    // The sequence number the next insert or delete must carry: they are consecutive from `first_seq`.
    let mut due = first_seq;
    loop {
        let record = match next_frame(&mut r, file_len - pos, &mut frame).map_err(io_err)? {
            Frame::End => break,
            Frame::Damaged(_) => break,
            Frame::Whole => match decode(&frame, num_perm) {
                Ok(Some((record, _))) => record,
                _ => break,
            },
        };
        let seq = match &record {
            Record::Insert(d) => d.seq,
            Record::Delete { seq, .. } | Record::Commit { seq } => *seq,
        };
        let end = matches!(record, Record::Commit { .. });
        let in_order = if end {
            !group.is_empty() && seq + 1 == due
        } else {
            seq == due
        };
        if !in_order {
            return Err(damaged(
                pos,
                format!(
                    "an intact {} record with sequence number {seq} where {} was due",
                    if end { "commit" } else { "document" },
                    if end { due.wrapping_sub(1) } else { due }
                ),
            ));
        }
        pos += frame.len() as u64;
        if !end {
            due += 1;
        }
        group.push(record);
        if end {
            for r in group.drain(..) {
                apply(r);
            }
            committed = pos;
            scan.groups += 1;
            scan.last_seq = Some(seq);
        }
    }
    scan.committed_len = committed;
    scan.tail_bytes = file_len - committed;
    if scan.tail_bytes > 0 && scan.tail_bytes <= MAX_WRITE_BYTES {
        // Read again from the last commit: the tail is rare and at most one write long.
        let mut r = storage.open_read(path).map_err(io_err)?;
        io::copy(&mut (&mut r).take(committed), &mut io::sink()).map_err(io_err)?;
        r.take(scan.tail_bytes)
            .read_to_end(&mut scan.tail)
            .map_err(io_err)?;
        scan.later_commit = later_commit(&scan.tail).map(|at| committed + at as u64);
    }
    Ok(scan)
}

/// Bytes a reader of the log and the snapshots asks the file for at once.
const READ_BYTES: usize = 1 << 20;

/// What [`next_frame`] read.
enum Frame {
    /// No byte left.
    End,
    /// A whole frame, its checksum not yet checked.
    Whole,
    /// The bytes left end inside the frame, or its length is impossible.
    Damaged(Damage),
}

/// Reads the next frame from `r`, which has `left` bytes before its end, into `frame`. Never allocates more
/// than the bytes left.
fn next_frame(r: &mut impl Read, left: u64, frame: &mut Vec<u8>) -> io::Result<Frame> {
    frame.clear();
    if left == 0 {
        return Ok(Frame::End);
    }
    if left < 12 {
        return Ok(Frame::Damaged(Damage::Truncated));
    }
    frame.resize(12, 0);
    r.read_exact(frame)?;
    let len = u32::from_le_bytes(frame[0..4].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return Ok(Frame::Damaged(Damage::Checksum));
    }
    if 12 + len as u64 > left {
        return Ok(Frame::Damaged(Damage::Truncated));
    }
    frame.resize(12 + len as usize, 0);
    r.read_exact(&mut frame[12..])?;
    Ok(Frame::Whole)
}

/// Bytes of a framed commit record: a 12-byte frame around kind and sequence number.
const COMMIT_FRAME: usize = 12 + 1 + 8;

/// Where in `tail` an intact commit record starts that does not end `tail`, if anywhere. A crash tears at
/// most the one write whose sync never returned, a single group ending with its commit record; any other
/// intact commit record in the tail is a later group, which was only written after this one was synced.
/// Commit records have a fixed length, so each offset costs a 4-byte compare, and a checksum where it matches.
fn later_commit(tail: &[u8]) -> Option<usize> {
    let len = (COMMIT_FRAME as u32 - 12).to_le_bytes();
    (0..tail.len().saturating_sub(COMMIT_FRAME)).find(|&at| {
        tail[at..at + 4] == len
            && tail[at + 12] == KIND_COMMIT
            && matches!(
                decode(&tail[at..at + COMMIT_FRAME], 0),
                Ok(Some((Record::Commit { .. }, _)))
            )
    })
}

/// A snapshot is synced each time this many bytes were written since its last sync.
///
/// Synced only at its end, a snapshot of a large index (about 1 GB at a million documents) would sit dirty in
/// the page cache until then, and the filesystem's journal commit that the log's next `fdatasync` starts must
/// first write it all out (ext4's ordered mode): every acknowledged write would wait a second or more. Synced
/// in slices, a log sync waits for at most one slice.
const SNAPSHOT_SYNC_BYTES: u64 = 8 << 20;
/// A snapshot is written in slices of this many bytes.
const WRITE_BYTES: usize = 1 << 20;

/// Writes a snapshot: the header, then records, then the trailer, hashing everything as it goes, synced every
/// `SNAPSHOT_SYNC_BYTES`.
pub struct SnapshotWriter {
    file: Box<dyn StorageFile>,
    /// Bytes not yet written to the file.
    buf: Vec<u8>,
    hasher: xxhash_rust::xxh3::Xxh3,
    records: u64,
    bytes: u64,
    synced: u64,
}

impl SnapshotWriter {
    /// Starts a snapshot of the documents live at `seq` in `file`.
    pub fn new(
        file: Box<dyn StorageFile>,
        num_perm: usize,
        seq: u64,
    ) -> io::Result<SnapshotWriter> {
        let mut w = SnapshotWriter {
            file,
            buf: Vec::with_capacity(WRITE_BYTES),
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            records: 0,
            bytes: 0,
            synced: 0,
        };
        let mut h = [0u8; SNAPSHOT_HEADER];
        h[..16].copy_from_slice(SNAPSHOT_MAGIC);
        h[16..20].copy_from_slice(&super::params::FORMAT.to_le_bytes());
        h[20..24].copy_from_slice(&(num_perm as u32).to_le_bytes());
        h[24..32].copy_from_slice(&seq.to_le_bytes());
        w.put(&h)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
        self.buffer(bytes)
    }

    fn buffer(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= WRITE_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.file.append(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Appends framed insert records (`count` of them).
    pub fn records(&mut self, framed: &[u8], count: u64) -> io::Result<()> {
        self.records += count;
        self.put(framed)?;
        if self.bytes - self.synced >= SNAPSHOT_SYNC_BYTES {
            self.flush()?;
            self.file.sync_data()?;
            self.synced = self.bytes;
        }
        Ok(())
    }

    /// Writes the trailer, flushes and syncs the file; returns its size.
    pub fn finish(mut self) -> io::Result<u64> {
        let count = self.records.to_le_bytes();
        self.put(&count)?;
        let digest = self.hasher.digest().to_le_bytes();
        self.buffer(&digest)?;
        self.flush()?;
        self.file.sync_all()?;
        Ok(self.bytes + 8)
    }
}

/// Reads the snapshot at `path`, calling `apply` on each document in order as it is read; returns the
/// snapshot's sequence number. The whole file's checksum is checked at its end, so on an error some documents
/// may have been applied (the caller then drops them all).
pub fn read_snapshot(
    storage: &dyn Storage,
    path: &Path,
    num_perm: usize,
    mut apply: impl FnMut(DocRecord),
) -> Result<u64, RecoveryError> {
    let io_err = |cause| RecoveryError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let damaged = |offset: u64, damage: &str| RecoveryError::Damaged {
        path: path.to_path_buf(),
        offset,
        damage: damage.to_string(),
    };
    let len = storage.len(path).map_err(io_err)?;
    if len < (SNAPSHOT_HEADER + 16) as u64 {
        return Err(damaged(0, "not an lshbench snapshot (too short)"));
    }
    let mut r = io::BufReader::with_capacity(READ_BYTES, storage.open_read(path).map_err(io_err)?);
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut header = [0u8; SNAPSHOT_HEADER];
    r.read_exact(&mut header).map_err(io_err)?;
    hasher.update(&header);
    if &header[..16] != SNAPSHOT_MAGIC {
        return Err(damaged(0, "not an lshbench snapshot (bad magic bytes)"));
    }
    let format = u32::from_le_bytes(header[16..20].try_into().unwrap());
    let k = u32::from_le_bytes(header[20..24].try_into().unwrap()) as usize;
    if format != super::params::FORMAT || k != num_perm {
        return Err(damaged(
            16,
            "another format or signature length than the index's",
        ));
    }
    let seq = u64::from_le_bytes(header[24..32].try_into().unwrap());
    let records_end = len - 16;
    let mut pos = SNAPSHOT_HEADER as u64;
    let mut seen = 0u64;
    let mut frame = Vec::new();
    loop {
        match next_frame(&mut r, records_end - pos, &mut frame).map_err(io_err)? {
            Frame::End => break,
            Frame::Damaged(d) => return Err(damaged(pos, &d.to_string())),
            Frame::Whole => {}
        }
        hasher.update(&frame);
        match decode(&frame, num_perm) {
            Ok(Some((Record::Insert(doc), _))) => {
                seen += 1;
                apply(doc);
            }
            Ok(_) => return Err(damaged(pos, "a record other than a document")),
            Err(d) => return Err(damaged(pos, &d.to_string())),
        }
        pos += frame.len() as u64;
    }
    let mut trailer = [0u8; 16];
    r.read_exact(&mut trailer).map_err(io_err)?;
    hasher.update(&trailer[..8]);
    let count = u64::from_le_bytes(trailer[..8].try_into().unwrap());
    let digest = u64::from_le_bytes(trailer[8..].try_into().unwrap());
    if hasher.digest() != digest {
        return Err(damaged(len - 8, "the snapshot's checksum does not match"));
    }
    if seen != count {
        return Err(damaged(len - 16, "the record count does not match"));
    }
    Ok(seq)
}

/// Syncs a directory, so that the names created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::storage::FsStorage;
    use super::*;

    fn doc(seq: u64, id: &str, k: usize, text: Option<&[u8]>) -> DocRecord {
        DocRecord {
            seq,
            id: id.into(),
            empty: seq.is_multiple_of(5),
            signature: (0..k as u32)
                .map(|i| i.wrapping_mul(2654435761) ^ seq as u32)
                .collect(),
            text: text.map(<[u8]>::to_vec),
        }
    }

    fn encode(out: &mut Vec<u8>, r: &Record) {
        match r {
            Record::Insert(d) => {
                encode_insert(out, d.seq, &d.id, d.empty, &d.signature, d.text.as_deref())
            }
            Record::Delete { seq, id } => encode_delete(out, *seq, id),
            Record::Commit { seq } => encode_commit(out, *seq),
        }
    }

    #[test]
    fn records_round_trip() {
        let k = 8;
        let records = vec![
            Record::Insert(doc(1, "a", k, Some(b"xyz"))),
            Record::Insert(doc(2, "b\u{e9}", k, None)),
            Record::Insert(doc(3, "", k, Some(b""))),
            Record::Delete {
                seq: 4,
                id: "a".into(),
            },
            Record::Commit { seq: 4 },
        ];
        let mut buf = Vec::new();
        for r in &records {
            encode(&mut buf, r);
        }
        let mut pos = 0;
        let mut back = Vec::new();
        while let Some((r, used)) = decode(&buf[pos..], k).unwrap() {
            back.push(r);
            pos += used;
        }
        assert_eq!(back, records);
        // Another k is refused, not misread.
        assert!(matches!(decode(&buf, 4), Err(Damage::Malformed(_))));
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_detected() {
        let k = 4;
        let mut buf = Vec::new();
        encode(&mut buf, &Record::Insert(doc(7, "doc", k, Some(b"hello"))));
        for cut in 0..buf.len() {
            let r = decode(&buf[..cut], k);
            assert!(
                matches!(r, Err(Damage::Truncated) | Ok(None)),
                "cut at {cut}: {r:?}"
            );
        }
        for i in 0..buf.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = buf.clone();
                bad[i] ^= bit;
                assert!(
                    decode(&bad, k).is_err(),
                    "flip of byte {i} bit {bit:#x} went unseen"
                );
            }
        }
        // A length past the limit is refused without allocating.
        let mut huge = buf.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&huge, k), Err(Damage::Checksum));
    }

    #[test]
    fn a_segment_applies_whole_groups_only() {
        let k = 4;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(segment_name(1));
        let mut bytes = segment_header(k, 1).to_vec();
        encode(&mut bytes, &Record::Insert(doc(1, "a", k, None)));
        encode(&mut bytes, &Record::Insert(doc(2, "b", k, None)));
        encode(&mut bytes, &Record::Commit { seq: 2 });
        let first_group = bytes.len();
        encode(&mut bytes, &Record::Insert(doc(3, "c", k, None)));
        encode(
            &mut bytes,
            &Record::Delete {
                seq: 4,
                id: "a".into(),
            },
        );
        encode(&mut bytes, &Record::Commit { seq: 4 });
        // At every length, exactly the groups whose commit record is complete are applied.
        for len in 0..=bytes.len() {
            std::fs::write(&path, &bytes[..len]).unwrap();
            let mut seen = Vec::new();
            let scan = read_segment(&FsStorage, &path, k, 1, |r| seen.push(r)).unwrap();
            let want_groups = if len == bytes.len() {
                2
            } else if len >= first_group {
                1
            } else {
                0
            };
            assert_eq!(scan.groups, want_groups, "length {len}");
            assert_eq!(seen.len(), [0, 3, 6][want_groups as usize], "length {len}");
            assert_eq!(scan.committed_len + scan.tail_bytes, len as u64);
        }
        // Garbage after the last commit is a tail, not a group.
        let mut torn = bytes.clone();
        torn.extend_from_slice(&[0xAB; 40]);
        std::fs::write(&path, &torn).unwrap();
        let scan = read_segment(&FsStorage, &path, k, 1, |_| {}).unwrap();
        assert_eq!((scan.groups, scan.tail_bytes), (2, 40));
        // A header whose first sequence number is not the name's, and records out of sequence, are damage.
        assert!(matches!(
            read_segment(&FsStorage, &path, k, 2, |_| {}),
            Err(RecoveryError::Damaged { offset: 24, .. })
        ));
        let mut gap = segment_header(k, 1).to_vec();
        encode(&mut gap, &Record::Insert(doc(1, "a", k, None)));
        let second = gap.len();
        encode(&mut gap, &Record::Insert(doc(3, "b", k, None)));
        encode(&mut gap, &Record::Commit { seq: 3 });
        std::fs::write(&path, &gap).unwrap();
        assert!(matches!(
            read_segment(&FsStorage, &path, k, 1, |_| {}),
            Err(RecoveryError::Damaged { offset, .. }) if offset == second as u64
        ));
        let mut early = segment_header(k, 1).to_vec();
        encode(&mut early, &Record::Insert(doc(1, "a", k, None)));
        encode(&mut early, &Record::Commit { seq: 2 });
        std::fs::write(&path, &early).unwrap();
        assert!(read_segment(&FsStorage, &path, k, 1, |_| {}).is_err());
        // A header of another index is damage, not a tail.
        let mut other = bytes.clone();
        other[20] ^= 1;
        std::fs::write(&path, &other).unwrap();
        assert!(matches!(
            read_segment(&FsStorage, &path, k, 1, |_| {}),
            Err(RecoveryError::Damaged { .. })
        ));
    }

    #[test]
    fn only_a_commit_record_before_the_end_proves_a_tail_is_not_torn() {
        let k = 4;
        let mut group = Vec::new();
        encode(&mut group, &Record::Insert(doc(1, "a", k, Some(b"text"))));
        encode(&mut group, &Record::Commit { seq: 1 });
        let mut next = Vec::new();
        encode(&mut next, &Record::Insert(doc(2, "b", k, None)));
        encode(&mut next, &Record::Commit { seq: 2 });
        // One group damaged anywhere, even with its commit intact at the end: a torn write.
        for i in 0..group.len() - COMMIT_FRAME {
            let mut torn = group.clone();
            torn[i] = 0;
            assert_eq!(later_commit(&torn), None, "zero at {i}");
        }
        // A damaged group followed by another (whose commit may itself be torn): damage.
        let mut two = group.clone();
        two[3] ^= 1;
        two.extend_from_slice(&next);
        assert_eq!(later_commit(&two), Some(group.len() - COMMIT_FRAME));
        assert_eq!(
            later_commit(&two[..two.len() - 1]),
            Some(group.len() - COMMIT_FRAME)
        );
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_refused() {
        let k = 4;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(snapshot_name(9));
        let docs = vec![doc(1, "a", k, Some(b"t1")), doc(4, "b", k, None)];
        let mut w = SnapshotWriter::new(Box::new(File::create(&path).unwrap()), k, 9).unwrap();
        let mut framed = Vec::new();
        for d in &docs {
            encode(&mut framed, &Record::Insert(d.clone()));
        }
        w.records(&framed, 2).unwrap();
        let size = w.finish().unwrap();
        assert_eq!(size, std::fs::metadata(&path).unwrap().len());
        let mut back = Vec::new();
        assert_eq!(
            read_snapshot(&FsStorage, &path, k, |d| back.push(d)).unwrap(),
            9
        );
        assert_eq!(back, docs);
        let good = std::fs::read(&path).unwrap();
        for i in [
            0,
            20,
            30,
            SNAPSHOT_HEADER + 3,
            good.len() - 12,
            good.len() - 1,
        ] {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(
                read_snapshot(&FsStorage, &path, k, |_| {}).is_err(),
                "flip at {i}"
            );
        }
        std::fs::write(&path, &good[..good.len() - 3]).unwrap();
        assert!(read_snapshot(&FsStorage, &path, k, |_| {}).is_err());
    }

    #[test]
    fn names_sort_and_parse() {
        assert_eq!(parse_name(&segment_name(42), "log-", ".wal"), Some(42));
        assert_eq!(parse_name(&snapshot_name(7), "snapshot-", ".snap"), Some(7));
        assert_eq!(parse_name("log-42.wal", "log-", ".wal"), None);
        assert!(segment_name(9) < segment_name(10));
    }
}
