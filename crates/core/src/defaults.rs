//! The defaults every front end shares, said once: the command line, the online service, the Python package and
//! the Spark job read them here, so the same call with the same flags, and without them, gives the same bytes
//! everywhere. A test in each higher layer ties its own defaults (an enum's `Default`, a flag's default, a
//! Python signature's default) to this table.

/// The signature kernel: one-permutation hashing with optimal densification, the fastest kernel that keeps
/// MinHash's accuracy on documents of any length.
pub const KERNEL: &str = "oph-opt";
/// k, the number of 32-bit slots per signature.
pub const NUM_PERM: usize = 128;
/// The seed of the shingle ids, the kernel's hash functions and the band keys.
pub const SEED: u64 = 42;
/// The shingle kind: character 5-grams.
pub const SHINGLE: &str = "char:5";
/// How candidate pairs are confirmed: exact Jaccard of the shingle sets.
pub const VERIFY: &str = "exact";
/// Which member of a group survives: the centre (most verified pairs).
pub const KEEP: &str = "center";
/// Documents shorter than one shingle (never candidates): exact copies are removed in favour of the one the
/// survivor policy prefers.
pub const SHORT: &str = "exact";
/// Documents per band bucket beyond which a bucket is walked as a star instead of all its pairs.
pub const BUCKET_CAP: usize = 5000;
/// The most candidate pairs a batch run enumerates before it stops with an error.
pub const MAX_CANDIDATES: u64 = 20_000_000;
/// The most member pairs a group's statistics examine (a seeded sample beyond it).
pub const PAIR_BUDGET: usize = 2000;
/// The longest record a reader accepts, in bytes.
pub const MAX_RECORD_BYTES: u64 = 1 << 30;

/// A default's value, as a front end in another language reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A name (a kernel, a shingle kind, a policy).
    Text(&'static str),
    /// A count or a size.
    Count(u64),
}

/// The whole table, by the name of the parameter it is the default of (the Python package's keyword names,
/// the command line's flags with `-` for `_`).
pub const TABLE: &[(&str, Value)] = &[
    ("kernel", Value::Text(KERNEL)),
    ("num_perm", Value::Count(NUM_PERM as u64)),
    ("seed", Value::Count(SEED)),
    ("shingle", Value::Text(SHINGLE)),
    ("verify", Value::Text(VERIFY)),
    ("keep", Value::Text(KEEP)),
    ("short", Value::Text(SHORT)),
    ("bucket_cap", Value::Count(BUCKET_CAP as u64)),
    ("max_candidates", Value::Count(MAX_CANDIDATES)),
    ("pair_budget", Value::Count(PAIR_BUDGET as u64)),
    ("max_record_bytes", Value::Count(MAX_RECORD_BYTES)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_in_the_table_once() {
        let mut names: Vec<&str> = TABLE.iter().map(|(n, _)| *n).collect();
        let len = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), len, "a name twice in the table");
        assert!(TABLE.contains(&("kernel", Value::Text(KERNEL))));
    }
}
