//! The soak's output: the samples as CSV, and per series the warm-up against the rest of the
//! run, its trend, and a verdict against the series' stated bound.

use crate::probe::{Col, Sample};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// What a series must do after the warm-up.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    /// Every sample after the warm-up is at most this.
    AtMost(f64),
    /// The later half's largest sample is at most the earlier half's × (1 + rel) + abs: for
    /// series that rise and fall with the bursts (their peaks must not climb).
    PeaksFlat { rel: f64, abs: f64 },
    /// The same for the halves' means: for series that should sit still.
    MeanFlat { rel: f64, abs: f64 },
    /// Expected to grow with the designs kept; reported, with its growth per accepted design.
    PerDesign,
}

/// A series, its unit, its bound and why that is the bound.
pub struct Check {
    pub col: Col,
    pub unit: &'static str,
    pub bound: Bound,
    pub why: String,
}

/// The samples as CSV: a header of [`Col`] names after `t_s`.
pub fn write_csv(path: &Path, samples: &[Sample]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let header: Vec<&str> = Col::ALL.iter().map(|c| c.name()).collect();
    writeln!(out, "t_s,{}", header.join(","))?;
    for s in samples {
        let values: Vec<String> =
            s.values.iter().map(|v| if v.is_nan() { String::new() } else { format!("{v:.3}") }).collect();
        writeln!(out, "{:.1},{}", s.at_s, values.join(","))?;
    }
    out.flush()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::MIN, f64::max)
}

/// The least-squares slope of `(t, y)` points, per hour.
fn per_hour(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mt, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let (mut cov, mut var) = (0.0, 0.0);
    for (t, y) in points {
        cov += (t - mt) * (y - my);
        var += (t - mt).powi(2);
    }
    cov / var * 3600.0
}

/// One line per series: warm-up, the two halves after it, the trend, the bound, the verdict;
/// and whether every bound held.
pub fn verdicts(samples: &[Sample], warm_up_s: f64, checks: &[Check]) -> (String, bool) {
    let mut text = String::new();
    let mut all = true;
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at_s >= warm_up_s).collect();
    let warm: Vec<&Sample> = samples.iter().filter(|s| s.at_s < warm_up_s).collect();
    if after.len() < 4 || warm.is_empty() {
        return ("too few samples after the warm-up for a verdict".into(), false);
    }
    let half = after.len() / 2;
    for c in checks {
        let values = |s: &[&Sample]| -> Vec<f64> { s.iter().map(|s| s.get(c.col)).filter(|v| !v.is_nan()).collect() };
        let (w, first, second) = (values(&warm), values(&after[..half]), values(&after[half..]));
        if w.is_empty() || first.is_empty() || second.is_empty() {
            let _ = writeln!(text, "{}: not sampled", c.col.name());
            continue;
        }
        let points: Vec<(f64, f64)> = after.iter().map(|s| (s.at_s, s.get(c.col))).filter(|p| !p.1.is_nan()).collect();
        let trend = per_hour(&points);
        let (held, bound) = match c.bound {
            Bound::AtMost(cap) => (max(&first).max(max(&second)) <= cap, format!("at most {cap:.1} {}", c.unit)),
            Bound::PeaksFlat { rel, abs } => (
                max(&second) <= max(&first) * (1.0 + rel) + abs,
                format!("later peak ≤ earlier peak × {:.2} + {abs} {}", 1.0 + rel, c.unit),
            ),
            Bound::MeanFlat { rel, abs } => (
                mean(&second) <= mean(&first) * (1.0 + rel) + abs,
                format!("later mean ≤ earlier mean × {:.2} + {abs} {}", 1.0 + rel, c.unit),
            ),
            Bound::PerDesign => {
                let accepted = |s: &&Sample| s.get(Col::Accepted);
                let designs = accepted(after.last().unwrap()) - accepted(after.first().unwrap());
                let grew = second.last().unwrap() - first.first().unwrap();
                (
                    true,
                    format!(
                        "grew {grew:+.1} {} after the warm-up, {:.4} per design or batch item accepted",
                        c.unit,
                        grew / designs
                    ),
                )
            }
        };
        all &= held;
        let _ = writeln!(
            text,
            "{:<22} warm-up mean {:>9.2} max {:>9.2} | after: first half mean {:>9.2} max {:>9.2}, second half mean {:>9.2} \
             max {:>9.2}, end {:>9.2} {} | trend {:+.2}/h | {} | {}",
            c.col.name(),
            mean(&w),
            max(&w),
            mean(&first),
            max(&first),
            mean(&second),
            max(&second),
            second.last().unwrap(),
            c.unit,
            trend,
            bound,
            match (held, c.bound) {
                (_, Bound::PerDesign) => "REPORTED",
                (true, _) => "HELD",
                (false, _) => "NOT HELD",
            }
        );
        let _ = writeln!(text, "{:<22} bound: {}", "", c.why);
    }
    (text, all)
}
