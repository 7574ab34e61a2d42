//! The in-memory side of an online index: document slots, signatures, compressed texts, the id map and the
//! band tables, with what each takes in memory.
//!
//! The band tables are the library's banding index ([`LshIndex`]), numbered by slot: a bucket is walked newest
//! first, and deleting a document unlinks it from each of its b buckets.
//!
//! Every document carries the sequence number of its insertion and, once deleted, of its deletion: readers
//! see a document when its insertion is durable and its deletion is not (see [`super`]).

use lshbench_core::lsh::index::{BandHasher, LshIndex};
use lshbench_core::lsh::sharded::{SHARDS, Sharded};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Slots end below this number (the index reserves `u32::MAX`).
const NIL: u32 = u32::MAX;
/// The deletion sequence number of a live document.
pub(crate) const LIVE: u64 = u64::MAX;

/// One document slot.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    /// The id; `None` marks a free slot.
    pub id: Option<Arc<str>>,
    /// Sequence number of the insertion.
    pub seq: u64,
    /// Sequence number of the deletion, or [`LIVE`].
    pub deleted: u64,
    /// The shingle set was empty: never banded, never a candidate.
    pub empty: bool,
    /// The compressed text ([`compress`]), when texts are kept.
    pub text: Option<Arc<[u8]>>,
}

/// The documents and band tables.
pub(crate) struct Store {
    k: usize,
    pub slots: Vec<Slot>,
    free: Vec<u32>,
    sigs: Vec<u32>,
    /// The band tables, numbered by slot.
    index: LshIndex,
    pub ids: Sharded<Arc<str>, u32>,
    /// Documents in slots (pending ones and ones deleted but not yet removed included).
    pub occupied: usize,
    /// Heap bytes of ids and texts.
    heap: usize,
    /// Whether documents are in the band tables (false while recovery places them; [`Store::band_all`]).
    banded: bool,
}

impl Store {
    pub fn new(k: usize, hasher: BandHasher) -> Store {
        Store {
            k,
            slots: Vec::new(),
            free: Vec::new(),
            sigs: Vec::new(),
            index: LshIndex::with_hasher(hasher),
            ids: Sharded::default(),
            occupied: 0,
            heap: 0,
            banded: true,
        }
    }

    /// The signature in slot `s`.
    pub fn signature(&self, s: u32) -> &[u32] {
        &self.sigs[s as usize * self.k..(s as usize + 1) * self.k]
    }

    /// The slot of a document (deleted or not) by id.
    pub fn slot_of(&self, id: &str) -> Option<u32> {
        self.ids.get(id).copied()
    }

    /// An empty store that recovery fills with [`Store::place`] and [`Store::remove`] before banding it once
    /// with [`Store::band_all`].
    pub fn unbanded(k: usize, hasher: BandHasher) -> Store {
        Store {
            banded: false,
            ..Store::new(k, hasher)
        }
    }

    /// Puts a document in a free slot without banding it (recovery bands everything at the end with
    /// [`Store::band_all`]); returns the slot.
    pub fn place(
        &mut self,
        id: Arc<str>,
        seq: u64,
        empty: bool,
        signature: &[u32],
        text: Option<Arc<[u8]>>,
    ) -> u32 {
        debug_assert_eq!(signature.len(), self.k);
        self.heap += heap_of(&id, text.as_deref());
        let slot = Slot {
            id: Some(id.clone()),
            seq,
            deleted: LIVE,
            empty,
            text,
        };
        let s = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = slot;
                self.sigs[s as usize * self.k..(s as usize + 1) * self.k]
                    .copy_from_slice(signature);
                s
            }
            None => {
                let s = self.slots.len() as u32;
                assert!(s < NIL, "more than 2^32 - 1 document slots");
                self.slots.push(slot);
                self.sigs.extend_from_slice(signature);
                s
            }
        };
        self.ids.insert(id, s);
        self.occupied += 1;
        s
    }

    /// Inserts a document and bands it; returns its slot.
    pub fn insert(
        &mut self,
        id: Arc<str>,
        seq: u64,
        empty: bool,
        signature: &[u32],
        text: Option<Arc<[u8]>>,
    ) -> u32 {
        assert!(
            self.banded,
            "inserting into a store recovery has not banded yet"
        );
        let s = self.place(id, seq, empty, signature, text);
        if !empty {
            self.index.insert(s, signature);
        }
        s
    }

    /// Bands every occupied, non-empty slot in sequence order (after [`Store::place`] during recovery), the
    /// bands in parallel.
    pub fn band_all(&mut self) {
        let mut order: Vec<(u64, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.id.is_some() && !s.empty)
            .map(|(i, s)| (s.seq, i as u32))
            .collect();
        order.sort_unstable();
        let order: Vec<u32> = order.into_iter().map(|(_, s)| s).collect();
        let (k, sigs) = (self.k, &self.sigs);
        self.index
            .build(&order, |s| &sigs[s as usize * k..(s as usize + 1) * k]);
        self.banded = true;
    }

    /// Removes the document in slot `s` from the band tables and the id map and frees the slot.
    pub fn remove(&mut self, s: u32) {
        let slot = &self.slots[s as usize];
        let id = slot.id.clone().expect("removing a free slot");
        if !slot.empty && self.banded {
            let k = self.k;
            let removed = self
                .index
                .remove(s, &self.sigs[s as usize * k..(s as usize + 1) * k]);
            assert!(removed, "a banded document is in the band tables");
        }
        let slot = &mut self.slots[s as usize];
        self.heap -= heap_of(&id, slot.text.as_deref());
        if self.ids.get(&id) == Some(&s) {
            self.ids.remove(&id);
        }
        slot.id = None;
        slot.text = None;
        self.free.push(s);
        self.occupied -= 1;
    }

    /// The slots sharing a band with `signature` that `visible` accepts, each once, and the bucket members not
    /// read because their bucket held more than `cap` (only its `cap` newest are read).
    pub fn candidates(
        &self,
        signature: &[u32],
        cap: usize,
        visible: impl Fn(&Slot) -> bool,
        keys: &mut Vec<u64>,
    ) -> (Vec<u32>, u64) {
        self.index
            .candidates(signature, cap, |s| visible(&self.slots[s as usize]), keys)
    }

    /// Bytes of memory the store holds: every table and vector at its capacity, and the heap bytes of ids and
    /// texts (with their allocation headers).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        // The id map's shards' own headers, in one box.
        let shards = SHARDS * size_of::<FxHashMap<Arc<str>, u32>>();
        self.slots.capacity() * size_of::<Slot>()
            + self.sigs.capacity() * 4
            + self.free.capacity() * 4
            + self.index.memory_bytes()
            + self.ids.capacity() * (size_of::<(Arc<str>, u32)>() + 1)
            + shards
            + self.heap
    }
}

/// What a document's id and text take on the heap (an `Arc`'s two counters included).
fn heap_of(id: &str, text: Option<&[u8]>) -> usize {
    16 + id.len() + text.map_or(0, |t| 16 + t.len())
}

/// zstd level of stored texts: the fastest, since a 1.5-KB text compresses about as well at level 3.
const ZSTD_LEVEL: i32 = 1;

/// A text compressed for storage: its length (u32) then a zstd frame; the empty text is empty.
pub fn compress(text: &str) -> Vec<u8> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    if text.is_empty() {
        return Vec::new();
    }
    let mut out = (text.len() as u32).to_le_bytes().to_vec();
    COMPRESSOR.with_borrow_mut(|c| {
        let c = c.get_or_insert_with(|| {
            zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("a zstd context at a valid level")
        });
        let frame = c
            .compress(text.as_bytes())
            .expect("compressing into a growable vector cannot fail");
        out.extend_from_slice(&frame);
    });
    out
}

/// The text of [`compress`]'s bytes, or why they are not one (damage in a file that passed its checksum).
pub fn decompress(bytes: &[u8]) -> Result<String, String> {
    if bytes.is_empty() {
        return Ok(String::new());
    }
    if bytes.len() < 4 {
        return Err("a stored text is shorter than its length".into());
    }
    let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let raw = zstd::bulk::decompress(&bytes[4..], len).map_err(|e| e.to_string())?;
    if raw.len() != len {
        return Err("a stored text has another length than recorded".into());
    }
    String::from_utf8(raw).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lshbench_core::lsh::scurve::Banding;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    #[test]
    fn inserts_removals_and_slot_reuse_keep_every_bucket_exact() {
        let k = 8;
        let banding = Banding::new(4, 2, k).unwrap();
        let mut store = Store::new(k, BandHasher::new(banding, 5));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        // (name, signature) of live documents; names map to slots through the id map, and slots are reused.
        let mut live: Vec<(u32, Vec<u32>)> = Vec::new();
        let mut keys = Vec::new();
        for step in 0..3000u32 {
            if !live.is_empty() && rng.next_u64() % 3 == 0 {
                let i = (rng.next_u64() % live.len() as u64) as usize;
                let (name, _) = live.swap_remove(i);
                let s = store.slot_of(&name.to_string()).unwrap();
                store.remove(s);
            } else {
                let sig: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 3) as u32).collect();
                store.insert(name_of(step), step as u64, false, &sig, None);
                live.push((step, sig));
            }
            if step % 97 == 0 {
                let probe: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 3) as u32).collect();
                let (got, unchecked) = store.candidates(&probe, usize::MAX, |_| true, &mut keys);
                let mut names: Vec<u32> = got
                    .iter()
                    .map(|&s| {
                        store.slots[s as usize]
                            .id
                            .as_ref()
                            .unwrap()
                            .parse()
                            .unwrap()
                    })
                    .collect();
                names.sort_unstable();
                // The reference: a new index of the live documents, numbered by name (the core's own tests
                // hold the index to a brute-force search).
                let mut reference = LshIndex::new(banding, 5);
                for (name, sig) in &live {
                    reference.insert(*name, sig);
                }
                assert_eq!(names, reference.query(&probe), "step {step}");
                assert_eq!(unchecked, 0);
            }
        }
        assert_eq!(store.occupied, live.len());
        // Removing everything leaves empty tables and only free slots.
        for (name, _) in live.drain(..) {
            let s = store.slot_of(&name.to_string()).unwrap();
            store.remove(s);
        }
        assert!(store.index.is_empty());
        assert_eq!(store.heap, 0);
    }

    fn name_of(i: u32) -> Arc<str> {
        i.to_string().into()
    }

    #[test]
    fn band_all_gives_the_tables_inserting_one_by_one_gives() {
        let k = 6;
        let banding = Banding::new(3, 2, k).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let docs: Vec<Vec<u32>> = (0..500)
            .map(|_| (0..k).map(|_| (rng.next_u64() % 2) as u32).collect())
            .collect();
        let mut one = Store::new(k, BandHasher::new(banding, 1));
        let mut all = Store::unbanded(k, BandHasher::new(banding, 1));
        for (i, d) in docs.iter().enumerate() {
            one.insert(name_of(i as u32), i as u64, i % 7 == 0, d, None);
            all.place(name_of(i as u32), i as u64, i % 7 == 0, d, None);
        }
        all.band_all();
        assert_eq!(one.index, all.index);
    }

    #[test]
    fn the_bucket_cap_reads_the_newest_and_counts_the_rest() {
        let k = 2;
        let banding = Banding::new(1, 2, k).unwrap();
        let mut store = Store::new(k, BandHasher::new(banding, 1));
        for i in 0..10 {
            store.insert(name_of(i), i as u64, false, &[7, 7], None);
        }
        let (got, unchecked) = store.candidates(&[7, 7], 3, |_| true, &mut Vec::new());
        assert_eq!(got, vec![7, 8, 9]);
        assert_eq!(unchecked, 7);
    }

    #[test]
    fn texts_round_trip_compressed() {
        for text in ["", "a", "caf\u{e9} ", &"near duplicate ".repeat(100)] {
            let c = compress(text);
            assert_eq!(decompress(&c).unwrap(), text);
        }
        let long = "near duplicate ".repeat(100);
        assert!(compress(&long).len() < long.len() / 5);
        assert!(decompress(&[1, 0, 0, 0, 9, 9]).is_err());
    }

    #[test]
    fn memory_grows_with_documents_and_is_given_back() {
        let k = 16;
        let banding = Banding::new(8, 2, k).unwrap();
        let mut store = Store::new(k, BandHasher::new(banding, 1));
        let empty = store.memory_bytes();
        for i in 0..1000u32 {
            let sig: Vec<u32> = (0..k as u32).map(|j| i * 31 + j).collect();
            store.insert(
                name_of(i),
                i as u64,
                false,
                &sig,
                Some(compress("text").into()),
            );
        }
        let full = store.memory_bytes();
        // At least the signatures, one link and one map entry per band, the ids and the texts.
        assert!(
            full - empty >= 1000 * (k * 4 + 8 * (4 + 17) + 17 + 16),
            "{full}"
        );
        assert!(full - empty < 1000 * 2048, "{full}");
    }
}
