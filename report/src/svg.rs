//! Minimal inline-SVG charts: scatter, lines, bars and a swimlane. Every chart is an `<svg>`
//! with `data-plot` (its name) and `data-points` (how many data marks it drew), and every data
//! mark carries class `pt`, so a headless browser (tests/report.rs) can check the plots are
//! there with data. Marks carry a `<title>` tooltip; no JavaScript is needed to read a chart.
//!
//! Decision: hand-written SVG rather than a plotting crate, so the report stays one
//! dependency-free file that opens offline; charts with more marks than [`MAX_MARKS`] are
//! thinned evenly (a 30k-turn run would otherwise make a 50 MB page).

use std::fmt::Write as _;

/// A plot's width, px (the page scales it to its own width).
pub const W: f64 = 760.0;
/// A plot's height, px.
pub const H: f64 = 300.0;
const ML: f64 = 64.0;
const MR: f64 = 16.0;
const MT: f64 = 28.0;
const MB: f64 = 44.0;
/// Most marks drawn per chart.
pub const MAX_MARKS: usize = 4000;

/// Series colours, in order.
pub const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// HTML/XML text escaping.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// A short number: 3 significant digits, no exponent for everyday magnitudes.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if x.fract() == 0.0 && a < 1e4 {
        format!("{x:.0}")
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

/// An axis: data range mapped to pixels, linear or log10.
#[derive(Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    p0: f64,
    p1: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, p0: f64, p1: f64, zero: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            // No data: an empty frame (a log axis cannot start at 0).
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if zero && lo > 0.0 {
                lo = 0.0;
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            let pad = (hi - lo) * 0.04;
            hi += pad;
            if !zero {
                lo -= pad;
            }
        }
        Axis {
            lo,
            hi,
            log,
            p0,
            p1,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.p0 + f * (self.p1 - self.p0)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut v = self.lo;
            // Bounded: a degenerate range must not loop (found by the replay's edge tests).
            while v <= self.hi * 1.0001 && t.len() < 24 {
                t.push(v);
                v *= 10.0;
            }
            return t;
        }
        let span = self.hi - self.lo;
        let raw = span / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| span / s <= 6.0)
            .unwrap_or(10.0 * mag);
        let mut v = (self.lo / step).ceil() * step;
        let mut t = Vec::new();
        while v <= self.hi && t.len() < 24 && step > 0.0 {
            t.push(v);
            v += step;
        }
        t
    }
}

fn frame(out: &mut String, name: &str, title: &str, x: &Axis, y: &Axis, xl: &str, yl: &str) {
    let _ = write!(
        out,
        r##"<text x="{}" y="18" class="ttl">{}</text><g class="axis">"##,
        ML,
        esc(title)
    );
    for t in x.ticks() {
        let p = x.px(t);
        let _ = write!(
            out,
            r##"<line x1="{p:.1}" y1="{}" x2="{p:.1}" y2="{}" class="grid"/><text x="{p:.1}" y="{}" text-anchor="middle">{}</text>"##,
            MT,
            H - MB,
            H - MB + 14.0,
            num(t)
        );
    }
    for t in y.ticks() {
        let p = y.px(t);
        let _ = write!(
            out,
            r##"<line x1="{}" y1="{p:.1}" x2="{}" y2="{p:.1}" class="grid"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            ML,
            W - MR,
            ML - 4.0,
            p + 4.0,
            num(t)
        );
    }
    let _ = write!(
        out,
        r##"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(14,{}) rotate(-90)" text-anchor="middle">{}</text></g>"##,
        (ML + W - MR) / 2.0,
        H - 8.0,
        esc(xl),
        (MT + H - MB) / 2.0,
        esc(yl)
    );
    let _ = name;
}

fn open(out: &mut String, name: &str, marks: usize) {
    let _ = write!(
        out,
        r##"<svg class="plot" data-plot="{}" data-points="{marks}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg" role="img">"##,
        esc(name)
    );
}

fn thin<T: Copy>(v: &[T]) -> Vec<T> {
    if v.len() <= MAX_MARKS {
        return v.to_vec();
    }
    let step = v.len() as f64 / MAX_MARKS as f64;
    (0..MAX_MARKS)
        .map(|i| v[(i as f64 * step) as usize])
        .collect()
}

/// A scatter plot of `(x, y)`; `tips` (same length, or empty) are the marks' tooltips.
pub struct Scatter<'a> {
    /// The plot's id (`data-plot`).
    pub name: &'a str,
    /// Its title.
    pub title: &'a str,
    /// The x axis' label.
    pub x_label: &'a str,
    /// The y axis' label.
    pub y_label: &'a str,
    /// A logarithmic y axis.
    pub log_y: bool,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

impl Scatter<'_> {
    /// The plot as inline SVG.
    pub fn render(&self) -> String {
        let pts = thin(&self.points);
        let x = Axis::new(pts.iter().map(|p| p.0), false, ML, W - MR, true);
        let y = Axis::new(pts.iter().map(|p| p.1), self.log_y, H - MB, MT, true);
        let mut o = String::with_capacity(200 + pts.len() * 90);
        open(&mut o, self.name, pts.len());
        frame(
            &mut o,
            self.name,
            self.title,
            &x,
            &y,
            self.x_label,
            self.y_label,
        );
        for (a, b) in &pts {
            let _ = write!(
                o,
                r##"<circle class="pt" cx="{:.1}" cy="{:.1}" r="2.6"><title>{}, {}</title></circle>"##,
                x.px(*a),
                y.px(*b),
                num(*a),
                num(*b)
            );
        }
        o.push_str("</svg>");
        o
    }
}

/// Line series over a shared x axis.
pub struct Lines<'a> {
    /// The plot's id (`data-plot`).
    pub name: &'a str,
    /// Its title.
    pub title: &'a str,
    /// The x axis' label.
    pub x_label: &'a str,
    /// The y axis' label.
    pub y_label: &'a str,
    /// A logarithmic x axis.
    pub log_x: bool,
    /// The series: a name and its points.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Shaded x ranges behind the data, each labelled (the sweep's regions).
    pub bands: Vec<(f64, f64, String)>,
}

impl Lines<'_> {
    /// The plot as inline SVG.
    pub fn render(&self) -> String {
        let series: Vec<(String, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|(n, p)| (n.clone(), thin(p)))
            .collect();
        let all = || series.iter().flat_map(|s| s.1.iter());
        let x = Axis::new(all().map(|p| p.0), self.log_x, ML, W - MR, !self.log_x);
        let y = Axis::new(all().map(|p| p.1), false, H - MB, MT, true);
        let marks: usize = series.iter().map(|s| s.1.len()).sum();
        let mut o = String::with_capacity(400 + marks * 40);
        open(&mut o, self.name, marks);
        for (i, (a, b, label)) in self.bands.iter().enumerate() {
            let (pa, pb) = (x.px(*a).max(ML), x.px(*b).min(W - MR));
            if pb <= pa {
                continue;
            }
            let _ = write!(
                o,
                r##"<rect class="band" x="{pa:.1}" y="{MT}" width="{:.1}" height="{}" fill="{}" fill-opacity=".10"/><text x="{:.1}" y="{}" text-anchor="middle" fill="#777">{}</text>"##,
                pb - pa,
                H - MB - MT,
                BAND[i % BAND.len()],
                (pa + pb) / 2.0,
                H - MB - 5.0,
                esc(label)
            );
        }
        frame(
            &mut o,
            self.name,
            self.title,
            &x,
            &y,
            self.x_label,
            self.y_label,
        );
        for (i, (label, pts)) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mut d = String::with_capacity(pts.len() * 16);
            for (j, (a, b)) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if j == 0 { "M" } else { "L" },
                    x.px(*a),
                    y.px(*b)
                );
            }
            let _ = write!(
                o,
                r##"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>"##
            );
            // Marks: one small dot per point, so tests and readers can count and hover them.
            for (a, b) in pts {
                let _ = write!(
                    o,
                    r##"<circle class="pt" cx="{:.1}" cy="{:.1}" r="1.6" fill="{color}"><title>{}: {}, {}</title></circle>"##,
                    x.px(*a),
                    y.px(*b),
                    esc(label),
                    num(*a),
                    num(*b)
                );
            }
            let _ = write!(
                o,
                r##"<text x="{}" y="{}" fill="{color}" text-anchor="end">{}</text>"##,
                W - MR,
                18.0 + 14.0 * i as f64,
                esc(label)
            );
        }
        o.push_str("</svg>");
        o
    }
}

const BAND: &[&str] = &["#9467bd", "#2ca02c", "#ff7f0e", "#d62728"];

/// A Pareto chart: labelled points and the frontier drawn as a step function — at each x, the
/// best y of any point at that x or beyond (no interpolation between points, as the official
/// curve is drawn). Dominated points are drawn but stay below the steps.
pub struct Steps<'a> {
    /// The plot's id (`data-plot`).
    pub name: &'a str,
    /// Its title.
    pub title: &'a str,
    /// The x axis' label.
    pub x_label: &'a str,
    /// The y axis' label.
    pub y_label: &'a str,
    /// `(x, y, label)`.
    pub points: Vec<(f64, f64, String)>,
}

impl Steps<'_> {
    /// The frontier's corners: points sorted by x with y replaced by the best y at x or beyond.
    pub fn frontier(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut best = f64::NEG_INFINITY;
        for q in p.iter_mut().rev() {
            best = best.max(q.1);
            q.1 = best;
        }
        p
    }

    /// The plot as inline SVG.
    pub fn render(&self) -> String {
        let pts: Vec<&(f64, f64, String)> = self
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        let x = Axis::new(pts.iter().map(|p| p.0), false, ML, W - MR, true);
        let y = Axis::new(pts.iter().map(|p| p.1), false, H - MB, MT, true);
        let mut o = String::with_capacity(600 + pts.len() * 160);
        open(&mut o, self.name, pts.len());
        frame(
            &mut o,
            self.name,
            self.title,
            &x,
            &y,
            self.x_label,
            self.y_label,
        );
        let f = Steps::frontier(&pts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>());
        if let Some(first) = f.first() {
            let mut d = format!("M{:.1},{:.1}", x.px(first.0), y.px(first.1));
            for q in &f[1..] {
                let _ = write!(d, "V{:.1}H{:.1}", y.px(q.1), x.px(q.0));
            }
            let _ = write!(
                o,
                r##"<path class="frontier" d="{d}" fill="none" stroke="{}" stroke-width="2"/>"##,
                PALETTE[0]
            );
        }
        for (a, b, label) in &pts {
            let (px, py) = (x.px(*a), y.px(*b));
            // Inside the plot: to the left of a point near the right edge, below one near the
            // top (11 px text, ~6.5 px a character).
            let wide = label.chars().count() as f64 * 6.5;
            let (tx, anchor) = if px + 5.0 + wide > W - MR {
                (px - 5.0, "end")
            } else {
                (px + 5.0, "start")
            };
            let ty = if py - 5.0 - 11.0 < MT {
                py + 14.0
            } else {
                py - 5.0
            };
            let _ = write!(
                o,
                r##"<circle class="pt" cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{}"><title>{}: {}, {}</title></circle><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}">{}</text>"##,
                PALETTE[1],
                esc(label),
                num(*a),
                num(*b),
                esc(label)
            );
        }
        o.push_str("</svg>");
        o
    }
}

/// Labelled bars.
pub struct Bars<'a> {
    /// The plot's id (`data-plot`).
    pub name: &'a str,
    /// Its title.
    pub title: &'a str,
    /// The bars: label, value, colour.
    pub bars: Vec<(String, f64, &'static str)>,
}

impl Bars<'_> {
    /// The plot as inline SVG.
    pub fn render(&self) -> String {
        let h = 40.0 + 26.0 * self.bars.len() as f64;
        let max = self.bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0);
        let mut o = String::new();
        let _ = write!(
            o,
            r##"<svg class="plot" data-plot="{}" data-points="{}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" xmlns="http://www.w3.org/2000/svg" role="img"><text x="{ML}" y="18" class="ttl">{}</text>"##,
            esc(self.name),
            self.bars.len(),
            esc(self.title)
        );
        let span = W - ML - MR - 120.0;
        for (i, (label, v, color)) in self.bars.iter().enumerate() {
            let y = 30.0 + 26.0 * i as f64;
            let w = (v / max * span).max(if *v > 0.0 { 2.0 } else { 0.0 });
            let _ = write!(
                o,
                r##"<text x="{}" y="{:.1}" text-anchor="end">{}</text><rect class="pt" x="{ML}" y="{y:.1}" width="{w:.1}" height="18" fill="{color}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}">{}</text>"##,
                ML - 6.0,
                y + 13.0,
                esc(label),
                esc(label),
                v,
                ML + w + 6.0,
                y + 13.0,
                v
            );
        }
        o.push_str("</svg>");
        o
    }
}

/// One bar of a swimlane: lane, start and end seconds, colour, tooltip.
pub struct Span {
    /// The lane (slot).
    pub lane: u32,
    /// Start, s.
    pub t0: f64,
    /// End, s.
    pub t1: f64,
    /// Colour.
    pub color: &'static str,
    /// Tooltip.
    pub tip: String,
}

/// Trajectories per replay slot over time.
pub struct Swimlane<'a> {
    /// The plot's id (`data-plot`).
    pub name: &'a str,
    /// Its title.
    pub title: &'a str,
    /// Lanes.
    pub lanes: u32,
    /// The spans.
    pub spans: Vec<Span>,
    /// The legend: label and colour.
    pub legend: &'a [(&'a str, &'a str)],
}

impl Swimlane<'_> {
    /// The plot as inline SVG.
    pub fn render(&self) -> String {
        let lane_h = (220.0 / self.lanes.max(1) as f64).clamp(4.0, 22.0);
        // The legend sits under the title, so the lanes start lower than in the other charts.
        let top = MT + 16.0;
        let h = top + MB + lane_h * self.lanes.max(1) as f64;
        let end = self.spans.iter().map(|s| s.t1).fold(0.0, f64::max);
        let x = Axis::new([0.0, end].into_iter(), false, ML, W - MR, true);
        let step = (self.spans.len() / MAX_MARKS).max(1);
        let drawn: Vec<&Span> = self.spans.iter().step_by(step).collect();
        let mut o = String::with_capacity(300 + drawn.len() * 120);
        let _ = write!(
            o,
            r##"<svg class="plot" data-plot="{}" data-points="{}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" xmlns="http://www.w3.org/2000/svg" role="img"><text x="{ML}" y="18" class="ttl">{}</text>"##,
            esc(self.name),
            drawn.len(),
            esc(self.title)
        );
        for t in x.ticks() {
            let p = x.px(t);
            let _ = write!(
                o,
                r##"<line x1="{p:.1}" y1="{top}" x2="{p:.1}" y2="{:.1}" class="grid"/><text x="{p:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                h - MB,
                h - MB + 14.0,
                num(t)
            );
        }
        let _ = write!(
            o,
            r##"<text x="{}" y="{:.1}" text-anchor="middle">seconds since run start</text><text transform="translate(14,{:.1}) rotate(-90)" text-anchor="middle">slot</text>"##,
            (ML + W - MR) / 2.0,
            h - 8.0,
            (top + h - MB) / 2.0
        );
        for s in &drawn {
            let y = top + lane_h * s.lane as f64;
            let x0 = x.px(s.t0);
            let w = (x.px(s.t1) - x0).max(0.8);
            let _ = write!(
                o,
                r##"<rect class="pt" x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"##,
                y + 1.0,
                (lane_h - 2.0).max(1.0),
                s.color,
                esc(&s.tip)
            );
        }
        for (i, (label, color)) in self.legend.iter().enumerate() {
            let lx = ML + 90.0 * i as f64;
            let _ = write!(
                o,
                r##"<rect x="{lx:.1}" y="26" width="10" height="10" fill="{color}"/><text x="{:.1}" y="35">{}</text>"##,
                lx + 14.0,
                esc(label)
            );
        }
        o.push_str("</svg>");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_draws_one_mark_per_point_and_escapes() {
        let s = Scatter {
            name: "a<b",
            title: "t",
            x_label: "x",
            y_label: "y",
            log_y: false,
            points: vec![(1.0, 2.0), (3.0, 4.0)],
        }
        .render();
        assert_eq!(s.matches("class=\"pt\"").count(), 2);
        assert!(s.contains("data-plot=\"a&lt;b\""));
        assert!(s.contains("data-points=\"2\""));
    }

    #[test]
    fn empty_and_degenerate_series_render() {
        for (log_x, pts) in [
            (true, vec![]),
            (false, vec![]),
            (true, vec![(0.0, 0.0)]),
            (false, vec![(1e17, 1e17)]),
        ] {
            let s = Lines {
                bands: Vec::new(),
                name: "n",
                title: "t",
                x_label: "x",
                y_label: "y",
                log_x,
                series: vec![("s".into(), pts)],
            }
            .render();
            assert!(s.ends_with("</svg>"));
        }
    }

    #[test]
    fn large_inputs_are_thinned() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        let s = Scatter {
            name: "n",
            title: "t",
            x_label: "x",
            y_label: "y",
            log_y: true,
            points: pts,
        }
        .render();
        assert_eq!(s.matches("class=\"pt\"").count(), MAX_MARKS);
    }
}
