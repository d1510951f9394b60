//! The names of the files a run, a sweep and a submission tree hold (docs/records.md), each
//! declared once.

/// A run's per-turn records (`TurnRecord`s, one JSON object a line).
pub const RECORDS: &str = "records.jsonl";
/// A run's summary ([`crate::summary::Summary`]).
pub const SUMMARY: &str = "summary.json";
/// A run's resolved configuration ([`crate::config::RunConfig`]).
pub const CONFIG: &str = "config.json";
/// The warmup's records (never part of a result).
pub const WARMUP_RECORDS: &str = "warmup.jsonl";
/// The reference's summary of the run, in its schema.
pub const RESULT_SUMMARY: &str = "result_summary.json";
/// The reference inline scorer's result, in its schema.
pub const SCORES: &str = "scores.json";
/// `tokentap compare --json` written into a run directory.
pub const COMPARE: &str = "compare.json";
/// A run's HTML report.
pub const REPORT: &str = "report.html";
/// A sweep point's facts, beside its run's files ([`crate::sweep::PointFile`]).
pub const POINT: &str = "point.json";
/// A sweep's plan, points and verdict ([`crate::sweep::SweepFile`]).
pub const SWEEP: &str = "sweep.json";
