//! `docs/metrics.md`, generated from the catalog.

use crate::{ALL, Group, Kind, Metric, NAMESPACE_PREFIX, dims};
use std::fmt::Write;

/// The whole of `docs/metrics.md`.
pub fn metrics_markdown() -> String {
    let mut out = String::new();
    out.push_str("# Metric catalog\n\n");
    out.push_str(
        "<!-- Generated from catalog/src/metrics.rs by `cargo run -p slurm-cw-catalog -- write`. \
         Do not edit: a test fails when this file is stale. -->\n\n",
    );
    let _ = writeln!(
        out,
        "Every metric lives in the cluster's own CloudWatch namespace, `{NAMESPACE_PREFIX}/<cluster \
         name>` unless configured (IAM can confine a cluster's nodes to it), and \
         carries the dimension `{}`. Each line under *Dimensions* is one dimension set the metric \
         is published with; in CloudWatch each distinct combination of values is one billed \
         metric. *Counter* figures grow until Slurm resets them; they are read, not sent: \
         the head node sends their reset-aware increase between reads (*increase* metrics, whose \
         `Sum` over a period is the count in it). *Total* metrics are one value per node and flush, so their `Sum` over \
         the flush interval (60 s) is the cluster's total. Per-job detail is not here but in the \
         job records (see [records.md](records.md)). {} metrics in all.\n",
        dims::CLUSTER_NAME,
        ALL.len()
    );
    let detail = crate::views::scheduler_detail();
    let mut groups: Vec<Group> = ALL.iter().map(|m| m.group).collect();
    groups.dedup();
    for group in groups {
        let _ = writeln!(out, "## {}\n", group.title());
        out.push_str("| Metric | Unit | Kind | Emitted by | Dimensions | Description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for m in ALL.iter().filter(|m| m.group == group) {
            row(&mut out, m, &detail);
        }
        out.push('\n');
    }
    out
}

fn row(out: &mut String, m: &Metric, detail: &[&Metric]) {
    let kind = match m.kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter (not sent)",
        Kind::Increase => "increase",
        Kind::Total => "total",
    };
    let roles: Vec<&str> = m.roles.iter().map(|r| r.as_str()).collect();
    let sets: Vec<String> = m.full_dimension_sets().map(|s| s.join(", ")).collect();
    let mut help = m.help.replace('|', "\\|");
    if let Some(src) = m.rate_of {
        let _ = write!(help, " Increase of `{}`.", src.name);
    }
    if crate::views::quiet_at_zero(m) {
        help.push_str(" At zero, sent to CloudWatch as it falls to zero and then once a day, not before it first rises (a gap is zero).");
    }
    if crate::dashboard::RECORD_BY_STATE.iter().any(|d| std::ptr::eq(*d, m)) {
        let metric: Vec<&str> = crate::dashboard::states_of(m)
            .into_iter()
            .filter(|s| !crate::views::state_in_record_only(m, s))
            .collect();
        let _ = write!(
            help,
            " States but {} (which an alarm watches or a metric chart draws) are sent in the head's `scheduler_sample` record only, where the dashboard's chart by state reads them (as metrics too with `head.scheduler_detail = \"metrics\"`).",
            metric.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        );
    }
    if crate::views::self_detail(m) {
        help.push_str(" Sent to CloudWatch only with `self_metrics = \"all\"` (no view reads it; the head puts it in its `scheduler_sample` record).");
    }
    if detail.iter().any(|d| std::ptr::eq(*d, m)) {
        if crate::dashboard::record_figures().iter().any(|d| std::ptr::eq(*d, m)) {
            help.push_str(" Sent in the head's `scheduler_sample` record, where the dashboard's *Scheduler* row reads it (as a metric too with `head.scheduler_detail = \"metrics\"`).");
        } else {
            help.push_str(" Sent in the head's `scheduler_sample` record unless `head.scheduler_detail = \"metrics\"` (no view reads it).");
        }
    }
    let _ = writeln!(
        out,
        "| `{}` | {} | {} | {} | {} | {} |",
        m.name,
        m.unit.as_str(),
        kind,
        roles.join(", "),
        sets.join("<br>"),
        help
    );
}
