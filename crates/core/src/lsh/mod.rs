//! Locality-sensitive hashing over MinHash signatures: S-curve theory, (b, r) tuning, the banding index and
//! grouping by union-find.

pub mod choice;
pub mod cluster;
pub mod index;
pub mod scurve;
pub mod sharded;
pub mod tune;
