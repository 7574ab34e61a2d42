//! Sketching a corpus: read documents in batches on a reading thread, shingle and sign each batch in parallel,
//! and hand the results on in input order. Memory holds a few batches of text at a time, so peak RSS stays flat
//! whatever the corpus size (beyond what the consumer keeps).

use crate::corpus::{CorpusReader, Document, ReadError};
use crate::kernel::Kernel;
use crate::shingle::Shingler;
use rayon::prelude::*;

/// Documents per batch for callers that batch themselves (`exact`). Large enough to amortise the fork-join,
/// small enough to keep RSS flat.
pub const BATCH_DOCS: usize = 2048;
/// A batch also ends once it holds this many bytes of text.
pub const BATCH_BYTES: usize = 32 << 20;

/// One signed batch, in input order.
pub struct SignedBatch {
    /// The documents, in input order.
    pub docs: Vec<Document>,
    /// `docs.len() * num_perm` slots, row-major.
    pub signatures: Vec<u32>,
    /// Whether each document's shingle set was empty (its row is the empty signature).
    pub empty: Vec<bool>,
}

impl SignedBatch {
    /// The signature of document `i`.
    pub fn signature(&self, i: usize, num_perm: usize) -> &[u32] {
        &self.signatures[i * num_perm..(i + 1) * num_perm]
    }
}

thread_local! {
    static IDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Signs `docs` in parallel on the current rayon pool. The output does not depend on the thread count.
pub fn sign_batch(docs: Vec<Document>, shingler: &Shingler, kernel: &dyn Kernel) -> SignedBatch {
    let k = kernel.num_perm();
    let mut signatures = vec![0u32; docs.len() * k];
    let mut empty = vec![false; docs.len()];
    signatures
        .par_chunks_mut(k)
        .zip(empty.par_iter_mut())
        .zip(docs.par_iter())
        // Batches are small (see READ_BATCH_BYTES): tasks of 2 documents still spread one over many threads.
        .with_min_len(2)
        .for_each(|((out, is_empty), doc)| {
            IDS.with_borrow_mut(|ids| {
                *is_empty = kernel.sign_text(shingler, &doc.text, ids, out);
            })
        });
    SignedBatch {
        docs,
        signatures,
        empty,
    }
}

/// Documents per batch on the reading thread: small batches let signing start early and keep the two threads
/// busy together; the channel holds at most [`QUEUED_BATCHES`] of them.
const READ_BATCH_DOCS: usize = 256;
/// A batch on the reading thread also ends once it holds this many bytes of text (about 70 mails).
///
/// With this, [`QUEUED_BATCHES`] and the gzip read-ahead's two 512-KB chunks, reading runs little ahead of
/// signing. With few cores (where reading, decompressing and signing share them) a long lead let the producers
/// take the cores while signing fell behind, and signing then ran alone at the end with the backlog; a short
/// one also keeps the text in flight in cache. BENCHMARKING.md §11 (eighth round): from batches of 256 mails
/// (about 0.9 MB), four queued, and 4 × 1 MB read ahead to 256 KB, two and 2 × 512 KB, the `.gz`
/// `sketch --threads 1` went from 46.8 to 40.2 ms on a 2-core VM.
const READ_BATCH_BYTES: usize = 256 << 10;
/// Batches read ahead of signing, at most.
const QUEUED_BATCHES: usize = 2;

/// Reads the whole corpus, signing batch by batch, and calls `consume` on each batch in input order.
/// Reading (with decompression and parsing) runs on its own thread, a bounded channel ahead of signing, which
/// runs on the current rayon pool; memory holds at most a few batches of text. Stops at the first read error
/// under `OnError::Fail` (the error names file, line and field) or the first error `consume` returns (the
/// reading thread then stops too). The batches, and so the output, do not depend on the thread count.
///
/// `consume` may take what it keeps out of the batch (`std::mem::take` on a document's id or text); what it
/// leaves goes back to the reading thread to be freed there, where it was allocated, so the allocator reuses
/// that memory for the next batches instead of asking the system for more.
pub fn sketch_corpus<E: From<ReadError>>(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    mut consume: impl FnMut(&mut SignedBatch) -> Result<(), E>,
) -> Result<(), E> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUED_BATCHES);
        let (spent_tx, spent_rx) =
            std::sync::mpsc::sync_channel::<Vec<Document>>(QUEUED_BATCHES + 2);
        scope.spawn(move || {
            loop {
                // Free the documents signing is done with before reading more.
                while let Ok(spent) = spent_rx.try_recv() {
                    drop(spent);
                }
                let batch = read_batch(reader, READ_BATCH_DOCS, READ_BATCH_BYTES);
                let last = !matches!(&batch, Ok(docs) if !docs.is_empty());
                // A send fails only when signing stopped (an error): then reading stops too.
                if tx.send(batch).is_err() || last {
                    break;
                }
            }
        });
        for batch in rx {
            let docs = batch?;
            if docs.is_empty() {
                break;
            }
            let mut signed = sign_batch(docs, shingler, kernel);
            consume(&mut signed)?;
            // When the reading thread is behind on freeing, free here (the channel never blocks signing).
            let _ = spent_tx.try_send(std::mem::take(&mut signed.docs));
        }
        Ok(())
    })
}

fn read_batch(
    reader: &mut CorpusReader,
    max_docs: usize,
    max_bytes: usize,
) -> Result<Vec<Document>, ReadError> {
    let mut batch = Vec::with_capacity(max_docs);
    let mut bytes = 0usize;
    while batch.len() < max_docs && bytes < max_bytes {
        match reader.next() {
            None => break,
            Some(doc) => {
                let doc = doc?;
                bytes += doc.text.len();
                batch.push(doc);
            }
        }
    }
    Ok(batch)
}
