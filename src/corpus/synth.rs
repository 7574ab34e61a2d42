//! The seeded synthetic corpus generator behind `lshbench gen`: Zipfian text with planted near-duplicate
//! clusters made by controlled edits, plus a ground-truth file naming each cluster.
//!
//! OWNER: corpus helper. Interface fixed by the skeleton; bodies to be written.
