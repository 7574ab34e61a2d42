//! Exact all-pairs Jaccard similarity join, the ground truth the LSH is measured against. Prefix filtering
//! (Chaudhuri et al. 2006; Bayardo et al.'s All-Pairs, 2007): tokens are ordered by global frequency, rarest
//! first; if J(x, y) >= t then the first |x| - ceil(t|x|) + 1 tokens of x and the first |y| - ceil(t|y|) + 1 of y
//! share a token. A length filter (J <= |x|/|y|) prunes the rest. Probing runs in parallel over documents; each
//! pair is found once, from its longer member, and the output is sorted.
//! Also the library side of `lshbench exact`: read and shingle a corpus, join it, write the pairs.

use crate::corpus::{CorpusReader, ReadError, ReadStats};
use crate::exec::Progress;
use crate::lsh::scurve::{BandingError, check_threshold};
use crate::sets::{
    intersection_at_least, jaccard, jaccard_from_counts, required_overlap, shingle_set,
};
use crate::shingle::Shingler;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::path::Path;

/// A pair found by the join: positions `a < b` in the input, and J.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimilarPair {
    /// The earlier position.
    pub a: u32,
    /// The later position.
    pub b: u32,
    /// Their exact Jaccard similarity, at least the join's threshold.
    pub jaccard: f64,
}

/// Smallest overlap a set of size `len` needs with any partner for J >= t: ceil(t * len), computed so that
/// rounding can only make it smaller (a longer prefix is still correct; a shorter one could miss pairs).
fn min_overlap(t: f64, len: usize) -> usize {
    ((t * len as f64) - 1e-9).ceil().max(0.0) as usize
}

fn prefix_len(t: f64, len: usize) -> usize {
    (len - min_overlap(t, len).min(len) + 1).min(len)
}

/// Every pair of `sets` (sorted, deduplicated) with J >= `threshold`, sorted by (a, b). Empty sets never pair.
pub fn all_pairs(sets: &[Vec<u64>], threshold: f64) -> Vec<SimilarPair> {
    assert!(
        threshold > 0.0 && threshold <= 1.0,
        "threshold must lie in (0, 1]"
    );
    let n = sets.len();
    assert!(n <= u32::MAX as usize);
    // 1. Global token order: rarest first, ties by token value (deterministic).
    let mut all: Vec<u64> = sets.iter().flatten().copied().collect();
    all.par_sort_unstable();
    let mut counted: Vec<(u32, u64)> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j] == all[i] {
            j += 1;
        }
        counted.push(((j - i) as u32, all[i]));
        i = j;
    }
    drop(all);
    counted.par_sort_unstable();
    let rank: FxHashMap<u64, u32> = counted
        .iter()
        .enumerate()
        .map(|(r, &(_, tok))| (tok, r as u32))
        .collect();
    drop(counted);
    let docs: Vec<Vec<u32>> = sets
        .par_iter()
        .map(|s| {
            let mut v: Vec<u32> = s.iter().map(|t| rank[t]).collect();
            v.sort_unstable();
            v
        })
        .collect();
    drop(rank);

    // 2. Process in (length, position) order. Each pair is found from its longer member x (later position),
    // probing the shorter ones y. Index y's prefix for the tightest bound that holds when |y| <= |x|:
    // overlap >= t/(1+t) (|x| + |y|) >= 2t/(1+t) |y|.
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&i| !docs[i as usize].is_empty())
        .collect();
    order.sort_by_key(|&i| (docs[i as usize].len(), i));
    let lens: Vec<usize> = order.iter().map(|&i| docs[i as usize].len()).collect();
    let t = threshold;
    let index_t = 2.0 * t / (1.0 + t);
    // Inverted lists of (position, offset of the token in y), in position (hence length) order.
    let mut lists: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
    for (pos, &d) in order.iter().enumerate() {
        let y = &docs[d as usize];
        for (j, &tok) in y[..prefix_len(index_t, y.len())].iter().enumerate() {
            lists.entry(tok).or_default().push((pos as u32, j as u32));
        }
    }

    // 3. Probe in parallel with x's prefix |x| - ceil(t|x|) + 1, the length filter |y| >= t|x|, and the
    // positional filter of PPJoin (Xiao et al. 2008): after matching x[i] = y[j], at most
    // min(|x| - i - 1, |y| - j - 1) more tokens can match, so a y that cannot reach the required overlap
    // ceil(t/(1+t) (|x| + |y|)) is dropped.
    const PRUNED: i32 = i32::MIN;
    let mut pairs: Vec<SimilarPair> = (0..order.len())
        .into_par_iter()
        .map_init(
            || (vec![0i32; order.len()], Vec::<u32>::new()),
            |(overlap, cands), p| {
                let x = &docs[order[p] as usize];
                let min_len = min_overlap(t, x.len());
                cands.clear();
                for (i, tok) in x[..prefix_len(t, x.len())].iter().enumerate() {
                    let Some(list) = lists.get(tok) else { continue };
                    let end = list.partition_point(|&(q, _)| (q as usize) < p);
                    let start = list[..end].partition_point(|&(q, _)| lens[q as usize] < min_len);
                    for &(q, j) in &list[start..end] {
                        let seen = overlap[q as usize];
                        if seen == PRUNED {
                            continue;
                        }
                        let ly = lens[q as usize];
                        let need = required_overlap(t, x.len(), ly);
                        let bound = seen as usize + 1 + (x.len() - i - 1).min(ly - j as usize - 1);
                        if bound >= need {
                            if seen == 0 {
                                cands.push(q);
                            }
                            overlap[q as usize] = seen + 1;
                        } else {
                            if seen == 0 {
                                cands.push(q);
                            }
                            overlap[q as usize] = PRUNED;
                        }
                    }
                }
                let mut found = Vec::new();
                for &q in cands.iter() {
                    let keep = overlap[q as usize] != PRUNED;
                    overlap[q as usize] = 0;
                    if !keep {
                        continue;
                    }
                    let y = &docs[order[q as usize] as usize];
                    let Some(inter) =
                        intersection_at_least(x, y, required_overlap(t, x.len(), y.len()))
                    else {
                        continue;
                    };
                    let j = jaccard_from_counts(inter, x.len(), y.len());
                    if j >= t {
                        let (a, b) = (order[p], order[q as usize]);
                        let (a, b) = if a < b { (a, b) } else { (b, a) };
                        found.push(SimilarPair { a, b, jaccard: j });
                    }
                }
                found
            },
        )
        .flatten()
        .collect();
    pairs.par_sort_unstable_by_key(|p| (p.a, p.b));
    pairs
}

/// Brute force over all pairs, for tests.
pub fn all_pairs_brute_force(sets: &[Vec<u64>], threshold: f64) -> Vec<SimilarPair> {
    let mut out = Vec::new();
    for a in 0..sets.len() {
        for b in a + 1..sets.len() {
            let j = jaccard(&sets[a], &sets[b]);
            if !sets[a].is_empty() && !sets[b].is_empty() && j >= threshold {
                out.push(SimilarPair {
                    a: a as u32,
                    b: b as u32,
                    jaccard: j,
                });
            }
        }
    }
    out
}

/// Why [`join_corpus`] or [`write_pairs_csv`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ExactError {
    /// The corpus could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The threshold is outside (0, 1].
    #[error(transparent)]
    Threshold(#[from] BandingError),
    /// The output file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
}

/// Writes pairs as CSV `id_a,id_b,jaccard` (J with 6 decimals), `ids` giving each position's id.
pub fn write_pairs_csv(
    path: &Path,
    ids: &[String],
    pairs: &[SimilarPair],
) -> Result<(), ExactError> {
    crate::output::write_atomic(path, |out| {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(["id_a", "id_b", "jaccard"])?;
        for p in pairs {
            w.write_record([
                ids[p.a as usize].as_str(),
                ids[p.b as usize].as_str(),
                &format!("{:.6}", p.jaccard),
            ])?;
        }
        w.flush()
    })?;
    Ok(())
}

/// A corpus read and shingled: ids and shingle sets in input order, and the reader's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CorpusSets {
    /// Each document's id.
    pub ids: Vec<String>,
    /// Each document's shingle set (sorted, deduplicated).
    pub sets: Vec<Vec<u64>>,
    /// What the reader counted (records, rejections, replaced UTF-8).
    pub stats: ReadStats,
}

/// Reads the rest of `corpus` and shingles every document, in parallel batches on the current rayon pool;
/// `progress` counts the documents read.
pub fn read_sets(
    corpus: &mut CorpusReader,
    shingler: &Shingler,
    progress: &dyn Progress,
) -> Result<CorpusSets, ReadError> {
    let (mut ids, mut sets) = (Vec::new(), Vec::new());
    loop {
        let mut batch = Vec::with_capacity(crate::pipeline::BATCH_DOCS);
        for doc in corpus.by_ref().take(crate::pipeline::BATCH_DOCS) {
            batch.push(doc?);
        }
        if batch.is_empty() {
            break;
        }
        let batch_sets: Vec<Vec<u64>> = batch
            .par_iter()
            .map(|d| shingle_set(shingler, &d.text))
            .collect();
        progress.inc(batch.len() as u64);
        ids.extend(batch.into_iter().map(|d| d.id));
        sets.extend(batch_sets);
    }
    Ok(CorpusSets {
        ids,
        sets,
        stats: corpus.stats().clone(),
    })
}

/// What [`join_corpus`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactJoin {
    /// Each document's id, in input order.
    pub ids: Vec<String>,
    /// Every pair with J >= the threshold, sorted by (a, b) (positions into `ids`).
    pub pairs: Vec<SimilarPair>,
    /// What the reader counted.
    pub stats: ReadStats,
    /// Documents with an empty shingle set (never paired).
    pub empty: usize,
    /// Seconds spent reading and shingling.
    pub read_seconds: f64,
    /// Seconds spent in the join.
    pub join_seconds: f64,
}

/// The exact join of a corpus: reads and shingles the rest of `corpus` ([`read_sets`]), then finds every
/// pair with J >= `threshold` ([`all_pairs`]), on the current rayon pool. Fails on a threshold outside (0, 1]
/// (before reading) or a read error.
pub fn join_corpus(
    corpus: &mut CorpusReader,
    shingler: &Shingler,
    threshold: f64,
    progress: &dyn Progress,
) -> Result<ExactJoin, ExactError> {
    let t = check_threshold(threshold)?;
    let t0 = std::time::Instant::now();
    let CorpusSets { ids, sets, stats } = read_sets(corpus, shingler, progress)?;
    let read_seconds = t0.elapsed().as_secs_f64();
    progress.stage("joining");
    let pairs = all_pairs(&sets, t);
    let join_seconds = t0.elapsed().as_secs_f64() - read_seconds;
    let empty = sets.iter().filter(|s| s.is_empty()).count();
    Ok(ExactJoin {
        ids,
        pairs,
        stats,
        empty,
        read_seconds,
        join_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sets::tests::random_sets;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    /// Clusters of edited copies of a base set, so many pairs lie near every threshold.
    fn planted_sets(clusters: usize, per: usize, seed: u64) -> Vec<Vec<u64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut out = Vec::new();
        for _ in 0..clusters {
            let len = 5 + (rng.next_u64() % 60) as usize;
            let base: Vec<u64> = (0..len).map(|_| rng.next_u64() % 5000).collect();
            for _ in 0..per {
                let mut s: Vec<u64> = base
                    .iter()
                    .copied()
                    .filter(|_| rng.next_u64() % 100 >= 15)
                    .collect();
                let extra = (rng.next_u64() % 8) as usize;
                s.extend((0..extra).map(|_| rng.next_u64() % 5000));
                s.sort_unstable();
                s.dedup();
                out.push(s);
            }
        }
        out
    }

    #[test]
    fn join_equals_brute_force() {
        for (seed, sets) in [
            (1, random_sets(400, 60, 30, 1)),
            (2, random_sets(300, 300, 80, 2)),
            (3, planted_sets(40, 8, 3)),
            (4, planted_sets(15, 20, 4)),
        ] {
            for t in [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0] {
                let got = all_pairs(&sets, t);
                let want = all_pairs_brute_force(&sets, t);
                assert_eq!(got, want, "case {seed}, t = {t}");
            }
            assert!(
                !all_pairs_brute_force(&sets, 0.1).is_empty(),
                "case {seed} has pairs"
            );
        }
    }

    #[test]
    fn join_is_the_same_for_any_thread_count() {
        let sets = planted_sets(30, 10, 9);
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| all_pairs(&sets, 0.5))
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn prefix_is_never_too_short_after_rounding() {
        // 0.7 * 10 = 7.000000000000001 in f64: the required overlap is still 7, the prefix 4.
        assert_eq!(min_overlap(0.7, 10), 7);
        assert_eq!(prefix_len(0.7, 10), 4);
        assert_eq!(prefix_len(1.0, 5), 1);
        assert_eq!(prefix_len(0.01, 5), 5);
    }

    #[test]
    fn join_corpus_reads_shingles_joins_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("c.txt");
        std::fs::write(
            &input,
            "the quick brown fox jumps\nthe quick brown fox jumps over\n\nsomething else entirely\n",
        )
        .unwrap();
        let shingler = Shingler::new(crate::shingle::ShingleKind::Word(2), Default::default(), 42);
        let open = || CorpusReader::open(&input, &Default::default()).unwrap();
        let err = join_corpus(&mut open(), &shingler, 0.0, &crate::exec::Silent).unwrap_err();
        assert_eq!(err.to_string(), "threshold 0 is outside (0, 1]");
        let join = join_corpus(&mut open(), &shingler, 0.5, &crate::exec::Silent).unwrap();
        assert_eq!(join.ids, ["0", "1", "2", "3"]);
        assert_eq!(join.empty, 1);
        assert_eq!(join.stats.documents, 4);
        assert_eq!(join.pairs.len(), 1);
        assert_eq!((join.pairs[0].a, join.pairs[0].b), (0, 1));
        let out = dir.path().join("pairs.csv");
        write_pairs_csv(&out, &join.ids, &join.pairs).unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "id_a,id_b,jaccard\n0,1,0.800000\n"
        );
        let bad = dir.path().join("no/such/dir.csv");
        let err = write_pairs_csv(&bad, &join.ids, &join.pairs).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot create {}: ", bad.display())),
            "{err}"
        );
        // The cause is said once, without the temporary file's name.
        assert_eq!(err.to_string().matches("os error").count(), 1, "{err}");
        assert!(!err.to_string().contains("at path"), "{err}");
        assert!(std::error::Error::source(&err).is_none());
    }
}
