//! A datum: one aggregated metric value as CloudWatch receives it, and its JSON line form.
//!
//! The JSON line is what `--sink stdout` prints and what the spool stores, one datum a line:
//! `{"namespace","metric","dimensions":{..},"unit","timestamp", and "value" | "values"+"counts"
//! | "stats":{"min","max","sum","count"}}`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::SystemTime;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub count: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DatumValue {
    Value { value: f64 },
    Values { values: Vec<f64>, counts: Vec<f64> },
    Stats { stats: Stats },
}

impl DatumValue {
    /// One number for destinations that take one value a series and period (OpenTelemetry
    /// gauges, Prometheus): the mean of what was observed, `Values` weighted by their counts (a
    /// missing count is 1, as CloudWatch reads it). `None` when nothing was counted.
    pub fn mean(&self) -> Option<f64> {
        let (sum, count) = match self {
            DatumValue::Value { value } => (*value, 1.0),
            DatumValue::Values { values, counts } => {
                let count = |i: usize| counts.get(i).copied().unwrap_or(1.0);
                values.iter().enumerate().fold((0.0, 0.0), |(s, c), (i, v)| (s + v * count(i), c + count(i)))
            }
            DatumValue::Stats { stats } => (stats.sum, stats.count),
        };
        (count > 0.0).then(|| sum / count)
    }

    /// Every number in the value, for validation.
    pub fn numbers(&self) -> Vec<f64> {
        match self {
            DatumValue::Value { value } => vec![*value],
            DatumValue::Values { values, counts } => values.iter().chain(counts).copied().collect(),
            DatumValue::Stats { stats } => vec![stats.min, stats.max, stats.sum, stats.count],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Datum {
    pub metric: String,
    pub unit: String,
    /// Sorted by name; `ClusterName` included.
    pub dimensions: Vec<(String, String)>,
    pub timestamp: SystemTime,
    pub value: DatumValue,
}

impl Datum {
    pub fn dimension(&self, name: &str) -> Option<&str> {
        self.dimensions.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The JSON line form; borrowed when written, owned when read back.
#[derive(Serialize, Deserialize)]
struct Line {
    namespace: String,
    metric: String,
    dimensions: BTreeMap<String, String>,
    unit: String,
    timestamp: String,
    #[serde(flatten)]
    value: DatumValue,
}

#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("not a datum line: {0}")]
    Json(#[from] serde_json::Error),
    #[error("bad timestamp {0:?}: {1}")]
    Timestamp(String, time::error::Parse),
}

pub fn format_timestamp(t: SystemTime) -> String {
    OffsetDateTime::from(t).format(&Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

impl Datum {
    /// One JSON object, no trailing newline.
    pub fn to_json_line(&self, namespace: &str) -> String {
        let line = Line {
            namespace: namespace.to_owned(),
            metric: self.metric.clone(),
            dimensions: self.dimensions.iter().cloned().collect(),
            unit: self.unit.clone(),
            timestamp: format_timestamp(self.timestamp),
            value: self.value.clone(),
        };
        // Serializing plain strings and finite-or-not floats cannot fail; non-finite floats
        // become null, which validation would have dropped before a real send.
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// Parses a line written by [`Datum::to_json_line`]; returns the namespace too.
    pub fn from_json_line(s: &str) -> Result<(String, Datum), LineError> {
        let line: Line = serde_json::from_str(s)?;
        let timestamp = OffsetDateTime::parse(&line.timestamp, &Rfc3339)
            .map_err(|e| LineError::Timestamp(line.timestamp.clone(), e))?;
        Ok((
            line.namespace,
            Datum {
                metric: line.metric,
                unit: line.unit,
                dimensions: line.dimensions.into_iter().collect(),
                timestamp: timestamp.into(),
                value: line.value,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn datum(value: DatumValue) -> Datum {
        Datum {
            metric: "NodeCount".into(),
            unit: "Count".into(),
            dimensions: vec![("ClusterName".into(), "c".into()), ("State".into(), "idle".into())],
            timestamp: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            value,
        }
    }

    #[test]
    fn json_line_has_the_documented_shape() {
        let line = datum(DatumValue::Value { value: 3.0 }).to_json_line("Slurm");
        assert_eq!(
            line,
            r#"{"namespace":"Slurm","metric":"NodeCount","dimensions":{"ClusterName":"c","State":"idle"},"unit":"Count","timestamp":"2023-11-14T22:13:20.123Z","value":3.0}"#
        );
        let stats = Stats { min: 1.0, max: 4.0, sum: 5.0, count: 2.0 };
        let line = datum(DatumValue::Stats { stats }).to_json_line("Slurm");
        assert!(line.ends_with(r#""stats":{"min":1.0,"max":4.0,"sum":5.0,"count":2.0}}"#), "{line}");
        let line = datum(DatumValue::Values { values: vec![1.0, 2.0], counts: vec![3.0, 1.0] })
            .to_json_line("Slurm");
        assert!(line.ends_with(r#""values":[1.0,2.0],"counts":[3.0,1.0]}"#), "{line}");
    }

    #[test]
    fn json_lines_round_trip() {
        for v in [
            DatumValue::Value { value: 2.5 },
            DatumValue::Values { values: vec![1.0], counts: vec![2.0] },
            DatumValue::Stats { stats: Stats { min: 0.0, max: 1.0, sum: 1.0, count: 2.0 } },
        ] {
            let d = datum(v);
            let (ns, back) = Datum::from_json_line(&d.to_json_line("X")).unwrap();
            assert_eq!(ns, "X");
            assert_eq!(back, d);
        }
        assert!(Datum::from_json_line("{").is_err());
        // Found by fuzzing: a long decimal must read back to the same float it was written as.
        let long = r#"{"namespace":"S","metric":"M","dimensions":{},"unit":"Percent","timestamp":"2026-02-21T19:30:00Z","value":100.04444444444444444444444444444444444444444444444444444444}"#;
        let (ns, d) = Datum::from_json_line(long).unwrap();
        assert_eq!(Datum::from_json_line(&d.to_json_line(&ns)).unwrap().1, d);
        assert!(Datum::from_json_line(r#"{"namespace":"a"}"#).is_err());
    }
}

#[cfg(test)]
mod mean_tests {
    use super::*;

    #[test]
    fn the_mean_of_each_kind_of_value() {
        assert_eq!(DatumValue::Value { value: 3.0 }.mean(), Some(3.0));
        let v = DatumValue::Values { values: vec![1.0, 4.0], counts: vec![3.0, 1.0] };
        assert_eq!(v.mean(), Some(7.0 / 4.0));
        let s = DatumValue::Stats { stats: Stats { min: 1.0, max: 5.0, sum: 12.0, count: 4.0 } };
        assert_eq!(s.mean(), Some(3.0));
        assert_eq!(DatumValue::Values { values: vec![], counts: vec![] }.mean(), None);
        let uncounted = DatumValue::Values { values: vec![1.0, 4.0], counts: vec![] };
        assert_eq!(uncounted.mean(), Some(2.5), "a missing count is 1");
    }
}
