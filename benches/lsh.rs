//! OWNER: lsh helper. Placeholder so the skeleton compiles.
fn main() {}
