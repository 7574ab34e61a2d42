//! A walk over Thrift compact-protocol bytes (a Parquet footer, a page header) that finds the one construct the
//! parquet crate (59.3.2, and 60.1.0 the same) can spend unbounded time on: a list, set or map of booleans in a
//! field it does not know. The crate skips such a field element by element and takes a boolean element to hold
//! no bytes (`parquet_thrift.rs`, `skip_till_depth`), so a declared size of two billion costs two billion
//! iterations that read nothing: about 8 s for one map in a 1 KB footer, and nesting multiplies it (found by
//! fuzz/reader_parquet; the inputs are in `tests/fuzz_regressions/`). No field of a Parquet footer or page header is such a container
//! (the one `list<bool>` of the format, a column index's `null_pages`, lives in the page index, which the reader
//! does not read), so the walk refuses any with a size above zero.
//!
//! Every other construct costs the crate at least one byte of input per element, so its work is bounded by the
//! input's length, and the walk leaves whatever else is malformed to the crate, which reports it.

/// Why a walk stopped before the end of the value.
#[derive(Debug, PartialEq)]
pub(super) enum Stop {
    /// A container of booleans: what, and its declared size.
    Booleans(String),
    /// The bytes ran out inside the value (a longer read may finish it).
    End,
    /// Something else the crate will refuse by itself (an unknown type, too deep, a size out of range).
    Malformed,
}

/// The crate's limit on nesting (`DEFAULT_SKIP_DEPTH`).
const MAX_DEPTH: u32 = 64;

/// Compact-protocol type ids.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

fn is_bool(ty: u8) -> bool {
    ty == BOOL_TRUE || ty == BOOL_FALSE
}

/// A cursor over compact-protocol bytes.
pub(super) struct Walker<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Walker<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Walker<'a> {
        Walker { bytes, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    fn byte(&mut self) -> Result<u8, Stop> {
        let b = *self.bytes.get(self.pos).ok_or(Stop::End)?;
        self.pos += 1;
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Result<(), Stop> {
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            self.pos = self.bytes.len();
            return Err(Stop::End);
        }
        self.pos += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint, read as the parquet crate reads one: of any length, each byte's bits shifted
    /// by 7 more than the last's, modulo 64 (`wrapping_shl`). A walk that stopped at 10 bytes, as the format
    /// intends, would hand the crate a value it never checked (a page size, say, from an 11-byte varint).
    fn varint(&mut self) -> Result<u64, Stop> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift = shift.wrapping_add(7);
        }
    }

    /// A struct's fields up to its stop byte; `on_int(field id, value)` sees every integer field (zigzag
    /// decoded) of this struct, not of the structs inside it.
    pub(super) fn struct_fields(
        &mut self,
        depth: u32,
        mut on_int: impl FnMut(i16, i64),
    ) -> Result<(), Stop> {
        if depth >= MAX_DEPTH {
            return Err(Stop::Malformed);
        }
        let mut last: i16 = 0;
        loop {
            let header = self.byte()?;
            if header == 0 {
                return Ok(());
            }
            let ty = header & 0x0f;
            let delta = header >> 4;
            let id = if delta == 0 {
                let zz = self.varint()?;
                i16::try_from((zz >> 1) as i64 ^ -((zz & 1) as i64)).map_err(|_| Stop::Malformed)?
            } else {
                last.wrapping_add(i16::from(delta))
            };
            last = id;
            if matches!(ty, I16 | I32 | I64) {
                let zz = self.varint()?;
                on_int(id, (zz >> 1) as i64 ^ -((zz & 1) as i64));
            } else if !is_bool(ty) {
                // A boolean field holds its value in the type nibble: no bytes.
                self.value(ty, depth + 1)?;
            }
        }
    }

    /// One value of type `ty` (as an element of a container, where a boolean is one byte).
    fn value(&mut self, ty: u8, depth: u32) -> Result<(), Stop> {
        if depth >= MAX_DEPTH {
            return Err(Stop::Malformed);
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE | BYTE => self.skip(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip(8),
            BINARY => {
                let n = self.varint()?;
                self.skip(n)
            }
            UUID => self.skip(16),
            STRUCT => self.struct_fields(depth, |_, _| {}),
            LIST | SET => {
                let header = self.byte()?;
                if header == 0 {
                    // An empty list some writers encode with element type 0 (the crate accepts it).
                    return Ok(());
                }
                let elem = header & 0x0f;
                let size = match header >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                if size > i32::MAX as u64 {
                    return Err(Stop::Malformed);
                }
                if is_bool(elem) && size > 0 {
                    let kind = if ty == LIST { "list" } else { "set" };
                    return Err(Stop::Booleans(format!("a {kind} of {size} booleans")));
                }
                for _ in 0..size {
                    self.value(elem, depth + 1)?;
                }
                Ok(())
            }
            MAP => {
                let size = self.varint()?;
                if size > i32::MAX as u64 {
                    return Err(Stop::Malformed);
                }
                if size == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                let (key, val) = (types >> 4, types & 0x0f);
                if is_bool(key) || is_bool(val) {
                    return Err(Stop::Booleans(format!(
                        "a map of {size} entries with boolean keys or values"
                    )));
                }
                for _ in 0..size {
                    self.value(key, depth + 1)?;
                    self.value(val, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(Stop::Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(bytes: &[u8]) -> (Result<(), Stop>, usize, Vec<(i16, i64)>) {
        let mut w = Walker::new(bytes);
        let mut ints = Vec::new();
        let r = w.struct_fields(0, |id, v| ints.push((id, v)));
        (r, w.position(), ints)
    }

    #[test]
    fn fields_ints_and_nesting_are_walked_to_the_stop_byte() {
        // i32 field 1 = -3 (zigzag 5), bool field 2 (true, no bytes), binary field 3 "ab", a struct field 4
        // holding i64 field 1 = 7 (not reported: an inner struct), a list field 5 of two i32 (1, 2), a map
        // field 6 of one binary -> i32 entry, field 300 (long form, zigzag 600 = 0xd8 0x04) i16 = 1, stop.
        let bytes = [
            0x15, 0x05, 0x11, 0x18, 0x02, b'a', b'b', 0x1c, 0x16, 0x0e, 0x00, 0x19, 0x25, 0x02,
            0x04, 0x1b, 0x01, 0x85, 0x01, b'k', 0x02, 0x04, 0xd8, 0x04, 0x02, 0x00, 0xff,
        ];
        let (r, pos, ints) = walk(&bytes);
        assert_eq!(r, Ok(()));
        assert_eq!(pos, bytes.len() - 1, "stops after the stop byte");
        assert_eq!(ints, vec![(1, -3), (300, 1)]);
    }

    #[test]
    fn containers_of_booleans_are_refused_whatever_their_nesting() {
        // Field 1: a map of 1,837,069,619 entries (varint b3 ea fd eb 06), key and value types bool (0x11).
        let map = [0x1b, 0xb3, 0xea, 0xfd, 0xeb, 0x06, 0x11];
        let (r, _, _) = walk(&map);
        assert_eq!(
            r,
            Err(Stop::Booleans(
                "a map of 1837069619 entries with boolean keys or values".into()
            ))
        );
        // Field 1: a list of 3 lists, the second of 2^31 - 1 booleans (0xf1, varint ff ff ff ff 07).
        let nested = [0x19, 0x39, 0x00, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07];
        let (r, _, _) = walk(&nested);
        assert_eq!(
            r,
            Err(Stop::Booleans("a list of 2147483647 booleans".into()))
        );
        // A set of booleans, and a map whose values only are booleans.
        assert!(matches!(walk(&[0x1a, 0x12]).0, Err(Stop::Booleans(_))));
        assert!(matches!(
            walk(&[0x1b, 0x01, 0x81]).0,
            Err(Stop::Booleans(_))
        ));
        // Empty containers of booleans cost nothing and pass.
        assert_eq!(walk(&[0x19, 0x01, 0x1b, 0x00, 0x00]).0, Ok(()));
    }

    /// Varints as the parquet crate reads them: an over-long one (11 bytes, zero payload past the first) is the
    /// value of its bits, and a value past 32 bits keeps them (the caller truncates an i32 as the crate does).
    #[test]
    fn varints_are_read_as_the_crate_reads_them() {
        let mut long = vec![0x15, 0x84];
        long.extend([0x80; 9]);
        long.extend([0x00, 0x00]);
        assert_eq!(walk(&long), (Ok(()), long.len(), vec![(1, 2)]));
        // ff ff ff f1 14: zigzag 0x14e3fffff, -2803892224 as an i64, 1491075072 in its low 32 bits.
        let wide = [0x15, 0xff, 0xff, 0xff, 0xf1, 0x14, 0x00];
        let (r, _, ints) = walk(&wide);
        assert_eq!(r, Ok(()));
        assert_eq!(ints, vec![(1, -2803892224)]);
        assert_eq!(ints[0].1 as i32, 1491075072);
        // An 11th byte's bits wrap around to the low end (shift 70 mod 64 = 6), as `wrapping_shl` has them.
        let mut wrap = vec![0x15, 0x80];
        wrap.extend([0x80; 9]);
        wrap.extend([0x01, 0x00]);
        assert_eq!(walk(&wrap).2, vec![(1, (1i64 << 6) >> 1)]);
    }

    #[test]
    fn truncations_and_malformed_bytes_stop_without_refusing() {
        let full = [0x15, 0x05, 0x18, 0x02, b'a', b'b', 0x00];
        for cut in 0..full.len() {
            assert_eq!(walk(&full[..cut]).0, Err(Stop::End), "cut at {cut}");
        }
        // Type 14 is no compact-protocol type; a size past i32; nesting past 64 levels.
        assert_eq!(walk(&[0x1e, 0x00]).0, Err(Stop::Malformed));
        assert_eq!(
            walk(&[0x1b, 0x80, 0x80, 0x80, 0x80, 0x08, 0x55]).0,
            Err(Stop::Malformed)
        );
        let deep: Vec<u8> = std::iter::repeat_n(0x1c, 70).collect();
        assert_eq!(walk(&deep).0, Err(Stop::Malformed));
    }
}
