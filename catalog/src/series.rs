//! The catalog's names as destinations outside CloudWatch spell them: OpenTelemetry metric
//! names and Prometheus series names in snake case with the unit as a suffix
//! (`MemoryRss` in Bytes is `slurm_memory_rss_bytes`), labels in snake case (`JobId` is
//! `job_id`). Derived here, once, from the catalog's own names.

use crate::{Metric, Unit};

/// What every series name starts with, so a site's other exporters never collide with ours.
pub const PREFIX: &str = "slurm_";

/// `MemoryRss` -> `memory_rss`, `GpuUuid` -> `gpu_uuid`, `CPUUtilization` -> `cpu_utilization`.
pub fn snake(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            // A word starts at an upper-case letter after a lower-case one or a digit, or at the
            // last capital of an acronym followed by a lower-case letter (`CPUTime`).
            let starts = match prev {
                None => false,
                Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_ascii_uppercase() => next.is_some_and(|n| n.is_ascii_lowercase()),
                Some(_) => false,
            };
            if starts && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_owned()
}

/// The unit as the last word of a series name ("" for counts and unit-less figures).
pub fn unit_suffix(unit: Unit) -> &'static str {
    match unit {
        Unit::Count | Unit::None => "",
        Unit::CountPerSecond => "per_second",
        Unit::Bytes => "bytes",
        Unit::BytesPerSecond => "bytes_per_second",
        Unit::Seconds => "seconds",
        Unit::Milliseconds => "milliseconds",
        Unit::Microseconds => "microseconds",
        Unit::Percent => "percent",
    }
}

/// The metric's series name: `slurm_` + its name in snake case + its unit, unless the name ends
/// with the unit already.
pub fn name(metric: &Metric) -> String {
    let mut out = format!("{PREFIX}{}", snake(metric.name));
    let suffix = unit_suffix(metric.unit);
    if !suffix.is_empty() && !out.ends_with(suffix) {
        out.push('_');
        out.push_str(suffix);
    }
    out
}

/// A dimension's label name.
pub fn label(dimension: &str) -> String {
    snake(dimension)
}

/// The UCUM unit OpenTelemetry expects ("1" for counts and unit-less figures).
pub fn otel_unit(unit: Unit) -> &'static str {
    match unit {
        Unit::Count | Unit::None => "1",
        Unit::CountPerSecond => "1/s",
        Unit::Bytes => "By",
        Unit::BytesPerSecond => "By/s",
        Unit::Seconds => "s",
        Unit::Milliseconds => "ms",
        Unit::Microseconds => "us",
        Unit::Percent => "%",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_snake_case_with_their_unit() {
        assert_eq!(snake("JobId"), "job_id");
        assert_eq!(snake("ClusterName"), "cluster_name");
        assert_eq!(snake("GpuUuid"), "gpu_uuid");
        assert_eq!(snake("CPUUtilization"), "cpu_utilization");
        assert_eq!(snake("EfaRxBytes"), "efa_rx_bytes");
        assert_eq!(name(&crate::metrics::MEMORY_RSS), "slurm_memory_rss_bytes");
    }

    #[test]
    fn every_series_name_is_distinct_and_valid_for_prometheus() {
        let mut seen = BTreeSet::new();
        for m in crate::ALL {
            let n = name(m);
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{n}");
            assert!(seen.insert(n.clone()), "two metrics are both {n}");
        }
        for d in crate::ALL.iter().flat_map(|m| m.dimension_sets.iter().flat_map(|s| s.iter())) {
            let l = label(d);
            assert!(l.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{l}");
        }
    }
}
