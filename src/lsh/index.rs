//! OWNER: LSH helper. To be written.
