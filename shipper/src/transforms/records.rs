//! A job record's JSON: the fields every record starts with, numbers kept short, and the cut
//! that makes a record fit one log event.

use crate::sample::JobInfo;
use crate::sinks::logs::batch::MAX_MESSAGE_BYTES;
use serde_json::{Map, Value, json};
use slurm_cw_catalog::records as r;
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::record::Record;
use std::time::SystemTime;

/// Whole units from 1000 up (bytes stay exact), six significant digits below: more than any
/// figure here is worth, and records stay small.
pub fn round(v: f64) -> f64 {
    // Not a number stays so, and becomes JSON null: never a made-up value.
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    if v.abs() >= 1000.0 {
        return v.round();
    }
    let digits = 6 - (v.abs().log10().floor() as i32 + 1);
    let f = 10f64.powi(digits.clamp(-12, 12));
    (v * f).round() / f
}

/// Dollars as [`round`], but never coarser than a cent: a $1,234.49 job is not $1,234.
pub fn round_usd(v: f64) -> f64 {
    if v.is_finite() && v.abs() >= 1000.0 { (v * 100.0).round() / 100.0 } else { round(v) }
}

/// The fields every record starts with.
pub fn head(info: &JobInfo, kind: &str, at: SystemTime, id: String) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(r::TYPE.name.into(), json!(kind));
    m.insert(r::RECORD_ID.name.into(), json!(id));
    m.insert(r::TIME.name.into(), json!(format_timestamp(at)));
    m.insert(r::NODE_NAME.name.into(), json!(info.node));
    m.insert(r::JOB_ID.name.into(), json!(info.id));
    m.insert(r::USER.name.into(), json!(info.user));
    m.insert(r::ACCOUNT.name.into(), json!(info.account));
    m.insert(r::PARTITION.name.into(), json!(info.partition));
    let n = &info.names;
    for (field, v) in
        [(&r::SLUID, &n.sluid), (&r::ARRAY_TASK, &n.array_task), (&r::HET_COMPONENT, &n.het_component)]
    {
        if let Some(v) = v {
            m.insert(field.name.into(), json!(v));
        }
    }
    m
}

/// The record's text; one too large for a log event loses its nested objects (largest first),
/// named in `Truncated`. Returns whether it was cut.
pub fn finish(mut m: Map<String, Value>, time: SystemTime) -> (Record, bool) {
    let mut text = serde_json::to_string(&m).unwrap_or_default();
    let mut cut = Vec::new();
    while text.len() > MAX_MESSAGE_BYTES {
        let largest = m
            .iter()
            .filter(|(_, v)| v.is_object() || v.is_string())
            .max_by_key(|(_, v)| v.to_string().len())
            .map(|(k, _)| k.clone());
        let Some(k) = largest else { break };
        m.remove(&k);
        cut.push(k);
        m.insert(r::TRUNCATED.name.into(), json!(cut));
        text = serde_json::to_string(&m).unwrap_or_default();
    }
    if !cut.is_empty() {
        tracing::warn!(cut = ?cut, "a job record was too large for one log event and was cut");
    }
    (Record { time, message: text }, !cut.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn parse(r: &Record) -> Value {
        serde_json::from_str(&r.message).unwrap()
    }

    #[test]
    fn oversized_records_are_cut_and_say_so() {
        let mut m = Map::new();
        m.insert("JobId".into(), json!("1"));
        let big: Map<String, Value> = (0..100_000).map(|i| (format!("exe{i}"), json!(0.5))).collect();
        m.insert("ProcessCpuUsage".into(), Value::Object(big));
        let (rec, cut) = finish(m, t(0));
        assert!(cut);
        assert!(rec.message.len() <= MAX_MESSAGE_BYTES);
        let v = parse(&rec);
        assert_eq!(v["Truncated"], json!(["ProcessCpuUsage"]));
        assert_eq!(v["JobId"], "1");
    }

    #[test]
    fn rounding_keeps_six_digits() {
        assert_eq!(round(314_572_812.0), 314_572_812.0);
        assert_eq!(round(629_145_600.5), 629_145_601.0);
        assert_eq!(round(0.123_456_78), 0.123_457);
        assert_eq!(round(0.0), 0.0);
        assert!(round(f64::NAN).is_nan());
        assert_eq!(json!(round(f64::INFINITY)), Value::Null, "JSON null, not a made-up number");
        assert_eq!(round_usd(1234.494), 1234.49, "dollars keep their cents");
        assert_eq!(round_usd(12.345_678), 12.3457);
        assert!(round_usd(f64::NAN).is_nan());
    }
}
