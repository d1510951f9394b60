//! The sweep report: one self-contained HTML page (the run report's style, inline SVG, the same
//! self-check script), Markdown and JSON, and the terminal's curve table and verdict screen.
//!
//! Plots (docs/benchmark.md#pareto): the agentic Pareto curve `system_tps` against
//! `e2e_interactivity` as the official step function, each point labelled by concurrency and
//! region; `system_tps` against `tps_per_user` (also steps); `system_tps`, `ttft_p90_ms` (with the
//! wire's and the engine's beside the client's when known) and `tps_per_user` against concurrency
//! on a log axis with the regions shaded. Every number comes from `sweep.json`.

use crate::file::{Point, PointStatus, SweepFile};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tokentap_report::html::{CSS, SCRIPT};
use tokentap_report::svg::{esc, num, Lines, Steps};

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn label(p: &Point) -> String {
    format!(
        "C={}{}",
        p.concurrency,
        p.region.map_or(String::new(), |r| format!(" {r}"))
    )
}

/// Points with primary metrics, in concurrency order.
fn measured(file: &SweepFile) -> impl Iterator<Item = (&Point, &tokentap_mlperf::Primary)> {
    file.points
        .iter()
        .filter(|p| matches!(p.status, PointStatus::Done | PointStatus::Interrupted))
        .filter_map(|p| p.primary.as_ref().map(|m| (p, m)))
}

/// The curve as a compact text table.
pub fn terminal_table(file: &SweepFile) -> String {
    let wire = file.points.iter().any(|p| p.wire.is_some());
    let engine = file.points.iter().any(|p| p.engine.is_some());
    let mut s = format!(
        "{:>6} {:<16} {:<11} {:>11} {:>11} {:>12} {:>11}",
        "C", "region", "status", "system_tps", "tps/user", "interactiv.", "TTFT p90"
    );
    if wire {
        s += &format!(" {:>10} {:>9}", "wire p90", "cl−wire");
    }
    if engine {
        s += &format!(" {:>10}", "engine p90");
    }
    s += "  point verdict\n";
    for p in &file.points {
        let m = p.primary.unwrap_or_default();
        let _ = write!(
            s,
            "{:>6} {:<16} {:<11} {:>11} {:>11} {:>12} {:>11}",
            p.concurrency,
            p.region.map_or("–", |r| r.as_str()),
            format!("{:?}", p.status).to_lowercase(),
            f(m.system_tps, 1),
            f(m.tps_per_user, 1),
            f(m.e2e_interactivity, 1),
            f(m.ttft_p90_ms, 1),
        );
        if wire {
            let w = p.wire.as_ref();
            let d = w.and_then(|w| Some(w.client_ttft_p90_ms? - w.ttft_p90_ms?));
            let _ = write!(
                s,
                " {:>10} {:>9}",
                f(w.and_then(|w| w.ttft_p90_ms), 1),
                f(d, 2)
            );
        }
        if engine {
            let _ = write!(
                s,
                " {:>10}",
                f(p.engine.as_ref().and_then(|e| e.ttft.as_ref()?.p90_ms), 1)
            );
        }
        let _ = writeln!(s, "  {}", p.verdict.map_or("–", |v| v.as_str()));
    }
    s.push_str("(tok/s; ms. TTFT p90 is the MLPerf number; wire p90 is the proxy's over the same\n tracked turns, and cl−wire the client's minus the wire's p90 over those turns, both tokentap's quantile)");
    s
}

/// The verdict screen: the table, then the curve's verdict with every failed or unevaluated rule.
pub fn terminal(file: &SweepFile) -> String {
    let mut s = terminal_table(file);
    s.push('\n');
    s += &verdict_text(file);
    s
}

/// The curve's verdict line and every rule, marked ok / FAIL / warn / n/e, under its rule id.
pub fn verdict_text(file: &SweepFile) -> String {
    let mut s = String::new();
    let _ = write!(s, "curve: {}", file.verdict.verdict.as_str().to_uppercase());
    if !file.official {
        let _ = write!(
            s,
            " (tuning sweep: minimum durations × {}, not official)",
            file.min_duration_scale
        );
    }
    s.push('\n');
    for r in &file.verdict.rules {
        let mark = match r.status {
            tokentap_mlperf::validity::Status::Pass => "ok  ",
            tokentap_mlperf::validity::Status::Fail => "FAIL",
            tokentap_mlperf::validity::Status::Warn => "warn",
            tokentap_mlperf::validity::Status::NotEvaluated => "n/e ",
        };
        let _ = writeln!(s, "  {mark} {:<16} {}", r.rule, r.message);
    }
    s
}

/// The sweep report as HTML.
pub fn render_html(file: &SweepFile, dir: &Path) -> String {
    let mut o = String::with_capacity(128 * 1024);
    let verdict = file.verdict.verdict.as_str();
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>tokentap sweep (script did not run)</title><style>{CSS}</style></head><body data-verdict="{}">"#,
        esc(verdict)
    );
    // A `config` that is not a run's reads as the defaults: the headline shows `?`.
    let config = file.run_config().unwrap_or_default();
    let model = config.model.as_deref().unwrap_or("?");
    let endpoint = match config.endpoint_urls() {
        e if e.is_empty() => "?".to_string(),
        e => e,
    };
    let _ = write!(
        o,
        r#"<h1>tokentap sweep — the Pareto curve</h1><div class="muted">{} · model <b>{}</b> · endpoint {} · {} points · tokentap {}</div>"#,
        esc(&dir.display().to_string()),
        esc(model),
        esc(&endpoint),
        file.points.len(),
        esc(&file.tokentap_version)
    );
    // Verdict.
    let _ = write!(
        o,
        r#"<h2>Curve verdict</h2><span class="verdict {v}" id="curve-verdict">{}</span>"#,
        esc(&verdict.to_uppercase()),
        v = esc(verdict)
    );
    if !file.official {
        let _ = write!(
            o,
            r#" <span class="muted">tuning sweep: minimum durations × {}, not official</span>"#,
            file.min_duration_scale
        );
    }
    o.push_str(r#"<table id="curve-rules"><tr><th>rule</th><th>status</th><th>detail</th></tr>"#);
    for r in &file.verdict.rules {
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td>{}</td><td style="text-align:left">{}</td></tr>"#,
            esc(&r.rule),
            esc(&format!("{:?}", r.status).to_lowercase()),
            esc(&r.message)
        );
    }
    o.push_str("</table>");
    match &file.regions {
        Some(r) => {
            let _ = write!(o, r#"<p class="muted">{}"#, esc(&r.describe()));
            if file.regions_source != "given" {
                let _ = write!(o, " — {}", esc(&file.regions_source));
            }
            o.push_str("</p>");
        }
        None => {
            let _ = write!(
                o,
                r#"<p class="muted">regions unknown: {}</p>"#,
                esc(&file.regions_source)
            );
        }
    }
    plots(&mut o, file);
    table(&mut o, file);
    engine_table(&mut o, file);
    let _ = write!(o, "<script>{SCRIPT}</script></body></html>");
    o
}

fn plots(o: &mut String, file: &SweepFile) {
    let pts: Vec<(&Point, &tokentap_mlperf::Primary)> = measured(file).collect();
    let steps =
        |name: &str, title: &str, xl: &str, x: fn(&tokentap_mlperf::Primary) -> Option<f64>| {
            Steps {
                name,
                title,
                x_label: xl,
                y_label: "system_tps (tok/s)",
                points: pts
                    .iter()
                    .filter_map(|(p, m)| Some((x(m)?, m.system_tps?, label(p))))
                    .collect(),
            }
            .render()
        };
    o.push_str(r#"<h2>The curve</h2><div class="grid2">"#);
    o.push_str(&steps(
        "pareto_interactivity",
        "Agentic Pareto curve: system_tps vs e2e_interactivity",
        "e2e_interactivity (tok/s per user)",
        |m| m.e2e_interactivity,
    ));
    o.push_str(&steps(
        "pareto_tps_per_user",
        "system_tps vs tps_per_user",
        "tps_per_user (tok/s)",
        |m| m.tps_per_user,
    ));
    let bands: Vec<(f64, f64, String)> = file
        .regions
        .as_ref()
        .map(|r| {
            r.regions
                .iter()
                .map(|x| (x.start as f64 - 0.5, x.end as f64 + 0.5, x.name.to_string()))
                .chain((r.margin_end > r.c_max).then(|| {
                    (
                        r.c_max as f64 + 0.5,
                        r.margin_end as f64 + 0.5,
                        "margin".to_string(),
                    )
                }))
                .collect()
        })
        .unwrap_or_default();
    let by_c = |name: &str, title: &str, yl: &str, series: Vec<(String, Vec<(f64, f64)>)>| {
        Lines {
            name,
            title,
            x_label: "concurrency (log)",
            y_label: yl,
            log_x: true,
            series,
            bands: bands.clone(),
        }
        .render()
    };
    let series =
        |get: &dyn Fn(&Point, &tokentap_mlperf::Primary) -> Option<f64>| -> Vec<(f64, f64)> {
            pts.iter()
                .filter_map(|(p, m)| Some((p.concurrency as f64, get(p, m)?)))
                .collect()
        };
    o.push_str(&by_c(
        "system_tps_by_concurrency",
        "system_tps by concurrency",
        "system_tps (tok/s)",
        vec![("system_tps".into(), series(&|_, m| m.system_tps))],
    ));
    let mut ttft = vec![(
        "client (MLPerf p90)".to_string(),
        series(&|_, m| m.ttft_p90_ms),
    )];
    let wire = series(&|p, _| p.wire.as_ref()?.ttft_p90_ms);
    if !wire.is_empty() {
        ttft.push(("wire (proxy p90)".into(), wire));
    }
    let engine = series(&|p, _| p.engine.as_ref()?.ttft.as_ref()?.p90_ms);
    if !engine.is_empty() {
        ttft.push(("engine (its histogram p90)".into(), engine));
    }
    o.push_str(&by_c(
        "ttft_p90_by_concurrency",
        "TTFT p90 by concurrency",
        "ms",
        ttft,
    ));
    o.push_str(&by_c(
        "tps_per_user_by_concurrency",
        "tps_per_user by concurrency",
        "tps_per_user (tok/s)",
        vec![("tps_per_user".into(), series(&|_, m| m.tps_per_user))],
    ));
    o.push_str("</div>");
}

fn table(o: &mut String, file: &SweepFile) {
    let wire = file.points.iter().any(|p| p.wire.is_some());
    o.push_str(r#"<h2>Points</h2><table id="points"><tr><th>point</th><th>region</th><th>status</th><th>system_tps</th><th>tps_per_user</th><th>e2e_interactivity</th><th>ttft_p90_ms</th><th>tpot_p90_ms</th><th>qps</th><th>tracked s (min)</th><th>inline acc.</th>"#);
    if wire {
        o.push_str("<th>wire TTFT p90 (client's, same turns)</th>");
    }
    o.push_str("<th>verdict</th><th>report</th></tr>");
    for p in &file.points {
        let m = p.primary.unwrap_or_default();
        let _ = write!(
            o,
            r#"<tr data-concurrency="{}"><td>r{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td>"#,
            p.concurrency,
            p.concurrency,
            p.region.map_or("–", |r| r.as_str()),
            esc(&format!("{:?}", p.status).to_lowercase()),
            f(m.system_tps, 1),
            f(m.tps_per_user, 1),
            f(m.e2e_interactivity, 1),
            f(m.ttft_p90_ms, 1),
            f(m.tpot_p90_ms, 2),
            f(m.qps, 2),
            f(m.tracked_duration_s, 1),
            num(p.min_duration_s),
            p.inline_accuracy
                .map_or("–".into(), |a| format!("{:.2} %", a * 100.0)),
        );
        if wire {
            let _ = write!(
                o,
                "<td>{}</td>",
                p.wire.as_ref().map_or("–".into(), |w| format!(
                    "{} (client {}; {} of {} turns)",
                    f(w.ttft_p90_ms, 1),
                    f(w.client_ttft_p90_ms, 1),
                    w.turns_joined,
                    w.client_turns
                ))
            );
        }
        let reasons = p.reasons.join("; ");
        let _ = write!(
            o,
            r#"<td title="{}">{}</td><td><a href="{}/report.html">{}/report.html</a></td></tr>"#,
            esc(&reasons),
            p.verdict.map_or("–", |v| v.as_str()),
            esc(&p.dir),
            esc(&p.dir)
        );
    }
    o.push_str("</table><p class=\"muted\">Primary metrics as the MLPerf reference defines them (docs/benchmark.md#primary-metrics), per point over its performance window. The wire column is tokentap's own: the proxy's TTFT p90 over the same tracked turns (linear-interpolated quantile).</p>");
}

fn engine_table(o: &mut String, file: &SweepFile) {
    if !file.points.iter().any(|p| p.engine.is_some()) {
        return;
    }
    o.push_str(r#"<h2>The engine's view</h2><table id="engine"><tr><th>point</th><th>engine</th><th>requests</th><th>TTFT mean · p50 / p90 (ms)</th><th>outside the engine: client − engine TTFT mean</th><th>ITL p50 / p90</th><th>E2E p50 / p90</th><th>queue p50 / p90</th><th>prefix-cache hit rate</th><th>scrapes (failed), bytes</th></tr>"#);
    for p in &file.points {
        let Some(e) = &p.engine else { continue };
        let q = |x: &Option<crate::engine::Quantiles>| {
            x.as_ref().map_or("–".into(), |q| {
                format!("{} / {}", f(q.p50_ms, 1), f(q.p90_ms, 1))
            })
        };
        let outside = match (
            p.client_ttft_mean_ms,
            e.ttft.as_ref().and_then(|t| t.mean_ms),
        ) {
            (Some(c), Some(en)) => format!("{:.1} ms ({:.0} %)", c - en, (c - en) / c * 100.0),
            _ => "–".into(),
        };
        let ttft = e.ttft.as_ref().map_or("–".into(), |t| {
            format!(
                "{} · {} / {}",
                f(t.mean_ms, 1),
                f(t.p50_ms, 1),
                f(t.p90_ms, 1)
            )
        });
        let _ = write!(
            o,
            "<tr><td>r{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({}), {}</td></tr>",
            p.concurrency,
            esc(&e.flavor),
            e.ttft.as_ref().map_or("–".into(), |t| format!("{:.0}", t.count)),
            ttft,
            outside,
            q(&e.itl),
            q(&e.e2e),
            q(&e.queue),
            e.prefix_cache_hit_rate.map_or("–".into(), |h| format!("{:.1} %", h * 100.0)),
            e.cost.scrapes,
            e.cost.failed,
            e.cost.bytes
        );
    }
    o.push_str("</table><p class=\"muted\">From the engine's own Prometheus histograms, the change over each point: means exact (sum / count), quantiles interpolated inside the engine's buckets as PromQL does, so only as fine as its buckets. The engine's TTFT starts at tokenization and leaves out HTTP and the network (docs/benchmark.md#prometheus); the client's mean is over the point's tracked turns, the engine's over every request it served during the point.</p>");
}

/// Markdown: the verdict and the table.
pub fn markdown(file: &SweepFile) -> String {
    let mut s = format!(
        "# tokentap sweep\n\n**Curve: {}**{}\n\n",
        file.verdict.verdict.as_str(),
        if file.official {
            ""
        } else {
            " (tuning sweep, not official)"
        }
    );
    for r in &file.verdict.rules {
        let _ = writeln!(s, "- `{}` {:?}: {}", r.rule, r.status, r.message);
    }
    if let Some(r) = &file.regions {
        let _ = writeln!(s, "\n{}", r.describe());
    }
    s += "\n| point | region | status | system_tps | tps_per_user | e2e_interactivity | ttft_p90_ms | wire ttft p90 | engine ttft p90 | verdict |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";
    for p in &file.points {
        let m = p.primary.unwrap_or_default();
        let _ = writeln!(
            s,
            "| r{} | {} | {:?} | {} | {} | {} | {} | {} | {} | {} |",
            p.concurrency,
            p.region.map_or("–", |r| r.as_str()),
            p.status,
            f(m.system_tps, 1),
            f(m.tps_per_user, 1),
            f(m.e2e_interactivity, 1),
            f(m.ttft_p90_ms, 1),
            f(p.wire.as_ref().and_then(|w| w.ttft_p90_ms), 1),
            f(p.engine.as_ref().and_then(|e| e.ttft.as_ref()?.p90_ms), 1),
            p.verdict.map_or("–", |v| v.as_str())
        );
    }
    s
}

/// Writes `dir/report.html`.
pub fn write_html(dir: &Path, file: &SweepFile) -> anyhow::Result<PathBuf> {
    let path = dir.join("report.html");
    std::fs::write(&path, render_html(file, dir))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// Whether `dir` is a sweep directory (has `sweep.json`).
pub fn is_sweep(dir: &Path) -> bool {
    dir.join(crate::file::FILE).is_file()
}

/// `tokentap report DIR` for a sweep directory.
pub fn run(opts: &tokentap_report::Opts) -> anyhow::Result<i32> {
    let file = if opts.wire.is_empty() {
        SweepFile::load(&opts.run_dir)?
    } else {
        crate::attach_wire(&opts.run_dir, &opts.wire)?
    };
    if opts.tokenizer.is_some() {
        anyhow::bail!(
            "--tokenizer recounts one run: give a point's directory ({}/r<C>)",
            opts.run_dir.display()
        );
    }
    let (text, default_out) = match opts.format {
        tokentap_report::Format::Html => (
            render_html(&file, &opts.run_dir),
            Some(opts.run_dir.join("report.html")),
        ),
        tokentap_report::Format::Md => (markdown(&file), None),
        tokentap_report::Format::Json => (serde_json::to_string_pretty(&file)? + "\n", None),
    };
    match opts.out.clone().or(default_out) {
        Some(path) => {
            std::fs::write(&path, text)
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            eprintln!("report written to {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(0)
}
