//! Property tests (proptest) of the invariants the rest of the suite checks on chosen inputs: estimates lie in
//! [0, 1] and are 1 on equal sets; every kernel ignores the order and repeats of its ids; banding finds exactly
//! the pairs that share a band key (brute force); union-find gives the components BFS gives; a state file saved
//! then loaded is the same state. `tests/props_io.rs` has the writer/reader round trips.
//!
//! Case counts are sized so this file runs in a few seconds in the test profile; `PROPTEST_CASES=N` raises
//! them all for a longer search.

mod common;

use lshbench_core::dedup::state::{State, StateParams};
use lshbench_core::kernel::{self, KERNELS};
use lshbench_core::lsh::cluster::UnionFind;
use lshbench_core::lsh::index::{BandHasher, batch_candidates};
use lshbench_core::lsh::scurve::Banding;
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::VecDeque;

fn cases(n: u32) -> ProptestConfig {
    // PROPTEST_CASES, when set, overrides every count (proptest reads it into the default config).
    let default = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_some() {
        default
    } else {
        ProptestConfig {
            cases: n,
            ..default
        }
    }
}

fn sign(spec: &kernel::KernelSpec, k: usize, seed: u64, ids: &[u64]) -> Vec<u32> {
    common::sign(&*common::build(spec, k, seed, None), ids)
}

/// Ids of a set: arbitrary u64s, or small ones (so two sets overlap often).
fn id_set() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![vec(any::<u64>(), 0..300), vec(0u64..200, 0..300)]
}

proptest! {
    #![proptest_config(cases(48))]

    /// Every kernel: an estimate lies in [0, 1], is symmetric, and is exactly 1 for a set against itself
    /// (also when the second copy is reordered and repeated).
    #[test]
    fn estimates_lie_in_0_1_and_equal_sets_give_1(
        a in id_set(), b in id_set(), k in 1usize..200, seed in any::<u64>()
    ) {
        for spec in KERNELS {
            let kern = common::build(spec, k, seed, None);
            let (sa, sb) = (common::sign(&*kern, &a), common::sign(&*kern, &b));
            let e = kern.estimate(&sa, &sb);
            prop_assert!((0.0..=1.0).contains(&e), "{}: {e}", spec.name);
            prop_assert_eq!(e, kern.estimate(&sb, &sa), "{}: symmetric", spec.name);
            let mut again = a.clone();
            again.reverse();
            again.extend_from_slice(&a);
            prop_assert_eq!(kern.estimate(&sa, &common::sign(&*kern, &again)), 1.0, "{}", spec.name);
        }
    }

    /// Every kernel: the signature depends on the set only, not on the order or the repeats of its ids.
    #[test]
    fn every_kernel_ignores_order_and_repeats(
        (ids, shuffled) in id_set().prop_flat_map(|ids| (Just(ids.clone()), Just(ids).prop_shuffle())),
        reps in vec(any::<proptest::sample::Index>(), 0..50), k in 1usize..300, seed in any::<u64>()
    ) {
        let mut other = shuffled;
        if !ids.is_empty() {
            other.extend(reps.iter().map(|r| ids[r.index(ids.len())]));
        }
        for spec in KERNELS {
            prop_assert_eq!(sign(spec, k, seed, &ids), sign(spec, k, seed, &other), "{}", spec.name);
        }
    }
}

proptest! {
    #![proptest_config(cases(64))]

    /// Banding returns exactly the pairs of non-empty documents that share at least one band key.
    #[test]
    fn banding_candidates_equal_brute_force(
        (k, bands, rows) in (1usize..5, 1usize..5).prop_flat_map(|(b, r)| (b * r..b * r + 3, Just(b), Just(r))),
        n in 0usize..40, slots in vec(0u32..3, 40 * 20), empty in vec(any::<bool>(), 40),
        seed in any::<u64>()
    ) {
        // Slots from {0, 1, 2}: many documents share bands.
        let signatures = slots[..n * k].to_vec();
        let empty = &empty[..n];
        let hasher = BandHasher::new(Banding::new(bands, rows, k).unwrap(), seed);
        // A bucket cap above n: no bucket is enumerated as a star, so every pair is reported.
        let got = batch_candidates(&signatures, k, empty, &hasher, n + 2);
        let mut want = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                if empty[a] || empty[b] {
                    continue;
                }
                let (sa, sb) = (&signatures[a * k..(a + 1) * k], &signatures[b * k..(b + 1) * k]);
                if (0..bands).any(|i| hasher.key(i, sa) == hasher.key(i, sb)) {
                    want.push((a as u32, b as u32));
                }
            }
        }
        prop_assert_eq!(got.pairs, want);
    }

    /// Union-find's sets are the connected components breadth-first search finds, for any edge list.
    #[test]
    fn union_find_equals_bfs_components(
        n in 1usize..60, edges in vec((any::<proptest::sample::Index>(), any::<proptest::sample::Index>()), 0..120),
        min_size in 1usize..4
    ) {
        let edges: Vec<(usize, usize)> = edges.iter().map(|(a, b)| (a.index(n), b.index(n))).collect();
        let mut uf = UnionFind::new(n);
        for &(a, b) in &edges {
            uf.union(a as u32, b as u32);
        }
        let got = uf.groups(min_size);
        let mut adjacent = vec![Vec::new(); n];
        for &(a, b) in &edges {
            adjacent[a].push(b);
            adjacent[b].push(a);
        }
        let mut seen = vec![false; n];
        let mut want = Vec::new();
        for start in 0..n {
            if seen[start] {
                continue;
            }
            seen[start] = true;
            let (mut queue, mut component) = (VecDeque::from([start]), Vec::new());
            while let Some(x) = queue.pop_front() {
                component.push(x as u32);
                for &y in &adjacent[x] {
                    if !seen[y] {
                        seen[y] = true;
                        queue.push_back(y);
                    }
                }
            }
            component.sort_unstable();
            if component.len() >= min_size {
                want.push(component);
            }
        }
        // Both are ordered by smallest member: BFS starts in increasing order.
        prop_assert_eq!(got, want);
    }
}

fn state_params() -> impl Strategy<Value = StateParams> {
    (
        "[a-z-]{1,12}",
        1usize..40,
        any::<u64>(),
        "\\PC{0,10}",
        any::<(bool, bool, bool)>(),
    )
        .prop_map(|(kernel, num_perm, seed, shingle, (l, c, s))| StateParams {
            kernel,
            num_perm,
            seed,
            shingle,
            lowercase: l,
            collapse_whitespace: c,
            strip_punctuation: s,
        })
}

proptest! {
    #![proptest_config(cases(64))]

    /// A state saved then loaded is the same state (ids of any Unicode, any slots, any parameters).
    #[test]
    fn state_save_then_load_is_the_identity(
        params in state_params(), ids in vec("\\PC{0,12}", 0..30), slots in vec(any::<u32>(), 30 * 40),
        empty in vec(any::<bool>(), 30)
    ) {
        let n = ids.len();
        let k = params.num_perm;
        let state = State {
            params,
            empty: empty[..n].to_vec(),
            signatures: slots[..n * k].to_vec(),
            ids,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.state");
        state.save(&path).unwrap();
        prop_assert_eq!(State::load(&path).unwrap(), state);
    }
}
