//! `OUT/sweep.json`: its schema and its atomic writes are `tokentap_run::sweep` (the run
//! directory's types, read back by the submission tree too).

pub use tokentap_run::sweep::*;
