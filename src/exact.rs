//! Exact all-pairs Jaccard similarity join (ground truth). OWNER: LSH helper. To be written.
