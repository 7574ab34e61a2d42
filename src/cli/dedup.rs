//! `lshbench dedup`: flags, thread pool, progress bar and summary around [`lshbench_core::dedup::run`].

use crate::cli::args::{KernelArgs, ReaderArgs, ShingleArgs};
use crate::cli::term::Bar;
use lshbench_core::dedup::{
    self, DedupOptions, DedupOutcome, DedupOutputs, DedupReport, Verify, survivor,
};
use lshbench_core::lsh::choice::BandingChoice;
use lshbench_core::lsh::cluster::GroupMode;
use lshbench_core::lsh::index;
use std::path::PathBuf;

/// `lshbench dedup`: near-duplicate pairs and groups of a corpus.
#[derive(clap::Args, Debug, Clone)]
pub struct DedupArgs {
    /// The corpus and how to read it.
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// Shingle kind and normalisation.
    #[command(flatten)]
    pub shingle: ShingleArgs,
    /// The signature kernel, k, the seed and the instruction set.
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Bits kept per slot: 1, 2, 4, 8, 16 or 32 (b-bit minwise hashing). Bands hash the b-bit values and the
    /// estimate is corrected for chance agreement: (P - 2^-b) / (1 - 2^-b).
    #[arg(long, default_value_t = 32)]
    pub bits: u32,
    /// Number of bands b (with --rows). Without both, --threshold picks (b, r) by the default rule.
    #[arg(long)]
    pub bands: Option<usize>,
    /// Rows per band r (with --bands).
    #[arg(long)]
    pub rows: Option<usize>,
    /// Similarity threshold in (0, 1] for verification [default: 0.5]. Alone, it also picks (b, r): the banding
    /// with P(threshold) >= 0.99 and the smallest P(threshold/2).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// How candidates are confirmed: exact shingle Jaccard, the signature estimate, or none.
    #[arg(long, value_enum, default_value_t = Verify::default())]
    pub verify: Verify,
    /// Grouping: connected components, or `center` (every member has a verified pair with its group's centre)
    /// [default: components; center with --kept or --removed, so that every removed document has a verified
    /// pair with its survivor].
    #[arg(long, value_enum)]
    pub groups: Option<GroupMode>,
    /// Which member of a group survives: center (the member with most verified pairs), first or last (input
    /// order), longest or shortest (text bytes), or column:NAME:max / column:NAME:min (a JSONL field or a
    /// CSV/TSV/Parquet column of numbers or text; documents without a value lose). Ties go to the earliest.
    #[arg(long, value_name = "POLICY", default_value = lshbench_core::defaults::KEEP)]
    pub keep: dedup::survivor::Keep,
    /// Documents shorter than one shingle (never candidates): keep them, drop them, or remove exact copies
    /// (same text after normalisation, whitespace collapsed) in favour of the one --keep prefers.
    #[arg(long, value_enum, default_value_t = dedup::survivor::Short::default())]
    pub short: dedup::survivor::Short,
    /// Write the verified pairs as CSV (id_a,id_b,estimate,jaccard,verified_by), or as Parquet with the same
    /// columns if the name ends in .parquet.
    #[arg(long, value_name = "CSV|PARQUET")]
    pub pairs: Option<PathBuf>,
    /// Write group membership as CSV (group,id,size,center,is_center,similarity_to_center), or as Parquet with
    /// the same columns if the name ends in .parquet.
    #[arg(long, value_name = "CSV|PARQUET")]
    pub clusters: Option<PathBuf>,
    /// Write one row per group as CSV: size, centre, edge and member-pair similarity, chaining counts (Parquet if
    /// the name ends in .parquet).
    #[arg(long, value_name = "CSV|PARQUET")]
    pub group_report: Option<PathBuf>,
    /// Write the kept corpus in the input's own form: every document read that is not removed (singletons and
    /// each group's survivor, see --keep), its record copied as read, in input order (JSONL lines, CSV/TSV rows
    /// after the header, text lines, Parquet rows with every column; a directory corpus's files into a new
    /// directory tree at PATH). gzip-compressed if PATH ends in .gz. PATH an empty directory or ending in /:
    /// shards part-00000.EXT, ... of --kept-shard-size each. Written whole or not at all.
    #[arg(long, value_name = "PATH")]
    pub kept: Option<PathBuf>,
    /// Write the audit of removals as CSV (Parquet if the name ends in .parquet): one row per removed document
    /// with its survivor, their similarity, its group and the rule that removed it
    /// (id,survivor,similarity,basis,group,rule).
    #[arg(long, value_name = "CSV|PARQUET")]
    pub removed: Option<PathBuf>,
    /// Close a --kept shard once it holds this many bytes (uncompressed): SIZE like 512M or 1G.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = dedup::external::parse_size)]
    pub kept_shard_size: u64,
    /// Buckets (and classes of identical signatures) larger than this are enumerated as a star; the pairs left
    /// out are counted in the summary. At most 100000.
    #[arg(long, default_value_t = index::DEFAULT_BUCKET_CAP)]
    pub bucket_cap: usize,
    /// Stop with an error when banding emits more candidate pairs than this (counted once per band): a guard
    /// against an S-curve far too permissive for the corpus, which would otherwise exhaust memory. At most 10^9.
    #[arg(long, default_value_t = dedup::DEFAULT_MAX_CANDIDATES)]
    pub max_candidates: u64,
    /// Member pairs examined per group for the chaining columns; larger groups are sampled (seeded). At most
    /// 10^6.
    #[arg(long, default_value_t = dedup::DEFAULT_PAIR_BUDGET)]
    pub pair_budget: usize,
    /// Load signatures from a saved state first; only pairs involving a newly read document are reported.
    #[arg(long, value_name = "STATE")]
    pub load: Option<PathBuf>,
    /// Save the signatures of every document (loaded and new) for a later --load.
    #[arg(long, value_name = "STATE")]
    pub save: Option<PathBuf>,
    /// Run out of core under this peak memory: SIZE like 4G, 512M or 1.5G (powers of 1024). Band keys spill to
    /// disk in sorted runs, the corpus is read a second time for the documents of candidate pairs, and the outputs
    /// are those of the in-memory run. The limit is on peak resident memory as the OS counts it (code
    /// included). Refused with --load and --save. A limit below what must stay resident (the process, per-worker
    /// buffers for the longest text, ids and about a hundred bytes per document) stops the run, naming the need.
    #[arg(long, value_name = "SIZE", value_parser = dedup::external::parse_size)]
    pub memory_limit: Option<u64>,
    /// Directory for the spill files of --memory-limit (a fresh subdirectory, deleted at the end) [default: the
    /// system temp dir].
    #[arg(long, value_name = "DIR", requires = "memory_limit")]
    pub tmp_dir: Option<PathBuf>,
    /// Test knob: records per sorted spill run (forces spilling on a small corpus).
    #[arg(long, hide = true, requires = "memory_limit")]
    pub spill_run_records: Option<usize>,
    /// Worker threads (default: all logical CPUs; at most 1024).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl DedupArgs {
    /// The library options these flags describe.
    pub fn options(&self) -> DedupOptions {
        DedupOptions {
            bands: self.bands,
            rows: self.rows,
            threshold: self.threshold,
            verify: self.verify,
            groups: self.group_mode(),
            bucket_cap: self.bucket_cap,
            max_candidates: self.max_candidates,
            pair_budget: self.pair_budget,
            seed: self.kernel.seed,
            load: self.load.clone(),
            save: self.save.clone(),
            outputs: DedupOutputs {
                pairs: self.pairs.clone(),
                clusters: self.clusters.clone(),
                group_report: self.group_report.clone(),
                kept: self.kept.clone().map(|path| dedup::kept::KeptTarget {
                    path,
                    shard_size: self.kept_shard_size,
                }),
                removed: self.removed.clone(),
            },
            memory_limit: self.memory_limit.map(|bytes| dedup::external::MemoryLimit {
                bytes,
                tmp_dir: self.tmp_dir.clone(),
                run_records: self.spill_run_records,
            }),
            tuning: crate::cli::args::tuning(),
            keep: self.keep.clone(),
            short: self.short,
        }
    }

    /// `--groups`, or its default: `center` when the run chooses survivors (`--kept`, `--removed`), else
    /// `components`.
    pub fn group_mode(&self) -> GroupMode {
        self.groups
            .unwrap_or(if self.kept.is_some() || self.removed.is_some() {
                GroupMode::Center
            } else {
                GroupMode::Components
            })
    }
}

/// Runs `lshbench dedup` on a pool of `--threads` workers: writes the outputs and prints the summary on stdout.
pub fn run(args: &DedupArgs) -> anyhow::Result<()> {
    use crate::cli::args::{at_most, check_outputs, limits};
    at_most(
        "--max-candidates",
        args.max_candidates,
        limits::MAX_CANDIDATES,
    )?;
    at_most("--pair-budget", args.pair_budget, limits::PAIR_BUDGET)?;
    // A directory target of --kept (shards, or a directory corpus's tree) is checked by the kept pass itself.
    let kept_file = args
        .kept
        .as_deref()
        .filter(|k| !dedup::kept::is_directory_target(k, args.reader.input.is_dir()));
    if let Some(kept) = &args.kept {
        dedup::kept::check_target(&args.reader.input, kept)?;
    }
    let tables = [
        ("--pairs", args.pairs.as_deref()),
        ("--clusters", args.clusters.as_deref()),
        ("--group-report", args.group_report.as_deref()),
        ("--kept", kept_file),
        ("--removed", args.removed.as_deref()),
    ];
    let input = ("--input", Some(args.reader.input.as_path()));
    check_outputs(&[input, ("--load", args.load.as_deref())], &tables)?;
    // `--save` may name the `--load` file (the state is read whole before the new one replaces it), nothing
    // else that is read; and no two outputs may name one file.
    let save_replaces_load = match (&args.save, &args.load) {
        (Some(s), Some(l)) => lshbench_core::output::same_place(s, l),
        _ => false,
    };
    let load = args.load.as_deref().filter(|_| !save_replaces_load);
    let mut outputs = tables.to_vec();
    outputs.push(("--save", args.save.as_deref()));
    check_outputs(&[input, ("--load", load)], &outputs)?;
    let pool = lshbench_core::exec::thread_pool(args.threads)?;
    let kernel = args.kernel.build_bits(args.bits)?;
    let shingler = args.shingle.shingler(args.kernel.seed, args.kernel.isa())?;
    let mut reader = args
        .reader
        .open_ranked(shingler.dispatch(), args.keep.field())?;
    let bar = Bar::new("reading and signing");
    let report = pool.install(|| {
        dedup::run(
            &mut reader,
            &shingler,
            kernel.as_ref(),
            &args.options(),
            &bar,
        )
    })?;
    bar.finish();
    print!("{}", summary(&report));
    Ok(())
}

/// The run summary `lshbench dedup` prints on stdout: every document and every pair accounted for, the largest
/// groups, the time per stage (newline-terminated lines).
pub fn summary(report: &DedupReport) -> String {
    use std::fmt::Write as _;
    let (o, read, total) = (&report.outcome, &report.read, report.seconds);
    let config = &o.config;
    let mut s = String::new();
    let c = &o.candidates;
    let t = config.choice.threshold;
    let _ = writeln!(s, "{}", super::report::read_stats(read));
    let new_docs = o.ids.len() - o.loaded;
    let _ = writeln!(
        s,
        "documents: {new_docs} read now{}, {} empty (never candidates), {} banded",
        if o.loaded > 0 {
            format!(" + {} loaded from state", o.loaded)
        } else {
            String::new()
        },
        o.empty_documents,
        c.documents
    );
    banding_lines(&mut s, &config.choice);
    let _ = writeln!(
        s,
        "candidates: {} pairs; {} classes of identical banded signatures hold {} documents (largest {}); largest \
         bucket {} documents",
        c.candidates,
        c.duplicate_classes,
        c.documents_in_duplicate_classes,
        c.largest_duplicate_class,
        c.largest_bucket
    );
    if c.pairs_not_enumerated > 0 {
        let _ = writeln!(
            s,
            "NOT ENUMERATED: {} buckets over --bucket-cap {} were walked as stars; {} pairs sharing a band (counted \
             once per band) were not listed. Their documents stay connected through the star's centre.",
            c.capped_groups, config.bucket_cap, c.pairs_not_enumerated
        );
    }
    let _ = writeln!(
        s,
        "verified ({}{}): {} pairs",
        config.verify.name(),
        if config.verify == Verify::None {
            String::new()
        } else {
            format!(", similarity >= {t}")
        },
        o.verified.len()
    );
    let in_groups: usize = o.groups.iter().map(|g| g.members.len()).sum();
    let largest = o.groups.iter().map(|g| g.members.len()).max().unwrap_or(0);
    let chained = o
        .group_stats
        .iter()
        .filter(|g| g.pairs_below_threshold > 0)
        .count();
    let disjoint = o
        .group_stats
        .iter()
        .filter(|g| g.pairs_disjoint > 0)
        .count();
    let _ = writeln!(
        s,
        "groups ({:?}): {} groups of 2+ documents covering {in_groups}; largest {largest}; {chained} with a member \
         pair below the threshold, {disjoint} with a member pair sharing no shingle",
        config.groups,
        o.groups.len()
    );
    let removed = o.removed()[o.loaded..].iter().filter(|&&r| r).count();
    let _ = writeln!(
        s,
        "kept: {} documents, {removed} removed as duplicates",
        new_docs - removed,
    );
    if o.keep != survivor::Keep::Center || o.short != survivor::Short::Exact {
        let _ = writeln!(
            s,
            "survivors: --keep {} (ties to the earliest); --short {}{}",
            o.keep,
            o.short.name(),
            match o.short {
                survivor::Short::Keep => " (short documents kept, not banded)".to_string(),
                survivor::Short::Drop => format!(
                    ": {} documents shorter than one shingle removed",
                    o.short_removed.len()
                ),
                survivor::Short::Exact => String::new(),
            }
        );
    }
    largest_groups(&mut s, o, t);
    let stages: Vec<String> = o
        .stage_seconds
        .iter()
        .map(|(n, x)| format!("{n} {x:.3} s"))
        .collect();
    let _ = writeln!(s, "time: {}; total {total:.3} s", stages.join(", "));
    s
}

/// The banding lines of the summary: bands and rows and how they were chosen, the b-bit slots' S-curve, and a
/// warning when the banding barely finds pairs at the verification threshold.
fn banding_lines(s: &mut String, choice: &BandingChoice) {
    use std::fmt::Write as _;
    let (b, t) = (choice.banding, choice.threshold);
    let _ = writeln!(
        s,
        "banding: {} bands x {} rows ({}); P({t}) = {:.4}, P = 1/2 at s = {:.4}",
        b.bands,
        b.rows,
        if choice.explicit {
            "given".to_string()
        } else {
            format!("default rule for --threshold {t}: P(t) >= 0.99, then the smallest P(t/2)")
        },
        choice.probability(t),
        choice.half_point()
    );
    if choice.bits < 32 {
        let _ = writeln!(
            s,
            "{}-bit slots: a slot agrees with probability 2^-{} + (1 - 2^-{}) s, so the S-curve above is taken \
             there; unrelated documents (s = 0) become candidates with probability {:.4}",
            choice.bits,
            choice.bits,
            choice.bits,
            choice.probability(0.0)
        );
    }
    if choice.explicit && choice.probability(t) < 0.5 {
        // An explicit --threshold that contradicts the banding is refused in `choose_banding`; the default
        // threshold is not refused (the banding was the user's choice), but the contradiction is said plainly.
        let _ = writeln!(
            s,
            "warning: this banding finds pairs at the verification threshold {t} (the default) with probability \
             only {:.4}; pass --threshold to say which similarity you are after",
            choice.probability(t)
        );
    }
}

/// The five largest groups, with their member pairs' similarities.
fn largest_groups(s: &mut String, o: &DedupOutcome, t: f64) {
    use std::fmt::Write as _;
    let mut order: Vec<usize> = (0..o.groups.len()).collect();
    order.sort_by_key(|&g| (std::cmp::Reverse(o.groups[g].members.len()), g));
    if !order.is_empty() {
        let _ = writeln!(
            s,
            "largest groups (member pairs: min/mean similarity, below threshold, sharing nothing):"
        );
        for &g in order.iter().take(5) {
            let st = &o.group_stats[g];
            let _ = writeln!(
                s,
                "  group {g}: {} documents, centre {}, {} {} pairs: min {:.3} mean {:.3}, {} below {t}, {} disjoint",
                st.size,
                o.ids[o.groups[g].center as usize],
                if st.sampled { "sampled" } else { "all" },
                st.pairs_examined,
                st.min_pair,
                st.mean_pair,
                st.pairs_below_threshold,
                st.pairs_disjoint
            );
        }
    }
}
