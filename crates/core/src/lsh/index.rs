//! The banding index: a band's key is a seeded xxh3 of its r slots, with the band number mixed into the seed so
//! equal slot values in different bands never collide. Two ways to use it:
//! - [`LshIndex`]: insert, delete, query, and streaming query-then-insert (online dedup; each pair reported
//!   once), behind Python's `LSHIndex` and the durable online index;
//! - [`batch_candidates`]: band a whole corpus, walk every band's buckets in parallel, and return each candidate
//!   pair once, sorted, whatever the thread count.
//!
//! Huge buckets must not make a run quadratic. Documents whose banded slots are all equal (exact duplicates,
//! boilerplate) are first collapsed into one class, so the class's pairs are made once instead of once per band.
//! A class or bucket with more than `bucket_cap` documents is enumerated as a star (its first document paired with
//! every other) and the pairs left out are counted in [`CandidateStats`]; nothing is skipped silently.

use super::scurve::Banding;
use super::sharded::{SHARDS, Sharded};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// Hashes each band of a signature to a 64-bit key.
#[derive(Clone, Debug)]
pub struct BandHasher {
    /// The banding whose bands are hashed.
    pub banding: Banding,
    /// The seed each band's own seed is derived from.
    pub seed: u64,
    band_seeds: Vec<u64>,
}

impl BandHasher {
    /// A hasher for `banding`; band i's seed is the xxh3 of i under `seed`.
    pub fn new(banding: Banding, seed: u64) -> BandHasher {
        // Band i hashes with its own seed, so the same slots in two bands give unrelated keys.
        let band_seeds = (0..banding.bands as u64)
            .map(|i| xxhash_rust::xxh3::xxh3_64_with_seed(&i.to_le_bytes(), seed))
            .collect();
        BandHasher {
            banding,
            seed,
            band_seeds,
        }
    }

    /// The key of band `band` of `signature` (which must hold at least b*r slots).
    #[inline]
    pub fn key(&self, band: usize, signature: &[u32]) -> u64 {
        let r = self.banding.rows;
        let slots = &signature[band * r..(band + 1) * r];
        hash_slots(slots, self.band_seeds[band])
    }

    /// All b keys of `signature`, into `out`.
    pub fn keys(&self, signature: &[u32], out: &mut Vec<u64>) {
        out.clear();
        out.extend((0..self.banding.bands).map(|i| self.key(i, signature)));
    }
}

/// Splits `sorted` (hash, document) pairs, sorted by hash, into classes of equal documents: within each run of
/// one hash, the documents `same` finds equal to the run's first remaining one, in run order, then the rest
/// likewise (so a hash collision never merges two classes). Calls `class` on each class, in order.
pub(crate) fn hash_classes(
    sorted: &[(u64, u32)],
    same: impl Fn(u32, u32) -> bool,
    mut class: impl FnMut(Vec<u32>),
) {
    for run in sorted.chunk_by(|a, b| a.0 == b.0) {
        let mut run: Vec<u32> = run.iter().map(|p| p.1).collect();
        while !run.is_empty() {
            let head = run[0];
            let (equal, rest): (Vec<u32>, Vec<u32>) = run.iter().partition(|&&d| same(d, head));
            class(equal);
            run = rest;
        }
    }
}

/// xxh3 of the slots' little-endian bytes, the same on every platform.
#[inline]
fn hash_slots(slots: &[u32], seed: u64) -> u64 {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: u32 has no padding and any byte pattern is a valid u8; the byte slice covers exactly the
        // memory of `slots` (len * 4 bytes, alignment 1 <= 4) and lives no longer than it. On a little-endian
        // target these are the slots' little-endian bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<u8>(), slots.len() * 4) };
        xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed)
    }
    #[cfg(not(target_endian = "little"))]
    {
        let bytes: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();
        xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, seed)
    }
}

/// Default cap on documents per bucket (and per exact-duplicate class) before its pairs are enumerated as a star.
/// 5,000 documents would be 12.5 million pairs.
pub const DEFAULT_BUCKET_CAP: usize = crate::defaults::BUCKET_CAP;

/// No document: the end of a bucket's chain.
const NIL: u32 = u32::MAX;

/// The banding index, with delete: one table per band from band key to the bucket's newest member and its size,
/// and one link per document and band to the next older member of its bucket. A document costs one map entry
/// and 4 bytes per band (no vector per bucket, whose header alone is 24 bytes plus an allocation); a bucket is
/// walked newest first, and deleting a document unlinks it from each of its b buckets.
///
/// Documents are numbered by the caller (positions or slots, reused after a delete); the links are indexed by
/// that number, so memory follows the largest number used. The index keeps no signatures: deleting a document
/// takes the signature it was inserted with. The in-process dedup (Python's `LSHIndex`) and the durable online
/// index both band through it.
#[derive(Clone, Debug)]
pub struct LshIndex {
    hasher: BandHasher,
    /// Per band: band key to (newest member, members).
    heads: Vec<Sharded<u64, (u32, u32)>>,
    /// `next[band][doc]`: the next older member of the document's bucket in that band.
    next: Vec<Vec<u32>>,
    len: usize,
    bucket_cap: usize,
    /// Bucket members not returned by queries because their bucket was over the cap (see [`LshIndex::query`]).
    pub skipped: u64,
    keys: Vec<u64>,
}

impl LshIndex {
    /// An empty index for `banding`, its band keys seeded by `seed`, with no bucket cap.
    pub fn new(banding: Banding, seed: u64) -> LshIndex {
        LshIndex::with_hasher(BandHasher::new(banding, seed))
    }

    /// An empty index whose band keys `hasher` makes.
    pub fn with_hasher(hasher: BandHasher) -> LshIndex {
        let bands = hasher.banding.bands;
        LshIndex {
            hasher,
            heads: (0..bands).map(|_| Sharded::default()).collect(),
            next: vec![Vec::new(); bands],
            len: 0,
            bucket_cap: usize::MAX,
            skipped: 0,
            keys: Vec::new(),
        }
    }

    /// Queries read only the `cap` newest members of a bucket (the others are counted in `skipped`).
    pub fn with_bucket_cap(mut self, cap: usize) -> LshIndex {
        self.bucket_cap = cap.max(1);
        self
    }

    /// The banding the index uses.
    pub fn banding(&self) -> Banding {
        self.hasher.banding
    }

    /// The band keys' hasher.
    pub fn hasher(&self) -> &BandHasher {
        &self.hasher
    }

    /// Documents in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for links of documents numbered below `docs`.
    fn room(&mut self, docs: usize) {
        if self.next.first().is_some_and(|n| n.len() < docs) {
            for next in &mut self.next {
                next.resize(docs, NIL);
            }
        }
    }

    /// Adds document `doc`, which must not be in the index. Callers keep empty documents out (they must never
    /// become candidates).
    pub fn insert(&mut self, doc: u32, signature: &[u32]) {
        assert_ne!(doc, NIL, "document number u32::MAX is reserved");
        self.room(doc as usize + 1);
        let mut keys = std::mem::take(&mut self.keys);
        self.hasher.keys(signature, &mut keys);
        for (band, &key) in keys.iter().enumerate() {
            let head = self.heads[band].entry(key).or_insert((NIL, 0));
            self.next[band][doc as usize] = head.0;
            *head = (doc, head.1 + 1);
        }
        self.keys = keys;
        self.len += 1;
    }

    /// Removes document `doc`, inserted with `signature`. Returns false, changing nothing, when `doc` is not in
    /// the bucket of that signature's first band (it was never inserted, or under another signature).
    pub fn remove(&mut self, doc: u32, signature: &[u32]) -> bool {
        if doc as usize >= self.next[0].len() {
            return false;
        }
        let mut keys = std::mem::take(&mut self.keys);
        self.hasher.keys(signature, &mut keys);
        // The first band's walk is also the check: nothing has changed when it does not find the document.
        let present = self.unlink(0, keys[0], doc);
        if present {
            for (band, &key) in keys.iter().enumerate().skip(1) {
                assert!(
                    self.unlink(band, key, doc),
                    "a document is in its bucket in every band it was inserted in"
                );
            }
            self.len -= 1;
        }
        self.keys = keys;
        present
    }

    /// Takes `doc` out of its bucket `key` in `band`; false, changing nothing, when it is not there.
    fn unlink(&mut self, band: usize, key: u64, doc: u32) -> bool {
        let next = &mut self.next[band];
        let Some(entry) = self.heads[band].get_mut(&key) else {
            return false;
        };
        if entry.0 == doc {
            entry.0 = next[doc as usize];
        } else {
            let mut at = entry.0;
            while at != NIL && next[at as usize] != doc {
                at = next[at as usize];
            }
            if at == NIL {
                return false;
            }
            next[at as usize] = next[doc as usize];
        }
        entry.1 -= 1;
        if entry.1 == 0 {
            self.heads[band].remove(&key);
        }
        next[doc as usize] = NIL;
        true
    }

    /// The documents sharing at least one band with `signature`, sorted, each once. A bucket over the cap is
    /// read to its `cap` newest members; the rest are counted in `skipped`.
    pub fn query(&mut self, signature: &[u32]) -> Vec<u32> {
        let mut keys = std::mem::take(&mut self.keys);
        let (out, unread) = self.candidates(signature, self.bucket_cap, |_| true, &mut keys);
        self.skipped += unread;
        self.keys = keys;
        out
    }

    /// Streaming dedup: the documents already inserted that share a band with `signature`, then inserts `doc`.
    /// Over a stream each candidate pair is reported exactly once, by its later document.
    pub fn query_then_insert(&mut self, doc: u32, signature: &[u32]) -> Vec<u32> {
        let found = self.query(signature);
        self.insert(doc, signature);
        found
    }

    /// The documents sharing a band with `signature` that `visible` accepts, sorted, each once, and the bucket
    /// members left unread because their bucket held more than `cap` (only its `cap` newest are read, whether
    /// `visible` accepts them or not). `keys` is scratch space, and holds the signature's band keys after.
    pub fn candidates(
        &self,
        signature: &[u32],
        cap: usize,
        mut visible: impl FnMut(u32) -> bool,
        keys: &mut Vec<u64>,
    ) -> (Vec<u32>, u64) {
        self.hasher.keys(signature, keys);
        let mut out = Vec::new();
        let mut unread = 0u64;
        for (band, key) in keys.iter().enumerate() {
            let Some(&(head, len)) = self.heads[band].get(key) else {
                continue;
            };
            let next = &self.next[band];
            let mut at = head;
            let mut read = 0usize;
            while at != NIL && read < cap {
                if visible(at) {
                    out.push(at);
                }
                read += 1;
                at = next[at as usize];
            }
            unread += (len as usize).saturating_sub(read) as u64;
        }
        out.sort_unstable();
        out.dedup();
        (out, unread)
    }

    /// Replaces the contents with `docs`, inserted in the order given (so buckets are walked as if each had
    /// been inserted in turn), `signature(doc)` giving each one's signature; the bands are built in parallel.
    pub fn build<'s>(&mut self, docs: &[u32], signature: impl Fn(u32) -> &'s [u32] + Sync) {
        let room = docs.iter().map(|&d| d as usize + 1).max().unwrap_or(0);
        self.room(room);
        let hasher = &self.hasher;
        self.heads
            .par_iter_mut()
            .zip(self.next.par_iter_mut())
            .enumerate()
            .for_each(|(band, (heads, next))| {
                heads.clear();
                next.fill(NIL);
                heads.reserve_total(docs.len());
                for &doc in docs {
                    let key = hasher.key(band, signature(doc));
                    let head = heads.entry(key).or_insert((NIL, 0));
                    next[doc as usize] = head.0;
                    *head = (doc, head.1 + 1);
                }
            });
        self.len = docs.len();
    }

    /// Bytes of memory the tables hold at their capacity (band maps, their shards' headers, links).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let map_entry = size_of::<(u64, (u32, u32))>() + 1;
        let maps: usize = self.heads.iter().map(|m| m.capacity() * map_entry).sum();
        let shards = self.heads.len() * SHARDS * size_of::<FxHashMap<u64, (u32, u32)>>();
        let links: usize = self.next.iter().map(|n| n.capacity() * 4).sum();
        maps + shards + links
    }
}

impl PartialEq for LshIndex {
    /// Equal tables: the same buckets with the same members in the same order (the cap and counters aside).
    fn eq(&self, other: &Self) -> bool {
        self.hasher.seed == other.hasher.seed
            && self.hasher.banding == other.hasher.banding
            && self.heads == other.heads
            && self.len == other.len
            && self.next.iter().zip(&other.next).all(|(a, b)| {
                let n = a.len().max(b.len());
                (0..n).all(|d| a.get(d).unwrap_or(&NIL) == b.get(d).unwrap_or(&NIL))
            })
    }
}

/// What candidate generation did, including everything it did not enumerate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CandidateStats {
    /// Documents banded (empty ones excluded).
    pub documents: u64,
    /// Classes of two or more documents with identical banded slots.
    pub duplicate_classes: u64,
    /// Documents in those classes.
    pub documents_in_duplicate_classes: u64,
    /// Largest class of identical banded slots.
    pub largest_duplicate_class: u64,
    /// Buckets (over all bands) holding two or more classes.
    pub shared_buckets: u64,
    /// The largest of those buckets, in documents.
    pub largest_bucket: u64,
    /// Classes or buckets over the cap, enumerated as a star.
    pub capped_groups: u64,
    /// Pairs that share a band but were not enumerated because of the cap. Their documents are still connected
    /// through the star's centre, so grouping sees them; the pairs list does not.
    pub pairs_not_enumerated: u64,
    /// Candidate pairs returned (distinct).
    pub candidates: u64,
}

/// Candidate pairs `(a, b)` with `a < b` (document positions), sorted and distinct.
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// The pairs `(a, b)`, `a < b`, sorted.
    pub pairs: Vec<(u32, u32)>,
    /// What generation did, including what it left out.
    pub stats: CandidateStats,
}

/// Bands every non-empty document of `signatures` (row-major, `num_perm` slots each) and returns each pair that
/// shares at least one band once, sorted. `empty[i]` marks documents to leave out. The result is the same for
/// any thread count.
pub fn batch_candidates(
    signatures: &[u32],
    num_perm: usize,
    empty: &[bool],
    hasher: &BandHasher,
    bucket_cap: usize,
) -> Candidates {
    batch_candidates_limited(signatures, num_perm, empty, hasher, bucket_cap, u64::MAX)
        .expect("no limit was set")
}

/// The banding produced more candidate pairs (counted with repeats across bands) than allowed: the S-curve is
/// too permissive for this corpus. Raised before memory runs out, instead of being silently truncated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the banding produced more than {limit} candidate pairs (counted once per band) before stopping; the S-curve \
     lets through too many dissimilar pairs for this corpus. Use more rows per band (a higher threshold), longer \
     shingles, or raise --max-candidates"
)]
pub struct TooManyCandidates {
    /// The limit that was exceeded (`max_pairs`).
    pub limit: u64,
}

/// [`batch_candidates`] that stops with an error once more than `max_pairs` pairs (with repeats across bands)
/// have been emitted.
pub fn batch_candidates_limited(
    signatures: &[u32],
    num_perm: usize,
    empty: &[bool],
    hasher: &BandHasher,
    bucket_cap: usize,
    max_pairs: u64,
) -> Result<Candidates, TooManyCandidates> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let emitted = AtomicU64::new(0);
    let n = signatures.len() / num_perm;
    assert_eq!(
        signatures.len(),
        n * num_perm,
        "signatures are not n x num_perm"
    );
    assert_eq!(empty.len(), n, "one empty flag per document");
    assert!(
        hasher.banding.hashes() <= num_perm,
        "banding uses more slots than the signature has"
    );
    assert!(n <= u32::MAX as usize, "document positions are u32");
    let cap = bucket_cap.max(2);
    let used = hasher.banding.hashes();
    let sig = |i: usize| &signatures[i * num_perm..i * num_perm + used];
    let mut stats = CandidateStats::default();

    // 1. Collapse documents with identical banded slots: sort by a hash of all b*r slots, then confirm equality.
    let mut by_full: Vec<(u64, u32)> = (0..n)
        .into_par_iter()
        .filter(|&i| !empty[i])
        .map(|i| {
            (
                hash_slots(sig(i), hasher.seed ^ 0x9e37_79b9_7f4a_7c15),
                i as u32,
            )
        })
        .collect();
    by_full.par_sort_unstable();
    stats.documents = by_full.len() as u64;
    // class_of[rep] lists members (rep first); reps are the smallest member.
    let mut reps: Vec<u32> = Vec::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    // Within a hash run, split by actual slot equality (a 64-bit collision must not merge classes).
    hash_classes(
        &by_full,
        |a, b| sig(a as usize) == sig(b as usize),
        |same| {
            reps.push(same[0]);
            members.push(same);
        },
    );
    let mut pairs: Vec<u64> = Vec::new();
    for m in &members {
        if m.len() > 1 {
            stats.duplicate_classes += 1;
            stats.documents_in_duplicate_classes += m.len() as u64;
            stats.largest_duplicate_class = stats.largest_duplicate_class.max(m.len() as u64);
            stats.pairs_not_enumerated += emit_group(&[m.as_slice()], cap, &mut pairs);
            if m.len() > cap {
                stats.capped_groups += 1;
            }
        }
    }

    // 2. Band the class representatives, each band in parallel, and walk the buckets. The keys are computed
    // representative by representative, all bands at once: each signature is then read once, in order,
    // instead of a few bytes of it per band (which on the mail corpus was most of this step).
    let bands = hasher.banding.bands;
    let mut keys = vec![0u64; reps.len() * bands];
    keys.par_chunks_mut(bands)
        .zip(reps.par_iter())
        .with_min_len(64)
        .for_each(|(out, &rep)| {
            let s = sig(rep as usize);
            for (band, key) in out.iter_mut().enumerate() {
                *key = hasher.key(band, s);
            }
        });
    let per_band: Vec<(Vec<u64>, u64, u64, u64, u64)> = (0..bands)
        .into_par_iter()
        .map(|band| {
            let mut keyed: Vec<(u64, u32)> = keys
                .iter()
                .skip(band)
                .step_by(bands)
                .enumerate()
                .map(|(c, &key)| (key, c as u32))
                .collect();
            keyed.sort_unstable();
            let mut out = Vec::new();
            let (mut shared, mut largest, mut capped, mut skipped) = (0u64, 0u64, 0u64, 0u64);
            let mut i = 0;
            while i < keyed.len() {
                let mut j = i + 1;
                while j < keyed.len() && keyed[j].0 == keyed[i].0 {
                    j += 1;
                }
                if j - i > 1 {
                    let classes: Vec<&[u32]> = keyed[i..j]
                        .iter()
                        .map(|&(_, c)| members[c as usize].as_slice())
                        .collect();
                    let size: usize = classes.iter().map(|c| c.len()).sum();
                    shared += 1;
                    largest = largest.max(size as u64);
                    if size > cap {
                        capped += 1;
                    }
                    let before = out.len();
                    skipped += emit_group(&classes, cap, &mut out);
                    let added = (out.len() - before) as u64;
                    if emitted.fetch_add(added, Ordering::Relaxed) + added > max_pairs {
                        break;
                    }
                }
                i = j;
            }
            (out, shared, largest, capped, skipped)
        })
        .collect();
    if emitted
        .load(Ordering::Relaxed)
        .saturating_add(pairs.len() as u64)
        > max_pairs
    {
        return Err(TooManyCandidates { limit: max_pairs });
    }
    for (band_pairs, shared, largest, capped, skipped) in per_band {
        pairs.extend(band_pairs);
        stats.shared_buckets += shared;
        stats.largest_bucket = stats.largest_bucket.max(largest);
        stats.capped_groups += capped;
        stats.pairs_not_enumerated += skipped;
    }
    pairs.par_sort_unstable();
    pairs.dedup();
    stats.candidates = pairs.len() as u64;
    Ok(Candidates {
        pairs: pairs
            .into_iter()
            .map(|p| ((p >> 32) as u32, p as u32))
            .collect(),
        stats,
    })
}

/// Emits the pairs across `classes` (and within a single class when only one is given) as `a << 32 | b`,
/// a < b. Over the cap, emits a star from the first document instead and returns how many pairs it left out.
pub(crate) fn emit_group(classes: &[&[u32]], cap: usize, out: &mut Vec<u64>) -> u64 {
    let pack = |a: u32, b: u32| {
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        (a as u64) << 32 | b as u64
    };
    let size: usize = classes.iter().map(|c| c.len()).sum();
    let all_pairs = if classes.len() == 1 {
        (size as u64) * (size as u64 - 1) / 2
    } else {
        let mut cross = 0u64;
        let mut before = 0u64;
        for c in classes {
            cross += before * c.len() as u64;
            before += c.len() as u64;
        }
        cross
    };
    if size <= cap {
        if classes.len() == 1 {
            let m = classes[0];
            for (x, &a) in m.iter().enumerate() {
                for &b in &m[x + 1..] {
                    out.push(pack(a, b));
                }
            }
        } else {
            for (x, ca) in classes.iter().enumerate() {
                for cb in &classes[x + 1..] {
                    for &a in *ca {
                        for &b in *cb {
                            out.push(pack(a, b));
                        }
                    }
                }
            }
        }
        0
    } else {
        // Star: the first class's first document (its representative) with every other representative;
        // members reach their representative through their class's own pairs.
        let centre = classes[0][0];
        let mut emitted = 0u64;
        if classes.len() == 1 {
            for &b in &classes[0][1..] {
                out.push(pack(centre, b));
                emitted += 1;
            }
        } else {
            for c in &classes[1..] {
                out.push(pack(centre, c[0]));
                emitted += 1;
            }
        }
        all_pairs - emitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    /// Random signatures over a tiny alphabet so that bands collide often; some exact duplicates.
    fn signatures(n: usize, k: usize, alphabet: u64, seed: u64) -> Vec<u32> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut sigs = Vec::with_capacity(n * k);
        for i in 0..n {
            if i > 0 && rng.next_u64() % 7 == 0 {
                let src = (rng.next_u64() % i as u64) as usize;
                let row: Vec<u32> = sigs[src * k..(src + 1) * k].to_vec();
                sigs.extend(row);
            } else {
                sigs.extend((0..k).map(|_| (rng.next_u64() % alphabet) as u32));
            }
        }
        sigs
    }

    fn brute_force(sigs: &[u32], k: usize, empty: &[bool], banding: Banding) -> Vec<(u32, u32)> {
        let n = sigs.len() / k;
        let r = banding.rows;
        let mut out = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                if empty[a] || empty[b] {
                    continue;
                }
                let share = (0..banding.bands).any(|band| {
                    sigs[a * k + band * r..a * k + (band + 1) * r]
                        == sigs[b * k + band * r..b * k + (band + 1) * r]
                });
                if share {
                    out.push((a as u32, b as u32));
                }
            }
        }
        out
    }

    #[test]
    fn batch_and_streaming_return_exactly_the_pairs_sharing_a_band() {
        let k = 16;
        for (seed, bands, rows, alphabet) in
            [(1, 8, 2, 4), (2, 5, 3, 3), (3, 16, 1, 20), (4, 3, 5, 2)]
        {
            let banding = Banding::new(bands, rows, k).unwrap();
            let n = 300;
            let sigs = signatures(n, k, alphabet, seed);
            let empty: Vec<bool> = (0..n).map(|i| i % 31 == 5).collect();
            let expected = brute_force(&sigs, k, &empty, banding);
            assert!(!expected.is_empty());
            let hasher = BandHasher::new(banding, 99);
            let got = batch_candidates(&sigs, k, &empty, &hasher, usize::MAX);
            assert_eq!(got.pairs, expected, "seed {seed} {banding}");
            assert_eq!(got.stats.pairs_not_enumerated, 0);
            // Streaming: each pair once, by its later document.
            let mut index = LshIndex::new(banding, 99);
            let mut streamed = Vec::new();
            for i in 0..n {
                if empty[i] {
                    continue;
                }
                for j in index.query_then_insert(i as u32, &sigs[i * k..(i + 1) * k]) {
                    streamed.push((j, i as u32));
                }
            }
            streamed.sort_unstable();
            assert_eq!(streamed, expected, "streaming seed {seed} {banding}");
        }
    }

    #[test]
    fn batch_output_is_the_same_for_any_thread_count() {
        let k = 12;
        let banding = Banding::new(4, 3, k).unwrap();
        let sigs = signatures(2000, k, 3, 5);
        let empty = vec![false; 2000];
        let hasher = BandHasher::new(banding, 7);
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| batch_candidates(&sigs, k, &empty, &hasher, 50))
        };
        let (one, two, four) = (run(1), run(2), run(4));
        assert_eq!(one.pairs, two.pairs);
        assert_eq!(one.pairs, four.pairs);
        assert_eq!(one.stats, four.stats);
    }

    #[test]
    fn capped_buckets_are_counted_and_stay_connected() {
        // 100 identical signatures plus 50 sharing only band 0 with them: caps at 10.
        let k = 4;
        let banding = Banding::new(2, 2, k).unwrap();
        let mut sigs = Vec::new();
        for _ in 0..100 {
            sigs.extend([1, 2, 3, 4]);
        }
        for i in 0..50u32 {
            sigs.extend([1, 2, 100 + i, 7]);
        }
        let n = 150;
        let empty = vec![false; n];
        let hasher = BandHasher::new(banding, 1);
        let full = batch_candidates(&sigs, k, &empty, &hasher, usize::MAX);
        let expected = brute_force(&sigs, k, &empty, banding);
        assert_eq!(full.pairs, expected);
        assert_eq!(full.pairs.len(), 150 * 149 / 2);
        let capped = batch_candidates(&sigs, k, &empty, &hasher, 10);
        assert_eq!(capped.stats.duplicate_classes, 1);
        assert_eq!(capped.stats.largest_duplicate_class, 100);
        // Nothing lost silently: enumerated + not enumerated covers every pair sharing a band.
        assert_eq!(
            capped.pairs.len() as u64 + capped.stats.pairs_not_enumerated,
            expected.len() as u64
        );
        assert!(capped.pairs.len() < 300);
        // And the star keeps every document connected to document 0.
        let mut uf = crate::lsh::cluster::UnionFind::new(n);
        for &(a, b) in &capped.pairs {
            uf.union(a, b);
        }
        assert!((0..n as u32).all(|d| uf.find(d) == uf.find(0)));
    }

    #[test]
    fn too_many_candidates_is_an_error_not_a_truncation() {
        let k = 4;
        let banding = Banding::new(2, 2, k).unwrap();
        let mut sigs = Vec::new();
        for i in 0..100u32 {
            sigs.extend([1, 2, i, 1000 + i]);
        }
        let empty = vec![false; 100];
        let hasher = BandHasher::new(banding, 1);
        let err =
            batch_candidates_limited(&sigs, k, &empty, &hasher, usize::MAX, 1000).unwrap_err();
        assert_eq!(err.limit, 1000);
        let ok = batch_candidates_limited(&sigs, k, &empty, &hasher, usize::MAX, 4950).unwrap();
        assert_eq!(ok.pairs.len(), 4950);
    }

    #[test]
    fn the_bucket_cap_reads_the_newest_and_counts_the_rest() {
        let banding = Banding::new(1, 2, 2).unwrap();
        let mut index = LshIndex::new(banding, 3).with_bucket_cap(3);
        for d in 0..5 {
            index.insert(d, &[9, 9]);
        }
        assert_eq!(index.query(&[9, 9]), vec![2, 3, 4]);
        assert_eq!(index.skipped, 2);
        assert_eq!(index.query(&[9, 8]), Vec::<u32>::new());
        // `visible` filters what is read; what it refuses still counts as read.
        let (seen, unread) = index.candidates(&[9, 9], 3, |d| d != 3, &mut Vec::new());
        assert_eq!((seen, unread), (vec![2, 4], 2));
    }

    /// The live documents sharing a band with `sig`, by brute force.
    fn sharing(live: &[(u32, Vec<u32>)], sig: &[u32], b: Banding) -> Vec<u32> {
        let r = b.rows;
        let mut out: Vec<u32> = live
            .iter()
            .filter(|(_, d)| (0..b.bands).any(|i| d[i * r..(i + 1) * r] == sig[i * r..(i + 1) * r]))
            .map(|(n, _)| *n)
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn inserts_removals_and_reused_numbers_keep_every_bucket_exact() {
        let k = 8;
        let banding = Banding::new(4, 2, k).unwrap();
        let mut index = LshIndex::new(banding, 5);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut live: Vec<(u32, Vec<u32>)> = Vec::new();
        let mut free: Vec<u32> = Vec::new();
        let mut fresh = 0u32;
        for step in 0..3000u32 {
            if !live.is_empty() && rng.next_u64() % 3 == 0 {
                let i = (rng.next_u64() % live.len() as u64) as usize;
                let (doc, sig) = live.swap_remove(i);
                assert!(index.remove(doc, &sig));
                assert!(!index.remove(doc, &sig), "removed twice");
                free.push(doc);
            } else {
                let sig: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 3) as u32).collect();
                let doc = free.pop().unwrap_or_else(|| {
                    fresh += 1;
                    fresh - 1
                });
                index.insert(doc, &sig);
                live.push((doc, sig));
            }
            if step % 97 == 0 {
                let probe: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 3) as u32).collect();
                assert_eq!(
                    index.query(&probe),
                    sharing(&live, &probe, banding),
                    "step {step}"
                );
                assert_eq!(index.skipped, 0);
            }
        }
        assert_eq!(index.len(), live.len());
        // A document is not removed under a signature it was not inserted with, nor when never inserted.
        let (doc, sig) = live[0].clone();
        let other: Vec<u32> = sig.iter().map(|s| s + 10).collect();
        assert!(!index.remove(doc, &other));
        assert!(!index.remove(fresh + 5, &sig));
        for (doc, sig) in live.drain(..) {
            assert!(index.remove(doc, &sig));
        }
        assert!(index.is_empty());
        assert!(index.heads.iter().all(|m| m.is_empty()));
        assert!(index.next.iter().all(|n| n.iter().all(|&l| l == NIL)));
    }

    #[test]
    fn building_at_once_gives_the_tables_inserting_in_turn_gives() {
        let k = 6;
        let banding = Banding::new(3, 2, k).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let sigs: Vec<Vec<u32>> = (0..500)
            .map(|_| (0..k).map(|_| (rng.next_u64() % 2) as u32).collect())
            .collect();
        // Some numbers left out, and an order that is not the numbers' own.
        let order: Vec<u32> = (0..500u32).rev().filter(|d| d % 7 != 0).collect();
        let mut one = LshIndex::new(banding, 1);
        for &d in &order {
            one.insert(d, &sigs[d as usize]);
        }
        let mut all = LshIndex::new(banding, 1);
        all.insert(3, &[5; 6]);
        all.build(&order, |d| &sigs[d as usize]);
        assert_eq!(one, all);
        assert_ne!(one, LshIndex::new(banding, 1));
    }

    #[test]
    fn memory_grows_with_documents() {
        let k = 16;
        let banding = Banding::new(8, 2, k).unwrap();
        let mut index = LshIndex::new(banding, 1);
        let empty = index.memory_bytes();
        for i in 0..1000u32 {
            let sig: Vec<u32> = (0..k as u32).map(|j| i * 31 + j).collect();
            index.insert(i, &sig);
        }
        let full = index.memory_bytes();
        // At least one link and one map entry per band and document.
        assert!(full - empty >= 1000 * 8 * (4 + 17), "{full}");
        assert!(full - empty < 1000 * 8 * 64, "{full}");
    }

    #[test]
    fn band_keys_differ_across_bands_and_seeds() {
        let banding = Banding::new(2, 2, 4).unwrap();
        let h = BandHasher::new(banding, 1);
        let sig = [5, 6, 5, 6];
        assert_ne!(h.key(0, &sig), h.key(1, &sig));
        assert_ne!(h.key(0, &sig), BandHasher::new(banding, 2).key(0, &sig));
    }
}
