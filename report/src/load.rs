//! Reads a run directory (docs/records.md): `records.jsonl` as typed
//! [`tokentap_core::record::TurnRecord`]s, `summary.json` and `config.json` into the run's
//! types (`tokentap_run`: a run directory of an earlier layout loads, a field it lacks takes its
//! default), and an optional `compare.json` written by `tokentap compare --json` into the run
//! directory.
//! Derives every series the plots and the text formats show.

use crate::error::ReportError;
use serde::Deserialize as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;
use tokentap_run::compare::CompareFile;
use tokentap_run::config::RunConfig;
use tokentap_run::files;
use tokentap_run::summary::Summary;

/// What `--tokenizer` recounted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recount {
    /// `ok` turns whose recorded output was counted.
    pub recounted: usize,
    /// `ok` turns without a recorded output.
    pub without_output: usize,
}

/// `(x, y)` points of one plotted series.
pub type Series = Vec<(f64, f64)>;

/// `compare.json`: typed, and as written.
pub struct Compared {
    /// What the page shows of it.
    pub file: CompareFile,
    /// The file as written.
    pub json: Value,
}

/// Everything read from one run directory.
pub struct Run {
    /// The run directory.
    pub dir: PathBuf,
    /// Its records.
    pub records: Vec<TurnRecord>,
    /// Its `summary.json`.
    pub summary: Summary,
    /// Its `config.json` (else the summary's copy).
    pub config: RunConfig,
    /// `compare.json`, when `tokentap compare --json RUN_DIR/compare.json` put one there: what
    /// the page shows of it, and the file as written (embedded verbatim in the JSON form).
    pub compare: Option<Compared>,
}

/// `records.jsonl`, a line at a time (memory: the records, not the file's text).
fn read_records(path: &Path, outputs: bool) -> Result<Vec<TurnRecord>, ReportError> {
    use tokentap_core::jsonl::LineError;
    let mut lines = tokentap_core::jsonl::open(path).map_err(|source| ReportError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut records = Vec::new();
    loop {
        let (line, text) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(records),
            Err(LineError::Io(source)) => {
                return Err(ReportError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
            Err(e) => {
                return Err(ReportError::Record {
                    path: path.to_owned(),
                    line: lines.line(),
                    message: e.to_string(),
                })
            }
        };
        let mut r: TurnRecord = serde_json::from_str(text).map_err(|e| ReportError::Record {
            path: path.to_owned(),
            line,
            message: e.to_string(),
        })?;
        // Exactly the chunks read (a list grows by doubling as it is parsed).
        r.measured.chunks.shrink_to_fit();
        r.content = match r.content.take() {
            Some(Value::Object(mut c)) if outputs => c
                .remove("output")
                .map(|o| Value::Object([("output".to_string(), o)].into_iter().collect())),
            _ => None,
        };
        records.push(r);
    }
}

/// A JSON document of the run directory into its type, refused unread past 64 MiB (a summary is
/// a few hundred KB); `what` names the file for an error of a JSON document of another shape.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, ReportError> {
    let bytes = tokentap_core::jsonl::read_document(path).map_err(|e| match e {
        tokentap_core::jsonl::DocumentError::Io(source) => ReportError::Read {
            path: path.to_owned(),
            source,
        },
        e => ReportError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        },
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let shape = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.is_object() => format!("{what}: "),
            Ok(_) => format!("not {what} (expected an object): "),
            Err(_) => String::new(),
        };
        ReportError::Parse {
            path: path.to_owned(),
            message: format!("{shape}{e}"),
        }
    })
}

impl Run {
    /// Loads `dir`. `records.jsonl` and `summary.json` are required; `config.json` falls back
    /// to the copy embedded in the summary. Recorded content is let go as each record is read.
    pub fn load(dir: &Path) -> Result<Run, ReportError> {
        Run::load_with(dir, false)
    }

    /// Like [`Run::load`]; with `outputs`, each record keeps its recorded output
    /// (`content.output`, for [`Run::recount`]) and nothing else of its content.
    pub fn load_with(dir: &Path, outputs: bool) -> Result<Run, ReportError> {
        let rp = dir.join(files::RECORDS);
        // The summary first: a directory that is not a run is refused before its records are
        // read.
        let sp = dir.join(files::SUMMARY);
        let summary: Summary = read_json(&sp, "a tokentap summary.json")?;
        let records = read_records(&rp, outputs)?;
        // The records and the summary must be of one run: a records.jsonl emptied or replaced
        // would otherwise show the summary's numbers beside other turns.
        let t = summary.counts.total;
        if t != records.len() as u64 && summary.run.records_error.is_none() {
            return Err(ReportError::Parse {
                path: rp,
                message: format!(
                    "{} records, but summary.json counts {t}: the records are not this run's (lost, cut or replaced)",
                    records.len()
                ),
            });
        }
        let cp = dir.join(files::CONFIG);
        let config = if cp.exists() {
            read_json(&cp, "a tokentap config.json")?
        } else {
            summary.config.clone()
        };
        let mp = dir.join(files::COMPARE);
        let compare = if mp.exists() {
            let json: Value = read_json(&mp, "a tokentap compare.json")?;
            let file = CompareFile::deserialize(&json).map_err(|e| ReportError::Parse {
                path: mp.clone(),
                message: format!("a tokentap compare.json: {e}"),
            })?;
            Some(Compared { file, json })
        } else {
            None
        };
        Ok(Run {
            dir: dir.to_owned(),
            records,
            summary,
            config,
            compare,
        })
    }

    /// `--tokenizer`: counts every recorded output (`content.output`, written by
    /// `replay --record-outputs`) the reference's way, folds the performance window again and
    /// replaces the summary's MLPerf primary metrics with the result (marked `recounted_with`).
    pub fn recount(&mut self, tok: &tokentap_mlperf::RefTokenizer) -> Recount {
        use tokentap_mlperf::ModelOutput;
        let mut n = Recount::default();
        for r in self.records.iter_mut().filter(|r| r.status == Status::Ok) {
            let out = r
                .content
                .as_ref()
                .and_then(|c| c.get("output"))
                .and_then(ModelOutput::from_event_data);
            let Some(out) = out else {
                n.without_output += 1;
                continue;
            };
            tok.record_output(&out, r);
            n.recounted += 1;
        }
        if n.recounted == 0 {
            self.summary.mlperf.report_note = Some(format!(
                "tokentap report --tokenizer {}: no recorded output to count (run the replay with --record-outputs, or with --tokenizer)",
                tok.dir().display()
            ));
            return n;
        }
        let mut w = tokentap_mlperf::window::Window::default();
        for r in &self.records {
            w.fold(r);
        }
        w.close(self.summary.window.start_mono_ns);
        let m = &mut self.summary.mlperf;
        m.primary = w.primary();
        m.reference_tokens = w.reference_tokens();
        m.osl_source = w
            .osl_sources
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), *v))
            .collect();
        m.recounted_with = Some(tok.dir().display().to_string());
        n
    }

    /// The run's first instant on the monotonic clock: `run.start.mono_ns`.
    pub fn t0(&self) -> u64 {
        self.summary.run.start.mono_ns
    }

    /// Turns that count for latency: `ok` and in the window (or with no window information).
    pub fn measured(&self) -> impl Iterator<Item = &TurnRecord> {
        self.records
            .iter()
            .filter(|r| r.status == Status::Ok && r.in_window != Some(false))
    }

    /// `(turn index, TTFT ms)`.
    pub fn ttft_by_turn(&self) -> Vec<(f64, f64)> {
        self.measured()
            .filter_map(|r| Some((r.turn_index as f64, r.measured.ttft_ns? as f64 / 1e6)))
            .collect()
    }

    /// `(prompt tokens, TTFT ms)`; the context size is the server's prompt tokens, else the
    /// request bytes / 4 (the stand-in tokenizer's ratio) — the label says which.
    pub fn ttft_by_context(&self) -> (Vec<(f64, f64)>, &'static str) {
        let reference: Vec<(f64, f64)> = self
            .measured()
            .filter_map(|r| {
                r.isl_source.filter(|s| s.is_reference())?;
                Some((r.isl? as f64, r.measured.ttft_ns? as f64 / 1e6))
            })
            .collect();
        if !reference.is_empty() {
            return (reference, "input tokens (reference tokenizer, ISL)");
        }
        let with_usage: Vec<(f64, f64)> = self
            .measured()
            .filter_map(|r| {
                Some((
                    r.measured.prompt_tokens? as f64,
                    r.measured.ttft_ns? as f64 / 1e6,
                ))
            })
            .collect();
        if !with_usage.is_empty() {
            return (with_usage, "prompt tokens (server usage)");
        }
        let est = self
            .measured()
            .filter_map(|r| {
                Some((
                    r.request_bytes? as f64 / 4.0,
                    r.measured.ttft_ns? as f64 / 1e6,
                ))
            })
            .collect();
        (
            est,
            "request bytes / 4 (no usage: run with --include-usage)",
        )
    }

    /// Every ITL sample (ms) of the measured turns.
    pub fn itl_ms(&self) -> Samples {
        let mut s = Samples::new();
        for r in self.measured() {
            for x in r.measured.itl_samples() {
                s.push(x / 1e6);
            }
        }
        s
    }

    /// Empirical CDF of ITL, `(ms, fraction ≤)`, at most `n` points.
    pub fn itl_cdf(&self, n: usize) -> Vec<(f64, f64)> {
        let mut v: Vec<f64> = self
            .measured()
            .flat_map(|r| r.measured.itl_samples().map(|x| x / 1e6))
            .filter(|x| *x > 0.0)
            .collect();
        v.sort_unstable_by(f64::total_cmp);
        if v.is_empty() {
            return Vec::new();
        }
        let step = (v.len() / n.max(1)).max(1);
        let mut out: Vec<(f64, f64)> = (0..v.len())
            .step_by(step)
            .map(|i| (v[i], (i + 1) as f64 / v.len() as f64))
            .collect();
        if let Some(last) = v.last() {
            out.push((*last, 1.0));
        }
        out
    }

    /// Output tokens/s and cached share per time bin, by completion time (s since run start).
    /// Bins: the run split into ~60 (at least 0.1 s each).
    pub fn over_time(&self) -> (Series, Series) {
        let t0 = self.t0();
        let ends: Vec<(f64, &TurnRecord)> = self
            .records
            .iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| Some((r.end_mono_ns()?.saturating_sub(t0) as f64 / 1e9, r)))
            .collect();
        let end = ends.iter().map(|e| e.0).fold(0.0, f64::max);
        if ends.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let width = (end / 60.0).max(0.1);
        let n = (end / width).floor() as usize + 1;
        let mut tokens = vec![0u64; n];
        let mut prompt = vec![0u64; n];
        let mut cached = vec![0u64; n];
        for (t, r) in &ends {
            let b = ((t / width) as usize).min(n - 1);
            tokens[b] += r.measured.output_tokens.unwrap_or(0);
            if let (Some(p), Some(c)) = (r.measured.prompt_tokens, r.measured.cached_tokens) {
                prompt[b] += p;
                cached[b] += c;
            }
        }
        let mid = |b: usize| (b as f64 + 0.5) * width;
        let tps = (0..n).map(|b| (mid(b), tokens[b] as f64 / width)).collect();
        let share = (0..n)
            .filter(|b| prompt[*b] > 0)
            .map(|b| (mid(b), cached[b] as f64 / prompt[b] as f64))
            .collect();
        (tps, share)
    }

    /// Records by status, in [`Status::ALL`] order.
    pub fn status_counts(&self) -> Vec<(Status, u64)> {
        Status::ALL
            .iter()
            .map(|s| {
                (
                    *s,
                    self.records.iter().filter(|r| r.status == *s).count() as u64,
                )
            })
            .collect()
    }

    /// `summary.validity.verdict`.
    pub fn verdict(&self) -> &'static str {
        self.summary.validity.verdict.as_str()
    }
}
