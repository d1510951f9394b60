//! Two datasets side by side (`tokentap dataset stats A --against B --html FILE`): a captured
//! set beside the MLPerf set, say. One self-contained page in the run report's style: the
//! comparison table, then the plots — request size by client turn (the context's growth), and
//! bars of the trajectory depth, output lengths and delays.

use crate::html::CSS;
use crate::svg::{esc, Bars, Lines};
use std::fmt::Write as _;
use tokentap_dataset::stats::{comparison_rows, render_comparison, DatasetStats, DomainStats};

const A: &str = "#1f77b4";
const B: &str = "#ff7f0e";

/// The page.
pub fn comparison_html(a: &DatasetStats, b: &DatasetStats) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tokentap dataset comparison</title><style>{CSS}</style></head><body><h1>Datasets side by side</h1><div class="muted">A: {} · B: {} · stand-in tokens (4 bytes a token)</div>"#,
        esc(&a.path),
        esc(&b.path)
    );
    o.push_str(r#"<table class="summary"><tr><th></th><th>A</th><th>B</th></tr>"#);
    for (name, f) in comparison_rows() {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(&f(&a.total)),
            esc(&f(&b.total))
        );
    }
    o.push_str("</table>");
    let growth =
        |d: &DomainStats, q: fn(&tokentap_dataset::stats::CountedDist) -> f64| -> Vec<(f64, f64)> {
            d.prompt_by_turn
                .iter()
                .map(|x| (x.from as f64, q(&x.size.tokens)))
                .collect()
        };
    o.push_str(
        &Lines {
            name: "context",
            title: "Request size by client turn (tokens; turn buckets 1, 2, 3–4, 5–8, …)",
            x_label: "client turn (first of its bucket)",
            y_label: "tokens",
            log_x: true,
            series: vec![
                ("A p50".into(), growth(&a.total, |d| d.p50)),
                ("A p90".into(), growth(&a.total, |d| d.p90)),
                ("B p50".into(), growth(&b.total, |d| d.p50)),
                ("B p90".into(), growth(&b.total, |d| d.p90)),
            ],
            bands: Vec::new(),
        }
        .render(),
    );
    let bars = |name, title, f: fn(&DomainStats) -> Option<(f64, f64)>| {
        let mut v = Vec::new();
        for (label, d, color) in [("A", &a.total, A), ("B", &b.total, B)] {
            if let Some((p50, p90)) = f(d) {
                v.push((format!("{label} p50"), round(p50), color));
                v.push((format!("{label} p90"), round(p90), color));
            }
        }
        Bars {
            name,
            title,
            bars: v,
        }
        .render()
    };
    o.push_str(&bars("depth", "Client turns per trajectory", |d| {
        d.turns_per_trajectory.map(|x| (x.p50, x.p90))
    }));
    o.push_str(&bars("output", "Output per assistant turn (tokens)", |d| {
        d.assistant.output_tokens.map(|x| (x.p50, x.p90))
    }));
    o.push_str(&bars("delays", "Delay before a client turn (s)", |d| {
        d.delays.seconds.map(|x| (x.p50, x.p90))
    }));
    let _ = write!(
        o,
        "<pre>{}</pre></body></html>",
        esc(&render_comparison(a, b))
    );
    o
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
