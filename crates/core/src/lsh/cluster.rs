//! From verified pairs to groups: union-find (path compression, union by size), the connected components it
//! gives, a non-chaining alternative (`center`: every member similar to its group's centre), and a per-group
//! report that makes chaining visible (seed 001: a 1,749-ad component whose ends shared nothing).

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::SeedableRng;

/// Disjoint sets over `0..n`.
#[derive(Clone, Debug)]
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singleton sets {0}, ..., {n - 1}. Panics if `n` exceeds `u32::MAX`.
    pub fn new(n: usize) -> UnionFind {
        assert!(n <= u32::MAX as usize);
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    /// The number of elements n (not of sets).
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// The root of x's set; every node on the path is repointed at the root (full path compression).
    pub fn find(&mut self, x: u32) -> u32 {
        let mut root = x;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        let mut x = x;
        while self.parent[x as usize] != root {
            let next = self.parent[x as usize];
            self.parent[x as usize] = root;
            x = next;
        }
        root
    }

    /// Joins the sets of a and b, hanging the smaller under the larger. Returns whether they were apart.
    pub fn union(&mut self, a: u32, b: u32) -> bool {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
        true
    }

    /// The sets with at least `min_size` members, each sorted, ordered by their smallest member.
    pub fn groups(&mut self, min_size: usize) -> Vec<Vec<u32>> {
        let n = self.parent.len();
        let mut slot = vec![u32::MAX; n];
        let mut out: Vec<Vec<u32>> = Vec::new();
        for x in 0..n as u32 {
            let root = self.find(x);
            if (self.size[root as usize] as usize) < min_size {
                continue;
            }
            if slot[root as usize] == u32::MAX {
                slot[root as usize] = out.len() as u32;
                out.push(Vec::new());
            }
            out[slot[root as usize] as usize].push(x);
        }
        out
    }
}

/// How groups are formed from verified pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum GroupMode {
    /// Connected components (union-find): chains may link documents that share nothing.
    #[default]
    Components,
    /// Star groups: a document joins a group only if its verified pair with the group's centre exists.
    Center,
}

/// A verified edge between document positions, with its similarity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    /// One document's position.
    pub a: u32,
    /// The other document's position.
    pub b: u32,
    /// The pair's similarity, in [0, 1].
    pub similarity: f64,
}

/// One group: members (sorted) and its centre. Without a survivor ranking the centre is the member with most
/// edges, then the highest summed similarity, then the smallest position; with one ([`group_ranked`]), the
/// member the ranking prefers.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Document positions, ascending.
    pub members: Vec<u32>,
    /// The centre, one of `members`.
    pub center: u32,
}

fn centres(n: usize, edges: &[Edge]) -> (Vec<u32>, Vec<f64>) {
    let mut degree = vec![0u32; n];
    let mut weight = vec![0.0f64; n];
    for e in edges {
        degree[e.a as usize] += 1;
        degree[e.b as usize] += 1;
        weight[e.a as usize] += e.similarity;
        weight[e.b as usize] += e.similarity;
    }
    (degree, weight)
}

/// Which of two documents makes the better centre: the one a survivor ranking puts first (`rank[x] <
/// rank[y]`), or without a ranking the one with more edges, then the higher summed similarity, then the smaller
/// position.
struct Preference<'a> {
    degree: Vec<u32>,
    weight: Vec<f64>,
    rank: Option<&'a [u32]>,
}

impl Preference<'_> {
    fn better(&self, x: u32, than: u32) -> bool {
        let (x, y) = (x as usize, than as usize);
        if let Some(rank) = self.rank {
            return (rank[x], x) < (rank[y], y);
        }
        let (degree, weight) = (&self.degree, &self.weight);
        (degree[x], weight[x]) > (degree[y], weight[y])
            || ((degree[x], weight[x]) == (degree[y], weight[y]) && x < y)
    }
}

/// Groups of two or more documents among `n`, ordered by smallest member. Deterministic.
pub fn group(n: usize, edges: &[Edge], mode: GroupMode) -> Vec<Group> {
    group_ranked(n, edges, mode, None)
}

/// [`group`] with each group's centre chosen by a survivor ranking: `rank[x]` (one per document, lower is
/// preferred, ties by position) instead of the most connected member. Components take their best-ranked member
/// as centre; the star cover takes documents in rank order, so an unassigned document becomes a centre and
/// takes its unassigned neighbours. Either way no centre is removed in favour of a document the ranking puts
/// after it, and in `Center` mode no two centres (nor a centre and a document left out of every group) share a
/// verified edge.
pub fn group_ranked(n: usize, edges: &[Edge], mode: GroupMode, rank: Option<&[u32]>) -> Vec<Group> {
    let (degree, weight) = centres(n, edges);
    if let Some(rank) = rank {
        assert_eq!(rank.len(), n, "one rank per document");
    }
    let pref = Preference {
        degree,
        weight,
        rank,
    };
    let degree = &pref.degree;
    match mode {
        GroupMode::Components => {
            let mut uf = UnionFind::new(n);
            for e in edges {
                uf.union(e.a, e.b);
            }
            uf.groups(2)
                .into_iter()
                .map(|members| {
                    let center = members
                        .iter()
                        .copied()
                        .reduce(|best, x| if pref.better(x, best) { x } else { best })
                        .expect("groups are non-empty");
                    Group { members, center }
                })
                .collect()
        }
        GroupMode::Center => {
            // Greedy star cover: take documents in order of preference (by default (degree, summed similarity)
            // descending); an unassigned one becomes a centre and takes its unassigned neighbours. Every member
            // has a verified edge to its centre.
            let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
            for e in edges {
                adj[e.a as usize].push(e.b);
                adj[e.b as usize].push(e.a);
            }
            let mut order: Vec<u32> = (0..n as u32).filter(|&x| degree[x as usize] > 0).collect();
            order.sort_by(|&x, &y| {
                if pref.better(x, y) {
                    std::cmp::Ordering::Less
                } else if x == y {
                    std::cmp::Ordering::Equal
                } else {
                    std::cmp::Ordering::Greater
                }
            });
            let mut assigned = vec![false; n];
            let mut out = Vec::new();
            for c in order {
                if assigned[c as usize] {
                    continue;
                }
                let mut members: Vec<u32> = adj[c as usize]
                    .iter()
                    .copied()
                    .filter(|&m| !assigned[m as usize])
                    .collect();
                if members.is_empty() {
                    continue;
                }
                members.push(c);
                members.sort_unstable();
                members.dedup();
                for &m in &members {
                    assigned[m as usize] = true;
                }
                out.push(Group { members, center: c });
            }
            out.sort_by_key(|g| g.members[0]);
            out
        }
    }
}

/// Similarity statistics of one group, over its member pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStats {
    /// Number of members.
    pub size: usize,
    /// Verified edges inside the group.
    pub edges: usize,
    /// The smallest similarity among those edges (NaN when there are none).
    pub min_edge: f64,
    /// The mean similarity of those edges (NaN when there are none).
    pub mean_edge: f64,
    /// Member pairs examined for the chaining columns: all of them (`sampled == false`) or a seeded random
    /// sample of `pair_budget`.
    pub pairs_examined: usize,
    /// Whether the group has more than `pair_budget` member pairs, so that a sample (drawn with replacement)
    /// was examined instead of all of them.
    pub sampled: bool,
    /// The smallest exact similarity over the examined member pairs (NaN when none was examined).
    pub min_pair: f64,
    /// The mean exact similarity over the examined member pairs (0 when none was examined).
    pub mean_pair: f64,
    /// Examined member pairs below the threshold: a chained group shows here.
    pub pairs_below_threshold: usize,
    /// Examined member pairs with no shingle in common (similarity 0): the clearest sign of chaining.
    pub pairs_disjoint: usize,
}

/// Computes a group's statistics. `similarity(a, b)` gives the exact similarity of two members; with more
/// than `pair_budget` member pairs, that many are drawn with a seeded RNG (deterministic) instead of all.
pub fn group_stats(
    group: &Group,
    edges_in_group: &[Edge],
    threshold: f64,
    pair_budget: usize,
    seed: u64,
    mut similarity: impl FnMut(u32, u32) -> f64,
) -> GroupStats {
    let pairs = stats_pairs(group, pair_budget, seed);
    let similarities: Vec<f64> = pairs.iter().map(|&(a, b)| similarity(a, b)).collect();
    group_stats_from(group, edges_in_group, threshold, pair_budget, &similarities)
}

/// The member pairs [`group_stats`] examines, in the order it examines them: every pair when there are at
/// most `pair_budget`, else `pair_budget` pairs drawn with replacement by an RNG seeded from `seed` and the
/// group's first member. With [`group_stats_from`], for callers that compute the similarities themselves
/// (in parallel, or from a cache).
pub fn stats_pairs(group: &Group, pair_budget: usize, seed: u64) -> Vec<(u32, u32)> {
    let m = group.members.len();
    let total_pairs = m * m.saturating_sub(1) / 2;
    if total_pairs <= pair_budget {
        let mut pairs = Vec::with_capacity(total_pairs);
        for (x, &a) in group.members.iter().enumerate() {
            for &b in &group.members[x + 1..] {
                pairs.push((a, b));
            }
        }
        return pairs;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ group.members[0] as u64);
    let mut pairs = Vec::with_capacity(pair_budget);
    while pairs.len() < pair_budget {
        let x = crate::corpus::pairs::bounded(&mut rng, m as u64) as usize;
        let y = crate::corpus::pairs::bounded(&mut rng, m as u64) as usize;
        if x != y {
            pairs.push((group.members[x], group.members[y]));
        }
    }
    pairs
}

/// [`group_stats`] from the similarities of [`stats_pairs`]`(group, pair_budget, ..)`, in that order.
pub fn group_stats_from(
    group: &Group,
    edges_in_group: &[Edge],
    threshold: f64,
    pair_budget: usize,
    similarities: &[f64],
) -> GroupStats {
    let m = group.members.len();
    let total_pairs = m * m.saturating_sub(1) / 2;
    let (min_edge, sum_edge) = edges_in_group
        .iter()
        .fold((f64::INFINITY, 0.0), |(mn, s), e| {
            (mn.min(e.similarity), s + e.similarity)
        });
    let mut stats = GroupStats {
        size: m,
        edges: edges_in_group.len(),
        min_edge: if edges_in_group.is_empty() {
            f64::NAN
        } else {
            min_edge
        },
        mean_edge: if edges_in_group.is_empty() {
            f64::NAN
        } else {
            sum_edge / edges_in_group.len() as f64
        },
        pairs_examined: similarities.len(),
        sampled: total_pairs > pair_budget,
        min_pair: f64::INFINITY,
        mean_pair: 0.0,
        pairs_below_threshold: 0,
        pairs_disjoint: 0,
    };
    // Summed in the order the pairs were examined, so the mean is the same to the last bit however the
    // similarities were computed.
    let mut sum = 0.0;
    for &s in similarities {
        stats.min_pair = stats.min_pair.min(s);
        sum += s;
        stats.pairs_below_threshold += (s < threshold) as usize;
        stats.pairs_disjoint += (s == 0.0) as usize;
    }
    stats.mean_pair = sum / stats.pairs_examined.max(1) as f64;
    if stats.pairs_examined == 0 {
        stats.min_pair = f64::NAN;
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::Rng;

    fn bfs_components(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<u32>> {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges {
            adj[a as usize].push(b);
            adj[b as usize].push(a);
        }
        let mut seen = vec![false; n];
        let mut out = Vec::new();
        for s in 0..n {
            if seen[s] {
                continue;
            }
            let mut comp = vec![s as u32];
            seen[s] = true;
            let mut q = std::collections::VecDeque::from([s]);
            while let Some(x) = q.pop_front() {
                for &y in &adj[x] {
                    if !seen[y as usize] {
                        seen[y as usize] = true;
                        comp.push(y);
                        q.push_back(y as usize);
                    }
                }
            }
            comp.sort_unstable();
            out.push(comp);
        }
        out
    }

    #[test]
    fn union_find_matches_bfs_components() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for trial in 0..50 {
            let n = 1 + (rng.next_u64() % 300) as usize;
            let m = (rng.next_u64() % (2 * n as u64)) as usize;
            let edges: Vec<(u32, u32)> = (0..m)
                .map(|_| {
                    (
                        (rng.next_u64() % n as u64) as u32,
                        (rng.next_u64() % n as u64) as u32,
                    )
                })
                .collect();
            let mut uf = UnionFind::new(n);
            for &(a, b) in &edges {
                uf.union(a, b);
            }
            let mut got = uf.groups(1);
            got.sort();
            let mut want = bfs_components(n, &edges);
            want.sort();
            assert_eq!(got, want, "trial {trial}");
        }
    }

    #[test]
    fn union_by_size_keeps_trees_shallow() {
        // A path union in the worst order still gives log-depth trees; after find, depth 1.
        let n = 1 << 12;
        let mut uf = UnionFind::new(n);
        for i in 1..n as u32 {
            uf.union(i - 1, i);
        }
        let root = uf.find(0);
        assert!((0..n as u32).all(|x| uf.find(x) == root));
        assert!((0..n).all(|x| {
            let p = uf.parent[x];
            p == root || uf.parent[p as usize] == root
        }));
    }

    /// Exact Jaccard of two sorted, deduplicated sets (0 when both are empty); `lsh` may not import `exact`.
    fn jaccard(a: &[u64], b: &[u64]) -> f64 {
        let inter = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
        let union = a.len() + b.len() - inter;
        if union == 0 {
            0.0
        } else {
            inter as f64 / union as f64
        }
    }

    /// a-b and b-c similar, a and c share nothing.
    fn chain() -> (Vec<Vec<u64>>, Vec<Edge>) {
        let a: Vec<u64> = (0..10).collect();
        let b: Vec<u64> = (5..15).collect();
        let c: Vec<u64> = (10..20).collect();
        let sets = vec![a, b, c];
        let j = |x: &Vec<u64>, y: &Vec<u64>| jaccard(x, y);
        let edges = vec![
            Edge {
                a: 0,
                b: 1,
                similarity: j(&sets[0], &sets[1]),
            },
            Edge {
                a: 1,
                b: 2,
                similarity: j(&sets[1], &sets[2]),
            },
        ];
        (sets, edges)
    }

    #[test]
    fn a_chained_group_is_visible_in_its_report() {
        let (sets, edges) = chain();
        let groups = group(3, &edges, GroupMode::Components);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].members, vec![0, 1, 2]);
        assert_eq!(groups[0].center, 1);
        let stats = group_stats(&groups[0], &edges, 1.0 / 3.0, 100, 0, |a, b| {
            jaccard(&sets[a as usize], &sets[b as usize])
        });
        assert_eq!(stats.pairs_examined, 3);
        assert!(!stats.sampled);
        assert_eq!(stats.min_pair, 0.0);
        assert_eq!(stats.pairs_disjoint, 1);
        assert_eq!(stats.pairs_below_threshold, 1);
        assert!((stats.min_edge - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn center_mode_keeps_only_members_similar_to_the_centre() {
        let (_, edges) = chain();
        let groups = group(3, &edges, GroupMode::Center);
        assert_eq!(
            groups,
            vec![Group {
                members: vec![0, 1, 2],
                center: 1
            }]
        );
        // A path 0-1-2-3-4: centres must have an edge to every member.
        let path: Vec<Edge> = (0..4)
            .map(|i| Edge {
                a: i,
                b: i + 1,
                similarity: 0.6,
            })
            .collect();
        let groups = group(5, &path, GroupMode::Center);
        for g in &groups {
            for &m in &g.members {
                assert!(
                    m == g.center
                        || path
                            .iter()
                            .any(|e| (e.a, e.b) == (m.min(g.center), m.max(g.center)))
                );
            }
        }
        let covered: usize = groups.iter().map(|g| g.members.len()).sum();
        assert!(covered <= 5 && groups.len() >= 2);
    }

    #[test]
    fn big_groups_are_sampled_deterministically() {
        let members: Vec<u32> = (0..100).collect();
        let g = Group { members, center: 0 };
        let edges = [Edge {
            a: 0,
            b: 1,
            similarity: 1.0,
        }];
        let run = || {
            group_stats(&g, &edges, 0.5, 50, 9, |a, b| {
                if (a + b) % 2 == 0 { 1.0 } else { 0.0 }
            })
        };
        let s = run();
        assert!(s.sampled);
        assert_eq!(s.pairs_examined, 50);
        assert_eq!(s, run());
    }
}
