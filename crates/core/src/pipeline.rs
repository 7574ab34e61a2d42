//! Sketching a corpus: read documents in batches on a reading thread, shingle and sign each batch in parallel,
//! and hand the results on in input order. Memory holds a few batches of text at a time, so peak RSS stays flat
//! whatever the corpus size (beyond what the consumer keeps).

use crate::corpus::{CorpusReader, Document, ReadError};
use crate::kernel::Kernel;
use crate::shingle::{KnownAscii, Shingler};
use crate::window::WindowSource;
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

/// Signs one text into `out` (the kernel's `num_perm` slots) with this thread's buffer of window ids, which
/// every signing call of the thread reuses; returns whether the text had no window (an empty signature). The one
/// signing step of every front end: the batch pipeline, the out-of-core run's second pass, the online index
/// and the Python binding.
pub fn sign_text(
    kernel: &dyn Kernel,
    windows: &dyn WindowSource,
    text: &str,
    out: &mut [u32],
) -> bool {
    IDS.with_borrow_mut(|ids| kernel.sign_text(windows, text, ids, out))
}

/// Signs every text on the current rayon pool, in input order: n x k slots and the empty flags. The output
/// does not depend on the thread count.
pub fn sign_texts<T: AsRef<str> + Sync>(
    texts: &[T],
    shingler: &Shingler,
    kernel: &dyn Kernel,
) -> (Vec<u32>, Vec<bool>) {
    let k = kernel.num_perm();
    let mut signatures = vec![0u32; texts.len() * k];
    let mut empty = vec![false; texts.len()];
    signatures
        .par_chunks_mut(k)
        .zip(empty.par_iter_mut())
        .zip(texts.par_iter())
        .with_min_len(8)
        .for_each(|((out, is_empty), text)| {
            *is_empty = sign_text(kernel, shingler, text.as_ref(), out)
        });
    (signatures, empty)
}

/// Signs `docs` in parallel on the current rayon pool. The output does not depend on the thread count.
pub fn sign_batch(docs: Vec<Document>, shingler: &Shingler, kernel: &dyn Kernel) -> SignedBatch {
    sign_read_batch(
        ReadBatch {
            docs,
            ascii: Vec::new(),
        },
        shingler,
        kernel,
    )
}

/// Bytes of the next text prefetched while one is signed: a long mail whole, and the start of anything longer
/// (by then the hardware prefetcher follows the loop).
const PREFETCH_BYTES: usize = 8 << 10;

/// A batch as the reading thread hands it on: the documents, and which of their texts are all ASCII.
struct ReadBatch {
    docs: Vec<Document>,
    /// `ascii[i]`: document i's text is all ASCII, found on the reading thread while the text is still in its
    /// cache, so that signing does not make a pass of its own over the text to find out. Empty when not
    /// looked at (every text is then checked where it is shingled).
    ascii: Vec<bool>,
}

/// [`sign_batch`], with the reading thread's ASCII flags: a text flagged ASCII is shingled through
/// [`KnownAscii`], which skips the check.
fn sign_read_batch(batch: ReadBatch, shingler: &Shingler, kernel: &dyn Kernel) -> SignedBatch {
    let ReadBatch { docs, ascii } = batch;
    debug_assert!(ascii.is_empty() || ascii.len() == docs.len());
    let known = KnownAscii::new(shingler);
    let k = kernel.num_perm();
    let mut signatures = vec![0u32; docs.len() * k];
    let mut empty = vec![false; docs.len()];
    signatures
        .par_chunks_mut(k)
        .zip(empty.par_iter_mut())
        .zip(docs.par_iter().enumerate())
        // Batches are small (see READ_BATCH_BYTES): tasks of 2 documents still spread one over many threads.
        .with_min_len(2)
        .for_each(|((out, is_empty), (i, doc))| {
            // The next text was written on the reading thread's core: start bringing it over now, while
            // this one is signed (the sign loop's own loads come too few at a time to hide the transfer).
            #[cfg(target_arch = "x86_64")]
            if let Some(next) = docs.get(i + 1) {
                // SAFETY: `prefetch` needs SSE, which every x86-64 CPU has.
                unsafe { crate::arch::x86::prefetch(next.text.as_bytes(), PREFETCH_BYTES) };
            }
            let windows: &dyn WindowSource = if ascii.get(i) == Some(&true) {
                &known
            } else {
                shingler
            };
            *is_empty = sign_text(kernel, windows, &doc.text, out);
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
/// one also keeps the text in flight in cache. Against batches of 256 mails (about 0.9 MB), four queued, and
/// 4 × 1 MB read ahead, these sizes made the `.gz` `sketch --threads 1` about 15% faster on 2 cores.
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
    consume: impl FnMut(&mut SignedBatch) -> Result<(), E>,
) -> Result<(), E> {
    sketch_corpus_on(reader, shingler, kernel, None, consume)
}

/// [`sketch_corpus`], with the reading thread bound to CPU `helper` when it is `Some` (a placement hint:
/// [`crate::exec::Tuning::helper_cpu`]), where it polls the full channel instead of sleeping on it
/// ([`crate::exec::send_polling`]).
pub(crate) fn sketch_corpus_on<E: From<ReadError>>(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    helper: Option<usize>,
    mut consume: impl FnMut(&mut SignedBatch) -> Result<(), E>,
) -> Result<(), E> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUED_BATCHES);
        let (spent_tx, spent_rx) =
            std::sync::mpsc::sync_channel::<Vec<Document>>(QUEUED_BATCHES + 2);
        scope.spawn(move || {
            // Bound to a CPU of its own (shared with the writing thread at most), the reading thread polls the
            // full channel rather than sleep on it (exec::send_polling).
            let poll = helper.is_some_and(crate::exec::bind_current_thread);
            loop {
                // Free the documents signing is done with before reading more.
                while let Ok(spent) = spent_rx.try_recv() {
                    drop(spent);
                }
                let batch = read_batch(reader, shingler, READ_BATCH_DOCS, READ_BATCH_BYTES);
                let last = !matches!(&batch, Ok(b) if !b.docs.is_empty());
                // A send fails only when signing stopped (an error): then reading stops too.
                if crate::exec::send_polling(&tx, batch, poll).is_err() || last {
                    break;
                }
            }
        });
        for batch in rx {
            let batch = batch?;
            if batch.docs.is_empty() {
                break;
            }
            let mut signed = sign_read_batch(batch, shingler, kernel);
            consume(&mut signed)?;
            // When the reading thread is behind on freeing, free here (the channel never blocks signing).
            let _ = spent_tx.try_send(std::mem::take(&mut signed.docs));
        }
        Ok(())
    })
}

/// The next batch: documents up to `max_docs` of them or `max_bytes` of text, each flagged ASCII or not right
/// after it is read (while its text is in cache) when `shingler` uses the flag.
fn read_batch(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    max_docs: usize,
    max_bytes: usize,
) -> Result<ReadBatch, ReadError> {
    let flag = shingler.uses_ascii();
    let mut batch = ReadBatch {
        docs: Vec::with_capacity(max_docs),
        ascii: Vec::with_capacity(if flag { max_docs } else { 0 }),
    };
    let mut bytes = 0usize;
    while batch.docs.len() < max_docs && bytes < max_bytes {
        match reader.next() {
            None => break,
            Some(doc) => {
                let doc = doc?;
                bytes += doc.text.len();
                if flag {
                    batch.ascii.push(shingler.is_ascii(&doc.text));
                }
                batch.docs.push(doc);
            }
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::ReaderOptions;
    use crate::kernel::KernelParams;
    use crate::shingle::{Normalization, ShingleKind};

    /// Texts for the ASCII flag: all ASCII, raw UTF-8, a `\u` escape that unescapes to a non-ASCII char (an
    /// ASCII line with a non-ASCII text), one that unescapes to ASCII, non-ASCII only at the very end, and
    /// short and empty texts. Each line is written as JSON by serde_json, some with `\u` escapes forced.
    fn mixed_corpus() -> (tempfile::TempDir, std::path::PathBuf, Vec<String>) {
        let base = "the quick brown fox jumps over the lazy dog; ";
        let texts: Vec<String> = vec![
            base.repeat(20),
            format!(
                "{}caf\u{e9} cr\u{e8}me br\u{fb}l\u{e9}e {}",
                base.repeat(3),
                base
            ),
            format!("{}\u{2014}em dash and \u{1f600} emoji", base.repeat(5)),
            format!("{}ends in \u{e9}", base.repeat(4)),
            "tiny".into(),
            "na\u{ef}ve".into(),
            String::new(),
            base.repeat(200),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mixed.jsonl");
        let mut lines = String::new();
        for (i, t) in texts.iter().enumerate() {
            let mut line =
                serde_json::to_string(&serde_json::json!({ "id": format!("d{i}"), "text": t }))
                    .unwrap();
            if i % 2 == 1 {
                // The same JSON with every non-ASCII char as `\u` escapes (surrogate pairs above U+FFFF), and an
                // escaped ASCII char: the line is ASCII, the text is not.
                let mut ascii = String::new();
                for c in line.chars() {
                    if c.is_ascii() {
                        ascii.push(c);
                    } else {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            ascii.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                }
                line = ascii.replacen("quick", "\\u0071uick", 1);
            }
            lines.push_str(&line);
            lines.push('\n');
        }
        std::fs::write(&path, lines).unwrap();
        (dir, path, texts)
    }

    /// `sign_texts` gives each text the signature the kernel gives it alone with a fresh buffer (the reused
    /// thread-local buffer leaves nothing behind, a long text before a short one included), the same for one
    /// thread and three, and flags the text with no window.
    #[test]
    fn sign_texts_signs_each_text_as_the_kernel_does_alone_at_any_thread_count() {
        let shingler = Shingler::new(ShingleKind::Char(5), Normalization::default(), 7);
        let long = "a longer text with many more windows than the next one ".repeat(40);
        let texts = [
            "",
            "abc",
            long.as_str(),
            "short text here",
            "abcd",
            long.as_str(),
            "the quick brown fox",
        ];
        for name in ["oph-opt", "simd", "fss"] {
            let params = KernelParams {
                num_perm: 32,
                seed: 5,
                isa: None,
            };
            let kernel = crate::kernel::build(name, &params).unwrap();
            let one =
                crate::exec::with_threads(Some(1), || sign_texts(&texts, &shingler, &*kernel))
                    .unwrap();
            let three =
                crate::exec::with_threads(Some(3), || sign_texts(&texts, &shingler, &*kernel))
                    .unwrap();
            assert_eq!(one, three, "{name}: thread count changed the output");
            let (sigs, empty) = one;
            for (i, text) in texts.iter().enumerate() {
                let mut want = vec![0u32; 32];
                let want_empty = kernel.sign_text(&shingler, text, &mut Vec::new(), &mut want);
                assert_eq!(&sigs[i * 32..(i + 1) * 32], &want[..], "{name}: text {i}");
                assert_eq!(empty[i], want_empty, "{name}: text {i}");
            }
            assert!(
                empty[0] && !empty[2],
                "{name}: only a text with no window is empty"
            );
        }
    }

    /// `sketch_corpus` (texts flagged ASCII on the reading thread, signed through `KnownAscii`) gives every
    /// document the signature the kernel gives its text directly, for shinglers that use the flag and ones
    /// that do not; and the flags it finds are the texts' own. Flagging a non-ASCII text would cut it into byte
    /// windows, which changes its signature at char:3 and char:5.
    #[test]
    fn flagged_batches_sign_as_the_texts_do() {
        let (_dir, path, texts) = mixed_corpus();
        let kinds = [
            (ShingleKind::Char(5), Normalization::default()),
            (ShingleKind::Char(3), Normalization::default()),
            (ShingleKind::Char(9), Normalization::default()),
            (ShingleKind::Byte(5), Normalization::default()),
            (ShingleKind::Word(2), Normalization::default()),
        ];
        for (kind, norm) in kinds {
            let shingler = Shingler::new(kind, norm, 7);
            for name in ["oph-opt", "fss", "simd", "scalar"] {
                let params = KernelParams {
                    num_perm: 64,
                    seed: 3,
                    isa: None,
                };
                let kernel = crate::kernel::build(name, &params).unwrap();
                let mut reader = CorpusReader::open(&path, &ReaderOptions::default()).unwrap();
                let mut got: Vec<(String, Vec<u32>, bool)> = Vec::new();
                sketch_corpus::<ReadError>(&mut reader, &shingler, &*kernel, |batch| {
                    for (i, d) in batch.docs.iter().enumerate() {
                        got.push((
                            d.text.clone(),
                            batch.signature(i, 64).to_vec(),
                            batch.empty[i],
                        ));
                    }
                    Ok(())
                })
                .unwrap();
                assert_eq!(got.len(), texts.len());
                for (i, (text, sig, empty)) in got.iter().enumerate() {
                    assert_eq!(text, &texts[i], "document {i} read back");
                    let mut want = vec![0u32; 64];
                    let want_empty = kernel.sign_text(&shingler, text, &mut Vec::new(), &mut want);
                    assert_eq!(
                        (sig, *empty),
                        (&want, want_empty),
                        "{name}, {kind:?}, document {i}"
                    );
                }
                let mut reader = CorpusReader::open(&path, &ReaderOptions::default()).unwrap();
                let batch = read_batch(&mut reader, &shingler, 100, 1 << 20).unwrap();
                let want: Vec<bool> = if shingler.uses_ascii() {
                    texts.iter().map(|t| t.is_ascii()).collect()
                } else {
                    Vec::new()
                };
                assert_eq!(batch.ascii, want, "{kind:?}");
            }
        }
    }
}
