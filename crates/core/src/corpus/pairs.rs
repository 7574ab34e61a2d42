//! Synthetic set pairs with a known Jaccard similarity, following Ertl's protocol: fix |A\B|, |B\A| and
//! |A n B|, and draw fresh elements for every trial. Random elements test the algorithm; runs of consecutive
//! integers test the hash family (weak families show bias on structured input).

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// The shape of a pair: sizes of the three disjoint parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairShape {
    /// |A\B|: elements only in A.
    pub only_a: usize,
    /// |B\A|: elements only in B.
    pub only_b: usize,
    /// |A n B|: elements in both.
    pub both: usize,
}

impl PairShape {
    /// The exact Jaccard similarity |A n B| / |A u B| (0 for two empty sets).
    pub fn jaccard(&self) -> f64 {
        let union = self.union();
        if union == 0 {
            0.0
        } else {
            self.both as f64 / union as f64
        }
    }

    /// The union size |A u B|.
    pub fn union(&self) -> usize {
        self.only_a + self.only_b + self.both
    }

    /// The shape with union size `union` whose Jaccard is closest to `j`, split symmetrically.
    pub fn for_jaccard(union: usize, j: f64) -> PairShape {
        let both = ((j * union as f64).round() as usize).min(union);
        let rest = union - both;
        PairShape {
            only_a: rest - rest / 2,
            only_b: rest / 2,
            both,
        }
    }
}

/// How the elements of a pair are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// Fresh uniform 64-bit elements every trial (distinct with overwhelming probability; checked).
    Random,
    /// One run of consecutive integers, the same in every trial of a source (its start drawn once from the
    /// seed): A n B first, then A\B, then B\A. A fixed structured set, so across trials only the kernel's seed
    /// varies: it tests the hash family (Ertl's protocol).
    Consecutive,
}

/// Draws the pairs of one experiment cell, reproducibly from a seed.
pub struct PairSource {
    rng: Xoshiro256PlusPlus,
    /// The shape of every pair drawn.
    pub shape: PairShape,
    /// How the elements are drawn.
    pub kind: ElementKind,
    /// The start of the consecutive run (drawn once).
    start: u64,
}

impl PairSource {
    /// A source of `shape` pairs of `kind` elements, reproducible from `seed`.
    pub fn new(shape: PairShape, kind: ElementKind, seed: u64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let start = rng.next_u64() >> 1;
        PairSource {
            rng,
            shape,
            kind,
            start,
        }
    }

    /// Fills `a` and `b` with a fresh pair (both cleared first). Element order within each set is shuffled so
    /// kernels cannot depend on it.
    pub fn next_pair(&mut self, a: &mut Vec<u64>, b: &mut Vec<u64>) {
        a.clear();
        b.clear();
        let PairShape {
            only_a,
            only_b,
            both,
        } = self.shape;
        let total = only_a + only_b + both;
        let mut elements: Vec<u64> = match self.kind {
            ElementKind::Random => loop {
                let v: Vec<u64> = (0..total).map(|_| self.rng.next_u64()).collect();
                let mut sorted = v.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted.len() == total {
                    break v;
                }
            },
            ElementKind::Consecutive => (0..total as u64).map(|i| self.start + i).collect(),
        };
        let (shared, rest) = elements.split_at_mut(both);
        let (a_only, b_only) = rest.split_at_mut(only_a);
        a.extend_from_slice(shared);
        a.extend_from_slice(a_only);
        b.extend_from_slice(shared);
        b.extend_from_slice(b_only);
        shuffle(&mut self.rng, a);
        shuffle(&mut self.rng, b);
    }
}

/// Fisher-Yates with an unbiased bounded draw (Lemire's multiply method with rejection).
fn shuffle(rng: &mut Xoshiro256PlusPlus, v: &mut [u64]) {
    for i in (1..v.len()).rev() {
        let j = bounded(rng, i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// A uniform draw from `0..n`.
pub fn bounded(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    debug_assert!(n > 0);
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = (rng.next_u64() as u128) * (n as u128);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(a: &[u64], b: &[u64]) -> f64 {
        let sa: std::collections::HashSet<_> = a.iter().collect();
        let sb: std::collections::HashSet<_> = b.iter().collect();
        sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64
    }

    #[test]
    fn pairs_have_the_planned_jaccard_for_both_element_kinds() {
        for kind in [ElementKind::Random, ElementKind::Consecutive] {
            let shape = PairShape {
                only_a: 30,
                only_b: 10,
                both: 160,
            };
            assert!((shape.jaccard() - 0.8).abs() < 1e-12);
            let mut src = PairSource::new(shape, kind, 7);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..20 {
                src.next_pair(&mut a, &mut b);
                assert_eq!(a.len(), 190);
                assert_eq!(b.len(), 170);
                assert_eq!(exact(&a, &b), shape.jaccard());
            }
        }
    }

    #[test]
    fn same_seed_same_pairs_other_seed_other_pairs() {
        let shape = PairShape::for_jaccard(64, 0.5);
        let draw = |seed| {
            let mut src = PairSource::new(shape, ElementKind::Random, seed);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            src.next_pair(&mut a, &mut b);
            (a, b)
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn for_jaccard_rounds_to_the_nearest_achievable_value() {
        let s = PairShape::for_jaccard(8, 0.5);
        assert_eq!((s.both, s.union()), (4, 8));
        let s = PairShape::for_jaccard(10_000, 0.95);
        assert_eq!(s.both, 9_500);
    }
}
