//! The report for a terminal: text bars, colour only on a terminal.

use super::cost;
use super::model::{Report, bytes};
use super::series::{Series, Unit};
use super::spark;
use std::fmt::Write;

const WIDTH: usize = 20;
/// Where the terminal's width is unknown.
pub const DEFAULT_WIDTH: usize = 100;

/// `[########............]  42%`, green to red by how well the share is used.
fn bar(percent: f64, colour: bool) -> String {
    let p = percent.clamp(0.0, 100.0);
    let full = ((p / 100.0) * WIDTH as f64).round() as usize;
    let body = format!("{}{}", "#".repeat(full), ".".repeat(WIDTH - full));
    if !colour {
        return format!("[{body}] {percent:>5.1}%");
    }
    let code = if p >= 70.0 {
        32
    } else if p >= 30.0 {
        33
    } else {
        31
    };
    format!("[\x1b[{code}m{body}\x1b[0m] {percent:>5.1}%")
}

fn or_unknown(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("unknown")
}

fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `s` with its control characters escaped (`\u{1b}`): records and Slurm carry text a job's
/// user partly wrote, and an escape sequence in it must not move the cursor, retitle the
/// terminal or hide lines of the report.
pub fn printable(s: &str) -> String {
    s.chars().fold(String::with_capacity(s.len()), |mut out, c| {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        out
    })
}

/// The report with every text field [`printable`].
fn printable_report(rep: &Report) -> Report {
    let p = |v: &Option<String>| v.as_deref().map(printable);
    let mut r = rep.clone();
    r.job_id = printable(&rep.job_id);
    r.log_group = printable(&rep.log_group);
    (r.cluster, r.user, r.account) = (p(&rep.cluster), p(&rep.user), p(&rep.account));
    (r.partition, r.nodes, r.state) = (p(&rep.partition), p(&rep.nodes), p(&rep.state));
    for n in &mut r.per_node {
        (n.node, n.source) = (printable(&n.node), printable(&n.source));
    }
    for g in &mut r.gpus {
        (g.node, g.gpu) = (printable(&g.node), printable(&g.gpu));
    }
    for s in &mut r.series {
        (s.node, s.figure) = (printable(&s.node), printable(&s.figure));
    }
    r.advice = rep.advice.iter().map(|a| printable(a)).collect();
    r.nodes_without_records = rep.nodes_without_records.iter().map(|n| printable(n)).collect();
    r
}

pub fn text(rep: &Report, colour: bool) -> String {
    text_width(rep, colour, DEFAULT_WIDTH)
}

/// A figure of a series, in its unit.
fn figure(s: &Series, v: f64) -> String {
    match s.unit {
        Unit::Cores => format!("{v:.1} cores"),
        Unit::Bytes => bytes(v),
        Unit::Percent => format!("{v:.0}%"),
    }
}

/// The job's figures over time, one sparkline a line fitted to `width` columns, peak and mean
/// beside each.
fn over_time(o: &mut String, rep: &Report, width: usize) {
    let times = rep.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (Some(from), Some(to)) = (times.clone().reduce(f64::min), times.reduce(f64::max)) else { return };
    let label =
        rep.series.iter().map(|s| s.node.chars().count() + 1 + s.figure.chars().count()).max().unwrap_or(0);
    let stats: Vec<String> = rep
        .series
        .iter()
        .map(|s| {
            format!(
                "peak {}  mean {}",
                s.peak().map_or("-".into(), |v| figure(s, v)),
                s.mean().map_or("-".into(), |v| figure(s, v))
            )
        })
        .collect();
    let stat = stats.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    // Two spaces of indent, label, two spaces, the line, two spaces, the figures; no finer
    // than the samples (a cell with none is a gap).
    let samples = rep.series.iter().map(|s| s.points.len()).max().unwrap_or(1);
    let cells = width.saturating_sub(2 + label + 2 + 2 + stat).clamp(8, 240).min(samples.max(8));
    let _ = writeln!(
        o,
        "\nOver time ({} to {}, {} a cell):",
        clock(from),
        clock(to),
        span(((to - from) / cells as f64).max(1.0))
    );
    for (s, stats) in rep.series.iter().zip(&stats) {
        let name = format!("{} {}", s.node, s.figure);
        let _ = writeln!(o, "  {name:<label$}  {}  {stats}", spark::line(&s.points, from, to + 1.0, cells));
    }
}

/// `14:03:09`, UTC, of seconds since the epoch.
fn clock(t: f64) -> String {
    let s = t.max(0.0) as u64 % 86_400;
    format!("{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// `30 s`, `4 min`, `2.5 h`.
fn span(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

pub fn text_width(rep: &Report, colour: bool, width: usize) -> String {
    let rep = &printable_report(rep);
    let mut o = String::new();
    let _ = writeln!(o, "Job {}  ({}, log group {})", rep.job_id, or_unknown(&rep.cluster), rep.log_group);
    let _ = writeln!(
        o,
        "  user {}  account {}  partition {}  nodes {}",
        or_unknown(&rep.user),
        or_unknown(&rep.account),
        or_unknown(&rep.partition),
        or_unknown(&rep.nodes)
    );
    let _ = writeln!(
        o,
        "  state {}  elapsed {}  records {}",
        or_unknown(&rep.state),
        rep.elapsed_seconds.map_or("unknown".into(), duration),
        rep.records
    );
    if !rep.nodes_without_records.is_empty() {
        let n = rep.nodes_without_records.len();
        let names = rep.nodes_without_records.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
        let more = if n > 8 { format!(" and {} more", n - 8) } else { String::new() };
        let _ = writeln!(
            o,
            "  no records yet from {n} of Slurm's node(s): {names}{more}; their cost is not in the total"
        );
    }
    if rep.incomplete {
        let _ = writeln!(o, "  records still arriving: the job runs, or a node has no summary yet");
    }
    let _ = writeln!(o);
    let eff = rep.cpu_efficiency_percent.map_or("unknown".into(), |e| bar(e, colour));
    let _ = writeln!(o, "CPU     {eff}  {:.0} CPU-s on {:.0} cores", rep.cpu_seconds, rep.cores_allocated);
    match (rep.memory_peak_bytes, rep.memory_requested_bytes) {
        (Some(p), Some(r)) if r > 0.0 => {
            let _ = writeln!(
                o,
                "Memory  {}  peak {} of {} (per node)",
                bar(p / r * 100.0, colour),
                bytes(p),
                bytes(r)
            );
        }
        (Some(p), _) => {
            let _ = writeln!(o, "Memory  peak {} (no limit known)", bytes(p));
        }
        _ => {
            let _ = writeln!(o, "Memory  unknown");
        }
    }
    if let Some(usd) = rep.cost_usd {
        let nodes = rep.per_node.iter().filter(|n| n.cost.is_some()).count();
        let _ = write!(o, "Cost    {} on {nodes} node(s)", cost::dollars(usd));
        if let Some(w) = rep.waste_usd {
            let _ = write!(
                o,
                ", of it wasted {} (the unused part of what set each node's share)",
                cost::dollars(w)
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "\nPer node:");
    for n in &rep.per_node {
        let eff =
            n.cpu_efficiency_percent.map_or("cpu unknown".into(), |e| format!("cpu {}", bar(e, colour)));
        let mem = match (n.memory_peak_bytes, n.memory_requested_bytes) {
            (Some(p), Some(r)) if r > 0.0 => format!("mem {} / {}", bytes(p), bytes(r)),
            (Some(p), _) => format!("mem {}", bytes(p)),
            _ => "mem unknown".into(),
        };
        let _ = writeln!(
            o,
            "  {:<12} {eff}  {:.0} CPU-s / {:.0} cores  {mem}  {} ({:.0} samples)",
            n.node, n.cpu_seconds, n.cores_allocated, n.source, n.samples
        );
        if let Some(c) = &n.cost {
            let _ = writeln!(o, "  {:<12} cost {}", "", printable(&cost::line(c)));
        }
        if let Some(idle) = n.gpu_idle_percent {
            let energy = n.gpu_energy_kwh.map_or(String::new(), |e| format!("  energy {}", kwh(e)));
            let _ = writeln!(
                o,
                "  {:<12} GPUs {:.0}, idle {}{energy}",
                "",
                n.gpus.unwrap_or(0.0),
                bar(idle, false)
            );
        }
        if let (Some(peak), Some(total)) = (n.gpu_memory_peak_bytes, n.gpu_memory_total_bytes)
            && total > 0.0
        {
            let share = bar(peak / total * 100.0, false);
            let _ = writeln!(o, "  {:<12} GPU memory peak {} of {} {share}", "", bytes(peak), bytes(total));
        }
    }
    if !rep.gpus.is_empty() {
        let _ = writeln!(o, "\nGPUs:");
        for g in &rep.gpus {
            let util = g.utilization_mean_percent.map_or("unknown".into(), |u| bar(u, colour));
            let mut mem = g.memory_used_peak_bytes.map_or("unknown".into(), bytes);
            if let Some(total) = g.memory_total_bytes {
                mem.push_str(&format!(" of {}", bytes(total)));
            }
            if let Some(sm) = g.sm_activity_mean_percent {
                mem.push_str(&format!("  SM activity {sm:.0}%"));
            }
            if let Some(e) = g.energy_kwh {
                mem.push_str(&format!("  energy {}", kwh(e)));
            }
            let _ = writeln!(o, "  {:<12} gpu {:<4} util {util}  memory peak {mem}", g.node, g.gpu);
        }
    }
    over_time(&mut o, rep, width);
    if !rep.advice.is_empty() {
        let _ = writeln!(o, "\nAdvice:");
        for a in &rep.advice {
            let _ = writeln!(o, "  - {a}");
        }
    }
    o
}

/// `1.23 kWh`: three decimals, a GPU's few minutes reading as more than zero.
fn kwh(e: f64) -> String {
    format!("{e:.3} kWh")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_without_colour_are_plain() {
        assert_eq!(bar(50.0, false), "[##########..........]  50.0%");
        assert!(bar(150.0, false).starts_with(&format!("[{}]", "#".repeat(WIDTH))));
        assert!(bar(10.0, true).contains("\x1b[31m"));
        assert_eq!(duration(3725.0), "01:02:05");
    }

    #[test]
    fn control_characters_from_records_never_reach_the_terminal() {
        let evil = "c1\x1b]0;pwned\x07\x1b[2J\r\nroot";
        let rep = Report {
            job_id: "7".into(),
            user: Some(evil.into()),
            nodes: Some(evil.into()),
            per_node: vec![super::super::model::NodeRow {
                node: evil.into(),
                source: "summary".into(),
                samples: 1.0,
                elapsed_seconds: 1.0,
                cpu_seconds: 1.0,
                cores_allocated: 1.0,
                cpu_efficiency_percent: None,
                memory_peak_bytes: None,
                memory_requested_bytes: None,
                gpus: None,
                gpu_idle_percent: None,
                gpu_memory_peak_bytes: None,
                gpu_memory_total_bytes: None,
                gpu_energy_kwh: None,
                cost: None,
            }],
            advice: vec![evil.into()],
            ..Report::default()
        };
        for colour in [false, true] {
            let out = text(&rep, colour);
            let stray: Vec<char> =
                out.chars().filter(|c| c.is_control() && *c != '\n' && *c != '\x1b').collect();
            assert!(stray.is_empty(), "{stray:?}");
            // Only the bars' own colour codes, never the record's.
            assert!(!out.contains("\x1b]") && !out.contains("\x1b[2J"), "{out:?}");
            assert!(out.contains("c1\\u{1b}]0;pwned"), "{out}");
        }
    }
}
