//! A walk over Thrift compact-protocol bytes (a Parquet footer, a page header) that finds the one construct the
//! parquet crate (59.3.2, and 60.1.0 the same) can spend unbounded time on: a list, set or map of booleans in a
//! field it skips. The crate skips a field it does not know element by element and takes a boolean element to
//! hold no bytes (`parquet_thrift.rs`, `skip_till_depth`), so a declared size of two billion costs two billion
//! iterations that read nothing: about 8 s for one map in a 1 KB footer, and nesting multiplies it
//! (fuzz/reader_parquet covers it; the inputs are in `tests/fuzz_regressions/`). No field of a Parquet footer or page
//! header is such a container (the one `list<bool>` of the format, a column index's `null_pages`, lives in the
//! page index, which the reader does not read), so the walk refuses any with a size above zero.
//!
//! The walk also refuses the two sizes in a footer that the crate reserves memory for before it reads what they
//! size, where the size is larger than the footer could hold: the list of row groups (`Vec::with_capacity` of
//! the declared size, up to 2^31 - 1 row groups of about 100 bytes each) and a schema element's `num_children`
//! (a vector of that many pointers, `schema_from_array_helper`). A 910-byte fuzzed file claimed 457 million
//! children, a 3.7 GB allocation that aborts the process where memory is limited (fuzz/reader_parquet under
//! ASan's malloc limit, CI). Every other list the crate reads by type it first checks against the bytes left.
//!
//! The walk reads the bytes as the crate's decoder does, which is not as a generic Thrift reader would: the
//! crate's typed readers (its `thrift_struct!` macros and the hand-written ones for `FileMetaData`,
//! `RowGroup`, `ColumnChunk` and `ColumnMetaData`) read a field they know by its id as the type the format gives
//! it, whatever the type nibble of its header says, and skip by the nibble only the fields they do not know. A
//! walk that followed the nibbles instead read two fuzzed footers as ending after 7 and 101 bytes, while the
//! crate read on into skipped containers of booleans for 1.5 s and 11.6 s. So [`FILE_META_DATA`] and
//! [`PAGE_HEADER`] describe the structs field by field as the crate reads them ([`Shape`]), and [`Walker::skip`]
//! follows `skip_till_depth` step for step, depth limit included.
//!
//! Every other construct costs the crate at least one byte of input per element, so its work is bounded by the
//! input's length. Where the crate would stop with an error the walk may stop too or read on (reading on can
//! only find more to refuse in input the crate refuses anyway); it never stops short of where the crate goes on.

/// Why a walk stopped before the end of the value.
#[derive(Debug, PartialEq)]
pub(super) enum Stop {
    /// A container of booleans: what, and its declared size.
    Booleans(String),
    /// A size the crate allocates for before it reads what it sizes, larger than the input could hold: what.
    Oversized(String),
    /// The bytes ran out inside the value (a longer read may finish it).
    End,
    /// Something else the crate refuses by itself (an unknown type, too deep, a size out of range).
    Malformed,
}

/// The crate's limit on the nesting of a skipped value (`DEFAULT_SKIP_DEPTH`).
const SKIP_DEPTH: u32 = 64;

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

fn zigzag(zz: u64) -> i64 {
    (zz >> 1) as i64 ^ -((zz & 1) as i64)
}

/// How the crate's typed decoder reads a value whose type it knows.
#[derive(Clone, Copy, Debug)]
pub(super) enum Shape {
    /// An i16, i32, i64 or enum: one varint.
    Int,
    /// A schema element's `num_children`, an i32 varint: the crate reserves that many child pointers
    /// (`schema_from_array_helper`) before it finds there are not that many elements, so it must be below the
    /// size of the list being read (the schema's elements, itself bounded by the footer's length).
    Children,
    /// An i8: one byte.
    Byte,
    /// A struct field's boolean, held in its header's type nibble (the crate refuses any other nibble).
    Bool,
    /// A double: eight bytes.
    Double,
    /// A string or binary: a varint length, then that many bytes.
    Binary,
    /// A union's variant that is an empty struct: one stop byte (the crate refuses any other).
    Empty,
    /// A struct or union: the fields the crate knows, by id; any other field is skipped by its type nibble.
    Struct(&'static [(i16, Shape)]),
    /// A list whose header must name this element type (the crate refuses another), then its elements.
    List(u8, &'static Shape),
}

use Shape::{Binary, Bool, Byte, Children, Double, Empty, Int, List, Struct};

/// `FileMetaData` as `parquet_metadata_from_bytes` reads it (`file/metadata/thrift/mod.rs`), with the options
/// the reader opens files with (every statistic decoded; the crate built without `encryption`, so fields 8 and
/// 9 are skipped like unknown ones).
pub(super) const FILE_META_DATA: Shape = Struct(&[
    (1, Int),
    (2, List(STRUCT, &SCHEMA_ELEMENT)),
    (3, Int),
    (4, List(STRUCT, &ROW_GROUP)),
    (5, List(STRUCT, &Struct(&[(1, Binary), (2, Binary)]))),
    (6, Binary),
    // ColumnOrder: TYPE_ORDER (an empty struct); other variants skipped.
    (7, List(STRUCT, &Struct(&[(1, Empty)]))),
]);

const SCHEMA_ELEMENT: Shape = Struct(&[
    (1, Int),
    (2, Int),
    (3, Int),
    (4, Binary),
    (5, Children),
    (6, Int),
    (7, Int),
    (8, Int),
    (9, Int),
    (10, LOGICAL_TYPE),
]);

const TIME_UNIT: Shape = Struct(&[(1, Empty), (2, Empty), (3, Empty)]);
const TIMESTAMP: Shape = Struct(&[(1, Bool), (2, TIME_UNIT)]);

const LOGICAL_TYPE: Shape = Struct(&[
    (1, Empty),
    (2, Empty),
    (3, Empty),
    (4, Empty),
    (5, Struct(&[(1, Int), (2, Int)])),
    (6, Empty),
    (7, TIMESTAMP),
    (8, TIMESTAMP),
    (10, Struct(&[(1, Byte), (2, Bool)])),
    (11, Empty),
    (12, Empty),
    (13, Empty),
    (14, Empty),
    (15, Empty),
    (16, Struct(&[(1, Byte)])),
    (17, Struct(&[(1, Binary)])),
    (18, Struct(&[(1, Binary), (2, Int)])),
]);

/// Field 6 (`total_compressed_size`) is not read: skipped.
const ROW_GROUP: Shape = Struct(&[
    (1, List(STRUCT, &COLUMN_CHUNK)),
    (2, Int),
    (3, Int),
    (4, List(STRUCT, &Struct(&[(1, Int), (2, Bool), (3, Bool)]))),
    (5, Int),
    (7, Int),
]);

/// Fields 8 and 9 (encryption) are skipped without the crate's `encryption` feature.
const COLUMN_CHUNK: Shape = Struct(&[
    (1, Binary),
    (2, Int),
    (3, COLUMN_META_DATA),
    (4, Int),
    (5, Int),
    (6, Int),
    (7, Int),
]);

/// Fields 3 (`path_in_schema`) and 8 (`key_value_metadata`) are not read: skipped.
const COLUMN_META_DATA: Shape = Struct(&[
    (1, Int),
    (2, List(I32, &Int)),
    (4, Int),
    (5, Int),
    (6, Int),
    (7, Int),
    (9, Int),
    (10, Int),
    (11, Int),
    (12, STATISTICS),
    (13, List(STRUCT, &Struct(&[(1, Int), (2, Int), (3, Int)]))),
    (14, Int),
    (15, Int),
    (
        16,
        Struct(&[(1, Int), (2, List(I64, &Int)), (3, List(I64, &Int))]),
    ),
    (
        17,
        Struct(&[
            (
                1,
                Struct(&[
                    (1, Double),
                    (2, Double),
                    (3, Double),
                    (4, Double),
                    (5, Double),
                    (6, Double),
                    (7, Double),
                    (8, Double),
                ]),
            ),
            (2, List(I32, &Int)),
        ]),
    ),
]);

const STATISTICS: Shape = Struct(&[
    (1, Binary),
    (2, Binary),
    (3, Int),
    (4, Int),
    (5, Binary),
    (6, Binary),
    (7, Bool),
    (8, Bool),
]);

/// `PageHeader` as `read_thrift_without_stats` reads it, the crate's default (`read_page_stats` false): the
/// statistics of a data page header (field 5 of v1, 8 of v2) are skipped like unknown fields.
pub(super) const PAGE_HEADER: Shape = Struct(&[
    (1, Int),
    (2, Int),
    (3, Int),
    (4, Int),
    (5, Struct(&[(1, Int), (2, Int), (3, Int), (4, Int)])),
    (6, Struct(&[])),
    (7, Struct(&[(1, Int), (2, Int), (3, Bool)])),
    (
        8,
        Struct(&[
            (1, Int),
            (2, Int),
            (3, Int),
            (4, Int),
            (5, Int),
            (6, Int),
            (7, Bool),
        ]),
    ),
]);

/// A cursor over compact-protocol bytes.
pub(super) struct Walker<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The size of the innermost list being read by shape (for [`Shape::Children`]).
    list_len: u64,
}

impl<'a> Walker<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Walker<'a> {
        Walker {
            bytes,
            pos: 0,
            list_len: 0,
        }
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

    fn skip_bytes(&mut self, n: u64) -> Result<(), Stop> {
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

    /// A field header as `read_field_begin` reads it: `None` for a stop (any byte whose type nibble is 0), else
    /// the type nibble and the field id (the last id plus the header's delta, or a zigzag varint cut to 16 bits).
    fn field_header(&mut self, last: i16) -> Result<Option<(u8, i16)>, Stop> {
        let header = self.byte()?;
        let ty = header & 0x0f;
        if ty == 0 {
            return Ok(None);
        }
        if ty > UUID {
            return Err(Stop::Malformed);
        }
        let delta = header >> 4;
        let id = if delta == 0 {
            zigzag(self.varint()?) as i16
        } else {
            last.checked_add(i16::from(delta)).ok_or(Stop::Malformed)?
        };
        Ok(Some((ty, id)))
    }

    /// A list or set header as `read_list_begin` reads it: element type and size (`None` for the one-byte 0 some
    /// writers use for an empty list).
    fn list_header(&mut self) -> Result<Option<(u8, u64)>, Stop> {
        let header = self.byte()?;
        if header == 0 {
            return Ok(None);
        }
        let elem = header & 0x0f;
        if elem == 0 || elem > UUID {
            return Err(Stop::Malformed);
        }
        let size = match header >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if size > i32::MAX as u64 {
            return Err(Stop::Malformed);
        }
        Ok(Some((elem, size)))
    }

    /// A value of `shape` as the crate's typed decoder reads it; `on_int(field id, value)` sees every integer
    /// field (zigzag decoded) of the outermost struct, not of the structs inside it.
    pub(super) fn read(
        &mut self,
        shape: Shape,
        on_int: &mut dyn FnMut(i16, i64),
    ) -> Result<(), Stop> {
        match shape {
            Int => self.varint().map(drop),
            Children => self.children().map(drop),
            Byte => self.skip_bytes(1),
            Double => self.skip_bytes(8),
            Binary => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            Empty => match self.byte()? {
                0 => Ok(()),
                _ => Err(Stop::Malformed),
            },
            // Only a struct field is a `Bool`; `fields` reads it from the header.
            Bool => Err(Stop::Malformed),
            List(elem_type, elem) => {
                let Some((got, size)) = self.list_header()? else {
                    return Ok(());
                };
                if got != elem_type {
                    return Err(Stop::Malformed);
                }
                // Every element the crate reads by type takes at least one byte. It reserves room for the
                // row groups' list before reading one (`parquet_metadata_from_bytes`), so a size beyond the
                // bytes left would be an allocation of gigabytes for a list that cannot be there.
                let left = (self.bytes.len() - self.pos) as u64;
                if size > left {
                    return Err(Stop::Oversized(format!(
                        "a list of {size} elements in its last {left} bytes"
                    )));
                }
                let outer = std::mem::replace(&mut self.list_len, size);
                for _ in 0..size {
                    self.read(*elem, &mut |_, _| {})?;
                }
                self.list_len = outer;
                Ok(())
            }
            Struct(known) => {
                let mut last = 0i16;
                while let Some((ty, id)) = self.field_header(last)? {
                    match known.iter().find(|(k, _)| *k == id).map(|(_, s)| *s) {
                        Some(Int) => on_int(id, zigzag(self.varint()?)),
                        Some(Children) => on_int(id, self.children()?),
                        Some(Bool) if !is_bool(ty) => return Err(Stop::Malformed),
                        Some(Bool) => {}
                        Some(inner) => self.read(inner, &mut |_, _| {})?,
                        None => self.skip(ty, SKIP_DEPTH)?,
                    }
                    last = id;
                }
                Ok(())
            }
        }
    }

    /// A `num_children` (see [`Shape::Children`]): the crate's i32 (the low 32 bits of the zigzag-decoded
    /// varint), refused at or above the size of the list being read. A negative count the crate refuses itself.
    fn children(&mut self) -> Result<i64, Stop> {
        let n = zigzag(self.varint()?) as i32;
        if n > 0 && n as u64 >= self.list_len {
            return Err(Stop::Oversized(format!(
                "a schema element of {n} children in a schema of {} elements",
                self.list_len
            )));
        }
        Ok(i64::from(n))
    }

    /// A value of compact type `ty` skipped as the crate's `skip_till_depth(ty, depth)` skips it: a boolean (a
    /// field's or a container element's) holds no bytes, and a value at depth 0 is an error.
    fn skip(&mut self, ty: u8, depth: u32) -> Result<(), Stop> {
        if depth == 0 {
            return Err(Stop::Malformed);
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            UUID => self.skip_bytes(16),
            STRUCT => {
                while let Some((ty, _)) = self.field_header(0)? {
                    self.skip(ty, depth - 1)?;
                }
                Ok(())
            }
            LIST | SET => {
                let Some((elem, size)) = self.list_header()? else {
                    return Ok(());
                };
                if is_bool(elem) && size > 0 {
                    let kind = if ty == LIST { "list" } else { "set" };
                    return Err(Stop::Booleans(format!("a {kind} of {size} booleans")));
                }
                for _ in 0..size {
                    self.skip(elem, depth - 1)?;
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
                if key == 0 || key > UUID || val == 0 || val > UUID {
                    return Err(Stop::Malformed);
                }
                if is_bool(key) || is_bool(val) {
                    return Err(Stop::Booleans(format!(
                        "a map of {size} entries with boolean keys or values"
                    )));
                }
                for _ in 0..size {
                    self.skip(key, depth - 1)?;
                    self.skip(val, depth - 1)?;
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

    /// A struct the walk knows no field of: every field is skipped by its type nibble.
    const UNKNOWN: Shape = Struct(&[]);
    const ONE_INT: Shape = Struct(&[(1, Int)]);

    fn walk(shape: Shape, bytes: &[u8]) -> (Result<(), Stop>, usize, Vec<(i16, i64)>) {
        let mut w = Walker::new(bytes);
        let mut ints = Vec::new();
        let r = w.read(shape, &mut |id, v| ints.push((id, v)));
        (r, w.position(), ints)
    }

    /// A list read by shape whose size is beyond the bytes left, and a `num_children` at or above the size of
    /// the list holding it, are refused; one less is read on.
    #[test]
    fn sizes_the_crate_reserves_for_are_bounded_by_the_input() {
        const LIST: Shape = Struct(&[(1, List(I32, &Int))]);
        // A list of 5 i32s with 5 bytes after its header reads; with 4 it is refused before any element.
        let bytes = [0x19, 0x55, 1, 2, 3, 4, 5, 0x00];
        assert_eq!(walk(LIST, &bytes).0, Ok(()));
        let short = [0x19, 0x55, 1, 2, 3, 4];
        assert_eq!(
            walk(LIST, &short).0,
            Err(Stop::Oversized(
                "a list of 5 elements in its last 4 bytes".into()
            ))
        );
        // Long-form size 2^31 - 1 in a few bytes.
        let long = [0x19, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x07, 1, 0x00];
        assert!(matches!(walk(LIST, &long).0, Err(Stop::Oversized(_))));

        // Two elements of one field, num_children: 1 (zigzag 2) passes in a list of 2, 2 (zigzag 4) does not;
        // a negative count (zigzag 3 = -2) is left to the crate, which refuses it.
        const ELEMENTS: Shape = Struct(&[(1, List(STRUCT, &Struct(&[(5, Children)])))]);
        let with = |n: u8| [0x19, 0x2c, 0x55, n, 0x00, 0x55, 0x00, 0x00, 0x00];
        assert_eq!(walk(ELEMENTS, &with(2)).0, Ok(()));
        assert_eq!(walk(ELEMENTS, &with(3)).0, Ok(()));
        assert_eq!(
            walk(ELEMENTS, &with(4)).0,
            Err(Stop::Oversized(
                "a schema element of 2 children in a schema of 2 elements".into()
            ))
        );
        // The outermost struct reports it like an int.
        let (r, _, ints) = walk(Struct(&[(5, Children)]), &[0x55, 0x00, 0x00]);
        assert_eq!((r, ints), (Ok(()), vec![(5, 0)]));
    }

    #[test]
    fn known_fields_are_read_by_shape_and_others_skipped_to_the_stop_byte() {
        const SHAPE: Shape = Struct(&[
            (1, Int),
            (2, Bool),
            (3, Binary),
            (4, Struct(&[(1, Int)])),
            (5, List(I32, &Int)),
            (300, Int),
        ]);
        // i32 field 1 = -3 (zigzag 5), bool field 2 (true, no bytes), binary field 3 "ab", a struct field 4
        // holding i64 field 1 = 7 (not reported: an inner struct), a list field 5 of two i32 (1, 2), an unknown
        // map field 6 of one binary -> i32 entry (skipped), field 300 (long form, zigzag 600 = 0xd8 0x04) i16 = 1,
        // stop.
        let bytes = [
            0x15, 0x05, 0x11, 0x18, 0x02, b'a', b'b', 0x1c, 0x16, 0x0e, 0x00, 0x19, 0x25, 0x02,
            0x04, 0x1b, 0x01, 0x85, 0x01, b'k', 0x02, 0x04, 0xd8, 0x04, 0x02, 0x00, 0xff,
        ];
        let (r, pos, ints) = walk(SHAPE, &bytes);
        assert_eq!(r, Ok(()));
        assert_eq!(pos, bytes.len() - 1, "stops after the stop byte");
        assert_eq!(ints, vec![(1, -3), (300, 1)]);
        // Skipped the same, nothing is reported and the walk ends at the same byte.
        let (r, pos, ints) = walk(UNKNOWN, &bytes);
        assert_eq!((r, pos, ints), (Ok(()), bytes.len() - 1, vec![]));
    }

    /// The shape of session 9's slow footers: field 1's header says "set" but the crate reads version, an i32,
    /// by its id; the bytes after it are then a list of booleans it skips. Read by the nibbles, the same bytes are
    /// a set of one i64 and then an invalid header, and the walk would pass them.
    #[test]
    fn a_known_field_is_read_as_its_type_whatever_its_header_says() {
        let bytes = [0x1a, 0x16, 0x19, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        let (r, _, ints) = walk(ONE_INT, &bytes);
        assert_eq!(
            r,
            Err(Stop::Booleans("a list of 2147483647 booleans".into()))
        );
        assert_eq!(ints, vec![(1, 11)]);
        assert_eq!(walk(UNKNOWN, &bytes).0, Err(Stop::Malformed));
        // And a page header's sizes are read the same way: field 2 with a binary nibble is an i32 to the crate.
        let (r, _, ints) = walk(
            PAGE_HEADER,
            &[0x15, 0x00, 0x18, 0x80, 0x01, 0x15, 0x04, 0x00],
        );
        assert_eq!(r, Ok(()));
        assert_eq!(ints, vec![(1, 0), (2, 64), (3, 2)]);
    }

    /// The crate ends a struct at any header whose type nibble is 0, whatever its delta.
    #[test]
    fn any_header_with_a_zero_type_is_a_stop() {
        let shape = Struct(&[(1, Struct(&[]))]);
        let bytes = [0x1c, 0x10, 0x19, 0x11, 0x00];
        assert_eq!(
            walk(shape, &bytes).0,
            Err(Stop::Booleans("a list of 1 booleans".into()))
        );
    }

    #[test]
    fn containers_of_booleans_are_refused_whatever_their_nesting() {
        // Field 1: a map of 1,837,069,619 entries (varint b3 ea fd eb 06), key and value types bool (0x11).
        let map = [0x1b, 0xb3, 0xea, 0xfd, 0xeb, 0x06, 0x11];
        assert_eq!(
            walk(UNKNOWN, &map).0,
            Err(Stop::Booleans(
                "a map of 1837069619 entries with boolean keys or values".into()
            ))
        );
        // Field 1: a list of 3 lists, the second of 2^31 - 1 booleans (0xf1, varint ff ff ff ff 07).
        let nested = [0x19, 0x39, 0x00, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07];
        assert_eq!(
            walk(UNKNOWN, &nested).0,
            Err(Stop::Booleans("a list of 2147483647 booleans".into()))
        );
        // A set of booleans, and a map whose values only are booleans.
        assert!(matches!(
            walk(UNKNOWN, &[0x1a, 0x12]).0,
            Err(Stop::Booleans(_))
        ));
        assert!(matches!(
            walk(UNKNOWN, &[0x1b, 0x01, 0x81]).0,
            Err(Stop::Booleans(_))
        ));
        // Inside a skipped struct inside known ones: FileMetaData's row group's column chunk's field 20.
        // (0x0c 0x28: a struct field with the long-form id zigzag 40 = 20.)
        let deep = [
            0x49, 0x1c, 0x19, 0x1c, 0x0c, 0x28, 0x19, 0x11, 0x00, 0x00, 0x00,
        ];
        assert_eq!(
            walk(FILE_META_DATA, &deep).0,
            Err(Stop::Booleans("a list of 1 booleans".into()))
        );
        // Empty containers of booleans cost nothing and pass.
        assert_eq!(walk(UNKNOWN, &[0x19, 0x01, 0x1b, 0x00, 0x00]).0, Ok(()));
    }

    /// Varints as the parquet crate reads them: an over-long one (11 bytes, zero payload past the first) is the
    /// value of its bits, and a value past 32 bits keeps them (the caller truncates an i32 as the crate does).
    #[test]
    fn varints_are_read_as_the_crate_reads_them() {
        let mut long = vec![0x15, 0x84];
        long.extend([0x80; 9]);
        long.extend([0x00, 0x00]);
        assert_eq!(walk(ONE_INT, &long), (Ok(()), long.len(), vec![(1, 2)]));
        // ff ff ff f1 14: zigzag 0x14e3fffff, -2803892224 as an i64, 1491075072 in its low 32 bits.
        let wide = [0x15, 0xff, 0xff, 0xff, 0xf1, 0x14, 0x00];
        let (r, _, ints) = walk(ONE_INT, &wide);
        assert_eq!(r, Ok(()));
        assert_eq!(ints, vec![(1, -2803892224)]);
        assert_eq!(ints[0].1 as i32, 1491075072);
        // An 11th byte's bits wrap around to the low end (shift 70 mod 64 = 6), as `wrapping_shl` has them.
        let mut wrap = vec![0x15, 0x80];
        wrap.extend([0x80; 9]);
        wrap.extend([0x01, 0x00]);
        assert_eq!(walk(ONE_INT, &wrap).2, vec![(1, (1i64 << 6) >> 1)]);
        // A long-form field id is a zigzag varint cut to 16 bits, as the crate casts it: 2 * 65537 is id 1.
        assert_eq!(
            walk(ONE_INT, &[0x05, 0x82, 0x80, 0x08, 0x02, 0x00]).2,
            vec![(1, 1)]
        );
    }

    #[test]
    fn truncations_and_malformed_bytes_stop_without_refusing() {
        let full = [0x15, 0x05, 0x18, 0x02, b'a', b'b', 0x00];
        for cut in 0..full.len() {
            assert_eq!(
                walk(UNKNOWN, &full[..cut]).0,
                Err(Stop::End),
                "cut at {cut}"
            );
        }
        // Type 14 is no compact-protocol type; a size past i32; a known boolean field with another nibble; a
        // list of another element type than the field's; an empty variant holding a field; a delta past i16.
        assert_eq!(walk(UNKNOWN, &[0x1e, 0x00]).0, Err(Stop::Malformed));
        assert_eq!(
            walk(UNKNOWN, &[0x1b, 0x80, 0x80, 0x80, 0x80, 0x08, 0x55]).0,
            Err(Stop::Malformed)
        );
        assert_eq!(
            walk(Struct(&[(1, Bool)]), &[0x15, 0x00]).0,
            Err(Stop::Malformed)
        );
        assert_eq!(
            walk(Struct(&[(1, List(I32, &Int))]), &[0x19, 0x16, 0x02]).0,
            Err(Stop::Malformed)
        );
        assert_eq!(
            walk(Struct(&[(1, Empty)]), &[0x1c, 0x15, 0x00]).0,
            Err(Stop::Malformed)
        );
        // i32 field 32766 (long form, zigzag 65532) = 0, then a header with delta 2: past i16.
        let far = [0x05, 0xfc, 0xff, 0x03, 0x00, 0x25, 0x00];
        assert_eq!(walk(UNKNOWN, &far).0, Err(Stop::Malformed));
    }

    /// The skip's depth limit is the crate's: 64 levels of skipped structs inside a known struct read, 65 do
    /// not; a list of booleans at the deepest level the crate reaches is still refused.
    #[test]
    fn skips_nest_as_deep_as_the_crates() {
        let nested = |levels: usize| {
            let mut b = vec![0x1c; levels];
            b.extend([0x19, 0x11]);
            b.extend(std::iter::repeat_n(0x00, levels));
            b
        };
        assert!(matches!(
            walk(UNKNOWN, &nested(63)).0,
            Err(Stop::Booleans(_))
        ));
        assert_eq!(walk(UNKNOWN, &nested(64)).0, Err(Stop::Malformed));
        let mut ok = vec![0x1c; 63];
        ok.extend(std::iter::repeat_n(0x00, 64));
        assert_eq!(walk(UNKNOWN, &ok), (Ok(()), 127, vec![]));
    }
}
