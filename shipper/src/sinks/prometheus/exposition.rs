//! The series a pull endpoint serves, and their text exposition format (version 0.0.4): HELP
//! and TYPE from the catalog, one gauge a series whose value is the mean of its last period.

use crate::aggregate::Aggregate;
use crate::sample::Dims;
use slurm_cw_catalog::{Metric, series};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// One series' latest value.
#[derive(Debug)]
struct Point {
    value: f64,
    /// The aggregate's own time, so an older period arriving late (a flush handed on after the
    /// next collection was shown) does not win: unless this time is in the future, the wall
    /// clock having stepped back since, when any newer value does.
    at: std::time::SystemTime,
    updated: Instant,
}

/// Every series seen, by metric and label set.
#[derive(Debug, Default)]
pub struct Series {
    /// Series name -> (metric, rendered label set -> point).
    by_metric: BTreeMap<String, (&'static Metric, BTreeMap<String, Point>)>,
}

impl Series {
    /// Takes the aggregates' values.
    pub fn update(&mut self, items: Vec<Aggregate>, now: Instant) {
        let wall = std::time::SystemTime::now();
        for a in items {
            let Some(value) = a.value.mean() else { continue };
            let labels = labels(&a.dims);
            let (_, points) =
                self.by_metric.entry(series::name(a.metric)).or_insert_with(|| (a.metric, BTreeMap::new()));
            match points.get_mut(&labels) {
                Some(p) if p.at > a.time && p.at <= wall => p.updated = now,
                Some(p) => *p = Point { value, at: a.time, updated: now },
                None => {
                    points.insert(labels, Point { value, at: a.time, updated: now });
                }
            }
        }
    }

    /// Forgets series not updated for `ttl` (an ended job's).
    pub fn expire(&mut self, now: Instant, ttl: Duration) {
        for (_, points) in self.by_metric.values_mut() {
            points.retain(|_, p| now.duration_since(p.updated) <= ttl);
        }
        self.by_metric.retain(|_, (_, points)| !points.is_empty());
    }

    pub fn len(&self) -> usize {
        self.by_metric.values().map(|(_, p)| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (metric, points)) in &self.by_metric {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(metric.help));
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (labels, p) in points {
                let _ = writeln!(out, "{name}{labels} {}", p.value);
            }
        }
        out
    }
}

/// `{a="1",b="2"}` in the dimensions' (sorted) order; empty without any.
fn labels(dims: &Dims) -> String {
    if dims.is_empty() {
        return String::new();
    }
    let mut out = String::from("{");
    for (i, (n, v)) in dims.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&series::label(n));
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::{Datum, DatumValue, Stats};
    use std::time::SystemTime;

    fn datum(metric: &str, dims: &[(&str, &str)], value: DatumValue, at: SystemTime) -> Aggregate {
        let d = Datum {
            metric: metric.into(),
            unit: String::new(),
            dimensions: dims.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            timestamp: at,
            value,
        };
        Aggregate::from_datum(d).expect("a catalog metric")
    }

    #[test]
    fn help_type_and_one_gauge_a_series_with_escaped_labels() {
        let mut s = Series::default();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let stats = DatumValue::Stats { stats: Stats { min: 1.0, max: 3.0, sum: 4.0, count: 2.0 } };
        let dims = [("ClusterName", "c"), ("JobId", "7"), ("User", "a\"b\\c\nd")];
        s.update(vec![datum("MemoryRss", &dims, stats, t)], Instant::now());
        let text = s.render();
        assert!(text.starts_with("# HELP slurm_memory_rss_bytes "), "{text}");
        assert!(text.contains("# TYPE slurm_memory_rss_bytes gauge\n"), "{text}");
        assert!(
            text.contains(
                "slurm_memory_rss_bytes{cluster_name=\"c\",job_id=\"7\",user=\"a\\\"b\\\\c\\nd\"} 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_latest_period_wins_and_idle_series_expire() {
        let mut s = Series::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(60);
        let t1 = t0 + Duration::from_secs(60);
        let now = Instant::now();
        let v = |x| DatumValue::Value { value: x };
        s.update(
            vec![
                datum("MemoryRss", &[("JobId", "1")], v(2.0), t1),
                datum("MemoryRss", &[("JobId", "1")], v(1.0), t0),
            ],
            now,
        );
        assert!(s.render().contains("{job_id=\"1\"} 2\n"), "{}", s.render());
        s.update(vec![datum("MemoryRss", &[("JobId", "2")], v(5.0), t1)], now + Duration::from_secs(100));
        s.expire(now + Duration::from_secs(150), Duration::from_secs(60));
        assert_eq!(s.len(), 1);
        assert!(s.render().contains("{job_id=\"2\"} 5\n"));
    }

    #[test]
    fn after_the_clock_steps_back_new_values_are_served() {
        use slurm_cw_catalog::dims::JOB_ID;
        use slurm_cw_catalog::metrics::MEMORY_RSS;
        let mut s = Series::default();
        let (wall, now) = (SystemTime::now(), Instant::now());
        let v = |x| DatumValue::Value { value: x };
        // Served while the clock was an hour ahead; then it stepped back to the right time.
        let ahead = wall + Duration::from_secs(3600);
        s.update(vec![datum(MEMORY_RSS.name, &[(JOB_ID, "1")], v(2.0), ahead)], now);
        s.update(vec![datum(MEMORY_RSS.name, &[(JOB_ID, "1")], v(3.0), wall)], now + Duration::from_secs(30));
        assert!(s.render().contains("{job_id=\"1\"} 3\n"), "{}", s.render());
        // Once the clock is right, an older period arriving late still does not win.
        let late = wall - Duration::from_secs(60);
        s.update(vec![datum(MEMORY_RSS.name, &[(JOB_ID, "1")], v(9.0), late)], now + Duration::from_secs(60));
        assert!(s.render().contains("{job_id=\"1\"} 3\n"), "{}", s.render());
    }
}
