//! Shingle tests: each kind on small hand-checked texts, the ASCII fast path against the generic path,
//! normalisation, and pinned hash values (a platform or refactor change that alters ids fails here).

use lshbench_core::arch::Isa;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler, shingle_id};
use lshbench_core::window::{ShortRun, WindowSink};

fn ids(kind: &str, text: &str, seed: u64) -> Vec<u64> {
    let sh = Shingler::new(kind.parse().unwrap(), Normalization::default(), seed);
    let mut out = vec![123];
    sh.hashes(text, &mut out);
    out
}

fn of(windows: &[&str], seed: u64) -> Vec<u64> {
    windows
        .iter()
        .map(|w| shingle_id(w.as_bytes(), seed))
        .collect()
}

#[test]
fn char_windows_include_the_last_one() {
    // "abcd" has 4 - 3 + 1 = 2 windows; `range(0, len(text) - 3)` (seed 002) would give only "abc".
    assert_eq!(ids("char:3", "abcd", 7), of(&["abc", "bcd"], 7));
    assert_eq!(ids("char:5", "hello world", 1).len(), 7);
    assert_eq!(
        *ids("char:5", "hello world", 1).last().unwrap(),
        shingle_id(b"world", 1)
    );
}

#[test]
fn char_windows_count_distinct_shingles() {
    let sh = Shingler::new(ShingleKind::Char(3), Normalization::default(), 0);
    // abc bca cab abc: 4 windows, 3 distinct.
    assert_eq!(ids("char:3", "abcabc", 0).len(), 4);
    assert_eq!(sh.set("abcabc").len(), 3);
    assert_eq!(sh.set("aaaaaaa").len(), 1);
}

#[test]
fn short_text_is_one_shingle_and_empty_text_none() {
    for kind in ["char:5", "byte:5", "word:3", "stopword:2"] {
        assert_eq!(ids(kind, "", 3), Vec::<u64>::new(), "{kind}");
    }
    assert_eq!(ids("char:5", "ab", 3), of(&["ab"], 3));
    assert_eq!(ids("char:5", "abcde", 3), of(&["abcde"], 3));
    assert_eq!(ids("byte:16", "short", 3), of(&["short"], 3));
    assert_eq!(ids("word:3", "two words", 3), of(&["two words"], 3));
    // Blank text has no token.
    assert_eq!(ids("word:2", "  \n ", 3), Vec::<u64>::new());
}

#[test]
fn unicode_char_windows_count_scalar_values_not_bytes() {
    // 5 scalar values, 7 bytes: char:3 has 3 windows, byte:3 has 5.
    let text = "h\u{e9}ll\u{f6}";
    assert_eq!(
        ids("char:3", text, 9),
        of(&["h\u{e9}l", "\u{e9}ll", "ll\u{f6}"], 9)
    );
    assert_eq!(ids("byte:3", text, 9).len(), 5);
    assert_eq!(ids("char:6", text, 9), of(&[text], 9));
    // A window of long chars exceeds 8 bytes and takes the xxh3 branch.
    let wide = "\u{1F600}\u{1F601}\u{1F602}\u{1F603}";
    assert_eq!(
        ids("char:3", wide, 9),
        of(
            &["\u{1F600}\u{1F601}\u{1F602}", "\u{1F601}\u{1F602}\u{1F603}"],
            9
        )
    );
}

#[test]
fn ascii_fast_path_equals_the_generic_path() {
    let text = "The quick brown fox jumps over the lazy dog; 0123456789 !\"#$%&'()*+,-./ end";
    for k in 1..=12 {
        for cut in [0, 1, 7, 8, 9, 15, 16, 17, text.len() - 1, text.len()] {
            let t = &text[..cut];
            let sh = Shingler::new(ShingleKind::Char(k), Normalization::default(), 42);
            let mut fast = Vec::new();
            let mut generic = Vec::new();
            sh.hashes(t, &mut fast);
            sh.char_hashes_generic(t, k, &mut generic);
            assert_eq!(fast, generic, "k={k} len={cut}");
            // And byte:K is the same as char:K on ASCII.
            assert_eq!(fast, ids(&format!("byte:{k}"), t, 42), "k={k} len={cut}");
        }
    }
}

/// The generic char path against a naive reference (collect the chars, build each window as a String) on
/// random texts mixing ASCII with 2-, 3- and 4-byte chars, at every K from 1 to 10.
#[test]
fn generic_char_path_matches_a_naive_reference_on_mixed_text() {
    let alphabet: Vec<char> = "abc de\u{e9}\u{f6}\u{20ac}\u{4e2d}\u{1F600}."
        .chars()
        .collect();
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for trial in 0..400 {
        let len = (next() % 40) as usize;
        // Mostly ASCII with a few wide chars, or dense wide chars.
        let dense = trial % 3 == 0;
        let text: String = (0..len)
            .map(|_| {
                let r = next() as usize;
                if dense || r.is_multiple_of(7) {
                    alphabet[r % alphabet.len()]
                } else {
                    (b'a' + (r % 26) as u8) as char
                }
            })
            .collect();
        let chars: Vec<char> = text.chars().collect();
        for k in 1..=10 {
            let want: Vec<u64> = if chars.is_empty() {
                vec![]
            } else if chars.len() <= k {
                vec![shingle_id(text.as_bytes(), 3)]
            } else {
                chars
                    .windows(k)
                    .map(|w| shingle_id(w.iter().collect::<String>().as_bytes(), 3))
                    .collect()
            };
            let sh = Shingler::new(ShingleKind::Char(k), Normalization::default(), 3);
            let mut generic = Vec::new();
            sh.char_hashes_generic(&text, k, &mut generic);
            assert_eq!(generic, want, "generic k={k} text={text:?}");
            let mut picked = Vec::new();
            sh.hashes(&text, &mut picked);
            assert_eq!(picked, want, "hashes k={k} text={text:?}");
        }
    }
}

#[test]
fn word_windows_are_tokens_joined_by_one_space() {
    assert_eq!(
        ids("word:2", "the cat  sat\n", 5),
        of(&["the cat", "cat sat"], 5)
    );
    assert_eq!(ids("word:1", "a b a", 5), of(&["a", "b", "a"], 5));
}

#[test]
fn stopword_shingles_start_at_each_stop_word() {
    // Stop words: The, on, the. Matching ignores case; the shingle keeps the text as given.
    assert_eq!(
        ids("stopword:2", "The cat sat on the mat today", 5),
        of(&["The cat sat", "on the mat", "the mat today"], 5)
    );
    // A stop word near the end gives the shorter window.
    assert_eq!(ids("stopword:2", "cat sat on mat", 5), of(&["on mat"], 5));
    // No stop word at all: one shingle, all tokens.
    assert_eq!(
        ids("stopword:2", "cats chase mice", 5),
        of(&["cats chase mice"], 5)
    );
    // Punctuation keeps a token from matching unless stripped.
    assert_eq!(
        ids("stopword:1", "cat, the, dog", 5),
        of(&["cat, the, dog"], 5)
    );
}

#[test]
fn normalisation_is_opt_in() {
    let plain = Shingler::new(ShingleKind::Char(3), Normalization::default(), 1);
    assert_ne!(plain.set("ABC"), plain.set("abc"));
    let lower = Shingler::new(
        ShingleKind::Char(3),
        Normalization {
            lowercase: true,
            ..Default::default()
        },
        1,
    );
    assert_eq!(lower.set("ABC"), plain.set("abc"));
    let collapse = Normalization {
        collapse_whitespace: true,
        ..Default::default()
    };
    assert_eq!(collapse.apply("  a \t\n b  "), "a b");
    let strip = Normalization {
        strip_punctuation: true,
        ..Default::default()
    };
    assert_eq!(strip.apply("a,b! c."), "ab c");
    let all = Normalization {
        lowercase: true,
        collapse_whitespace: true,
        strip_punctuation: true,
    };
    assert_eq!(all.apply(" Hello,  World ! "), "hello world");
    // Stripping punctuation lets `the,` match as a stop word.
    let sw = Shingler::new(ShingleKind::StopWord(1), all, 5);
    let mut out = Vec::new();
    sw.hashes("Cat, THE, dog", &mut out);
    assert_eq!(out, of(&["the dog"], 5));
}

#[test]
fn seed_changes_every_id() {
    let a = ids("char:5", "hello world", 1);
    let b = ids("char:5", "hello world", 2);
    assert!(a.iter().zip(&b).all(|(x, y)| x != y));
}

/// Pinned values: the ids are part of the output format (same seed, same signatures on every platform).
#[test]
fn shingle_ids_are_pinned() {
    let pinned: [(&[u8], u64, u64); 5] = [
        (b"hello", 42, PIN_0),
        (b"a", 0, PIN_1),
        (b"abcdefgh", 1, PIN_2),
        (b"longer than eight bytes", 42, PIN_3),
        ("h\u{e9}llo".as_bytes(), 7, PIN_4),
    ];
    for (bytes, seed, want) in pinned {
        assert_eq!(
            shingle_id(bytes, seed),
            want,
            "{:?} seed {seed}: {:#018x}",
            String::from_utf8_lossy(bytes),
            shingle_id(bytes, seed)
        );
    }
}

// Windows of <= 8 bytes: computed from the definition of `mix_short` by an independent Python transcription
// (key = SplitMix64(seed ^ 0x5348494e474c4521); id = word ^ key ^ len * G) and frozen. Longer windows: xxh3_64_with_seed, computed once by this implementation and frozen.
const PIN_0: u64 = 0x3310_a0b8_e6e7_731a;
const PIN_1: u64 = 0x68eb_7a37_4341_0a12;
const PIN_2: u64 = 0x520a_2bb9_e6b6_e9d9;
const PIN_3: u64 = 0x4f5d_0356_32f9_bec2;
const PIN_4: u64 = 0x1168_61d3_d94d_1dae;

/// A sink that records every id one window at a time, through the scalar definition ([`ShortRun::id`]).
struct Recorder(Vec<u64>);

impl WindowSink for Recorder {
    fn run(&mut self, run: &ShortRun<'_>) {
        self.0.extend((0..run.count()).map(|i| run.id(i)));
    }
    fn ids(&mut self, ids: &[u64]) {
        self.0.extend_from_slice(ids);
    }
}

/// `stream_windows` gives exactly the ids of `hashes`, for every shingler it accepts and every instruction set
/// this CPU runs, and refuses the others.
#[test]
fn stream_windows_gives_the_ids_of_hashes() {
    let texts = [
        "",
        "a",
        "hello",
        "hello world, this is a longer text with more than sixteen bytes",
        "caf\u{e9} cr\u{e8}me br\u{fb}l\u{e9}e and more plain ascii text after it",
        "\u{4e2d}\u{6587}\u{6587}\u{5b57}\u{7b26}\u{4e2d}\u{6587}",
        "x\u{1f600}y\u{1f600}z and then a long ascii run of text to batch through the vector path",
    ];
    for spec in [
        "char:1", "char:5", "char:8", "byte:2", "byte:8", "char:9", "word:2",
    ] {
        for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
            let sh = Shingler::new(spec.parse().unwrap(), Normalization::default(), 9)
                .with_isa(Some(isa))
                .unwrap();
            for text in texts {
                let mut want = Vec::new();
                sh.hashes(text, &mut want);
                let mut got = Recorder(Vec::new());
                let streamed = sh.stream_windows(text, &mut got);
                let short = matches!(spec, "char:1" | "char:5" | "char:8" | "byte:2" | "byte:8");
                assert_eq!(streamed, short, "{spec}");
                if streamed {
                    assert_eq!(got.0, want, "{isa} {spec} {text:?}");
                } else {
                    assert!(got.0.is_empty());
                }
            }
        }
    }
    let lower = Normalization {
        lowercase: true,
        ..Normalization::default()
    };
    assert!(
        !Shingler::new(ShingleKind::Char(5), lower, 9)
            .stream_windows("Hi there", &mut Recorder(Vec::new()))
    );
}
