//! The seeded synthetic corpus generator behind `lshbench gen`: Zipfian text with planted near-duplicate
//! clusters made by controlled edits, plus a ground-truth file naming each cluster.
//!
//! How a corpus is made:
//! 1. A vocabulary is drawn from the seed: optionally the most common English words first, then pronounceable
//!    pseudo-words (1-5 syllables). Words are ranked roughly by length, short first, as in natural language,
//!    and word w of rank r is drawn with probability proportional to r^-s (Zipf's law; Walker's alias method
//!    makes each draw O(1)).
//! 2. A plan, drawn from the seed, picks which documents are planted near-duplicates: clusters of
//!    `cluster_size` documents each, at random positions. The member with the smallest index is the cluster's
//!    *base*; the others are *copies*. A fraction of the clusters are *template* clusters: every member fills
//!    the same boilerplate's slots (names, places, companies, salaries, dates, numbers) with its own values.
//! 3. Every document is a pure function of (seed, plan, its index): its text comes from its own random stream,
//!    and a copy rebuilds its base's text from the base's stream and then applies edits from its own. So the
//!    output is byte-identical for any thread count, and documents can be made in any order.
//!
//! Edits of a copy with edit rate `e` over a base of `W` words: `round(e * W)` word operations (stochastic
//! rounding, so the expected count is exactly `e * W`), each a substitution (a fresh Zipf word in place),
//! an insertion (a fresh word) or a deletion with equal probability, at uniform positions; then 0 to
//! `max_moves` block moves (a run of 5-30 words cut out and put back elsewhere). The counts actually applied
//! are recorded in the truth file.

use super::pairs::bounded;
use super::reader::Document;
use crate::exec::Progress;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------------------
// Configuration

/// Everything that determines a corpus. Equal configs give byte-identical corpora.
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Number of documents.
    pub docs: usize,
    /// Mean document length in bytes (before edits).
    pub mean_len: usize,
    /// Spread of document lengths: the sigma of the log-normal length distribution (0 = all lengths equal).
    pub len_sigma: f64,
    /// Fraction of documents that are planted copies (near-duplicates of an earlier base document).
    pub dup_fraction: f64,
    /// Documents per cluster, base included: inclusive range.
    pub cluster_size: (usize, usize),
    /// Per-copy edit rate (word operations per base word), drawn uniformly from this inclusive range.
    pub edit_rate: (f64, f64),
    /// Block moves per copy, drawn uniformly from 0..=max_moves.
    pub max_moves: usize,
    /// Fraction of clusters built from a shared template with per-member slot values.
    pub template_fraction: f64,
    /// Template slots per word of template text.
    pub slot_rate: f64,
    /// Vocabulary size (word types), built-in English words included.
    pub vocab: usize,
    /// Zipf exponent s: the word of rank r has probability proportional to r^-s.
    pub zipf: f64,
    /// Put the most common English words at the top ranks (otherwise the vocabulary is all pseudo-words).
    pub english: bool,
    /// The seed every random stream (vocabulary, plan, each document's text, slots and edits) derives from.
    pub seed: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            docs: 10_000,
            mean_len: 1500,
            len_sigma: 0.5,
            dup_fraction: 0.1,
            cluster_size: (2, 5),
            edit_rate: (0.0, 0.3),
            max_moves: 2,
            template_fraction: 0.2,
            slot_rate: 0.05,
            vocab: 50_000,
            zipf: 1.0,
            english: true,
            seed: 42,
        }
    }
}

impl GenConfig {
    /// Checks every field is in range (the plan's size against `docs` is checked by [`Generator::new`]).
    pub fn validate(&self) -> Result<(), GenConfigError> {
        let (cmin, cmax) = self.cluster_size;
        if cmin < 2 || cmax < cmin {
            return Err(GenConfigError::ClusterSize {
                min: cmin,
                max: cmax,
            });
        }
        let (emin, emax) = self.edit_rate;
        if !(0.0..=1.0).contains(&emin) || !(emin..=1.0).contains(&emax) {
            return Err(GenConfigError::EditRate {
                min: emin,
                max: emax,
            });
        }
        if !(0.0..1.0).contains(&self.dup_fraction) {
            return Err(GenConfigError::DupFraction(self.dup_fraction));
        }
        if !(0.0..=1.0).contains(&self.template_fraction) {
            return Err(GenConfigError::TemplateFraction(self.template_fraction));
        }
        if !(0.0..=1.0).contains(&self.slot_rate) {
            return Err(GenConfigError::SlotRate(self.slot_rate));
        }
        if self.vocab < 10 || self.vocab > 1_000_000 {
            return Err(GenConfigError::Vocab(self.vocab));
        }
        if !(self.zipf >= 0.0 && self.zipf.is_finite()) {
            return Err(GenConfigError::Zipf(self.zipf));
        }
        if !(self.len_sigma >= 0.0 && self.len_sigma <= 3.0) {
            return Err(GenConfigError::LenSigma(self.len_sigma));
        }
        if self.mean_len == 0 {
            return Err(GenConfigError::MeanLen);
        }
        Ok(())
    }
}

/// Why a [`GenConfig`] was refused. The messages name the `lshbench gen` flag of the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenConfigError {
    /// `cluster_size` is not MIN..MAX with 2 <= MIN <= MAX.
    #[error("--cluster-size must be MIN..MAX with 2 <= MIN <= MAX, got {min}..{max}")]
    ClusterSize {
        /// The smallest cluster size asked for.
        min: usize,
        /// The largest cluster size asked for.
        max: usize,
    },
    /// `edit_rate` is not MIN..MAX with 0 <= MIN <= MAX <= 1.
    #[error("--edit-rate must be MIN..MAX with 0 <= MIN <= MAX <= 1, got {min}..{max}")]
    EditRate {
        /// The smallest edit rate asked for.
        min: f64,
        /// The largest edit rate asked for.
        max: f64,
    },
    /// `dup_fraction` is outside [0, 1).
    #[error("--dup-fraction must be in [0, 1), got {0}")]
    DupFraction(f64),
    /// `template_fraction` is outside [0, 1].
    #[error("--template-fraction must be in [0, 1], got {0}")]
    TemplateFraction(f64),
    /// `slot_rate` is outside [0, 1].
    #[error("--slot-rate must be in [0, 1], got {0}")]
    SlotRate(f64),
    /// `vocab` is outside 10..=1,000,000.
    #[error("--vocab must be between 10 and 1,000,000, got {0}")]
    Vocab(usize),
    /// `zipf` is negative, infinite or NaN.
    #[error("--zipf must be a finite exponent >= 0, got {0}")]
    Zipf(f64),
    /// `len_sigma` is outside [0, 3].
    #[error("--len-sigma must be in [0, 3], got {0}")]
    LenSigma(f64),
    /// `mean_len` is 0.
    #[error("--mean-len must be positive")]
    MeanLen,
    /// The planted clusters need more documents than the corpus has.
    #[error(
        "--dup-fraction {dup_fraction} with --cluster-size {}..{} needs {members} documents in clusters, more than --docs {docs}",
        cluster_size.0,
        cluster_size.1
    )]
    TooManyMembers {
        /// The fraction of copies asked for.
        dup_fraction: f64,
        /// The cluster size range asked for.
        cluster_size: (usize, usize),
        /// Documents the drawn clusters hold.
        members: usize,
        /// Documents in the corpus.
        docs: usize,
    },
}

/// Why [`write_corpus`] or [`write_files`] failed.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The configuration was refused.
    #[error(transparent)]
    Config(#[from] GenConfigError),
    /// Writing to the caller's stream failed ([`write_corpus`]).
    #[error("{0}")]
    Stream(std::io::Error),
    /// A file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
}

// ---------------------------------------------------------------------------------------------------------
// Random streams

/// Independent streams per purpose, so adding a draw to one never shifts another.
#[derive(Clone, Copy)]
enum Stream {
    /// A document's own text (for a template cluster's base: the template).
    Text = 0,
    /// A copy's edits.
    Edits = 1,
    /// A template member's slot values.
    Slots = 2,
    /// The cluster plan.
    Plan = 3,
    /// The vocabulary.
    Vocab = 4,
}

fn rng_for(seed: u64, index: u64, stream: Stream) -> Xoshiro256PlusPlus {
    // seed_from_u64 expands its argument through SplitMix64, which decorrelates nearby inputs; the odd
    // multipliers keep (seed, index, stream) triples from colliding.
    let key = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
        ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03)
        ^ (stream as u64).wrapping_mul(0xA24B_AED4_963E_E407);
    Xoshiro256PlusPlus::seed_from_u64(key)
}

/// A uniform draw from [0, 1) with 53 bits.
fn unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    let u1 = 1.0 - unit(rng); // (0, 1]
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn uniform_usize(rng: &mut Xoshiro256PlusPlus, lo: usize, hi: usize) -> usize {
    lo + bounded(rng, (hi - lo + 1) as u64) as usize
}

fn pick<'a>(rng: &mut Xoshiro256PlusPlus, items: &[&'a str]) -> &'a str {
    items[bounded(rng, items.len() as u64) as usize]
}

// ---------------------------------------------------------------------------------------------------------
// Vocabulary and Zipf sampling

/// Very frequent English words, roughly most frequent first, then a few that job adverts use a lot.
#[rustfmt::skip]
const ENGLISH: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
    "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
    "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
    "would", "who", "so", "no", "she", "other", "its", "may", "these", "what", "them", "than", "some", "him",
    "time", "into", "only", "do", "out", "new", "then", "any", "our", "about", "also", "two", "first", "could",
    "must", "over", "such", "should", "made", "work", "years", "like", "after", "most", "make", "people",
    "year", "between", "through", "before", "where", "well", "each", "much", "used", "many", "under", "same",
    "us", "own", "while", "very", "team", "role", "experience", "within", "good", "part", "world",
    "without", "high", "state", "life", "last", "great", "help", "business", "support", "working", "skills",
    "service", "based", "development", "company", "day",
];

#[rustfmt::skip]
const ONSETS: &[&str] = &[
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z", "b", "c",
    "d", "l", "m", "n", "p", "r", "s", "t", "b", "d", "l", "m", "n", "r", "s", "t", "br", "ch", "cl", "cr",
    "dr", "fl", "fr", "gr", "pl", "pr", "sh", "sp", "st", "th", "tr", "wh", "", "", "", "", "",
];
#[rustfmt::skip]
const NUCLEI: &[&str] = &[
    "a", "e", "i", "o", "u", "a", "e", "i", "o", "e", "a", "e", "i", "a", "o", "ai", "ea", "ee", "ou", "oo",
    "y",
];
#[rustfmt::skip]
const CODAS: &[&str] = &[
    "", "", "", "", "", "", "", "", "", "", "", "", "n", "r", "s", "t", "l", "m", "d", "n", "r", "s", "nd",
    "st", "ng", "nt", "ck", "ll",
];

fn pseudo_word(rng: &mut Xoshiro256PlusPlus) -> String {
    // Syllables per word type: most dictionary words have two or three.
    let syllables = match unit(rng) {
        u if u < 0.15 => 1,
        u if u < 0.55 => 2,
        u if u < 0.85 => 3,
        u if u < 0.97 => 4,
        _ => 5,
    };
    let mut w = String::with_capacity(12);
    for _ in 0..syllables {
        w.push_str(pick(rng, ONSETS));
        w.push_str(pick(rng, NUCLEI));
        w.push_str(pick(rng, CODAS));
    }
    w
}

/// Word types, rank order (index 0 is rank 1), stored in one buffer.
struct Vocabulary {
    bytes: Vec<u8>,
    /// `ends[i]` is the end of word i in `bytes`; word i starts at `ends[i-1]` (or 0).
    ends: Vec<u32>,
}

impl Vocabulary {
    fn build(config: &GenConfig) -> Vocabulary {
        let mut rng = rng_for(config.seed, 0, Stream::Vocab);
        let mut seen = rustc_hash::FxHashSet::default();
        let mut words: Vec<String> = Vec::with_capacity(config.vocab);
        if config.english {
            for w in ENGLISH.iter().take(config.vocab) {
                if seen.insert(w.to_string()) {
                    words.push(w.to_string());
                }
            }
        }
        let fixed = words.len();
        let mut pseudo: Vec<(f64, String)> = Vec::with_capacity(config.vocab - fixed);
        while fixed + pseudo.len() < config.vocab {
            let w = pseudo_word(&mut rng);
            if seen.insert(w.clone()) {
                // Rank by length plus noise: frequent words are short (Zipf's law of abbreviation), but
                // not strictly so.
                let key = w.len() as f64 + 4.0 * unit(&mut rng);
                pseudo.push((key, w));
            }
        }
        pseudo.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        words.extend(pseudo.into_iter().map(|(_, w)| w));
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(words.len());
        for w in &words {
            bytes.extend_from_slice(w.as_bytes());
            ends.push(bytes.len() as u32);
        }
        Vocabulary { bytes, ends }
    }

    fn word(&self, i: u32) -> &[u8] {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Walker's alias method (Vose's construction): O(1) draws from a fixed discrete distribution.
struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    fn zipf(n: usize, s: f64) -> Alias {
        let weights: Vec<f64> = (1..=n).map(|r| (r as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut prob = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(&s_i), Some(&l_i)) = (small.last(), large.last()) {
            small.pop();
            prob[s_i] = scaled[s_i];
            alias[s_i] = l_i as u32;
            scaled[l_i] -= 1.0 - scaled[s_i];
            if scaled[l_i] < 1.0 {
                large.pop();
                small.push(l_i);
            }
        }
        // Whatever is left has probability 1 up to rounding.
        Alias { prob, alias }
    }

    #[inline]
    fn sample(&self, rng: &mut Xoshiro256PlusPlus) -> u32 {
        let r = rng.next_u64();
        // One 64-bit draw: the high 32 bits pick the column (multiply-shift; each column's probability is off
        // by at most n / 2^32, relatively 1e-5 at n = 50,000, far below anything a test can see), the low
        // 32 bits flip its biased coin.
        let col = (((r >> 32) * self.prob.len() as u64) >> 32) as usize;
        if ((r as u32) as f64) < self.prob[col] * 4_294_967_296.0 {
            col as u32
        } else {
            self.alias[col]
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Tokens and text

/// A token's word id: below the vocabulary size it is a word; with `SLOT` set, a template slot of the kind in
/// the low bits; with `FILL` set, the document's slot value of that index.
const SLOT: u32 = 1 << 31;
const FILL: u32 = 1 << 30;

/// What follows a token when another token comes after it.
const SEP_SPACE: u8 = 0;
const SEP_PARAGRAPH: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token {
    word: u32,
    /// Capitalise the first letter (a sentence start).
    cap: bool,
    /// Punctuation written right after the word (0 = none).
    punct: u8,
    sep: u8,
}

impl Token {
    fn plain(word: u32) -> Token {
        Token {
            word,
            cap: false,
            punct: 0,
            sep: SEP_SPACE,
        }
    }
}

/// The kinds of template slot and how a value is drawn: the varying parts of a job advert.
#[derive(Clone, Copy)]
enum SlotKind {
    Name,
    City,
    Company,
    Salary,
    Date,
    Number,
}
const SLOT_KINDS: [SlotKind; 6] = [
    SlotKind::Name,
    SlotKind::City,
    SlotKind::Company,
    SlotKind::Salary,
    SlotKind::Date,
    SlotKind::Number,
];

#[rustfmt::skip]
const FIRST_NAMES: &[&str] = &[
    "James", "Mary", "John", "Patricia", "Robert", "Jennifer", "Michael", "Linda", "David", "Elizabeth",
    "William", "Susan", "Richard", "Jessica", "Thomas", "Sarah", "Daniel", "Karen", "Matthew", "Lisa",
    "Anthony", "Nancy", "Mark", "Sandra", "Paul", "Ashley", "Steven", "Emily", "Andrew", "Donna", "Oliver",
    "Amelia", "George", "Isla", "Harry", "Ava", "Jack", "Mia", "Noah", "Grace",
];
#[rustfmt::skip]
const SURNAMES: &[&str] = &[
    "Smith", "Jones", "Taylor", "Brown", "Williams", "Wilson", "Johnson", "Davies", "Robinson", "Wright",
    "Thompson", "Evans", "Walker", "White", "Roberts", "Green", "Hall", "Wood", "Jackson", "Clarke", "Patel",
    "Khan", "Lewis", "Hughes", "Edwards", "Turner", "Hill", "Moore", "Cooper", "Ward",
];
#[rustfmt::skip]
const CITIES: &[&str] = &[
    "London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Bristol", "Liverpool", "Sheffield", "Edinburgh",
    "Cardiff", "Leicester", "Nottingham", "Newcastle", "Belfast", "Brighton", "Reading", "Oxford", "Cambridge",
    "York", "Aberdeen", "Southampton", "Norwich", "Exeter", "Coventry", "Bath", "Derby", "Swindon",
    "Milton Keynes", "Plymouth", "Hull",
];
#[rustfmt::skip]
const COMPANY_SUFFIXES: &[&str] = &[
    "Ltd", "Group", "plc", "Partners", "Solutions", "Recruitment", "Services", "Consulting", "Holdings",
];
#[rustfmt::skip]
const MONTHS: &[&str] = &[
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
];

fn capitalised(word: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(word).into_owned();
    if let Some(first) = s.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    s
}

fn slot_value(kind: SlotKind, rng: &mut Xoshiro256PlusPlus, vocab: &Vocabulary) -> String {
    match kind {
        SlotKind::Name => format!("{} {}", pick(rng, FIRST_NAMES), pick(rng, SURNAMES)),
        SlotKind::City => pick(rng, CITIES).to_string(),
        SlotKind::Company => {
            // A rarer vocabulary word as the brand name.
            let lo = (vocab.len() / 10).min(vocab.len() - 1);
            let w = uniform_usize(rng, lo, vocab.len() - 1) as u32;
            format!(
                "{} {}",
                capitalised(vocab.word(w)),
                pick(rng, COMPANY_SUFFIXES)
            )
        }
        SlotKind::Salary => {
            let pounds = 500 * uniform_usize(rng, 30, 180);
            format!("\u{a3}{},{:03}", pounds / 1000, pounds % 1000)
        }
        SlotKind::Date => format!(
            "{} {} {}",
            uniform_usize(rng, 1, 28),
            pick(rng, MONTHS),
            uniform_usize(rng, 2010, 2026)
        ),
        SlotKind::Number => uniform_usize(rng, 2, 99).to_string(),
    }
}

/// Appends `text` JSON-escaped, without the quotes (the characters a JSON string may not hold raw).
fn push_json_inner(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

// ---------------------------------------------------------------------------------------------------------
// The plan: which documents form clusters

/// What kind of near-duplicates a cluster holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterKind {
    /// Copies are the base with word edits and block moves.
    Edit,
    /// Every member fills the same template's slots with its own values; copies are also edited.
    Template,
}

impl ClusterKind {
    /// The name in the truth file's `kind` column: `edit` or `template`.
    pub fn name(self) -> &'static str {
        match self {
            ClusterKind::Edit => "edit",
            ClusterKind::Template => "template",
        }
    }
}

/// The edits actually applied to one document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditLog {
    /// Words replaced by a fresh Zipf word.
    pub substitutions: u32,
    /// Fresh Zipf words inserted.
    pub insertions: u32,
    /// Words deleted.
    pub deletions: u32,
    /// Block moves (a run of words cut out and put back elsewhere).
    pub moves: u32,
    /// Template slots filled with this member's own values (0 for edit clusters).
    pub slots: u32,
    /// Words in the document before the word edits (the base's words, after slot filling).
    pub base_words: u32,
}

/// One member of a planted cluster, as the truth file lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthMember {
    /// 0-based document index (the id is its decimal string).
    pub index: u64,
    /// Whether this member is the cluster's base (its smallest index) rather than a copy.
    pub is_base: bool,
    /// The edit rate drawn for this copy (0 for the base).
    pub edit_rate: f64,
    /// What was actually applied to this member.
    pub log: EditLog,
}

/// One planted cluster, as the truth file lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthCluster {
    /// 0-based; clusters are numbered in order of their base's position.
    pub id: u64,
    /// What kind of near-duplicates it holds.
    pub kind: ClusterKind,
    /// Ascending document index; the first is the base.
    pub members: Vec<TruthMember>,
}

/// The ground truth: every planted cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// The clusters, in `id` order (that of their base's position).
    pub clusters: Vec<TruthCluster>,
}

/// The truth file's columns.
pub const TRUTH_HEADER: &str = "cluster,kind,id,role,base_id,edit_rate,substitutions,insertions,deletions,moves,slots,base_words";

impl Truth {
    /// Number of documents that are copies.
    pub fn copies(&self) -> usize {
        self.clusters.iter().map(|c| c.members.len() - 1).sum()
    }

    /// Writes the truth as CSV: one row per cluster member, in cluster order, base first.
    pub fn write_csv(&self, mut out: impl Write) -> std::io::Result<()> {
        writeln!(out, "{TRUTH_HEADER}")?;
        for c in &self.clusters {
            let base = c.members[0].index;
            for m in &c.members {
                let l = &m.log;
                writeln!(
                    out,
                    "{},{},{},{},{},{:.4},{},{},{},{},{},{}",
                    c.id,
                    c.kind.name(),
                    m.index,
                    if m.is_base { "base" } else { "copy" },
                    base,
                    m.edit_rate,
                    l.substitutions,
                    l.insertions,
                    l.deletions,
                    l.moves,
                    l.slots,
                    l.base_words
                )?;
            }
        }
        Ok(())
    }
}

const UNIQUE: u32 = u32::MAX;

struct PlannedCluster {
    kind: ClusterKind,
    /// Ascending; `members[0]` is the base.
    members: Vec<u32>,
    /// Per member: (edit rate, block moves); (0, 0) for the base.
    edits: Vec<(f64, usize)>,
}

struct Plan {
    cluster_of: Vec<u32>,
    clusters: Vec<PlannedCluster>,
}

impl Plan {
    fn draw(config: &GenConfig) -> Result<Plan, GenConfigError> {
        let n = config.docs;
        let mut rng = rng_for(config.seed, 0, Stream::Plan);
        let copies = (config.dup_fraction * n as f64).round() as usize;
        let (cmin, cmax) = config.cluster_size;
        let mut sizes = Vec::new();
        let mut left = copies;
        while left > 0 {
            // The last cluster may be smaller than MIN, to hit the copy count exactly.
            let c = (uniform_usize(&mut rng, cmin, cmax) - 1).min(left);
            sizes.push(c + 1);
            left -= c;
        }
        let members: usize = sizes.iter().sum();
        if members > n {
            return Err(GenConfigError::TooManyMembers {
                dup_fraction: config.dup_fraction,
                cluster_size: (cmin, cmax),
                members,
                docs: n,
            });
        }
        // A partial Fisher-Yates shuffle picks the members' positions.
        let mut positions: Vec<u32> = (0..n as u32).collect();
        for i in 0..members {
            let j = i + bounded(&mut rng, (n - i) as u64) as usize;
            positions.swap(i, j);
        }
        let mut clusters = Vec::with_capacity(sizes.len());
        let mut at = 0;
        for size in sizes {
            let mut m = positions[at..at + size].to_vec();
            at += size;
            m.sort_unstable();
            let kind = if unit(&mut rng) < config.template_fraction {
                ClusterKind::Template
            } else {
                ClusterKind::Edit
            };
            let edits = (0..size)
                .map(|k| {
                    let rate = config.edit_rate.0
                        + (config.edit_rate.1 - config.edit_rate.0) * unit(&mut rng);
                    let moves = uniform_usize(&mut rng, 0, config.max_moves);
                    if k == 0 { (0.0, 0) } else { (rate, moves) }
                })
                .collect();
            clusters.push(PlannedCluster {
                kind,
                members: m,
                edits,
            });
        }
        clusters.sort_by_key(|c| c.members[0]);
        let mut cluster_of = vec![UNIQUE; n];
        for (ci, c) in clusters.iter().enumerate() {
            for &d in &c.members {
                cluster_of[d as usize] = ci as u32;
            }
        }
        Ok(Plan {
            cluster_of,
            clusters,
        })
    }
}

// ---------------------------------------------------------------------------------------------------------
// The generator

/// A corpus, ready to produce any of its documents on demand.
pub struct Generator {
    config: GenConfig,
    vocab: Vocabulary,
    zipf: Alias,
    plan: Plan,
}

impl Generator {
    /// Validates `config`, builds the vocabulary and draws the cluster plan.
    pub fn new(config: &GenConfig) -> Result<Generator, GenConfigError> {
        config.validate()?;
        let vocab = Vocabulary::build(config);
        let zipf = Alias::zipf(vocab.len(), config.zipf);
        let plan = Plan::draw(config)?;
        Ok(Generator {
            config: config.clone(),
            vocab,
            zipf,
            plan,
        })
    }

    /// Number of documents in the corpus.
    pub fn len(&self) -> usize {
        self.config.docs
    }

    /// Whether the corpus has no documents.
    pub fn is_empty(&self) -> bool {
        self.config.docs == 0
    }

    /// The vocabulary in rank order (rank 1 first).
    pub fn vocabulary(&self) -> Vec<String> {
        (0..self.vocab.len() as u32)
            .map(|i| String::from_utf8_lossy(self.vocab.word(i)).into_owned())
            .collect()
    }

    /// The truth for this corpus with empty edit logs (the logs are known once the copies are made).
    fn truth_skeleton(&self) -> Truth {
        Truth {
            clusters: self
                .plan
                .clusters
                .iter()
                .enumerate()
                .map(|(ci, c)| TruthCluster {
                    id: ci as u64,
                    kind: c.kind,
                    members: c
                        .members
                        .iter()
                        .zip(&c.edits)
                        .enumerate()
                        .map(|(k, (&d, &(rate, _)))| TruthMember {
                            index: d as u64,
                            is_base: k == 0,
                            edit_rate: rate,
                            log: EditLog::default(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// A document's text tokens, drawn from its own stream. Length: a log-normal byte target with the
    /// configured mean; the document ends at the word that reaches it. Slots are placed when `template`.
    fn base_tokens(&self, index: u32, template: bool) -> Vec<Token> {
        let mut rng = rng_for(self.config.seed, index as u64, Stream::Text);
        let sigma = self.config.len_sigma;
        // E[exp(mu + sigma Z)] = exp(mu + sigma^2 / 2), so this mu gives the requested mean.
        let mu = (self.config.mean_len as f64).ln() - sigma * sigma / 2.0;
        let target = (mu + sigma * normal(&mut rng)).exp().max(1.0) as usize;
        let mut tokens: Vec<Token> = Vec::with_capacity(target / 5 + 8);
        let mut bytes = 0usize;
        'doc: loop {
            // Sentence lengths: triangular on 3..=27 words, mean 15.
            let words = 3 + uniform_usize(&mut rng, 0, 12) + uniform_usize(&mut rng, 0, 12);
            for w in 0..words {
                let mut t = if template && unit(&mut rng) < self.config.slot_rate {
                    let kind = bounded(&mut rng, SLOT_KINDS.len() as u64) as u32;
                    bytes += 10; // a typical slot value's length
                    Token::plain(SLOT | kind)
                } else {
                    let word = self.zipf.sample(&mut rng);
                    bytes += self.vocab.word(word).len();
                    Token::plain(word)
                };
                t.cap = w == 0;
                let last = w + 1 == words;
                if !last && unit(&mut rng) < 0.07 {
                    t.punct = b',';
                    bytes += 1;
                }
                bytes += 1; // the separator or the sentence end
                if last || bytes >= target {
                    bytes += 1;
                    t.punct = match unit(&mut rng) {
                        u if u < 0.90 => b'.',
                        u if u < 0.96 => b'?',
                        _ => b'!',
                    };
                    // About five sentences per paragraph.
                    if unit(&mut rng) < 0.2 {
                        t.sep = SEP_PARAGRAPH;
                        bytes += 1;
                    }
                }
                tokens.push(t);
                if bytes >= target {
                    break 'doc;
                }
            }
        }
        tokens
    }

    /// Replaces a template's slot tokens with this member's values, returning them.
    fn fill_slots(&self, tokens: &mut [Token], index: u32) -> Vec<String> {
        let mut rng = rng_for(self.config.seed, index as u64, Stream::Slots);
        let mut fills = Vec::new();
        for t in tokens.iter_mut().filter(|t| t.word & SLOT != 0) {
            let kind = SLOT_KINDS[(t.word & !SLOT) as usize];
            t.word = FILL | fills.len() as u32;
            fills.push(slot_value(kind, &mut rng, &self.vocab));
        }
        fills
    }

    /// Applies a copy's word edits and block moves, returning what was done.
    fn edit(&self, tokens: &mut Vec<Token>, index: u32, rate: f64, moves: usize) -> EditLog {
        let mut rng = rng_for(self.config.seed, index as u64, Stream::Edits);
        let mut log = EditLog {
            base_words: tokens.len() as u32,
            ..Default::default()
        };
        let expected = rate * tokens.len() as f64;
        // Stochastic rounding: E[ops] = rate * words exactly.
        let ops = (expected + unit(&mut rng)).floor() as usize;
        for _ in 0..ops {
            match bounded(&mut rng, 3) {
                0 if !tokens.is_empty() => {
                    let p = bounded(&mut rng, tokens.len() as u64) as usize;
                    tokens[p].word = self.zipf.sample(&mut rng);
                    log.substitutions += 1;
                }
                1 => {
                    let p = bounded(&mut rng, tokens.len() as u64 + 1) as usize;
                    tokens.insert(p, Token::plain(self.zipf.sample(&mut rng)));
                    log.insertions += 1;
                }
                2 if tokens.len() > 1 => {
                    let p = bounded(&mut rng, tokens.len() as u64) as usize;
                    tokens.remove(p);
                    log.deletions += 1;
                }
                _ => {} // nothing to substitute or delete in an empty or one-word text
            }
        }
        for _ in 0..moves {
            let len = tokens.len();
            if len < 10 {
                break;
            }
            let block = uniform_usize(&mut rng, 5.min(len / 2), 30.min(len / 2));
            let from = bounded(&mut rng, (len - block + 1) as u64) as usize;
            let cut: Vec<Token> = tokens.drain(from..from + block).collect();
            // Any insertion point of the remainder except the block's old place.
            let mut to = bounded(&mut rng, (len - block) as u64) as usize;
            if to >= from {
                to += 1;
            }
            tokens.splice(to..to, cut);
            log.moves += 1;
        }
        log
    }

    /// Appends the text of `tokens` to `out`; with `json`, as the inside of a JSON string (the only
    /// characters generated text holds that JSON must escape are the paragraph breaks' newlines).
    fn render_into(&self, tokens: &[Token], fills: &[String], out: &mut Vec<u8>, json: bool) {
        let paragraph: &[u8] = if json { b"\\n\\n" } else { b"\n\n" };
        for (i, t) in tokens.iter().enumerate() {
            if i > 0 {
                if tokens[i - 1].sep == SEP_PARAGRAPH {
                    out.extend_from_slice(paragraph);
                } else {
                    out.push(b' ');
                }
            }
            let start = out.len();
            if t.word & FILL != 0 {
                let fill = &fills[(t.word & !FILL) as usize];
                if json {
                    push_json_inner(out, fill);
                } else {
                    out.extend_from_slice(fill.as_bytes());
                }
            } else {
                out.extend_from_slice(self.vocab.word(t.word));
            }
            if t.cap && start < out.len() {
                out[start].make_ascii_uppercase();
            }
            if t.punct != 0 {
                out.push(t.punct);
            }
        }
    }

    /// The tokens of document `index` (edited when it is a copy), its slot values, and its edit log.
    fn tokens_of(&self, index: usize) -> (Vec<Token>, Vec<String>, Option<EditLog>) {
        let i = index as u32;
        match self.plan.cluster_of[index] {
            UNIQUE => (self.base_tokens(i, false), Vec::new(), None),
            ci => {
                let c = &self.plan.clusters[ci as usize];
                let template = c.kind == ClusterKind::Template;
                let mut tokens = self.base_tokens(c.members[0], template);
                let fills = if template {
                    self.fill_slots(&mut tokens, i)
                } else {
                    Vec::new()
                };
                let k = c.members.iter().position(|&m| m == i).expect("member");
                let mut log = if k == 0 {
                    EditLog {
                        base_words: tokens.len() as u32,
                        ..Default::default()
                    }
                } else {
                    let (rate, moves) = c.edits[k];
                    self.edit(&mut tokens, i, rate, moves)
                };
                log.slots = fills.len() as u32;
                (tokens, fills, Some(log))
            }
        }
    }

    /// Appends document `index` as one JSONL line `{"id":"<index>","text":"..."}`, returning its text length
    /// in bytes and its edit log.
    fn write_json_line(&self, index: usize, out: &mut Vec<u8>) -> (u64, Option<EditLog>) {
        let (tokens, fills, log) = self.tokens_of(index);
        out.extend_from_slice(b"{\"id\":\"");
        out.extend_from_slice(index.to_string().as_bytes());
        out.extend_from_slice(b"\",\"text\":\"");
        let start = out.len();
        self.render_into(&tokens, &fills, out, true);
        // Each paragraph break is 2 bytes of text written as 4.
        let breaks = tokens
            .iter()
            .skip(1)
            .zip(&tokens)
            .filter(|(_, p)| p.sep == SEP_PARAGRAPH)
            .count();
        let len = (out.len() - start - 2 * breaks) as u64;
        out.extend_from_slice(b"\"}\n");
        (len, log)
    }

    /// Document `index` and, for a cluster member, the edits applied to it.
    pub fn document(&self, index: usize) -> (Document, Option<EditLog>) {
        let (tokens, fills, log) = self.tokens_of(index);
        let mut out = Vec::with_capacity(tokens.len() * 8);
        self.render_into(&tokens, &fills, &mut out, false);
        let doc = Document {
            index: index as u64,
            id: index.to_string(),
            // Vocabulary words, slot values and punctuation are all UTF-8.
            text: String::from_utf8(out).expect("generated text is UTF-8"),
        };
        (doc, log)
    }

    /// Makes documents `range` in parallel on the current rayon pool, in order.
    fn chunk(&self, range: std::ops::Range<usize>) -> Vec<(Document, Option<EditLog>)> {
        range.into_par_iter().map(|i| self.document(i)).collect()
    }
}

/// Documents per unit of parallel work and per gzip member. Fixed, so the output never depends on the
/// thread count.
const CHUNK_DOCS: usize = 4096;

fn record_log(truth: &mut Truth, plan: &Plan, index: usize, log: EditLog) {
    let ci = plan.cluster_of[index] as usize;
    let m = truth.clusters[ci]
        .members
        .iter_mut()
        .find(|m| m.index == index as u64)
        .expect("member of its cluster");
    m.log = log;
}

/// Generates the corpus in memory, calling `sink` on each document in order, and returns the truth.
/// Work is spread over the current rayon pool; the documents do not depend on the thread count.
pub fn generate(
    config: &GenConfig,
    mut sink: impl FnMut(Document),
) -> Result<Truth, GenConfigError> {
    let generator = Generator::new(config)?;
    let mut truth = generator.truth_skeleton();
    let n = generator.len();
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK_DOCS * 4).min(n);
        for (doc, log) in generator.chunk(start..end) {
            if let Some(log) = log {
                record_log(&mut truth, &generator.plan, doc.index as usize, log);
            }
            sink(doc);
        }
        start = end;
    }
    Ok(truth)
}

// ---------------------------------------------------------------------------------------------------------
// Writing

/// One chunk of output: its JSONL bytes (gzip-compressed or not), its copies' edit logs, its text bytes.
struct MadeChunk {
    jsonl: Vec<u8>,
    logs: Vec<(usize, EditLog)>,
    text_bytes: u64,
    docs: u64,
}

impl Generator {
    /// Writes the corpus as JSONL (gzip members of `CHUNK_DOCS` documents each when `gzip`) and returns the
    /// truth and the number of text bytes. Chunks are made and compressed in parallel on the current rayon
    /// pool, and written in order; `progress` counts the documents written.
    pub fn write_jsonl(
        &self,
        out: &mut (dyn Write + Send),
        gzip: bool,
        progress: &dyn Progress,
    ) -> std::io::Result<(Truth, u64)> {
        let config = &self.config;
        let mut truth = self.truth_skeleton();
        let n = self.len();
        let chunks = n.div_ceil(CHUNK_DOCS);
        // A window of chunks in flight bounds memory whatever the corpus size.
        let window = 2 * rayon::current_num_threads().max(1);
        let mut text_bytes = 0u64;
        let mut first = 0;
        while first < chunks {
            let last = (first + window).min(chunks);
            let made: Vec<MadeChunk> = (first..last)
                .into_par_iter()
                .map(|c| -> std::io::Result<_> {
                    let range = c * CHUNK_DOCS..((c + 1) * CHUNK_DOCS).min(n);
                    let docs = range.len();
                    let mut buf = Vec::with_capacity(range.len() * (config.mean_len + 40));
                    let mut logs = Vec::new();
                    let mut bytes = 0u64;
                    for i in range {
                        let (len, log) = self.write_json_line(i, &mut buf);
                        bytes += len;
                        if let Some(log) = log {
                            logs.push((i, log));
                        }
                    }
                    if gzip {
                        // Each chunk is one gzip member (mtime 0, so the bytes are reproducible); readers
                        // and `gzip -d` treat concatenated members as one stream. Level 2: on this text zlib-rs
                        // level 6 is 1.5x slower for 4% smaller output, level 1 is 40% larger.
                        let mut enc = flate2::write::GzEncoder::new(
                            Vec::with_capacity(buf.len() / 3),
                            flate2::Compression::new(2),
                        );
                        enc.write_all(&buf)?;
                        buf = enc.finish()?;
                    }
                    Ok(MadeChunk {
                        jsonl: buf,
                        logs,
                        text_bytes: bytes,
                        docs: docs as u64,
                    })
                })
                .collect::<std::io::Result<_>>()?;
            for chunk in made {
                out.write_all(&chunk.jsonl)?;
                text_bytes += chunk.text_bytes;
                progress.inc(chunk.docs);
                for (i, log) in chunk.logs {
                    record_log(&mut truth, &self.plan, i, log);
                }
            }
            first = last;
        }
        Ok((truth, text_bytes))
    }
}

/// Writes the corpus of `config` to `out` as [`Generator::write_jsonl`] does, returning the truth and the number
/// of text bytes.
pub fn write_corpus(
    config: &GenConfig,
    out: &mut (dyn Write + Send),
    gzip: bool,
    progress: &dyn Progress,
) -> Result<(Truth, u64), GenError> {
    Generator::new(config)?
        .write_jsonl(out, gzip, progress)
        .map_err(GenError::Stream)
}

/// The default truth path for a corpus written to `output`: its name without `.gz` and `.jsonl`/`.ndjson`/
/// `.json`, plus `.truth.csv`, in the same directory.
pub fn default_truth_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = name.as_str();
    for ext in [".gz", ".jsonl", ".ndjson", ".json"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    output.with_file_name(format!("{stem}.truth.csv"))
}

/// What [`write_files`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct GenReport {
    /// Documents written.
    pub documents: usize,
    /// Bytes of document text (before JSON escaping and compression).
    pub text_bytes: u64,
    /// Worker threads of the rayon pool the corpus was made on.
    pub threads: usize,
    /// The planted clusters, as written to the truth file.
    pub truth: Truth,
}

/// Writes `path` whole or not at all ([`crate::output::AtomicFile`]: a temporary name, renamed into place),
/// naming the file in any error.
fn write_file<T>(
    path: &Path,
    write: impl FnOnce(&mut (dyn Write + Send)) -> std::io::Result<T>,
) -> Result<T, GenError> {
    let mut out = crate::output::AtomicFile::create(path)?;
    let value = write(&mut out).map_err(|cause| out.write_error(cause))?;
    out.commit()?;
    Ok(value)
}

/// Writes the corpus of `config` to the file `output` (JSONL, gzip-compressed when the name ends in `.gz`) and
/// its ground truth to the CSV file `truth` (see [`Truth::write_csv`]). The configuration is checked before
/// any file is created. Work runs on the current rayon pool; the bytes do not depend on its size.
pub fn write_files(
    config: &GenConfig,
    output: &Path,
    truth: &Path,
    progress: &dyn Progress,
) -> Result<GenReport, GenError> {
    let generator = Generator::new(config)?;
    let gzip = output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let (planted, text_bytes) =
        write_file(output, |out| generator.write_jsonl(out, gzip, progress))?;
    write_file(truth, |out| planted.write_csv(out))?;
    Ok(GenReport {
        documents: generator.len(),
        text_bytes,
        threads: rayon::current_num_threads(),
        truth: planted,
    })
}
