//! The library without the command line: texts in, signatures, estimates, banding, candidate pairs, exact
//! verification; then the whole dedup job (`dedup::run`) on a small JSONL file. An example of the core crate:
//! it builds on `lshbench-core` alone.
//!
//! ```sh
//! cargo run --release --example near_duplicates
//! cargo run --release -p lshbench-core --no-default-features --example near_duplicates
//! ```

use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::dedup::{self, DedupOptions};
use lshbench_core::exec::Silent;
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::lsh::index::{BandHasher, batch_candidates};
use lshbench_core::lsh::scurve::Banding;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let texts = [
        "The quick brown fox jumps over the lazy dog near the river bank.",
        "The quick brown fox jumped over the lazy dog near the river bank!",
        "A completely different sentence about MinHash and locality-sensitive hashing.",
        "The quick brown fox jumps over the lazy dog near the river bank.",
        "Locality-sensitive hashing makes near-duplicate detection fast on large corpora.",
    ];

    // Texts to shingle ids (char 5-grams), on the widest instruction set this CPU runs.
    let seed = 42;
    let shingler = Shingler::new(ShingleKind::Char(5), Normalization::default(), seed);

    // A kernel from the registry: one-permutation hashing with optimal densification, k = 128.
    let params = KernelParams {
        num_perm: 128,
        seed,
        isa: None,
    };
    let kernel = kernel::build("oph-opt", &params)?;
    let k = kernel.num_perm();
    println!("kernel {} on {}, k = {k}", kernel.name(), kernel.isa());

    // Signatures, one row of k slots per text.
    let mut signatures = vec![0u32; texts.len() * k];
    let mut empty = vec![false; texts.len()];
    let mut scratch = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let row = &mut signatures[i * k..(i + 1) * k];
        empty[i] = kernel.sign_text(&shingler, text, &mut scratch, row);
    }
    let sig = |i: usize| &signatures[i * k..(i + 1) * k];

    // Banding: 42 bands of 3 rows; P(candidate) at similarity s is 1 - (1 - s^3)^42.
    let banding = Banding::new(42, 3, k)?;
    println!(
        "banding {} x {}: P(0.5) = {:.4}, P(0.2) = {:.4}",
        banding.bands,
        banding.rows,
        banding.probability(0.5),
        banding.probability(0.2)
    );
    let hasher = BandHasher::new(banding, seed);
    let candidates = batch_candidates(&signatures, k, &empty, &hasher, 5000);

    // Each candidate: the signature estimate against the exact Jaccard of the shingle sets.
    println!("candidate pairs (estimate, exact Jaccard):");
    for &(a, b) in &candidates.pairs {
        let (a, b) = (a as usize, b as usize);
        let estimate = kernel.estimate(sig(a), sig(b));
        let exact = lshbench_core::sets::jaccard(&shingler.set(texts[a]), &shingler.set(texts[b]));
        println!("  {a} ~ {b}: {estimate:.3}, {exact:.3}");
        assert!(
            (estimate - exact).abs() < 0.25,
            "an estimate far from the truth"
        );
    }
    let found: Vec<(u32, u32)> = candidates.pairs.clone();
    assert!(
        found.contains(&(0, 3)) && found.contains(&(0, 1)),
        "the planted near-duplicates were missed: {found:?}"
    );

    // The whole job on a file: read, sign, band, verify by exact Jaccard at 0.5, group (union-find).
    let dir = std::env::temp_dir().join(format!("lshbench-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("docs.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"id\": \"doc-{i}\", \"text\": \"{t}\"}}"))
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n")?;
    let mut reader = CorpusReader::open(&path, &ReaderOptions::default())?;
    let options = DedupOptions {
        bands: Some(42),
        rows: Some(3),
        threshold: Some(0.5),
        seed,
        ..DedupOptions::default()
    };
    let report = dedup::run(&mut reader, &shingler, kernel.as_ref(), &options, &Silent)?;
    std::fs::remove_dir_all(&dir)?;
    let outcome = &report.outcome;
    println!("dedup: {} verified pairs, groups:", outcome.verified.len());
    for group in &outcome.groups {
        let members: Vec<&str> = group
            .members
            .iter()
            .map(|&m| outcome.ids[m as usize].as_str())
            .collect();
        println!(
            "  {members:?}, centre {}",
            outcome.ids[group.center as usize]
        );
    }
    assert_eq!(
        outcome.groups.len(),
        1,
        "one group: the three fox sentences"
    );
    assert_eq!(outcome.groups[0].members.len(), 3);
    Ok(())
}
