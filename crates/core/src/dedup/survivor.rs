//! Which copy of a near-duplicate group survives, and why: the survivor policy (`--keep`), the ranking it puts
//! on the documents, and the policy for documents too short to hold one shingle (`--short`).
//!
//! A policy is a total order on the documents (ties by input position). Grouping takes it as the order in which
//! documents become centres ([`crate::lsh::cluster::group_ranked`]): under `--groups center` a document is
//! removed only in favour of a centre it has a verified pair with, and no two kept documents share a verified
//! pair; under `--groups components` the best-ranked member of each component survives alone, which is what
//! chaining makes unsafe (a removed member may share nothing with its survivor).

use crate::corpus::FieldValue;
use std::fmt;

/// Which member of a group survives: the grouping's own centre, or a ranking of the documents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Keep {
    /// The member with most verified pairs (then the highest summed similarity, then the earliest).
    #[default]
    Center,
    /// The earliest document in input order.
    First,
    /// The latest document in input order.
    Last,
    /// The longest text (bytes of UTF-8), ties to the earliest.
    Longest,
    /// The shortest text, ties to the earliest.
    Shortest,
    /// The largest (`max`) or smallest value of a JSONL field or a CSV/TSV/Parquet column, ties to the earliest.
    /// A document without a value never survives one that has one.
    Column {
        /// The field or column.
        name: String,
        /// Whether the largest value wins.
        max: bool,
    },
}

impl Keep {
    /// The field or column the policy reads from each record, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Keep::Column { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Whether the policy ranks by text length.
    pub fn needs_lengths(&self) -> bool {
        matches!(self, Keep::Longest | Keep::Shortest)
    }
}

impl std::str::FromStr for Keep {
    type Err = String;

    fn from_str(s: &str) -> Result<Keep, String> {
        Ok(match s {
            "center" => Keep::Center,
            "first" => Keep::First,
            "last" => Keep::Last,
            "longest" => Keep::Longest,
            "shortest" => Keep::Shortest,
            _ => {
                let column = s.strip_prefix("column:").and_then(|rest| {
                    let (name, order) = rest.rsplit_once(':')?;
                    let max = match order {
                        "max" => true,
                        "min" => false,
                        _ => return None,
                    };
                    (!name.is_empty()).then(|| Keep::Column {
                        name: name.to_string(),
                        max,
                    })
                });
                return column.ok_or_else(|| {
                    format!(
                        "{s:?} is not a survivor policy: use center, first, last, longest, shortest, \
                         column:NAME:max or column:NAME:min"
                    )
                });
            }
        })
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::Center => f.write_str("center"),
            Keep::First => f.write_str("first"),
            Keep::Last => f.write_str("last"),
            Keep::Longest => f.write_str("longest"),
            Keep::Shortest => f.write_str("shortest"),
            Keep::Column { name, max } => {
                write!(f, "column:{name}:{}", if *max { "max" } else { "min" })
            }
        }
    }
}

/// What happens to a document shorter than one shingle ([`crate::shingle::Shingler::is_short`]: fewer
/// tokens or characters than one window), whose shingle set is its whole normalised text as one shingle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Short {
    /// Matched by its whole normalised text: identical short documents are duplicates (Jaccard 1) and a short
    /// document never matches a longer one; a document with no token at all is never matched.
    #[default]
    Exact,
    /// Kept, and never matched (not banded).
    Keep,
    /// Removed (the audit says why), and not banded.
    Drop,
}

impl Short {
    /// The name on the command line and in the audit.
    pub fn name(self) -> &'static str {
        match self {
            Short::Keep => "keep",
            Short::Drop => "drop",
            Short::Exact => "exact",
        }
    }

    /// Whether the policy takes short documents out of banding.
    pub fn unbanded(self) -> bool {
        self != Short::Exact
    }
}

/// Why a ranking could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SurvivorError {
    /// The policy's column holds numbers in some records and text in others.
    #[error(
        "--keep {policy}: field `{field}` holds a number in document {number_id:?} and text in document \
         {text_id:?}; a survivor column must hold numbers throughout or text throughout"
    )]
    MixedColumn {
        /// The policy.
        policy: String,
        /// The field.
        field: String,
        /// A document whose value is a number.
        number_id: String,
        /// A document whose value is text.
        text_id: String,
    },
    /// The policy needs per-document values the run did not record (a caller's mistake).
    #[error("--keep {0}: the run did not record the values this policy ranks by")]
    Missing(String),
}

/// The per-document inputs of a ranking, for the documents read now (position `loaded + j` is entry `j`).
#[derive(Clone, Debug, Default)]
pub struct RankInputs {
    /// Text lengths in bytes (`longest`, `shortest`).
    pub lengths: Vec<u32>,
    /// The policy column's values (`column:...`).
    pub values: Vec<FieldValue>,
}

/// The ranking a policy puts on `loaded + new` documents: `rank[x]` is `x`'s place in the order of preference
/// (0 first), or `None` for [`Keep::Center`] (the grouping's own centre). Documents loaded from a saved state
/// rank before every document read now, in their order: they are already in the deduplicated corpus.
pub fn ranking(
    keep: &Keep,
    loaded: usize,
    new: usize,
    inputs: &RankInputs,
    ids: &[String],
) -> Result<Option<Vec<u32>>, SurvivorError> {
    let n = loaded + new;
    let mut order: Vec<u32> = (loaded as u32..n as u32).collect();
    let j = |x: u32| x as usize - loaded;
    match keep {
        Keep::Center => return Ok(None),
        Keep::First => {}
        Keep::Last => order.reverse(),
        Keep::Longest | Keep::Shortest => {
            if inputs.lengths.len() != new {
                return Err(SurvivorError::Missing(keep.to_string()));
            }
            let len = |x: u32| inputs.lengths[j(x)];
            if *keep == Keep::Longest {
                order.sort_by_key(|&x| (std::cmp::Reverse(len(x)), x));
            } else {
                order.sort_by_key(|&x| (len(x), x));
            }
        }
        Keep::Column { name, max } => {
            let values = &inputs.values;
            if values.len() != new {
                return Err(SurvivorError::Missing(keep.to_string()));
            }
            let number = values
                .iter()
                .position(|v| matches!(v, FieldValue::Number(_)));
            let text = values.iter().position(|v| matches!(v, FieldValue::Text(_)));
            if let (Some(a), Some(b)) = (number, text) {
                return Err(SurvivorError::MixedColumn {
                    policy: keep.to_string(),
                    field: name.clone(),
                    number_id: ids[loaded + a].clone(),
                    text_id: ids[loaded + b].clone(),
                });
            }
            // Present values first, best first; ties and missing values in input order.
            order.sort_by(|&x, &y| {
                use std::cmp::Ordering;
                let (a, b) = (&values[j(x)], &values[j(y)]);
                let by_value = match (a, b) {
                    (FieldValue::Missing, FieldValue::Missing) => Ordering::Equal,
                    (FieldValue::Missing, _) => Ordering::Greater,
                    (_, FieldValue::Missing) => Ordering::Less,
                    (FieldValue::Number(p), FieldValue::Number(q)) => {
                        if *max {
                            q.total_cmp(p)
                        } else {
                            p.total_cmp(q)
                        }
                    }
                    (FieldValue::Text(p), FieldValue::Text(q)) => {
                        if *max {
                            q.cmp(p)
                        } else {
                            p.cmp(q)
                        }
                    }
                    _ => unreachable!("mixed columns were refused above"),
                };
                by_value.then(x.cmp(&y))
            });
        }
    }
    let mut rank = vec![0u32; n];
    for (x, r) in rank.iter_mut().enumerate().take(loaded) {
        *r = x as u32;
    }
    for (place, &x) in order.iter().enumerate() {
        rank[x as usize] = (loaded + place) as u32;
    }
    Ok(Some(rank))
}

/// A document removed by the short-document policy (`--short drop`): its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortRemoval {
    /// The removed document's position.
    pub doc: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for s in [
            "center",
            "first",
            "last",
            "longest",
            "shortest",
            "column:ts:max",
            "column:a:b:min",
        ] {
            assert_eq!(s.parse::<Keep>().unwrap().to_string(), s);
        }
        for bad in ["", "column:ts", "column::max", "column:ts:up", "oldest"] {
            let e = bad.parse::<Keep>().unwrap_err();
            assert!(e.contains("not a survivor policy"), "{e}");
        }
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("d{i}")).collect()
    }

    #[test]
    fn rankings_order_by_the_policy_then_position() {
        let inputs = RankInputs {
            lengths: vec![5, 9, 5, 1],
            values: vec![
                FieldValue::Number(2.0),
                FieldValue::Missing,
                FieldValue::Number(7.5),
                FieldValue::Number(2.0),
            ],
        };
        let rank = |k: &str| ranking(&k.parse().unwrap(), 0, 4, &inputs, &ids(4)).unwrap();
        assert_eq!(rank("center"), None);
        assert_eq!(rank("first"), Some(vec![0, 1, 2, 3]));
        assert_eq!(rank("last"), Some(vec![3, 2, 1, 0]));
        assert_eq!(rank("longest"), Some(vec![1, 0, 2, 3]));
        assert_eq!(rank("shortest"), Some(vec![1, 3, 2, 0]));
        assert_eq!(rank("column:x:max"), Some(vec![1, 3, 0, 2]));
        assert_eq!(rank("column:x:min"), Some(vec![0, 3, 2, 1]));
        // Loaded documents come first, in their order.
        let r = ranking(&Keep::Last, 2, 4, &inputs, &ids(6))
            .unwrap()
            .unwrap();
        assert_eq!(r, vec![0, 1, 5, 4, 3, 2]);
    }

    #[test]
    fn a_column_of_numbers_and_text_is_refused_naming_both() {
        let inputs = RankInputs {
            lengths: Vec::new(),
            values: vec![
                FieldValue::Missing,
                FieldValue::Text("2024-01-01".into()),
                FieldValue::Number(3.0),
            ],
        };
        let e = ranking(&"column:ts:min".parse().unwrap(), 0, 3, &inputs, &ids(3))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field `ts`") && e.contains("\"d2\"") && e.contains("\"d1\""),
            "{e}"
        );
    }
}
