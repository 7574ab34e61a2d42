//! `lshbench sketch`: read a corpus, shingle and sign every document, write the signatures as CSV or NPY.
//!
//! Output order equals input order and the bytes written do not depend on the thread count or the instruction
//! set. Memory holds one batch of text plus, for `.npy` only, the n x k signature matrix (NPY needs the row count
//! in its header).

use crate::cli::args::KernelArgs;
use crate::cli::args::ReaderArgs;
use crate::cli::args::ShingleArgs;
use crate::pipeline::{SignedBatch, sketch_corpus};
use anyhow::{Context, bail};
use std::fs::File;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct SketchArgs {
    #[command(flatten)]
    pub reader: ReaderArgs,
    #[command(flatten)]
    pub shingle: ShingleArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Where to write the signatures: `.csv` (columns id,h0,...,h{k-1}) or `.npy` (an n x k uint32 array, with
    /// the ids in `<stem>.ids.csv` beside it). An empty document's row is all 4294967295.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Worker threads (default: every logical CPU). The output is identical for any value.
    #[arg(long)]
    pub threads: Option<usize>,
}

enum Sink {
    Csv(csv::Writer<BufWriter<File>>),
    Npy {
        path: PathBuf,
        ids: csv::Writer<BufWriter<File>>,
        rows: u64,
        slots: Vec<u32>,
    },
}

impl Sink {
    fn create(path: &Path) -> anyhow::Result<Sink> {
        let create = |p: &Path| -> anyhow::Result<csv::Writer<BufWriter<File>>> {
            let file = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
            Ok(csv::Writer::from_writer(BufWriter::with_capacity(
                1 << 20,
                file,
            )))
        };
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(Sink::Csv(create(path)?)),
            Some("npy") => {
                let ids_path = ids_path(path);
                let mut ids = create(&ids_path)?;
                ids.write_record(["row", "id", "empty"])?;
                Ok(Sink::Npy {
                    path: path.to_path_buf(),
                    ids,
                    rows: 0,
                    slots: Vec::new(),
                })
            }
            _ => bail!(
                "--output {}: the extension must be .csv or .npy",
                path.display()
            ),
        }
    }

    fn header(&mut self, num_perm: usize) -> anyhow::Result<()> {
        if let Sink::Csv(w) = self {
            let mut row = Vec::with_capacity(num_perm + 1);
            row.push("id".to_string());
            row.extend((0..num_perm).map(|i| format!("h{i}")));
            w.write_record(&row)?;
        }
        Ok(())
    }

    fn batch(&mut self, batch: &SignedBatch, num_perm: usize) -> anyhow::Result<()> {
        match self {
            Sink::Csv(w) => {
                let mut buf = itoa::Buffer::new();
                for (i, doc) in batch.docs.iter().enumerate() {
                    w.write_field(&doc.id)?;
                    for &slot in batch.signature(i, num_perm) {
                        w.write_field(buf.format(slot))?;
                    }
                    w.write_record(None::<&[u8]>)?;
                }
            }
            Sink::Npy {
                ids, rows, slots, ..
            } => {
                for (i, doc) in batch.docs.iter().enumerate() {
                    ids.write_record([
                        rows.to_string().as_str(),
                        &doc.id,
                        if batch.empty[i] { "1" } else { "0" },
                    ])?;
                    *rows += 1;
                }
                slots.extend_from_slice(&batch.signatures);
            }
        }
        Ok(())
    }

    fn finish(self, num_perm: usize) -> anyhow::Result<()> {
        match self {
            Sink::Csv(mut w) => w.flush()?,
            Sink::Npy {
                path,
                mut ids,
                rows,
                slots,
            } => {
                ids.flush()?;
                use npyz::WriterBuilder;
                let file = File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let mut writer = npyz::WriteOptions::new()
                    .default_dtype()
                    .shape(&[rows, num_perm as u64])
                    .writer(BufWriter::with_capacity(1 << 20, file))
                    .begin_nd()?;
                writer.extend(slots)?;
                writer.finish()?;
            }
        }
        Ok(())
    }
}

/// `sigs.npy` -> `sigs.ids.csv`.
pub fn ids_path(npy: &Path) -> PathBuf {
    npy.with_extension("ids.csv")
}

/// A rayon pool of `threads` workers (all logical CPUs when `None`).
pub fn thread_pool(threads: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    let threads = threads.unwrap_or_else(crate::machine::logical_cpus);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?)
}

/// A spinner on stderr when stderr is a terminal; hidden otherwise.
pub fn progress(what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} {human_pos} documents ({per_sec}) {elapsed}",
        )
        .expect("static template"),
    );
    bar.set_message(what.to_string());
    bar
}

pub fn run(args: &SketchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let shingler = args.shingle.shingler(args.kernel.seed, args.kernel.isa())?;
    let kernel = args.kernel.build()?;
    let num_perm = kernel.num_perm();
    let pool = thread_pool(args.threads)?;
    let mut reader = args.reader.open()?;
    let mut sink = Sink::create(&args.output)?;
    sink.header(num_perm)?;

    let bar = progress("sketching");
    let (mut docs, mut empty, mut bytes) = (0u64, 0u64, 0u64);
    pool.install(|| {
        sketch_corpus(&mut reader, &shingler, kernel.as_ref(), |batch| {
            docs += batch.docs.len() as u64;
            empty += batch.empty.iter().filter(|&&e| e).count() as u64;
            bytes += batch.docs.iter().map(|d| d.text.len() as u64).sum::<u64>();
            bar.inc(batch.docs.len() as u64);
            sink.batch(&batch, num_perm)
        })
    })?;
    sink.finish(num_perm)?;
    bar.finish_and_clear();

    let secs = started.elapsed().as_secs_f64();
    eprintln!("{}", reader.stats().report());
    eprintln!("sketched {docs} documents, {empty} of them empty (their rows are all 4294967295)");
    eprintln!(
        "kernel {} on {}, k = {num_perm}, seed {}, shingle {}, {} threads: {:.3} s, {:.1} MB/s of text",
        kernel.name(),
        kernel.isa(),
        args.kernel.seed,
        shingler.kind,
        pool.current_num_threads(),
        secs,
        bytes as f64 / secs / 1e6
    );
    eprintln!("wrote {}", args.output.display());
    Ok(())
}
