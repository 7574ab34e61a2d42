//! The end-to-end dedup job. OWNER: LSH helper. To be written.
