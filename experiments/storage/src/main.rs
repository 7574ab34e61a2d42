//! The durability work of `lshbench serve` done three ways on the same records: the index's own log
//! (`lshbench_online::log`, one segment, an append and an `fdatasync` per group, as the writer does), redb (one
//! write transaction per group, `Durability::Immediate`) and fjall (one atomic batch per group, then
//! `persist(SyncData)`). Each store keeps what the log keeps: the framed insert record of each document (its id,
//! signature and zstd-compressed text), keyed by sequence number.
//!
//! `write` times the durable writes of groups of `--group` documents, each group durable before the next starts (the
//! writer's group commit: with 16 clients a group holds up to 16 documents). `read` times what recovery does with
//! the files: every record read back, checked and decoded (then dropped: see [`Seen`]), and reports the process's
//! peak resident memory, which is then the store's own. Documents come from `lshbench gen`'s generator (the corpus
//! of `experiments/serve/recovery.sh`: mean length 1,500 bytes, seed 7); signatures are 128 slots of a seeded hash,
//! which a store sees as the same incompressible bytes as real ones.
//!
//! What is not measured here: the index on a store end to end (HTTP, signing, banding, the band tables' rebuild),
//! which the storage choice would add the same cost to in every case. `run.sh` runs the comparison.

use anyhow::{Context, Result, bail};
use lshbench_core::corpus::synth::{GenConfig, generate};
use lshbench_online::log::{self, Record};
use lshbench_online::storage::{FsStorage, Storage};
use redb::{ReadableDatabase, ReadableTable};
use std::path::{Path, PathBuf};
use std::time::Instant;

const NUM_PERM: usize = 128;
const REDB_TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("docs");

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Log,
    Redb,
    Fjall,
}

impl Kind {
    fn parse(s: &str) -> Result<Kind> {
        Ok(match s {
            "log" => Kind::Log,
            "redb" => Kind::Redb,
            "fjall" => Kind::Fjall,
            _ => bail!("--store must be log, redb or fjall, not {s:?}"),
        })
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Log => "log",
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
        }
    }
}

struct Args {
    command: String,
    store: Kind,
    dir: PathBuf,
    docs: usize,
    group: usize,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let command = it
        .next()
        .context("usage: storage-compare write|read --store S --dir D [--docs N --group G]")?;
    let (mut store, mut dir, mut docs, mut group) = (None, None, 100_000usize, 16usize);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--store" => store = Some(Kind::parse(&value)?),
            "--dir" => dir = Some(PathBuf::from(value)),
            "--docs" => docs = value.parse().context("--docs")?,
            "--group" => group = value.parse().context("--group")?,
            _ => bail!("unknown flag {flag}"),
        }
    }
    if group == 0 {
        bail!("--group must be at least 1");
    }
    Ok(Args {
        command,
        store: store.context("--store is required")?,
        dir: dir.context("--dir is required")?,
        docs,
        group,
    })
}

/// The framed insert records of `docs` generated documents, in order.
fn records(docs: usize) -> Result<Vec<Vec<u8>>> {
    let config = GenConfig {
        docs,
        mean_len: 1500,
        seed: 7,
        ..GenConfig::default()
    };
    let mut compressor = zstd::bulk::Compressor::new(1)?;
    let mut out = Vec::with_capacity(docs);
    let mut signature = vec![0u32; NUM_PERM];
    generate(&config, |doc| {
        for (slot, s) in signature.iter_mut().enumerate() {
            *s = xxhash_rust::xxh3::xxh3_64_with_seed(&(slot as u64).to_le_bytes(), doc.index)
                as u32;
        }
        // The index keeps a text as its length and its zstd frame (level 1).
        let mut text = (doc.text.len() as u32).to_le_bytes().to_vec();
        text.extend(
            compressor
                .compress(doc.text.as_bytes())
                .expect("zstd compresses"),
        );
        let mut rec = Vec::with_capacity(text.len() + 4 * NUM_PERM + 64);
        log::encode_insert(
            &mut rec,
            doc.index + 1,
            &doc.id,
            false,
            &signature,
            Some(&text),
        );
        out.push(rec);
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(out)
}

fn write(args: &Args) -> Result<()> {
    let recs = records(args.docs)?;
    let bytes: usize = recs.iter().map(Vec::len).sum();
    std::fs::create_dir_all(&args.dir)?;
    if std::fs::read_dir(&args.dir)?.next().is_some() {
        bail!("{} is not empty", args.dir.display());
    }
    let start = Instant::now();
    let groups = match args.store {
        Kind::Log => write_log(&args.dir, &recs, args.group)?,
        Kind::Redb => write_redb(&args.dir, &recs, args.group)?,
        Kind::Fjall => write_fjall(&args.dir, &recs, args.group)?,
    };
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"phase\":\"write\",\"store\":\"{}\",\"docs\":{},\"group\":{},\"groups\":{},\"record_bytes\":{},\"seconds\":{:.3},\"docs_per_s\":{:.0},\"disk_bytes\":{}}}",
        args.store.name(),
        recs.len(),
        args.group,
        groups,
        bytes,
        secs,
        recs.len() as f64 / secs,
        dir_bytes(&args.dir)?
    );
    Ok(())
}

fn write_log(dir: &Path, recs: &[Vec<u8>], group: usize) -> Result<u64> {
    let storage = FsStorage;
    let path = dir.join(log::segment_name(1));
    let mut file = storage.create_new(&path)?;
    file.append(&log::segment_header(NUM_PERM, 1))?;
    file.sync_all()?;
    storage.sync_dir(dir)?;
    let mut buf = Vec::new();
    let mut groups = 0;
    let mut seq = 0u64;
    for chunk in recs.chunks(group) {
        buf.clear();
        for r in chunk {
            buf.extend_from_slice(r);
        }
        seq += chunk.len() as u64;
        log::encode_commit(&mut buf, seq);
        file.append(&buf)?;
        file.sync_data()?;
        groups += 1;
    }
    Ok(groups)
}

fn write_redb(dir: &Path, recs: &[Vec<u8>], group: usize) -> Result<u64> {
    let db = redb::Database::create(dir.join("index.redb"))?;
    let mut groups = 0;
    let mut seq = 0u64;
    for chunk in recs.chunks(group) {
        // A write transaction commits with `Durability::Immediate` unless told otherwise.
        let txn = db.begin_write()?;
        {
            let mut table = txn.open_table(REDB_TABLE)?;
            for r in chunk {
                seq += 1;
                table.insert(seq, r.as_slice())?;
            }
        }
        txn.commit()?;
        groups += 1;
    }
    Ok(groups)
}

fn write_fjall(dir: &Path, recs: &[Vec<u8>], group: usize) -> Result<u64> {
    let db = fjall::Database::builder(dir.join("index.fjall")).open()?;
    let docs = db.keyspace("docs", fjall::KeyspaceCreateOptions::default)?;
    let mut groups = 0;
    let mut seq = 0u64;
    for chunk in recs.chunks(group) {
        let mut batch = db.batch();
        for r in chunk {
            seq += 1;
            batch.insert(&docs, seq.to_be_bytes(), r.as_slice());
        }
        batch.commit()?;
        db.persist(fjall::PersistMode::SyncData)?;
        groups += 1;
    }
    Ok(groups)
}

/// What the read keeps of the documents: their count and sequence numbers (which must run 1, 2, ...), and a
/// sum over their ids, signatures and texts, so that nothing decoded goes unused. The documents themselves are
/// dropped once decoded: the index's copy of them costs the same whichever store they came from, and held here
/// it would make the read's time a measure of the machine's page allocation instead of the store.
#[derive(Default)]
struct Seen {
    docs: u64,
    sum: u64,
}

impl Seen {
    fn doc(&mut self, d: log::DocRecord) -> Result<()> {
        self.docs += 1;
        if d.seq != self.docs {
            bail!("record {} has sequence number {}", self.docs, d.seq);
        }
        let text = d.text.as_deref().unwrap_or_default();
        self.sum = self
            .sum
            .wrapping_add(d.id.len() as u64)
            .wrapping_add(d.signature.iter().map(|&s| s as u64).sum::<u64>())
            .wrapping_add(text.len() as u64);
        Ok(())
    }

    /// One record read back from a store: checked (its checksum) and decoded.
    fn record(&mut self, bytes: &[u8]) -> Result<()> {
        match log::decode(bytes, NUM_PERM) {
            Ok(Some((Record::Insert(d), used))) if used == bytes.len() => self.doc(d),
            other => bail!("a stored record did not decode: {other:?}"),
        }
    }
}

fn read(args: &Args) -> Result<()> {
    let start = Instant::now();
    let mut seen = Seen::default();
    match args.store {
        Kind::Log => {
            let path = args.dir.join(log::segment_name(1));
            let mut failed = None;
            let scan = log::read_segment(&FsStorage, &path, NUM_PERM, 1, |r| {
                if let Record::Insert(d) = r
                    && failed.is_none()
                {
                    failed = seen.doc(d).err();
                }
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            if let Some(e) = failed {
                return Err(e);
            }
            if scan.tail_bytes != 0 {
                bail!("the log has {} bytes after its last group", scan.tail_bytes);
            }
        }
        Kind::Redb => {
            let db = redb::Database::open(args.dir.join("index.redb"))?;
            let txn = db.begin_read()?;
            let table = txn.open_table(REDB_TABLE)?;
            for row in table.iter()? {
                let (_, v) = row?;
                seen.record(v.value())?;
            }
        }
        Kind::Fjall => {
            let db = fjall::Database::builder(args.dir.join("index.fjall")).open()?;
            let ks = db.keyspace("docs", fjall::KeyspaceCreateOptions::default)?;
            for row in ks.iter() {
                seen.record(&row.value()?)?;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"phase\":\"read\",\"store\":\"{}\",\"docs\":{},\"sum\":{},\"seconds\":{:.3},\"peak_rss_mib\":{:.1}}}",
        args.store.name(),
        seen.docs,
        seen.sum,
        secs,
        peak_rss_kib() as f64 / 1024.0
    );
    Ok(())
}

fn peak_rss_kib() -> i64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss
}

/// Bytes allocated on disk under `dir` (as `du` counts them: a sparse or preallocated file counts what it holds).
fn dir_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&e.path())?
        } else {
            meta.blocks() * 512
        };
    }
    Ok(total)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    match args.command.as_str() {
        "write" => write(&args),
        "read" => read(&args),
        other => bail!("unknown command {other:?}: write or read"),
    }
}
