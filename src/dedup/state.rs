//! The saved state of a dedup run: the signatures of every document with its id, and the parameters that made
//! them, so a later run can load them and take new documents online (`--load state.bin --save state.bin`).
//! The banding is not part of the state: the index is rebuilt from the signatures, so any (b, r) can be used.
//!
//! Format, version 2, all integers little-endian (version 1 had the same layout, but its signatures were made
//! from the earlier shingle ids of windows of at most 8 bytes, so it is refused rather than mixed with new ones):
//! ```text
//! magic     16 bytes  "LSHBENCH-STATE\0\0"
//! version   u32       2
//! hlen      u32       length of the header
//! header    hlen bytes of JSON: kernel, num_perm, seed, shingle, lowercase, collapse_whitespace,
//!           strip_punctuation, documents, crate version
//! ids       per document: u32 length + UTF-8 bytes
//! empty     one byte per document (1 = empty shingle set)
//! sigs      documents x num_perm u32 slots, row-major
//! checksum  u64       xxh3_64 of everything from `version` up to here
//! ```

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::Path;

const MAGIC: &[u8; 16] = b"LSHBENCH-STATE\0\0";
pub const VERSION: u32 = 2;

/// What made the signatures. A state is only usable by a run with the same values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateParams {
    pub kernel: String,
    pub num_perm: usize,
    pub seed: u64,
    pub shingle: String,
    pub lowercase: bool,
    pub collapse_whitespace: bool,
    pub strip_punctuation: bool,
}

#[derive(Serialize, Deserialize)]
struct Header {
    #[serde(flatten)]
    params: StateParams,
    documents: u64,
    written_by: String,
}

/// Documents with their signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub params: StateParams,
    pub ids: Vec<String>,
    pub empty: Vec<bool>,
    /// `ids.len() * num_perm` slots.
    pub signatures: Vec<u32>,
}

impl State {
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        save_parts(path, &self.params, &self.ids, &self.empty, &self.signatures)
    }

    pub fn load(path: &Path) -> anyhow::Result<State> {
        let name = path.display();
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .with_context(|| format!("reading state {name}"))?;
        if bytes.len() < 16 + 8 + 8 || &bytes[..16] != MAGIC {
            bail!("{name} is not an lshbench state file (bad magic bytes)");
        }
        let body = &bytes[16..bytes.len() - 8];
        let stored = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
        let mut cur = Cursor {
            buf: body,
            pos: 0,
            name: &name.to_string(),
        };
        let version = cur.u32()?;
        if version != VERSION {
            bail!("{name}: state format version {version}; this lshbench reads version {VERSION}");
        }
        if xxhash_rust::xxh3::xxh3_64(body) != stored {
            bail!("{name}: checksum mismatch, the file is corrupt or truncated");
        }
        let hlen = cur.u32()? as usize;
        let header: Header = serde_json::from_slice(cur.take(hlen)?)
            .with_context(|| format!("{name}: unreadable header"))?;
        let n = usize::try_from(header.documents)?;
        let k = header.params.num_perm;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            let len = cur.u32()? as usize;
            let id = std::str::from_utf8(cur.take(len)?)
                .with_context(|| format!("{name}: an id is not UTF-8"))?;
            ids.push(id.to_string());
        }
        let empty = cur.take(n)?.iter().map(|&b| b != 0).collect();
        let sig_bytes = cur.take(
            n.checked_mul(k)
                .and_then(|x| x.checked_mul(4))
                .context("size overflow")?,
        )?;
        let signatures = sig_bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if cur.pos != body.len() {
            bail!(
                "{name}: {} unexpected bytes after the signatures",
                body.len() - cur.pos
            );
        }
        Ok(State {
            params: header.params,
            ids,
            empty,
            signatures,
        })
    }

    /// Refuses a state made with other parameters, naming each difference.
    pub fn check_compatible(&self, run: &StateParams, path: &Path) -> anyhow::Result<()> {
        let s = &self.params;
        let mut diffs = Vec::new();
        let mut diff = |what: &str, saved: String, now: String| {
            if saved != now {
                diffs.push(format!("{what}: state {saved}, this run {now}"));
            }
        };
        diff("kernel", s.kernel.clone(), run.kernel.clone());
        diff(
            "num_perm (k)",
            s.num_perm.to_string(),
            run.num_perm.to_string(),
        );
        diff("seed", s.seed.to_string(), run.seed.to_string());
        diff("shingle", s.shingle.clone(), run.shingle.clone());
        diff(
            "lowercase",
            s.lowercase.to_string(),
            run.lowercase.to_string(),
        );
        diff(
            "collapse_whitespace",
            s.collapse_whitespace.to_string(),
            run.collapse_whitespace.to_string(),
        );
        diff(
            "strip_punctuation",
            s.strip_punctuation.to_string(),
            run.strip_punctuation.to_string(),
        );
        if !diffs.is_empty() {
            bail!(
                "{} was made with other signature parameters, so its signatures cannot be compared with this \
                 run's: {}",
                path.display(),
                diffs.join("; ")
            );
        }
        Ok(())
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    name: &'a str,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            bail!("{}: truncated state file", self.name);
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
}

/// Writes a state file from borrowed parts (no copy of the signature matrix), streaming: the checksum is
/// computed while writing. The file goes to a temporary name next to `path` and is renamed into place, so
/// `--load x --save x` never leaves a half-written state behind.
pub fn save_parts(
    path: &Path,
    params: &StateParams,
    ids: &[String],
    empty: &[bool],
    signatures: &[u32],
) -> anyhow::Result<()> {
    let n = ids.len();
    assert_eq!(empty.len(), n);
    assert_eq!(signatures.len(), n * params.num_perm);
    let header = serde_json::to_vec(&Header {
        params: params.clone(),
        documents: n as u64,
        written_by: format!("lshbench {}", env!("CARGO_PKG_VERSION")),
    })?;
    let tmp = path.with_extension("tmp-lshbench");
    {
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut f = std::io::BufWriter::with_capacity(1 << 20, file);
        f.write_all(MAGIC)?;
        // Everything from the version on goes through the hasher as well as to the file.
        let mut body = Hashed {
            out: &mut f,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
        };
        body.write_all(&VERSION.to_le_bytes())?;
        body.write_all(&(header.len() as u32).to_le_bytes())?;
        body.write_all(&header)?;
        for id in ids {
            let len = u32::try_from(id.len()).context("an id longer than 4 GiB")?;
            body.write_all(&len.to_le_bytes())?;
            body.write_all(id.as_bytes())?;
        }
        let flags: Vec<u8> = empty.iter().map(|&e| e as u8).collect();
        body.write_all(&flags)?;
        for row in signatures.chunks(4096) {
            let bytes: Vec<u8> = row.iter().flat_map(|s| s.to_le_bytes()).collect();
            body.write_all(&bytes)?;
        }
        let checksum = body.hasher.digest();
        f.write_all(&checksum.to_le_bytes())?;
        f.flush()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A writer that also feeds what it writes to an xxh3 hasher (whose digest equals the one-shot `xxh3_64`).
struct Hashed<'a, W: Write> {
    out: &'a mut W,
    hasher: xxhash_rust::xxh3::Xxh3,
}

impl<W: Write> Write for Hashed<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.out.write(buf)?;
        self.hasher.update(&buf[..written]);
        Ok(written)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> StateParams {
        StateParams {
            kernel: "oph-opt".into(),
            num_perm: 4,
            seed: 42,
            shingle: "char:5".into(),
            lowercase: false,
            collapse_whitespace: false,
            strip_punctuation: false,
        }
    }

    fn state() -> State {
        State {
            params: params(),
            ids: vec!["a".into(), "b/ü".into(), String::new()],
            empty: vec![false, false, true],
            signatures: (0..12).map(|x| x * 0x0101_0101).collect(),
        }
    }

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.bin");
        let s = state();
        s.save(&path).unwrap();
        let back = State::load(&path).unwrap();
        assert_eq!(back, s);
        back.check_compatible(&params(), &path).unwrap();
        let mut other = params();
        other.kernel = "simd".into();
        other.seed = 7;
        let err = back
            .check_compatible(&other, &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kernel: state oph-opt, this run simd"),
            "{err}"
        );
        assert!(err.contains("seed: state 42, this run 7"), "{err}");
        // Flip one signature byte: the checksum catches it.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 12;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = State::load(&path).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        std::fs::write(&path, b"not a state").unwrap();
        assert!(
            State::load(&path)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
    }
}
