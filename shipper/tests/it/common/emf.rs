//! Reading embedded-metric-format events back as CloudWatch would, against AWS's specification
//! ("Specification: Embedded metric format", CloudWatch User Guide): the root a JSON object
//! with an `_aws` metadata object (`Timestamp`, a number of milliseconds; `CloudWatchMetrics`,
//! an array of directives), each directive a `Namespace` string, `Dimensions` (an array of
//! dimension sets, each at most 30 names of root members holding strings) and `Metrics` (at
//! most 100 definitions: a `Name` naming a root member that holds a number or an array of at
//! most 100 numbers, an optional `Unit` of CloudWatch's, an optional `StorageResolution` of 1
//! or 60); an event at most 1 MB. LocalStack stores such events and extracts no metric from
//! them, so this is what the tests read instead.

use serde_json::Value;

/// CloudWatch's units (PutMetricData's StandardUnit).
const UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// One metric's values as an event gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub namespace: String,
    pub name: String,
    pub unit: String,
    pub resolution: i64,
    /// Sorted by name.
    pub dims: Vec<(String, String)>,
    pub timestamp_ms: i64,
    pub values: Vec<f64>,
}

/// The metrics one event gives, or what breaks the specification.
pub fn extract(message: &str) -> Result<Vec<Extracted>, String> {
    if message.len() > 1_048_576 - 26 {
        return Err(format!("{} bytes: over one event's limit", message.len()));
    }
    let root: Value = serde_json::from_str(message).map_err(|e| format!("not JSON: {e}"))?;
    let root = root.as_object().ok_or("the root is not an object")?;
    let meta = root.get("_aws").and_then(Value::as_object).ok_or("no _aws object")?;
    let ts = meta.get("Timestamp").and_then(Value::as_i64).ok_or("_aws.Timestamp is not an integer")?;
    let directives =
        meta.get("CloudWatchMetrics").and_then(Value::as_array).ok_or("no CloudWatchMetrics array")?;
    let mut out = Vec::new();
    for d in directives {
        let ns = d.get("Namespace").and_then(Value::as_str).ok_or("a directive without Namespace")?;
        if ns.is_empty() || ns.len() > 255 {
            return Err(format!("namespace {ns:?}"));
        }
        let sets = d.get("Dimensions").and_then(Value::as_array).ok_or("a directive without Dimensions")?;
        let metrics = d.get("Metrics").and_then(Value::as_array).ok_or("a directive without Metrics")?;
        if metrics.len() > 100 {
            return Err(format!("{} metrics in one directive", metrics.len()));
        }
        for set in sets {
            let names = set.as_array().ok_or("a dimension set is not an array")?;
            if names.len() > 30 {
                return Err(format!("{} dimensions in a set", names.len()));
            }
            let mut dims = Vec::new();
            for n in names {
                let n = n.as_str().ok_or("a dimension name is not a string")?;
                let v = root
                    .get(n)
                    .and_then(Value::as_str)
                    .ok_or(format!("dimension {n} is not a string member"))?;
                if v.is_empty() || v.len() > 1024 {
                    return Err(format!("dimension {n} = {v:?}"));
                }
                dims.push((n.to_owned(), v.to_owned()));
            }
            dims.sort();
            for m in metrics {
                let name = m.get("Name").and_then(Value::as_str).ok_or("a metric without Name")?;
                let unit = m.get("Unit").and_then(Value::as_str).unwrap_or("None");
                if !UNITS.contains(&unit) {
                    return Err(format!("{name}: unit {unit:?}"));
                }
                let resolution = m.get("StorageResolution").and_then(Value::as_i64).unwrap_or(60);
                if ![1, 60].contains(&resolution) {
                    return Err(format!("{name}: StorageResolution {resolution}"));
                }
                let values: Vec<f64> = match root.get(name) {
                    Some(Value::Number(x)) => vec![x.as_f64().ok_or("not a number")?],
                    Some(Value::Array(xs)) if xs.len() <= 100 => xs
                        .iter()
                        .map(|x| x.as_f64().ok_or(format!("{name}: a value is not a number")))
                        .collect::<Result<_, _>>()?,
                    other => return Err(format!("{name}: {other:?} is not a number or up to 100 numbers")),
                };
                out.push(Extracted {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    unit: unit.to_owned(),
                    resolution,
                    dims: dims.clone(),
                    timestamp_ms: ts,
                    values,
                });
            }
        }
    }
    Ok(out)
}

/// Every event's message in `group`, every stream, every page.
pub async fn messages(logs: &aws_sdk_cloudwatchlogs::Client, group: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = match logs.filter_log_events().log_group_name(group).set_next_token(token).send().await {
            Ok(p) => p,
            Err(e) => panic!("FilterLogEvents on {group}: {e:?}"),
        };
        out.extend(page.events().iter().filter_map(|e| e.message().map(str::to_owned)));
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            return out;
        }
    }
}

/// Every metric the events of `group` give, each event checked against the specification.
pub async fn metrics(logs: &aws_sdk_cloudwatchlogs::Client, group: &str) -> Vec<Extracted> {
    let mut out = Vec::new();
    for m in messages(logs, group).await {
        out.extend(extract(&m).unwrap_or_else(|e| panic!("not EMF ({e}): {m}")));
    }
    out
}
