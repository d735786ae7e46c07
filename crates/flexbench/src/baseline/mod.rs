//! Baseline extent indexes for `flexbench tree` (Table 1 of the paper).

pub mod array;
pub mod btree;
