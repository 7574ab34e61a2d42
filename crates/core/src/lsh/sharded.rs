//! A hash map split into shards by its keys' hashes, so that it grows a shard at a time.

use rustc_hash::{FxBuildHasher, FxHashMap};
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// Shards of a [`Sharded`] map.
pub const SHARDS: usize = 64;

/// A hash map split by its keys' hashes into [`SHARDS`] maps. A hash map grows by rehashing every entry at
/// once; under a lock (the online index holds its band tables and id map under one) that stops every reader
/// and writer for as long: about a second for band tables at a million documents and 35 bands, which hold one
/// entry per document and band, all growing at the same pace. Split, each shard grows on its own, a 64th of
/// the work at a time, and the shards reach their thresholds at scattered moments.
#[derive(Clone, Debug)]
pub struct Sharded<K, V> {
    shards: Box<[FxHashMap<K, V>]>,
}

impl<K: Hash + Eq, V: PartialEq> PartialEq for Sharded<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.shards == other.shards
    }
}

impl<K, V> Default for Sharded<K, V> {
    fn default() -> Self {
        Sharded {
            shards: (0..SHARDS).map(|_| FxHashMap::default()).collect(),
        }
    }
}

impl<K: Hash + Eq, V> Sharded<K, V> {
    /// The shard of a key: hash bits 32 to 37, which a shard's own table (its low bits for the bucket, its top
    /// seven for the tag) does not use, so each shard's table stays as well spread as one table would be.
    fn shard<Q: Hash + ?Sized>(key: &Q) -> usize {
        (FxBuildHasher.hash_one(key) >> 32) as usize & (SHARDS - 1)
    }

    /// The value of `key`.
    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.shards[Self::shard(key)].get(key)
    }

    /// The value of `key`, to change.
    pub fn get_mut<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.shards[Self::shard(key)].get_mut(key)
    }

    /// Sets `key` to `value`; returns the value it had.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.shards[Self::shard(&key)].insert(key, value)
    }

    /// Removes `key`; returns the value it had.
    pub fn remove<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.shards[Self::shard(key)].remove(key)
    }

    /// The entry of `key`, in its shard.
    pub fn entry(&mut self, key: K) -> std::collections::hash_map::Entry<'_, K, V> {
        self.shards[Self::shard(&key)].entry(key)
    }

    /// Removes every entry (each shard keeps its capacity).
    pub fn clear(&mut self) {
        self.shards.iter_mut().for_each(FxHashMap::clear);
    }

    /// Room for about `n` entries in all, spread evenly (recovery, which knows its count).
    pub fn reserve_total(&mut self, n: usize) {
        let each = n / SHARDS + n / SHARDS / 16 + 16;
        self.shards.iter_mut().for_each(|m| m.reserve(each));
    }

    /// Entries, in all.
    pub fn len(&self) -> usize {
        self.shards.iter().map(FxHashMap::len).sum()
    }

    /// Whether no shard holds an entry.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(FxHashMap::is_empty)
    }

    /// Entries the shards hold room for, in all.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(FxHashMap::capacity).sum()
    }

    /// The number of entries in each shard.
    pub fn shard_lens(&self) -> Vec<usize> {
        self.shards.iter().map(FxHashMap::len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};
    use std::sync::Arc;

    /// Every shard gets its share of band keys and of ids: each count within six standard deviations of the
    /// binomial mean (one shard is 1/64 of the keys).
    #[test]
    fn shards_share_keys_and_ids_evenly() {
        let n = 64_000usize;
        let p = 1.0 / SHARDS as f64;
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut keys: Sharded<u64, u32> = Sharded::default();
        let mut ids: Sharded<Arc<str>, u32> = Sharded::default();
        for i in 0..n as u32 {
            keys.insert(rng.next_u64(), i);
            ids.insert(format!("doc-{i}").into(), i);
        }
        let lens = |lens: Vec<usize>| {
            for (i, len) in lens.into_iter().enumerate() {
                let z = (len as f64 - mean) / sd;
                assert!(
                    z.abs() < 6.0,
                    "shard {i} holds {len}, expected {mean:.0} +- {sd:.0}"
                );
            }
        };
        lens(keys.shard_lens());
        lens(ids.shard_lens());
        assert_eq!((keys.len(), ids.len()), (n, n));
        assert_eq!(ids.get("doc-17"), Some(&17));
        assert_eq!(ids.remove("doc-17"), Some(17));
        assert_eq!(ids.get("doc-17"), None);
    }
}
