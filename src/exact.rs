//! Exact all-pairs Jaccard similarity join, the ground truth the LSH is measured against. Prefix filtering
//! (Chaudhuri et al. 2006; Bayardo et al.'s All-Pairs, 2007): tokens are ordered by global frequency, rarest
//! first; if J(x, y) >= t then the first |x| - ceil(t|x|) + 1 tokens of x and the first |y| - ceil(t|y|) + 1 of y
//! share a token. A length filter (J <= |x|/|y|) prunes the rest. Probing runs in parallel over documents; each
//! pair is found once, from its shorter member, and the output is sorted.
//! Also `lshbench exact`.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// Intersection size of two sorted, deduplicated slices.
pub fn intersection_size<T: Ord>(a: &[T], b: &[T]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// J from the intersection and the two set sizes. Every exact Jaccard in the crate goes through this one
/// expression, so `dedup` and `exact` agree bit for bit. Two empty sets give 0 (empty never matches).
#[inline]
pub fn jaccard_from_counts(intersection: usize, len_a: usize, len_b: usize) -> f64 {
    let union = len_a + len_b - intersection;
    if union == 0 {
        0.0
    } else {
        intersection as f64 / union as f64
    }
}

/// Exact Jaccard of two sorted, deduplicated sets (0 when both are empty).
pub fn jaccard<T: Ord>(a: &[T], b: &[T]) -> f64 {
    jaccard_from_counts(intersection_size(a, b), a.len(), b.len())
}

/// A pair found by the join: positions `a < b` in the input, and J.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimilarPair {
    pub a: u32,
    pub b: u32,
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

    // 2. Process in (length, position) order; index every prefix.
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&i| !docs[i as usize].is_empty())
        .collect();
    order.sort_by_key(|&i| (docs[i as usize].len(), i));
    let lens: Vec<usize> = order.iter().map(|&i| docs[i as usize].len()).collect();
    let mut lists: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (pos, &d) in order.iter().enumerate() {
        let x = &docs[d as usize];
        for &tok in &x[..prefix_len(threshold, x.len())] {
            lists.entry(tok).or_default().push(pos as u32);
        }
    }

    // 3. Probe: for x at position p, candidates are later positions (longer or equal, later index) sharing a
    // prefix token and passing the length filter |y| <= |x| / t.
    let mut pairs: Vec<SimilarPair> = (0..order.len())
        .into_par_iter()
        .map_init(
            || (vec![u32::MAX; order.len()], Vec::<u32>::new()),
            |(stamp, cands), p| {
                let x = &docs[order[p] as usize];
                let max_len = x.len() as f64 / threshold + 1e-9;
                cands.clear();
                for tok in &x[..prefix_len(threshold, x.len())] {
                    let list = &lists[tok];
                    let start = list.partition_point(|&q| q as usize <= p);
                    for &q in &list[start..] {
                        if lens[q as usize] as f64 > max_len {
                            break;
                        }
                        if stamp[q as usize] != p as u32 {
                            stamp[q as usize] = p as u32;
                            cands.push(q);
                        }
                    }
                }
                let mut found = Vec::new();
                for &q in cands.iter() {
                    let y = &docs[order[q as usize] as usize];
                    let j = jaccard(x, y);
                    if j >= threshold {
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

/// Writes pairs as CSV `id_a,id_b,jaccard`.
pub fn write_pairs_csv(
    path: &std::path::Path,
    ids: &[String],
    pairs: &[SimilarPair],
) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    w.write_record(["id_a", "id_b", "jaccard"])?;
    for p in pairs {
        w.write_record([
            ids[p.a as usize].as_str(),
            ids[p.b as usize].as_str(),
            &format!("{:.6}", p.jaccard),
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    fn random_sets(n: usize, universe: u64, max_len: usize, seed: u64) -> Vec<Vec<u64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let len = (rng.next_u64() % max_len as u64) as usize;
                let mut s: Vec<u64> = (0..len).map(|_| rng.next_u64() % universe).collect();
                s.sort_unstable();
                s.dedup();
                s
            })
            .collect()
    }

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
    fn jaccard_basics() {
        assert_eq!(jaccard::<u64>(&[], &[]), 0.0);
        assert_eq!(jaccard(&[1u64, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard(&[1u64], &[]), 0.0);
    }
}
