//! Checks a datum against CloudWatch's PutMetricData rules before it is sent, so that one bad
//! datum is dropped (logged once, counted by reason) instead of failing a whole request.

use crate::datum::{Datum, DatumValue};
use crate::log_once::LogOnce;
use std::time::{Duration, SystemTime};

/// Largest magnitude CloudWatch stores.
pub const MAX_MAGNITUDE: f64 = 1.174271e108;
/// Smallest non-zero magnitude CloudWatch stores; smaller values are sent as 0.
pub const MIN_MAGNITUDE: f64 = 8.515920e-109;
pub const MAX_NAMESPACE: usize = 255;
pub const MAX_DIMENSIONS: usize = 30;
pub const MAX_DIMENSION_NAME: usize = 255;
pub const MAX_DIMENSION_VALUE: usize = 1024;
pub const MAX_METRIC_NAME: usize = 255;
pub const MAX_VALUES: usize = 150;
pub const MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);
pub const MAX_AHEAD: Duration = Duration::from_secs(2 * 3600);

/// Why a datum was not delivered. The string form is the `Reason` dimension of
/// `ShipperDatumsDropped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    NonFinite,
    OutOfRange,
    BadMetricName,
    BadDimension,
    TooManyDimensions,
    BadValues,
    Timestamp,
    /// CloudWatch refused it although it passed local validation.
    Rejected,
    /// The in-memory queue of undelivered data was full; the oldest went.
    QueueFull,
    /// The disk spool was full; the oldest went.
    SpoolFull,
    /// A spool file failed its checksum or could not be parsed.
    SpoolCorrupt,
    /// A job record too large for one log event even after trimming.
    TooLarge,
    /// Part of a job record was cut to fit one log event.
    Trimmed,
    /// A spooled flush the service refused for good while newer ones went through: moved to
    /// the spool's `aside/` directory so the rest is not held behind it.
    SetAside,
    /// A pull endpoint that could not listen (its address held by another program): no one
    /// could read the datum.
    NotListening,
    /// A spooled datum of a metric (or dimension) the running version does not have.
    UnknownMetric,
    /// Held in memory (the spool could not take it) when the daemon stopped with its
    /// destination failing, and the spool could not take it then either: lost, logged.
    Stopped,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::NonFinite => "non_finite",
            DropReason::OutOfRange => "out_of_range",
            DropReason::BadMetricName => "bad_metric_name",
            DropReason::BadDimension => "bad_dimension",
            DropReason::TooManyDimensions => "too_many_dimensions",
            DropReason::BadValues => "bad_values",
            DropReason::Timestamp => "timestamp",
            DropReason::Rejected => "rejected",
            DropReason::QueueFull => "queue_full",
            DropReason::SpoolFull => "spool_full",
            DropReason::SpoolCorrupt => "spool_corrupt",
            DropReason::TooLarge => "too_large",
            DropReason::Trimmed => "trimmed",
            DropReason::SetAside => "set_aside",
            DropReason::NotListening => "not_listening",
            DropReason::UnknownMetric => "unknown_metric",
            DropReason::Stopped => "stopped",
        }
    }
}

/// Checks a namespace against CloudWatch's rules: 1-255 of `A-Z a-z 0-9 . - _ / # :` and
/// space, not starting with `:` (the API's pattern) nor `AWS/` (reserved). The same set as the
/// Terraform module's, so the IAM condition it writes names exactly what the shipper sends.
pub fn check_namespace(ns: &str) -> Result<(), NamespaceError> {
    if ns.is_empty() || ns.len() > MAX_NAMESPACE {
        return Err(NamespaceError::Length(ns.len()));
    }
    if ns.starts_with("AWS/") {
        return Err(NamespaceError::Reserved);
    }
    if let Some(c) = ns.chars().find(|&c| !(c.is_ascii_alphanumeric() || ".-_/#: ".contains(c))) {
        return Err(NamespaceError::Character { namespace: ns.to_owned(), c });
    }
    if ns.starts_with(':') || ns.trim().is_empty() {
        return Err(NamespaceError::Start(ns.to_owned()));
    }
    Ok(())
}

/// Why CloudWatch would refuse a namespace; the caller names the key it came from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NamespaceError {
    #[error("must be 1 to {MAX_NAMESPACE} characters, not {0}")]
    Length(usize),
    #[error("namespaces starting with AWS/ are reserved for AWS")]
    Reserved,
    #[error("{namespace:?} holds {c:?}: a namespace is made of letters, digits, spaces and . - _ / # :")]
    Character { namespace: String, c: char },
    #[error("{0:?} must not start with ':' nor be only spaces")]
    Start(String),
}

/// Validates datums; remembers which (reason, metric) pairs it has logged so each is logged once.
#[derive(Debug, Default)]
pub struct Validator {
    logged: LogOnce<(DropReason, String)>,
}

impl Validator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the valid datums (fixing values too small to store to 0) and returns the rest with
    /// their reasons.
    pub fn retain_valid(&mut self, datums: &mut Vec<Datum>, now: SystemTime) -> Vec<(Datum, DropReason)> {
        let mut dropped = Vec::new();
        let mut kept = Vec::with_capacity(datums.len());
        for mut d in datums.drain(..) {
            match check(&mut d, now) {
                Ok(()) => kept.push(d),
                Err((reason, why)) => {
                    self.log_once(reason, &d.metric, &why);
                    dropped.push((d, reason));
                }
            }
        }
        *datums = kept;
        dropped
    }

    /// Logs a drop the first time its (reason, metric) pair is seen.
    pub fn log_once(&mut self, reason: DropReason, metric: &str, why: &str) {
        if self.logged.first(&(reason, metric.to_owned())) {
            tracing::warn!(
                metric,
                reason = reason.as_str(),
                detail = why,
                "dropping datum (logged once per metric and reason; ShipperDatumsDropped counts them)"
            );
        }
    }
}

type Invalid = (DropReason, String);

/// A dimension value CloudWatch accepts, from any text: printable ASCII is kept, a backslash
/// becomes `\\`, other characters `\u{..}` (control characters and bytes outside ASCII
/// included), a blank value's spaces `\x20`, an empty one `(empty)`; past [`MAX_DIMENSION_VALUE`] characters it is
/// cut and ends in `~`. Job users choose process names and accounts: a name they pick must
/// never make a datum invalid (a drop pages the admins).
pub fn clean_dimension_value(value: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii() && !c.is_ascii_control() && c != '\\';
    if !value.is_empty()
        && value.chars().all(plain)
        && !value.trim().is_empty()
        && value.len() <= MAX_DIMENSION_VALUE
    {
        return std::borrow::Cow::Borrowed(value);
    }
    if value.is_empty() {
        return std::borrow::Cow::Borrowed("(empty)");
    }
    let blank = value.trim().is_empty();
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' ' if blank => out.push_str("\\x20"),
            c if plain(c) => out.push(c),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    if out.len() > MAX_DIMENSION_VALUE {
        out.truncate(MAX_DIMENSION_VALUE - 1);
        out.push('~');
    }
    std::borrow::Cow::Owned(out)
}

/// One datum against every rule; fixes tiny magnitudes in place.
pub fn check(d: &mut Datum, now: SystemTime) -> Result<(), Invalid> {
    if d.metric.is_empty() || d.metric.len() > MAX_METRIC_NAME || d.metric.chars().any(char::is_control) {
        return Err((DropReason::BadMetricName, format!("metric name {:?}", d.metric)));
    }
    check_dimensions(&d.dimensions)?;
    check_timestamp(d.timestamp, now)?;
    check_value(&mut d.value)
}

fn check_dimensions(dims: &[(String, String)]) -> Result<(), Invalid> {
    if dims.len() > MAX_DIMENSIONS {
        return Err((DropReason::TooManyDimensions, format!("{} dimensions", dims.len())));
    }
    for (name, value) in dims {
        let bad = |why: String| Err((DropReason::BadDimension, format!("dimension {name:?}: {why}")));
        if name.is_empty() || name.len() > MAX_DIMENSION_NAME {
            return bad(format!("name must be 1 to {MAX_DIMENSION_NAME} characters"));
        }
        if !name.is_ascii() || name.starts_with(':') || name.trim().is_empty() {
            return bad("name must be ASCII, not blank and not start with ':'".into());
        }
        if value.is_empty() || value.chars().count() > MAX_DIMENSION_VALUE {
            return bad(format!("value must be 1 to {MAX_DIMENSION_VALUE} characters"));
        }
        if !value.is_ascii() {
            return bad("value must be ASCII".into());
        }
        if value.trim().is_empty() {
            return bad("value is blank".into());
        }
        if name.chars().chain(value.chars()).any(char::is_control) {
            return bad("contains a control character".into());
        }
    }
    Ok(())
}

fn check_timestamp(t: SystemTime, now: SystemTime) -> Result<(), Invalid> {
    let too_old = now.checked_sub(MAX_AGE).is_some_and(|limit| t < limit);
    let too_new = now.checked_add(MAX_AHEAD).is_some_and(|limit| t > limit);
    if too_old || too_new {
        return Err((
            DropReason::Timestamp,
            format!("timestamp {} is outside [-14 days, +2 hours] of now", crate::datum::format_timestamp(t)),
        ));
    }
    Ok(())
}

fn check_value(v: &mut DatumValue) -> Result<(), Invalid> {
    match v {
        DatumValue::Value { value } => check_number(value),
        DatumValue::Stats { stats } => {
            for x in [&mut stats.min, &mut stats.max, &mut stats.sum, &mut stats.count] {
                check_number(x)?;
            }
            if stats.count <= 0.0 || stats.min > stats.max {
                return Err((DropReason::BadValues, format!("inconsistent statistics {stats:?}")));
            }
            Ok(())
        }
        DatumValue::Values { values, counts } => {
            if values.is_empty() || values.len() != counts.len() || values.len() > MAX_VALUES {
                return Err((
                    DropReason::BadValues,
                    format!("{} values with {} counts (1 to 150, equal)", values.len(), counts.len()),
                ));
            }
            for x in values.iter_mut() {
                check_number(x)?;
            }
            for c in counts.iter_mut() {
                check_number(c)?;
                if *c < 0.0 {
                    return Err((DropReason::BadValues, format!("negative count {c}")));
                }
            }
            Ok(())
        }
    }
}

fn check_number(x: &mut f64) -> Result<(), Invalid> {
    if !x.is_finite() {
        return Err((DropReason::NonFinite, format!("value {x}")));
    }
    let m = x.abs();
    if m > MAX_MAGNITUDE {
        return Err((DropReason::OutOfRange, format!("value {x} above {MAX_MAGNITUDE:e}")));
    }
    if m != 0.0 && m < MIN_MAGNITUDE {
        // Too small for CloudWatch to store: indistinguishable from zero, so send zero.
        *x = 0.0;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::Stats;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn good() -> Datum {
        Datum {
            metric: "NodeCount".into(),
            unit: "Count".into(),
            dimensions: vec![("ClusterName".into(), "c".into()), ("State".into(), "idle".into())],
            timestamp: now(),
            value: DatumValue::Value { value: 1.0 },
        }
    }

    fn reason(mut d: Datum) -> Option<DropReason> {
        check(&mut d, now()).err().map(|(r, _)| r)
    }

    #[test]
    fn a_good_datum_passes() {
        assert_eq!(reason(good()), None);
    }

    #[test]
    fn non_finite_values_are_rejected() {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut d = good();
            d.value = DatumValue::Value { value: v };
            assert_eq!(reason(d), Some(DropReason::NonFinite), "{v}");
        }
        let mut d = good();
        d.value = DatumValue::Stats { stats: Stats { min: 0.0, max: 1.0, sum: f64::NAN, count: 2.0 } };
        assert_eq!(reason(d), Some(DropReason::NonFinite));
    }

    #[test]
    fn huge_values_are_out_of_range_and_tiny_ones_become_zero() {
        let mut d = good();
        d.value = DatumValue::Value { value: 2e108 };
        assert_eq!(reason(d), Some(DropReason::OutOfRange));
        let mut d = good();
        d.value = DatumValue::Value { value: -1e-200 };
        assert!(check(&mut d, now()).is_ok());
        assert_eq!(d.value, DatumValue::Value { value: 0.0 });
        let mut d = good();
        d.value = DatumValue::Value { value: 1.17e108 };
        assert_eq!(reason(d), None, "just inside the range");
    }

    #[test]
    fn bad_dimensions_are_rejected() {
        let cases: Vec<(&str, String)> = vec![
            ("State", String::new()),
            ("State", "   ".into()),
            ("State", "a\nb".into()),
            ("State", "x".repeat(1025)),
            ("", "v".into()),
            (":State", "v".into()),
            ("Stäte", "v".into()),
        ];
        for (name, value) in cases {
            let mut d = good();
            d.dimensions[1] = (name.to_owned(), value.clone());
            assert_eq!(reason(d), Some(DropReason::BadDimension), "{name:?}={value:?}");
        }
        let mut d = good();
        d.dimensions[1].1 = "e".repeat(MAX_DIMENSION_VALUE);
        assert_eq!(reason(d), None, "1024 characters is allowed");
        let mut d = good();
        d.dimensions[1].1 = "é".into();
        assert_eq!(reason(d), Some(DropReason::BadDimension), "CloudWatch takes ASCII only");
    }

    #[test]
    fn any_text_cleans_to_a_valid_dimension_value() {
        assert_eq!(clean_dimension_value("python3"), "python3");
        assert!(matches!(clean_dimension_value("python3"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(clean_dimension_value("sölver\u{7}"), "s\\u{f6}lver\\u{7}");
        assert_eq!(clean_dimension_value("a\\b"), "a\\\\b");
        assert_eq!(clean_dimension_value("  "), "\\x20\\x20");
        assert_eq!(clean_dimension_value(""), "(empty)");
        assert_eq!(clean_dimension_value("\u{fffd}x"), "\\u{fffd}x");
        let long = clean_dimension_value(&"ü".repeat(2000)).into_owned();
        assert_eq!((long.len(), long.ends_with('~')), (MAX_DIMENSION_VALUE, true));
        for v in ["sölver\u{7}", "  ", "", "\n", &"ü".repeat(2000), "漢字", "\u{0}"] {
            let mut d = good();
            d.dimensions[1].1 = clean_dimension_value(v).into_owned();
            assert_eq!(reason(d), None, "{v:?}");
        }
    }

    #[test]
    fn more_than_30_dimensions_are_rejected() {
        let mut d = good();
        d.dimensions = (0..31).map(|i| (format!("D{i}"), "v".into())).collect();
        assert_eq!(reason(d), Some(DropReason::TooManyDimensions));
        let mut d = good();
        d.dimensions = (0..30).map(|i| (format!("D{i}"), "v".into())).collect();
        assert_eq!(reason(d), None);
    }

    #[test]
    fn timestamps_outside_the_window_are_rejected() {
        let mut d = good();
        d.timestamp = now() - MAX_AGE - Duration::from_secs(1);
        assert_eq!(reason(d), Some(DropReason::Timestamp));
        let mut d = good();
        d.timestamp = now() + MAX_AHEAD + Duration::from_secs(1);
        assert_eq!(reason(d), Some(DropReason::Timestamp));
        let mut d = good();
        d.timestamp = now() - MAX_AGE + Duration::from_secs(60);
        assert_eq!(reason(d), None);
    }

    #[test]
    fn bad_metric_names_and_value_arrays_are_rejected() {
        let mut d = good();
        d.metric = String::new();
        assert_eq!(reason(d), Some(DropReason::BadMetricName));
        let mut d = good();
        d.metric = "M".repeat(256);
        assert_eq!(reason(d), Some(DropReason::BadMetricName));
        let mut d = good();
        d.value = DatumValue::Values { values: vec![1.0; 151], counts: vec![1.0; 151] };
        assert_eq!(reason(d), Some(DropReason::BadValues));
        let mut d = good();
        d.value = DatumValue::Values { values: vec![1.0, 2.0], counts: vec![1.0] };
        assert_eq!(reason(d), Some(DropReason::BadValues));
        let mut d = good();
        d.value = DatumValue::Stats { stats: Stats { min: 2.0, max: 1.0, sum: 3.0, count: 2.0 } };
        assert_eq!(reason(d), Some(DropReason::BadValues));
    }

    #[test]
    fn namespaces() {
        assert!(check_namespace("Slurm").is_ok());
        assert_eq!(check_namespace("AWS/EC2"), Err(NamespaceError::Reserved));
        assert!(check_namespace("").is_err());
        assert!(check_namespace(&"n".repeat(256)).is_err());
        assert!(check_namespace("Slurm/prod-1_a.b#c:d e").is_ok());
        assert!(check_namespace(&format!("Slurm/{}", "n".repeat(249))).is_ok());
        for bad in [":Slurm", "   ", "Slurm\n", "Slurm/é", "Slurm/${aws:username}", "Slurm/*"] {
            assert!(check_namespace(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn retain_valid_keeps_order_and_reports_drops() {
        let mut v = Validator::new();
        let mut bad = good();
        bad.value = DatumValue::Value { value: f64::NAN };
        let mut datums = vec![good(), bad, good()];
        let dropped = v.retain_valid(&mut datums, now());
        assert_eq!(datums.len(), 2);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].1, DropReason::NonFinite);
    }
}
