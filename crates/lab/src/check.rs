//! One self-check: what an experiment checked against theory, whether it held, and the numbers behind it.

use serde::Serialize;

/// One self-check: what was checked, whether it held, and the numbers behind the verdict.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Check {
    /// The experiment that made it.
    pub experiment: String,
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// The numbers behind the verdict.
    pub detail: String,
}
