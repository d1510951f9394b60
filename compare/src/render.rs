//! The terminal form of a [`Report`]: the inputs and the join, the per-turn differences, the
//! TTFT split, the claims, an agent's totals, the levels and the verdict. Judging is
//! [`crate::report`]'s; this module only renders what it decided.

use crate::client::Clock;
use crate::report::{fmt_num, Dist, Report};

impl Report {
    /// The terminal table.
    pub fn render_text(&self) -> String {
        let mut o = String::new();
        self.text_header(&mut o);
        self.text_diffs(&mut o);
        self.text_split(&mut o);
        self.text_claims(&mut o);
        crate::totals::render(&self.totals, &mut o);
        self.text_levels(&mut o);
        self.text_verdict(&mut o);
        o
    }

    /// TTFT split by the engine's own timing, when the wire recorded it.
    fn text_split(&self, o: &mut String) {
        let Some(sp) = &self.ttft_split else {
            return;
        };
        *o += &format!(
            "\nTTFT split by the engine's own timing ({} turns)    p50        p90        p99\n",
            sp.turns
        );
        let mut row = |label: &str, d: &Dist| {
            *o += &format!(
                "  {:<44}{:>9.3}  {:>9.3}  {:>9.3}\n",
                label, d.p50, d.p90, d.p99
            );
        };
        row("engine queue (ms)", &sp.queue_ms);
        row("engine: scheduled → first token (ms)", &sp.engine_ms);
        row("outside the engine, at the wire (ms)", &sp.wire_outside_ms);
        if let Some(c) = &sp.client_outside_ms {
            row("outside the engine, at the client (ms)", c);
        }
    }

    /// The inputs, the join's counts and the tolerance.
    fn text_header(&self, o: &mut String) {
        let c = &self.counts;
        *o += &format!(
            "tokentap compare: {} client vs the wire (proxy records)\n",
            self.format.as_str()
        );
        *o += &format!(
            "  client     {} ({} turns, clock {})\n",
            self.client_file,
            c.client_turns,
            match self.clock {
                Clock::Wall => "wall",
                Clock::Mono => "monotonic",
            }
        );
        *o += &format!(
            "  wire       {} ({} completion records{})\n",
            self.wire.join(", "),
            c.wire_turns,
            if c.wire_ignored > 0 {
                format!(", {} other requests ignored", c.wire_ignored)
            } else {
                String::new()
            }
        );
        if self.wire_sources.len() > 1 {
            for src in &self.wire_sources {
                let replicas: Vec<String> = src
                    .replicas
                    .iter()
                    .map(|(r, n)| format!("{r} {n}"))
                    .collect();
                *o += &format!(
                    "    proxy {}: {} turns, {} joined; replicas: {}\n",
                    src.path,
                    src.turns,
                    src.joined,
                    replicas.join(", ")
                );
            }
        }
        *o += &format!(
            "  joined     {} ({} by response id, {} by request id,{} {} by session + order, {} by time); client only {}; wire only {}; status differs {}\n",
            c.joined, c.by_response_id, c.by_request_id,
            if c.by_output_text > 0 { format!(" {} by output text,", c.by_output_text) } else { String::new() },
            c.by_session_order, c.by_time, c.client_only, c.wire_only, c.status_differs
        );
        *o += &format!(
            "  tolerance  |client − wire| ≤ max({} ms or {} tokens, {} % of wire)\n\n",
            fmt_num(self.tolerance.ms),
            fmt_num(self.tolerance.tokens),
            fmt_num(self.tolerance.pct)
        );
    }

    /// The table of per-turn differences, one row per metric.
    fn text_diffs(&self, o: &mut String) {
        *o += &format!(
            "{:<24}{:>7}{:>11}{:>11}{:>11}{:>11}{:>11}  {}\n",
            "client − wire per turn", "turns", "min", "p50", "p90", "p99", "max", "beyond tol."
        );
        for m in &self.metrics {
            let label = format!("{} ({})", m.metric.label(), m.unit);
            match &m.diff {
                Some(d) => {
                    *o += &format!(
                        "{:<24}{:>7}{:>11.3}{:>11.3}{:>11.3}{:>11.3}{:>11.3}  {}\n",
                        label, m.turns, d.min, d.p50, d.p90, d.p99, d.max, m.turns_beyond_tolerance
                    )
                }
                None => {
                    *o += &format!(
                        "{:<24}{:>7}  (not claimed by the client or not on the wire)\n",
                        label, 0
                    )
                }
            }
        }
    }

    /// The table of the client's claims against the wire.
    fn text_claims(&self, o: &mut String) {
        if self.metrics.iter().all(|m| m.claims.is_empty()) && !self.totals.is_empty() {
            return;
        }
        *o += &format!(
            "\n{:<24}{:>6}{:>12}{:>12}{:>14}{:>12}  {:<8} {}\n",
            "claim",
            "stat",
            "client",
            "wire",
            "client − wire",
            "tolerance",
            "verdict",
            "client value"
        );
        for m in &self.metrics {
            for cl in &m.claims {
                *o += &format!(
                    "{:<24}{:>6}{:>12.3}{:>12.3}{:>+14.3}{:>12.3}  {:<8} {}\n",
                    format!("{} ({})", m.metric.label(), m.unit),
                    cl.stat,
                    cl.client,
                    cl.wire,
                    cl.diff,
                    cl.tolerance,
                    cl.verdict.as_str(),
                    m.claims_source
                );
            }
        }
    }

    /// The checks of what the client published, the verdict with its reasons, and the notes.
    fn text_levels(&self, o: &mut String) {
        if self.levels.is_empty() {
            return;
        }
        *o += "\nper benchmark level (each over its own turns and published claims)\n";
        for l in &self.levels {
            *o += &format!(
                "  {:<20} {:>4} turns joined  {}\n",
                l.name, l.counts.joined, l.headline
            );
            for r in &l.reasons {
                *o += &format!("      - {r}\n");
            }
        }
    }

    fn text_verdict(&self, o: &mut String) {
        if !self.checks.is_empty() {
            *o += "\nchecks of what the client published\n";
            for c in &self.checks {
                *o += &format!("  {:<5} {:<42} {}\n", c.verdict.as_str(), c.name, c.detail);
            }
        }
        *o += &format!("\nverdict: {}\n", self.headline);
        for r in &self.reasons {
            *o += &format!("  - {r}\n");
        }
        for n in &self.notes {
            *o += &format!("note: {n}\n");
        }
    }
}
