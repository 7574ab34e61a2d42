//! The fast path of the JSONL reader: finds and unescapes the id and text fields of one line with `memchr`,
//! without serde_json's general machinery and with one exactly sized allocation per field.
//!
//! It accepts only the plain shape almost every corpus line has: an object whose keys have no escapes, whose
//! values are strings, short plain numbers, `true`, `false` or `null`, with spaces between tokens, valid UTF-8
//! and no raw control byte anywhere in the line. Everything else (invalid UTF-8, nested values, a duplicate id
//! or text field, a number or other non-string as id or text, lone surrogates, unusual escapes, exponents,
//! tabs between tokens, a syntax error, a missing text field) returns `None`, and the reader parses the line
//! with serde_json, which then decides and words any error. So the fast path changes speed, never results:
//! whenever it answers, serde_json would have answered the same (checked by the differential test below).

use crate::arch::Dispatch;
use memchr::memchr2;

/// The id (if present) and the text of `line`, or `None` when the line needs the general parser.
/// `id_field` and `text_field` are compared as serde_json's path compares them: the text field first, so a
/// field named by both is the text.
pub(super) fn parse_fast(
    line: &[u8],
    id_field: &str,
    text_field: &str,
    dispatch: Dispatch,
) -> Option<(Option<String>, String)> {
    // No raw control byte (JSON forbids them inside strings, and tabs or CRs between tokens are rare enough to
    // leave to serde_json), and valid UTF-8 (serde_json's own path repairs or rejects invalid bytes and names
    // the field). One pass finds both control bytes and high bytes; only a line with high bytes needs the
    // UTF-8 check's pass.
    let s = if scan_bytes(line)? {
        std::str::from_utf8(line).ok()?
    } else {
        // SAFETY: no byte is 0x80 or above: the line is ASCII, which is valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(line) }
    };
    let b = s.as_bytes();
    let mut p = Cursor { b, pos: 0 };
    p.skip_spaces();
    p.expect(b'{')?;
    p.skip_spaces();
    let mut id: Option<String> = None;
    let mut text: Option<String> = None;
    if p.peek()? == b'}' {
        return None; // no text field: serde_json words the error
    }
    loop {
        p.expect(b'"')?;
        let key_start = p.pos;
        let rel = memchr2(b'"', b'\\', &b[key_start..])?;
        if b[key_start + rel] != b'"' {
            return None; // an escaped key
        }
        let key = &s[key_start..key_start + rel];
        p.pos = key_start + rel + 1;
        p.skip_spaces();
        p.expect(b':')?;
        p.skip_spaces();
        let slot = if key == text_field {
            Some(&mut text)
        } else if key == id_field {
            Some(&mut id)
        } else {
            None
        };
        match slot {
            Some(slot) => {
                if slot.is_some() || p.peek()? != b'"' {
                    return None; // a duplicate, or not a string: serde_json words the error
                }
                let (value, end) = string(s, p.pos + 1, true, dispatch)?;
                *slot = Some(value);
                p.pos = end;
            }
            None => p.skip_value(s)?,
        }
        p.skip_spaces();
        match p.peek()? {
            b',' => {
                p.pos += 1;
                p.skip_spaces();
            }
            b'}' => {
                p.pos += 1;
                break;
            }
            _ => return None,
        }
    }
    p.skip_spaces();
    if p.pos != b.len() {
        return None;
    }
    Some((id, text?))
}

/// `None` when a byte is below 0x20 (a control byte), else whether any byte is 0x80 or above (a line with
/// neither is ASCII, so valid UTF-8 without the check). Written as ORs over fixed-size chunks so that it
/// compiles to vector code.
fn scan_bytes(line: &[u8]) -> Option<bool> {
    let mut chunks = line.chunks_exact(32);
    // The OR of every 8-byte word: a high byte anywhere leaves a top bit set in some byte of it.
    let mut high = 0u64;
    for c in &mut chunks {
        if c.iter().fold(0u8, |a, &x| a | (x < 0x20) as u8) != 0 {
            return None;
        }
        for w in c.chunks_exact(8) {
            high |= u64::from_le_bytes(w.try_into().expect("8 bytes"));
        }
    }
    let rest = chunks.remainder();
    if rest.iter().any(|&x| x < 0x20) {
        return None;
    }
    Some(high & 0x8080_8080_8080_8080 != 0 || rest.iter().any(|&x| x >= 0x80))
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.pos += 1)
    }

    fn skip_spaces(&mut self) {
        while self.b.get(self.pos) == Some(&b' ') {
            self.pos += 1;
        }
    }

    /// Skips the value of a field that is neither id nor text: a string, a plain number, `true`, `false` or
    /// `null`. Anything else (arrays, objects, exponents, long numbers) is left to serde_json.
    fn skip_value(&mut self, s: &str) -> Option<()> {
        match self.peek()? {
            b'"' => {
                let (_, end) = string(s, self.pos + 1, false, Dispatch::scalar())?;
                self.pos = end;
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Some(())
        } else {
            None
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` of at most 18 bytes; exponents and longer numbers go to serde_json.
    fn number(&mut self) -> Option<()> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let before = self.pos;
            self.digits();
            if self.pos == before {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E' | b'0'..=b'9')) || self.pos - start > 18 {
            return None;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }
}

/// The string starting at byte `start` (just after its opening quote) of `s`, unescaped when `keep` (else an
/// empty string), and the position after its closing quote. `None` for an unterminated string or an escape
/// this path does not handle (an invalid escape or a lone surrogate, which serde_json reports).
///
/// Texts escape often (a mail body has a `\n` or `\"` every 25 bytes or so), so the whole unescape is one loop
/// ([`unescape`]) that copies the plain runs a block at a time and writes the common escapes inline, instead of
/// one search call and one copy call per escape.
fn string(s: &str, start: usize, keep: bool, dispatch: Dispatch) -> Option<(String, usize)> {
    let b = s.as_bytes();
    if !keep {
        let mut pos = start;
        loop {
            pos += memchr2(b'"', b'\\', &b[pos..])?;
            if b[pos] == b'"' {
                return Some((String::new(), pos + 1));
            }
            pos += escape(&b[pos..])?.1;
        }
    }
    // A string without escapes (every id, almost, and some texts) ends at the first quote-or-backslash: copied
    // into an exactly sized allocation. Sizing it for the rest of the line instead, as the loop below must,
    // would cost an id (which comes before the text) a line-sized allocation and a reallocation to shrink it,
    // per document.
    let first = start + memchr2(b'"', b'\\', &b[start..])?;
    if b[first] == b'"' {
        // The slice ends at an ASCII quote: a char boundary of valid UTF-8.
        return Some((s[start..first].to_owned(), first + 1));
    }
    // The unescaped string is never longer than the escaped one; the block copies may store a whole block past
    // the bytes they keep, so they are given that much room (and no buffer is zeroed first).
    let mut out: Vec<u8> = Vec::with_capacity(b.len() - start + PLAIN_SLACK);
    let end = unescape(b, start, &mut out, dispatch)?;
    // SAFETY: `out` holds runs of `s`'s own bytes, each cut only at an ASCII quote or backslash (so at char
    // boundaries of valid UTF-8), and chars encoded by `encode_utf8`: valid UTF-8.
    let mut text = unsafe { String::from_utf8_unchecked(out) };
    // The buffer was sized for the rest of the line: an id (or a text) followed by more fields would keep that
    // whole length allocated for as long as it lives (out-of-core dedup keeps every id).
    if text.capacity() / 2 > text.len() + PLAIN_SLACK {
        text.shrink_to_fit();
    }
    Some((text, end))
}

/// Spare capacity the block copies need beyond the bytes they keep (one whole AVX-512 block).
const PLAIN_SLACK: usize = 64;

/// The one-byte escapes, by the byte after the backslash (0: not one of them).
const SIMPLE_ESCAPES: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

/// Appends the unescaped string that starts at `b[pos]` (just after its opening quote) to `out` and returns the
/// position after its closing quote; `None` when it is unterminated or holds an escape [`escape`] refuses.
/// `out` must have `b.len() - pos + PLAIN_SLACK` bytes of spare capacity.
#[inline]
fn unescape(b: &[u8], pos: usize, out: &mut Vec<u8>, dispatch: Dispatch) -> Option<usize> {
    assert!(out.capacity() - out.len() >= b.len() - pos + PLAIN_SLACK);
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        if let Some(token) = token.vbmi2() {
            // SAFETY: the token proves AVX-512 F/BW/VBMI/VBMI2; the spare capacity is asserted above.
            return unsafe { unescape_vbmi2(token, b, pos, out) };
        }
        // SAFETY: the token proves AVX-512 F/BW; the spare capacity is asserted above.
        return unsafe { unescape_avx512(token, b, pos, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx2() {
        // SAFETY: the token proves AVX2; the spare capacity is asserted above.
        return unsafe { unescape_avx2(token, b, pos, out) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = dispatch;
    // SAFETY: the spare capacity is asserted above; `swar_block` reads only `b` and writes at most 8 bytes,
    // and `unescape_with` calls it with bytes left.
    unsafe { unescape_with(b, pos, out, |b, pos, dst| swar_block(b, pos, dst)) }
}

/// The unescape loop of [`unescape`] over blocks: `block(b, pos, dst)` stores the bytes of a block starting
/// at `pos` (at least one byte, at most [`PLAIN_SLACK`]) at `dst` and returns how many of them come before the
/// first quote or backslash (all of the block's bytes when there is none) and whether it found one. A quote
/// ends the string; the one-byte escapes are written straight out; the others go through [`escape`].
///
/// # Safety
/// `out` has `b.len() - pos + PLAIN_SLACK` bytes of spare capacity, and `block` stores at most
/// [`PLAIN_SLACK`] bytes and reads only `b`.
#[inline(always)]
unsafe fn unescape_with(
    b: &[u8],
    mut pos: usize,
    out: &mut Vec<u8>,
    block: impl Fn(&[u8], usize, *mut u8) -> (usize, bool),
) -> Option<usize> {
    while pos < b.len() {
        let len = out.len();
        // SAFETY: `out` grew by at most as many bytes as `pos` advanced (an unescaped char is never longer than
        // its escape), so the spare capacity is still at least `b.len() - pos + PLAIN_SLACK`: a block's store
        // fits, and the `keep` bytes counted in are the ones it initialised.
        let (keep, hit) = block(b, pos, unsafe { out.as_mut_ptr().add(len) });
        unsafe { out.set_len(len + keep) };
        pos += keep;
        if !hit {
            continue;
        }
        if b[pos] == b'"' {
            return Some(pos + 1);
        }
        let simple = SIMPLE_ESCAPES[*b.get(pos + 1)? as usize];
        if simple != 0 {
            // SAFETY: as above, the escape is 2 bytes and its char 1, so there is room for it.
            unsafe {
                *out.as_mut_ptr().add(len + keep) = simple;
                out.set_len(len + keep + 1);
            }
            pos += 2;
            continue;
        }
        pos += push_escape(&b[pos..], out)?;
    }
    None
}

/// Appends the char of the escape at the start of `e` (a backslash, then anything but a one-byte escape) to
/// `out` and returns the escape's length; `None` when [`escape`] refuses it.
fn push_escape(e: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let (c, used) = escape(e)?;
    let mut utf8 = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
    Some(used)
}

/// A block of 8 bytes for [`unescape_with`] (a SWAR test finds the quote or backslash), or of the bytes up to
/// the first of them near the end of `b`.
///
/// # Safety
/// `pos < b.len()`, and `dst` is valid for 8 bytes of writes.
#[inline(always)]
unsafe fn swar_block(b: &[u8], pos: usize, dst: *mut u8) -> (usize, bool) {
    if let Some(word) = b.get(pos..pos + 8) {
        // SAFETY: 8 bytes at `dst` are writable (this function's contract).
        unsafe { std::ptr::copy_nonoverlapping(word.as_ptr(), dst, 8) };
        let special = special_bytes(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        return if special != 0 {
            (special.trailing_zeros() as usize / 8, true)
        } else {
            (8, false)
        };
    }
    let mut k = 0;
    while pos + k < b.len() {
        let c = b[pos + k];
        if c == b'"' || c == b'\\' {
            return (k, true);
        }
        // SAFETY: k < 8 (fewer than 8 bytes are left), within the 8 writable bytes.
        unsafe { *dst.add(k) = c };
        k += 1;
    }
    (k, false)
}

/// The bytes of `b` from `at` (at most 64, the rest of the vector zero) and the mask of the lanes they fill.
///
/// # Safety
/// Called only from code compiled for AVX-512 F/BW (into which it is inlined), and `at <= b.len()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_block(b: &[u8], at: usize) -> (std::arch::x86_64::__m512i, u64) {
    use std::arch::x86_64::*;
    let left = b.len() - at;
    let valid: u64 = if left >= 64 {
        u64::MAX
    } else {
        (1u64 << left) - 1
    };
    // SAFETY: the mask covers only the `left` bytes of `b` from `at` (masked lanes are not read); the CPU
    // features are this function's contract.
    (
        unsafe { _mm512_maskz_loadu_epi8(valid, b.as_ptr().add(at).cast()) },
        valid,
    )
}

/// Where [`block_avx512`] left the unescape: at the next block (its input position and output length), or
/// done, with [`unescape`]'s answer (and `out`'s length set).
enum Step {
    Next(usize, usize),
    Done(Option<usize>),
}

/// One block of [`unescape_avx512`]: the bytes of `b` from `pos` (at most 64), whose unescaped bytes go to
/// `out` from output position `olen` (the bytes of `out` below `olen` are initialised; `out.len()` may lag).
/// The block is stored whole, and its quotes and backslashes are found once: the escapes in it are then taken
/// from the masks one after another, and after each one the rest of the block is stored again one byte
/// further back, instead of searching afresh from each escape (which chains every escape through a load, a
/// compare and a bit scan).
///
/// # Safety
/// Called only from code compiled for AVX-512 F/BW (into which it is inlined); `pos < b.len()`; and `out`
/// has room for 64 bytes at the output position of any input position below `b.len()`: its capacity is at
/// least `olen + (b.len() - pos) + PLAIN_SLACK`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block_avx512(b: &[u8], pos: usize, olen: usize, out: &mut Vec<u8>) -> Step {
    use std::arch::x86_64::*;
    let n = b.len();
    let base = out.as_mut_ptr();
    // SAFETY: `pos <= n` (this function's contract).
    let (v, valid) = unsafe { load_block(b, pos) };
    // SAFETY: output position `olen` stands for input position `pos < n` (this function's contract).
    unsafe { _mm512_storeu_si512(base.add(olen).cast(), v) };
    // SAFETY: register-only AVX-512 F/BW instructions, which the CPU runs (this function's contract).
    let (quotes, backslashes) = unsafe {
        (
            _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)) & valid,
            _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)) & valid,
        )
    };
    let mut special = quotes | backslashes;
    let end = (n - pos).min(64);
    // Block bytes `from..` are in the output from `at` on.
    let (mut from, mut at) = (0usize, olen);
    while special != 0 {
        let k = special.trailing_zeros() as usize;
        let kept = at + (k - from);
        if quotes >> k & 1 != 0 {
            // SAFETY: the bytes below `kept` were stored (block bytes before `k`, from `at` on).
            unsafe { out.set_len(kept) };
            return Step::Done(Some(pos + k + 1));
        }
        let Some(&c) = b.get(pos + k + 1) else {
            // SAFETY: as above.
            unsafe { out.set_len(kept) };
            return Step::Done(None);
        };
        let simple = SIMPLE_ESCAPES[c as usize];
        if simple == 0 {
            // SAFETY: as above.
            unsafe { out.set_len(kept) };
            return match push_escape(&b[pos + k..], out) {
                Some(used) => Step::Next(pos + k + used, out.len()),
                None => Step::Done(None),
            };
        }
        // SAFETY: output position `kept` stands for input position `pos + k < n`.
        unsafe { *base.add(kept) = simple };
        (from, at) = (k + 2, kept + 1);
        if from >= end {
            return Step::Next(pos + from, at);
        }
        // The rest of the block, one byte further back (and more of `b` after it, overwritten later).
        // SAFETY: output position `at` stands for input position `pos + from < n`.
        unsafe { _mm512_storeu_si512(base.add(at).cast(), load_block(b, pos + from).0) };
        special &= u64::MAX << from;
    }
    Step::Next(pos + end, at + (end - from))
}

/// [`unescape`] 64 bytes at a time with AVX-512 ([`block_avx512`]; the last block is loaded under a mask, so
/// no byte past `b` is read).
///
/// # Safety
/// The CPU has AVX-512 F/BW (the token), and `out` has `b.len() - pos + PLAIN_SLACK` bytes of spare capacity.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn unescape_avx512(
    _: crate::arch::Avx512,
    b: &[u8],
    pos: usize,
    out: &mut Vec<u8>,
) -> Option<usize> {
    // SAFETY: the CPU features and the room are this function's contract; no block is taken another way.
    unsafe { unescape_blocks(b, pos, out, |_, _, _| None) }
}

/// [`unescape`] with AVX-512 VBMI2: each block first tries [`block_vbmi2`], and the blocks it leaves go through
/// [`block_avx512`], one escape at a time. Same bytes as [`unescape_avx512`] (tested).
///
/// # Safety
/// The CPU has AVX-512 F/BW/VBMI/VBMI2 (the token), and `out` has `b.len() - pos + PLAIN_SLACK` bytes of spare
/// capacity.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt")]
unsafe fn unescape_vbmi2(
    token: crate::arch::Vbmi2,
    b: &[u8],
    pos: usize,
    out: &mut Vec<u8>,
) -> Option<usize> {
    // SAFETY: the token proves the CPU features; the room is this function's contract, and `unescape_blocks`
    // passes it on to each block.
    unsafe {
        unescape_blocks(b, pos, out, |pos, olen, out| {
            block_vbmi2(token, b, pos, olen, out)
        })
    }
}

/// The block loop of the AVX-512 unescapes: from `pos`, each block is `fast`'s (given the input position, the
/// output length and `out`), or [`block_avx512`]'s where `fast` declines it (`None`).
///
/// # Safety
/// Called only from code compiled for AVX-512 F/BW (into which it is inlined); `out` has `b.len() - pos +
/// PLAIN_SLACK` bytes of spare capacity; and `fast` keeps [`block_avx512`]'s contract.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn unescape_blocks(
    b: &[u8],
    mut pos: usize,
    out: &mut Vec<u8>,
    fast: impl Fn(usize, usize, &mut Vec<u8>) -> Option<Step>,
) -> Option<usize> {
    // Output length so far. Invariant: `olen - out.len()` (at entry) is at most `pos - entry pos` (an
    // unescaped char is never longer than its escape), so the room a block needs is always there.
    let mut olen = out.len();
    while pos < b.len() {
        // SAFETY: `pos < b.len()`, and the room by the invariant above.
        let step = match fast(pos, olen, out) {
            Some(step) => step,
            None => unsafe { block_avx512(b, pos, olen, out) },
        };
        match step {
            Step::Next(p, o) => (pos, olen) = (p, o),
            Step::Done(answer) => return answer,
        }
    }
    // SAFETY: every byte below `olen` was stored.
    unsafe { out.set_len(olen) };
    None
}

/// One block of [`unescape_vbmi2`], without a branch per escape, when its escapes are all one-byte escapes,
/// none of them an escaped backslash and none cut by the block's end (most blocks of most texts); `None`,
/// having written nothing, for any other block (an escaped backslash, a `\u` or an invalid escape, a backslash
/// as its last byte). Each escaped byte is replaced by its char (a 128-entry byte lookup, `vpermt2b`), and the
/// block's bytes other than the backslashes are packed together (`vpcompressb`) and stored.
///
/// Why a block with no adjacent backslashes is exact: a quote is escaped only when an odd run of backslashes
/// comes before it, so a quote not right after a backslash ends the string, and the first of them is the
/// string's end unless an even run (an escaped backslash: two adjacent) comes before it; without adjacent
/// backslashes every backslash starts an escape and the byte after it is its escaped byte.
///
/// # Safety
/// `pos < b.len()`, and `out` has the room [`block_avx512`] needs; the token proves the CPU features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt")]
#[inline]
unsafe fn block_vbmi2(
    _: crate::arch::Vbmi2,
    b: &[u8],
    pos: usize,
    olen: usize,
    out: &mut Vec<u8>,
) -> Option<Step> {
    use std::arch::x86_64::*;
    // SAFETY: `SIMPLE_ESCAPES` has 256 bytes; these are its first 128, the entries of the ASCII bytes.
    let (low, high) = unsafe {
        (
            _mm512_loadu_si512(SIMPLE_ESCAPES.as_ptr().cast()),
            _mm512_loadu_si512(SIMPLE_ESCAPES.as_ptr().add(64).cast()),
        )
    };
    // SAFETY: `pos < b.len()` (this function's contract).
    let (v, _) = unsafe { load_block(b, pos) };
    let end = (b.len() - pos).min(64);
    // Lanes past `end` are zero: neither a quote nor a backslash.
    let slashes = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    let escaped = slashes << 1;
    let ends = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)) & !escaped;
    let lim = if ends != 0 {
        ends.trailing_zeros() as usize
    } else {
        end
    };
    let inside = if lim == 64 {
        u64::MAX
    } else {
        (1u64 << lim) - 1
    };
    let slashes = slashes & inside;
    let escaped = escaped & inside;
    // The char of each ASCII byte as a one-byte escape (0: not one); bytes of 0x80 and up have none.
    let chars = _mm512_permutex2var_epi8(low, v, high);
    let refused =
        (_mm512_cmpeq_epi8_mask(chars, _mm512_setzero_si512()) | _mm512_movepi8_mask(v)) & escaped;
    let cut = lim > 0 && slashes >> (lim - 1) & 1 != 0;
    if slashes & (slashes >> 1) != 0 || refused != 0 || cut {
        return None;
    }
    let keep = inside & !slashes;
    let packed = _mm512_maskz_compress_epi8(keep, _mm512_mask_blend_epi8(escaped, v, chars));
    // SAFETY: output position `olen` stands for input position `pos < b.len()`, so 64 bytes fit.
    unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(olen).cast(), packed) };
    let olen = olen + keep.count_ones() as usize;
    Some(if ends != 0 {
        // SAFETY: every byte below `olen` was stored.
        unsafe { out.set_len(olen) };
        Step::Done(Some(pos + lim + 1))
    } else {
        Step::Next(pos + end, olen)
    })
}

/// [`unescape`] 32 bytes at a time with AVX2; the last 31 bytes or fewer go 8 at a time ([`swar_block`]).
///
/// # Safety
/// The CPU has AVX2 (the token), and `out` has `b.len() - pos + PLAIN_SLACK` bytes of spare capacity.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn unescape_avx2(
    _: crate::arch::Avx2,
    b: &[u8],
    pos: usize,
    out: &mut Vec<u8>,
) -> Option<usize> {
    use std::arch::x86_64::*;
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let block = |b: &[u8], pos: usize, dst: *mut u8| {
        if b.len() - pos < 32 {
            // SAFETY: pos < b.len() (`unescape_with` calls with bytes left); 8 bytes at `dst` are writable.
            return unsafe { swar_block(b, pos, dst) };
        }
        // SAFETY: 32 bytes of `b` from `pos` are in bounds; `dst` has room for 64.
        unsafe {
            let v = _mm256_loadu_si256(b.as_ptr().add(pos).cast());
            _mm256_storeu_si256(dst.cast(), v);
            let special = _mm256_movemask_epi8(_mm256_or_si256(
                _mm256_cmpeq_epi8(v, quote),
                _mm256_cmpeq_epi8(v, backslash),
            )) as u32;
            if special != 0 {
                (special.trailing_zeros() as usize, true)
            } else {
                (32, false)
            }
        }
    };
    // SAFETY: the block stores at most 32 bytes and reads only `b`; the capacity is this function's contract.
    unsafe { unescape_with(b, pos, out, block) }
}

/// A word with the high bit set in the lowest byte that is `"` or `\` (bytes above it may be flagged too:
/// the classic has-zero-byte test, exact up to its first hit).
#[inline(always)]
fn special_bytes(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64))
}

/// Decodes the escape at the start of `e` (which starts with a backslash): the character and the bytes used.
fn escape(e: &[u8]) -> Option<(char, usize)> {
    let c = match *e.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex4(e.get(2..6)?)?;
            return match hi {
                0xD800..=0xDBFF => {
                    if e.get(6..8)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(e.get(8..12)?)?;
                    if !(0xDC00..=0xDFFF).contains(&lo) {
                        return None;
                    }
                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    Some((char::from_u32(cp)?, 12))
                }
                0xDC00..=0xDFFF => None,
                _ => Some((char::from_u32(hi)?, 6)),
            };
        }
        _ => return None,
    };
    Some((c, 2))
}

fn hex4(h: &[u8]) -> Option<u32> {
    h.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | v)
    })
}

/// A string's unescaped bytes and the position after its closing quote, or `None` (as [`unescape`] answers).
#[cfg(test)]
type Unescaped = Option<(Vec<u8>, usize)>;

/// What every unescape loop this CPU runs makes of the string starting at `b[pos]`, by name (the SWAR loop
/// first): the unescaped bytes and the position after the closing quote, or `None`. For tests that compare
/// the loops byte for byte.
#[cfg(test)]
fn every_unescape(b: &[u8], pos: usize) -> Vec<(&'static str, Unescaped)> {
    let run = |f: &dyn Fn(&mut Vec<u8>) -> Option<usize>| {
        let mut out = Vec::with_capacity(b.len() - pos + PLAIN_SLACK);
        f(&mut out).map(|end| (out, end))
    };
    // SAFETY: `run` gives `out` the spare capacity the loops need; `swar_block` reads only `b` and writes at
    // most 8 bytes.
    let swar =
        run(&|out| unsafe { unescape_with(b, pos, out, |b, pos, dst| swar_block(b, pos, dst)) });
    let mut all = vec![("swar", swar)];
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(token) = crate::arch::Avx2::detect() {
            // SAFETY: the token proves AVX2; the capacity as above.
            let avx2 = run(&|out| unsafe { unescape_avx2(token, b, pos, out) });
            all.push(("avx2", avx2));
        }
        if let Some(token) = crate::arch::Avx512::detect() {
            // SAFETY: the token proves AVX-512 F/BW; the capacity as above.
            let avx512 = run(&|out| unsafe { unescape_avx512(token, b, pos, out) });
            all.push(("avx512", avx512));
            if let Some(token) = token.vbmi2() {
                // SAFETY: the token proves AVX-512 VBMI/VBMI2 too; the capacity as above.
                let vbmi2 = run(&|out| unsafe { unescape_vbmi2(token, b, pos, out) });
                all.push(("vbmi2", vbmi2));
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::super::reader::{ReaderOptions, parse_json_serde};
    use super::{PLAIN_SLACK, every_unescape, parse_fast, scan_bytes};
    use crate::arch::Dispatch;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    /// The fast path must agree with serde_json on every line it answers: serde_json accepts the line, with
    /// the same id and text and no replacement. Lines the fast path declines go to serde_json unchanged.
    fn check(line: &[u8], id_field: Option<&str>, text_field: &str) -> bool {
        let options = ReaderOptions {
            id_field: id_field.map(str::to_string),
            text_field: text_field.to_string(),
            ..ReaderOptions::default()
        };
        let fast = parse_fast(
            line,
            id_field.unwrap_or("id"),
            text_field,
            Dispatch::detect(),
        );
        // Every instruction set's copy loop gives the same answer.
        assert_eq!(
            fast,
            parse_fast(
                line,
                id_field.unwrap_or("id"),
                text_field,
                Dispatch::scalar()
            ),
            "line {:?}",
            String::from_utf8_lossy(line)
        );
        // And every unescape loop, from every quote of the line, gives the same bytes.
        for (at, _) in line.iter().enumerate().filter(|&(_, &c)| c == b'"') {
            assert_same_unescapes(line, at + 1);
        }
        let Some((id, text)) = fast else {
            return false;
        };
        match parse_json_serde(line, 1, &options) {
            Ok(p) => {
                assert_eq!(
                    (p.id.as_deref(), p.text.as_str(), p.replaced),
                    (id.as_deref(), text.as_str(), false),
                    "line {:?}",
                    String::from_utf8_lossy(line)
                );
            }
            Err(_) => panic!(
                "the fast path accepted a line serde_json rejects: {:?}",
                String::from_utf8_lossy(line)
            ),
        }
        true
    }

    /// Every unescape loop's answer from `b[pos]` is the SWAR loop's.
    fn assert_same_unescapes(b: &[u8], pos: usize) {
        let all = every_unescape(b, pos);
        for (name, answer) in &all[1..] {
            assert_eq!(
                answer,
                &all[0].1,
                "{name} against swar from byte {pos} of {:?}",
                String::from_utf8_lossy(b)
            );
        }
    }

    #[test]
    fn every_unescape_loop_agrees_on_dense_random_bytes() {
        // Strings drawn from the bytes the loops branch on: quotes, backslashes (runs of them, and one as a
        // block's last byte), the one-byte escape letters, `u` and hex digits, a control byte, and the bytes of
        // an `é` and a `’` (a backslash before a byte of 0x80 or more is an invalid escape; 0xe2, the `’`'s
        // first, is `b` with the high bit set, which a 128-entry lookup alone would take for `\b`).
        const BYTES: &[u8] = b"aaaaaaaa\\\\\\\\\"\"nnt/rbfu0e9D\x01\xc3\xa9\xe2\x80\x99";
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
        for _ in 0..30_000 {
            let len = (rng.next_u64() % 300) as usize;
            let b: Vec<u8> = (0..len)
                .map(|_| BYTES[(rng.next_u64() % BYTES.len() as u64) as usize])
                .collect();
            for pos in [0, 1, 7].into_iter().filter(|&p| p <= b.len()) {
                assert_same_unescapes(&b, pos);
            }
        }
    }

    #[test]
    fn plain_lines_take_the_fast_path() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            (r#"{"id": "a", "text": "hello"}"#, Some(("a", "hello"))),
            (
                r#"{"text":"x\ny\"z\\w\/\u00e9\ud83d\ude00","id":"q"}"#,
                None,
            ),
            (
                r#"  { "text" : "" , "n": -1.25, "b": true, "z": null }  "#,
                None,
            ),
        ];
        for (line, want) in cases {
            assert!(check(line.as_bytes(), None, "text"), "{line}");
            let (id, text) = parse_fast(line.as_bytes(), "id", "text", Dispatch::detect()).unwrap();
            if let Some((want_id, want_text)) = want {
                assert_eq!((id.as_deref(), text.as_str()), (Some(*want_id), *want_text));
            }
        }
        let (_, text) = parse_fast(
            br#"{"text":"x\ny\"z\\w\/\u00e9\ud83d\ude00"}"#,
            "id",
            "text",
            Dispatch::detect(),
        )
        .unwrap();
        assert_eq!(text, "x\ny\"z\\w/\u{e9}\u{1f600}");
    }

    #[test]
    fn escapes_at_every_offset_of_the_copy_blocks() {
        // The unescape copies 8 (SWAR) or 64 (AVX-512) bytes at a time: put each escape, and the closing quote,
        // at every offset of both, and the line's end at every offset of the last masked block.
        for escape in ["\\n", "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", "\u{e9}"] {
            for before in 0..140 {
                for after in 0..70 {
                    let text = format!("{}{escape}{}", "a".repeat(before), "b".repeat(after));
                    let line = format!(r#"{{"text": "{text}{escape}", "id": "x{text}"}}"#);
                    assert!(check(line.as_bytes(), None, "text"), "{line}");
                }
            }
        }
    }

    #[test]
    fn dense_escapes_across_the_blocks() {
        // Several escapes in one block, escapes straddling a block's end, an escaped backslash before a quote,
        // and `\u` escapes between simple ones: the AVX-512 loop takes all the escapes of a block from one
        // search, so every mix of them must agree with the scalar loop and with serde_json.
        const PIECES: &[&str] = &[
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\t",
            "\\r",
            "\\b",
            "\\f",
            "\\u0041",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\u{e9}",
            "\u{1f600}",
        ];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
        for _ in 0..4000 {
            let mut text = String::new();
            for _ in 0..1 + pick(40) {
                if pick(2) == 0 {
                    text.push_str(&"a".repeat(pick(70)));
                } else {
                    text.push_str(PIECES[pick(PIECES.len())]);
                }
            }
            let line = format!(r#"{{"id": "{text}", "text": "{text}"}}"#);
            assert!(check(line.as_bytes(), None, "text"), "{line}");
        }
    }

    #[test]
    fn a_field_before_a_long_one_does_not_keep_the_line_allocated() {
        // Ids without an escape take the exact copy, ids with one the unescape loop and its shrink; texts with
        // and without escapes likewise.
        for (id_json, id_want) in [("doc-1", "doc-1"), (r#"doc\"1\n"#, "doc\"1\n")] {
            for (text_json, text_len) in [
                ("x".repeat(100_000), 100_000),
                (r"x\ty".repeat(20_000), 60_000),
            ] {
                let line = format!(r#"{{"id": "{id_json}", "text": "{text_json}"}}"#);
                for dispatch in [Dispatch::detect(), Dispatch::scalar()] {
                    let (id, text) = parse_fast(line.as_bytes(), "id", "text", dispatch).unwrap();
                    let id = id.unwrap();
                    assert_eq!((id.as_str(), text.len()), (id_want, text_len));
                    assert!(
                        id.capacity() <= 2 * PLAIN_SLACK,
                        "id capacity {}",
                        id.capacity()
                    );
                    assert!(text.capacity() <= text_json.len() + 2 * PLAIN_SLACK);
                }
            }
        }
    }

    #[test]
    fn unusual_lines_go_to_serde() {
        for line in [
            r#"{"id": 7, "text": "a"}"#,     // numeric id: serde formats it
            r#"{"text": "a", "text": "b"}"#, // duplicate
            r#"{"te\u0078t": "a"}"#,         // escaped key
            r#"{"meta": {"text": "no"}, "text": "a"}"#, // nested value before the field
            r#"{"text": "\ud800"}"#,         // lone surrogate
            r#"{"text": "a", "n": 1e5}"#,    // exponent
            "{\"text\":\t\"a\"}",            // tab between tokens
            r#"{"text": "a"} x"#,            // trailing garbage
            r#"{"text": "a",}"#,             // trailing comma
            r#"{"id": "a"}"#,                // no text
            r#"["text", "a"]"#,              // not an object
        ] {
            assert!(
                parse_fast(line.as_bytes(), "id", "text", Dispatch::detect()).is_none(),
                "{line}"
            );
        }
        assert!(parse_fast(b"{\"text\": \"a\xff\"}", "id", "text", Dispatch::detect()).is_none());
    }

    /// A random JSON-ish line built from fragments. Half the lines are "clean" (a well-formed object with
    /// the usual fields, values drawn from valid fragments), so the fast path answers many of them; the rest
    /// draw from every fragment, valid, slightly wrong or unusual. Either may then be cut or get a stray byte.
    fn random_line(rng: &mut Xoshiro256PlusPlus) -> Vec<u8> {
        const KEYS: &[&str] = &[
            "id",
            "text",
            "body",
            "idx",
            "",
            "te\\u0078t",
            "i\\nd",
            "text ",
            "ID",
            "\u{e9}",
        ];
        const PIECES: &[&str] = &[
            "a",
            "hello world",
            "\\n",
            "\\t",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\r",
            "\\u0041",
            "\\u00e9",
            "\\uD83D\\uDE00",
            "\\u0000",
            "\u{e9}",
            "\u{1f600}",
            "}",
            "{",
            ",",
            ":",
            "[",
            " ",
            // The unusual ones, from here on.
            "\\ud800",
            "\\udc00",
            "\\ud800\\u0041",
            "\\ud800x",
            "\\x",
            "\\u12",
            "\\uZZZZ",
            "\t",
            "\u{1}",
            "\\",
            "\"",
        ];
        const PLAIN_PIECES: usize = 22;
        const VALUES: &[&str] = &[
            "0",
            "-0",
            "12",
            "-3.5",
            "true",
            "false",
            "null",
            "\"\"",
            "123456789012345678",
            // The unusual ones, from here on.
            "01",
            "1.",
            "-",
            "1e5",
            "2E-3",
            "1.5e400",
            "123456789012345678901",
            "nul",
            "tru",
            "[]",
            "[1, \"a\"]",
            "{}",
            "{\"text\": \"in\"}",
            "[{\"a\": [\"}\"]}]",
            "NaN",
        ];
        const PLAIN_VALUES: usize = 9;
        const SPACES: &[&str] = &["", "", "", " ", "  ", "\t", "\r", "\n"];
        let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
        let clean = pick(2) == 0;
        // In a clean line: only plain fragments, and no syntax slips.
        let slip =
            |pick: &mut dyn FnMut(usize) -> usize, one_in: usize| !clean && pick(one_in) == 0;
        let space = |pick: &mut dyn FnMut(usize) -> usize| {
            SPACES[pick(if clean { 5 } else { SPACES.len() })]
        };
        let mut line = String::new();
        line.push_str(space(&mut pick));
        if !slip(&mut pick, 40) {
            line.push('{');
        }
        let fields = if clean { 1 + pick(4) } else { pick(5) };
        let text_at = pick(fields.max(1));
        for f in 0..fields {
            if f > 0 && !slip(&mut pick, 30) {
                line.push(',');
            }
            line.push_str(space(&mut pick));
            line.push('"');
            let key = if clean && f == text_at {
                "text"
            } else if clean {
                KEYS[pick(4)]
            } else {
                KEYS[pick(KEYS.len())]
            };
            line.push_str(key);
            line.push('"');
            line.push_str(space(&mut pick));
            if !slip(&mut pick, 30) {
                line.push(':');
            }
            line.push_str(space(&mut pick));
            if pick(3) == 0 && !(clean && key == "text") {
                line.push_str(VALUES[pick(if clean { PLAIN_VALUES } else { VALUES.len() })]);
            } else {
                line.push('"');
                for _ in 0..pick(6) {
                    let piece = if clean {
                        PIECES[pick(PLAIN_PIECES)]
                    } else if pick(3) == 0 {
                        PIECES[pick(PIECES.len())]
                    } else {
                        PIECES[pick(3)]
                    };
                    line.push_str(piece);
                }
                if !slip(&mut pick, 30) {
                    line.push('"');
                }
            }
            line.push_str(space(&mut pick));
        }
        if slip(&mut pick, 30) {
            line.push(',');
        }
        if !slip(&mut pick, 40) {
            line.push('}');
        }
        line.push_str(space(&mut pick));
        if slip(&mut pick, 40) {
            line.push('x');
        }
        let mut bytes = line.into_bytes();
        match pick(20) {
            0 if !bytes.is_empty() => {
                let at = pick(bytes.len());
                bytes.truncate(at); // cut anywhere, even inside a multi-byte character
            }
            1 if !bytes.is_empty() => {
                let at = pick(bytes.len());
                bytes.insert(at, [0xff, 0xc3, 0x80][pick(3)]); // invalid or stray UTF-8
            }
            _ => {}
        }
        bytes
    }

    #[test]
    fn agrees_with_serde_on_generated_lines() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(13);
        let settings: &[(Option<&str>, &str)] = &[
            (None, "text"),
            (Some("idx"), "text"),
            (Some("text"), "text"),
            (Some("id"), "body"),
        ];
        let mut fast = 0usize;
        let total = 200_000;
        for n in 0..total {
            let line = random_line(&mut rng);
            let (id_field, text_field) = settings[n % settings.len()];
            fast += check(&line, id_field, text_field) as usize;
        }
        // The generator makes plenty of lines the fast path answers, so the comparison above is not vacuous.
        assert!(
            fast > total / 20,
            "only {fast} of {total} lines took the fast path"
        );
    }

    /// `scan_bytes` against its definition, with a control byte and a high byte at every position of lines
    /// of every length up to 100 (whole 32-byte chunks and the rest): each alone, and both in either order.
    #[test]
    fn scan_bytes_finds_control_and_high_bytes() {
        let naive = |line: &[u8]| {
            (!line.iter().any(|&x| x < 0x20)).then(|| line.iter().any(|&x| x >= 0x80))
        };
        let mut checked = 0;
        for len in 0..100usize {
            let plain = vec![b'a'; len];
            assert_eq!(scan_bytes(&plain), Some(false), "len {len}");
            for c in 0..len {
                for (cb, hb) in [(0x1fu8, 0x80u8), (0x00, 0xff), (b'\n', 0xc3)] {
                    let mut line = plain.clone();
                    line[c] = hb;
                    assert_eq!(scan_bytes(&line), Some(true), "len {len} high at {c}");
                    line[c] = cb;
                    assert_eq!(scan_bytes(&line), None, "len {len} control at {c}");
                    for h in (0..len).filter(|&h| h != c) {
                        let mut both = line.clone();
                        both[h] = hb;
                        assert_eq!(
                            scan_bytes(&both),
                            naive(&both),
                            "len {len} control at {c} high at {h}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000);
    }
}
