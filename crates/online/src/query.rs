//! The read path: which documents a reader sees (a snapshot of sequence numbers), the candidates a document's
//! bands meet, and their verification.

use crate::api::Duplicate;
use crate::params::Built;
use crate::shared::{Prepared, Shared};
use crate::store;
use crate::store::{LIVE, Slot, Store};
use lshbench_core::dedup::{self};
use lshbench_core::sets::{self};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Which documents a lookup sees.
#[derive(Clone, Copy)]
pub(crate) enum Visibility {
    /// Readers: inserted durably, not deleted durably.
    Durable,
    /// The writer: everything it has applied.
    Writer,
}

impl Visibility {
    pub(crate) fn sees(self, slot: &Slot, durable: u64) -> bool {
        match self {
            Visibility::Durable => slot.seq <= durable && slot.deleted > durable,
            Visibility::Writer => slot.deleted == LIVE,
        }
    }
}

/// The documents a lookup reports: those `vis` sees, inserted before `before`, except the slot `exclude`.
///
/// A stored document's answer is about its past: a check that is sent again for a document already stored
/// (a client's retry) sees only what was inserted before it, and never the document itself, so it gets the
/// answer the first check got.
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub(crate) vis: Visibility,
    /// Only documents whose sequence number is below this.
    pub(crate) before: u64,
    /// The document itself, when it is stored.
    pub(crate) exclude: Option<u32>,
}

impl View {
    /// Everything `vis` sees.
    pub(crate) fn all(vis: Visibility) -> View {
        View {
            vis,
            before: u64::MAX,
            exclude: None,
        }
    }

    /// What the stored document in `slot` saw when it was inserted (its own first answer).
    pub(crate) fn before(vis: Visibility, slot: u32, seq: u64) -> View {
        View {
            vis,
            before: seq,
            exclude: Some(slot),
        }
    }

    /// Everything `vis` sees but the slot `slot` (a stored document of the same id with another text).
    pub(crate) fn except(vis: Visibility, slot: u32) -> View {
        View {
            vis,
            before: u64::MAX,
            exclude: Some(slot),
        }
    }
}

/// How a document to put or query stands to a stored document of the same id.
pub(crate) enum Stored {
    /// No live document has its id.
    Absent,
    /// The stored document has the same signature and text: the request is a retry of the one that stored it.
    Same { slot: u32, seq: u64 },
    /// The id holds another document.
    Other { slot: u32 },
}

/// How `doc` stands to the live document of its id that `vis` sees, if any.
pub(crate) fn stored(store: &Store, doc: &Prepared, vis: Visibility, durable: u64) -> Stored {
    let Some(s) = store.slot_of(&doc.id) else {
        return Stored::Absent;
    };
    let slot = &store.slots[s as usize];
    if !vis.sees(slot, durable) {
        return Stored::Absent;
    }
    let same = slot.empty == doc.empty
        && store.signature(s) == doc.signature.as_slice()
        && slot.text.as_deref() == doc.text.as_deref();
    if same {
        Stored::Same {
            slot: s,
            seq: slot.seq,
        }
    } else {
        Stored::Other { slot: s }
    }
}

/// A candidate's data, copied out under the lock so that verification runs without it.
pub(crate) struct Candidate {
    pub(crate) slot: u32,
    pub(crate) id: Arc<str>,
    pub(crate) seq: u64,
    pub(crate) estimate: f64,
    pub(crate) text: Option<Arc<[u8]>>,
}

/// The near-duplicates of a prepared document among the documents `view` reports, verified as `dedup` verifies
/// (`dedup::check_pair`), earliest first; and the bucket members left unread by the cap.
pub(crate) fn find(
    shared: &Shared,
    doc: &Prepared,
    view: View,
    keys: &mut Vec<u64>,
) -> (Vec<Duplicate>, u64) {
    let (candidates, unchecked) = candidates(shared, doc, view, keys);
    let mut fresh = 0;
    let mut out: Vec<Duplicate> = candidates
        .iter()
        .filter_map(|c| match doc.checked.get(&(c.slot, c.seq)) {
            Some(known) => known.clone(),
            None => {
                fresh += 1;
                verify(&shared.built, doc, c)
            }
        })
        .collect();
    if matches!(view.vis, Visibility::Writer) {
        shared
            .counters
            .verified_by_writer
            .fetch_add(fresh, Ordering::Relaxed);
    }
    out.sort_by_key(|d| d.seq);
    (out, unchecked)
}

/// The candidates of a prepared document among the documents `view` reports, copied out under the read lock,
/// and the bucket members left unread by the cap.
pub(crate) fn candidates(
    shared: &Shared,
    doc: &Prepared,
    view: View,
    keys: &mut Vec<u64>,
) -> (Vec<Candidate>, u64) {
    let b = &shared.built;
    let store = shared.store.read().unwrap();
    let durable = shared.durable.load(Ordering::Acquire);
    let (mut slots, unchecked) = store.candidates(
        &doc.signature,
        shared.params.bucket_cap,
        |s| s.seq < view.before && view.vis.sees(s, durable),
        keys,
    );
    if let Some(me) = view.exclude {
        slots.retain(|&s| s != me);
    }
    let c = slots
        .iter()
        .map(|&s| {
            let slot = &store.slots[s as usize];
            Candidate {
                slot: s,
                id: slot.id.clone().expect("a candidate is an occupied slot"),
                seq: slot.seq,
                estimate: b.kernel.estimate(store.signature(s), &doc.signature),
                text: slot.text.clone(),
            }
        })
        .collect();
    (c, unchecked)
}

/// Verifies one candidate pair as `dedup` does (`dedup::check_pair`): the duplicate, or `None`.
pub(crate) fn verify(b: &Built, doc: &Prepared, c: &Candidate) -> Option<Duplicate> {
    let other = match (&doc.set, &c.text) {
        (Some(_), Some(text)) => store::decompress(text)
            .ok()
            .map(|text| sets::verification_split_set(&b.shingler, &text)),
        _ => None,
    };
    let sets = match (&other, &doc.set) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let pair = dedup::check_pair(
        b.verify,
        b.choice.threshold,
        0,
        0,
        || c.estimate,
        sets,
        b.shingler.dispatch(),
    )?;
    Some(Duplicate {
        id: c.id.to_string(),
        seq: c.seq,
        estimate: pair.estimate,
        jaccard: pair.jaccard,
    })
}

/// Verifies a document against its candidates among the durable documents before it goes to the writer, on
/// the calling thread, and keeps each outcome by (slot, sequence number), which names one stored document for
/// good. The writer then finds the document's candidates as before (the same ones, and the answer is the
/// same) but verifies only those this did not see: the batch's own earlier documents and what was written
/// meanwhile. Verification, the costly part of a check, thus runs in the clients' threads, in parallel,
/// instead of on the single writer.
pub(crate) fn precheck(shared: &Shared, doc: &mut Prepared, keys: &mut Vec<u64>) {
    let (candidates, _) = candidates(shared, doc, View::all(Visibility::Durable), keys);
    let checked = candidates
        .iter()
        .map(|c| ((c.slot, c.seq), verify(&shared.built, doc, c)))
        .collect();
    doc.checked = checked;
    shared
        .counters
        .verified_before
        .fetch_add(doc.checked.len() as u64, Ordering::Relaxed);
}
