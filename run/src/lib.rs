//! The run directory as types: every file a tokentap run writes, by its one name
//! ([`files`]) and its schema — the run's configuration ([`config::RunConfig`], whose serde form
//! is `config.json`), its summary ([`summary::Summary`], `summary.json`), a sweep's plan and points
//! ([`sweep::SweepFile`], `sweep.json`), and a comparison left beside them
//! ([`compare::CompareFile`], `compare.json`, as far as the run's report reads it). Writers serialize
//! these types and readers deserialize them: a renamed field is a compile error in every crate
//! that reads it, not a `null` in a report or a submission. Files of earlier layouts keep
//! loading (a field added later has its default; `tests/run_layouts.rs`).
//!
//! Below the replay, the sweep, the report, the submission tree and compare: none of them
//! reads another's files as untyped JSON.

#![warn(missing_docs)]

pub mod compare;
pub mod config;
pub mod error;
pub mod files;
pub mod summary;
pub mod sweep;
