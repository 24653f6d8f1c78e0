//! sdiag: scheduler statistics. Text (every version) is read section by section, because the
//! same labels (`Last cycle:`, `Total cycles:`) mean different things in the main and backfill
//! sections; `sdiag --json` (23.02 on) is read by key. Counters are shipped as they are; the
//! Lambda turns them into reset-aware rates.

use super::sinfo::number;
use serde_json::Value;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;

/// What one sdiag output says.
#[derive(Debug, Default, PartialEq)]
pub struct Sdiag {
    pub values: Vec<(&'static Metric, f64)>,
    pub rpcs: Vec<Rpc>,
    /// None when the output has no pending-RPC section (older versions).
    pub pending_rpcs: Option<u64>,
    /// Labels this parser does not know, for one log line; never fatal.
    pub unknown: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rpc {
    pub message_type: String,
    pub count: u64,
    pub total_time: u64,
}

impl Sdiag {
    pub fn get(&self, m: &'static Metric) -> Option<f64> {
        self.values.iter().find(|(k, _)| std::ptr::eq(*k, m)).map(|(_, v)| *v)
    }
}

/// Each scheduler's means and the count of cycles they are over. Text sdiag prints no mean
/// before a scheduler's first cycle (after a start or the midnight reset); `sdiag --json` and
/// slurmctld's /metrics print 0, which read as a mean would drag a chart and an alarm to 0 µs.
const MEANS: &[(&Metric, &[&Metric])] = &[
    (&MAIN_SCHED_TOTAL_CYCLES, &[&MAIN_SCHED_MEAN_CYCLE, &MAIN_SCHED_MEAN_DEPTH]),
    (
        &BACKFILL_TOTAL_CYCLES,
        &[&BACKFILL_MEAN_CYCLE, &BACKFILL_DEPTH_MEAN, &BACKFILL_DEPTH_MEAN_TRY, &BACKFILL_QUEUE_LENGTH_MEAN],
    ),
];

/// Whether sdiag leaves `m` out until there is something to say: a scheduler's mean before
/// its first cycle, cycles per minute before a minute of data.
pub fn omitted_when_empty(m: &Metric) -> bool {
    std::ptr::eq(m, &MAIN_SCHED_CYCLES_PER_MINUTE) || mean_of_nothing(m, |_| None)
}

/// Whether `m` is a mean over no cycle, `value` giving the figures read with it: a mean whose
/// count of cycles is 0 or was not read.
pub fn mean_of_nothing(m: &Metric, value: impl Fn(&'static Metric) -> Option<f64>) -> bool {
    MEANS.iter().any(|(count, means)| {
        means.iter().any(|mean| std::ptr::eq(*mean, m)) && value(count).is_none_or(|n| n <= 0.0)
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Section {
    Header,
    Main,
    Backfill,
    RpcByType,
    PendingRpcs,
    /// A section whose lines carry no metric (exit reasons, RPCs by user, ...).
    Other,
}

const HEADER: &[(&str, &Metric)] = &[
    ("Server thread count", &SERVER_THREAD_COUNT),
    ("Agent queue size", &AGENT_QUEUE_SIZE),
    ("Agent count", &AGENT_COUNT),
    ("Agent thread count", &AGENT_THREAD_COUNT),
    ("DBD Agent queue size", &DBD_AGENT_QUEUE_SIZE),
    ("Jobs submitted", &JOBS_SUBMITTED),
    ("Jobs started", &JOBS_STARTED),
    ("Jobs completed", &JOBS_COMPLETED),
    ("Jobs canceled", &JOBS_CANCELED),
    ("Jobs failed", &JOBS_FAILED),
    ("Jobs pending", &JOBS_PENDING),
    ("Jobs running", &JOBS_RUNNING),
];

const MAIN: &[(&str, &Metric)] = &[
    ("Last cycle", &MAIN_SCHED_LAST_CYCLE),
    ("Max cycle", &MAIN_SCHED_MAX_CYCLE),
    ("Total cycles", &MAIN_SCHED_TOTAL_CYCLES),
    ("Mean cycle", &MAIN_SCHED_MEAN_CYCLE),
    ("Mean depth cycle", &MAIN_SCHED_MEAN_DEPTH),
    ("Cycles per minute", &MAIN_SCHED_CYCLES_PER_MINUTE),
    ("Last queue length", &MAIN_SCHED_LAST_QUEUE_LENGTH),
];

const BACKFILL: &[(&str, &Metric)] = &[
    ("Total backfilled jobs (since last slurm start)", &BACKFILL_JOBS_SINCE_START),
    ("Total backfilled jobs (since last stats cycle start)", &BACKFILL_JOBS_SINCE_CYCLE_START),
    ("Total cycles", &BACKFILL_TOTAL_CYCLES),
    ("Last cycle", &BACKFILL_LAST_CYCLE),
    ("Max cycle", &BACKFILL_MAX_CYCLE),
    ("Mean cycle", &BACKFILL_MEAN_CYCLE),
    ("Last depth cycle", &BACKFILL_LAST_DEPTH),
    ("Last depth cycle (try sched)", &BACKFILL_LAST_DEPTH_TRY),
    ("Depth Mean", &BACKFILL_DEPTH_MEAN),
    ("Depth Mean (try depth)", &BACKFILL_DEPTH_MEAN_TRY),
    ("Last queue length", &BACKFILL_QUEUE_LENGTH),
    ("Queue length mean", &BACKFILL_QUEUE_LENGTH_MEAN),
];

/// Labels known to carry nothing we ship (so they are not reported as unknown).
const IGNORED: &[&str] = &[
    "Job states ts",
    "RPC queue enabled",
    "Total backfilled heterogeneous job components",
    "Last cycle when",
    "Last table size",
    "Mean table size",
    "Table size mean",
    "Latency for 1000 calls to gettimeofday()",
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SdiagError {
    #[error("sdiag output has no statistics (empty or truncated before the first value)")]
    Empty,
    #[error("sdiag --json: {0}")]
    Json(String),
}

/// Parses plain `sdiag` output.
pub fn parse_text(out: &str) -> Result<Sdiag, SdiagError> {
    let mut s = Sdiag::default();
    let mut section = Section::Header;
    for raw in out.lines() {
        let line = raw.trim_end();
        let banner = line.starts_with("sdiag output at") || line.starts_with("Data since");
        if line.trim().is_empty() || line.starts_with('*') || banner {
            continue;
        }
        let indented = raw.starts_with(['\t', ' ']);
        if !indented && let Some(next) = section_of(line) {
            section = next;
            continue;
        }
        match section {
            Section::RpcByType => {
                if let Some(r) = parse_rpc(line) {
                    s.rpcs.push(r);
                }
            }
            Section::PendingRpcs => {
                let total = s.pending_rpcs.get_or_insert(0);
                if let Some(r) = parse_rpc(line) {
                    *total = total.saturating_add(r.count);
                }
            }
            Section::Other => {}
            Section::Header | Section::Main | Section::Backfill => {
                let Some((label, value)) = line.split_once(':') else {
                    s.unknown.push(line.trim().to_owned());
                    continue;
                };
                let label = label.trim();
                let table = match section {
                    Section::Header => HEADER,
                    Section::Main => MAIN,
                    _ => BACKFILL,
                };
                match table.iter().find(|(l, _)| *l == label) {
                    Some((_, m)) => {
                        // A value that is not a number (N/A) is left out, not guessed.
                        if let Some(v) = value.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) {
                            s.values.push((m, v));
                        }
                    }
                    None if IGNORED.contains(&label) => {}
                    None => s.unknown.push(label.to_owned()),
                }
            }
        }
    }
    if s.values.is_empty() {
        return Err(SdiagError::Empty);
    }
    Ok(s)
}

/// A section header (a line not indented that is no `Label: value` of the header part).
fn section_of(line: &str) -> Option<Section> {
    let starts = |p: &str| line.starts_with(p);
    if starts("Main schedule statistics") {
        Some(Section::Main)
    } else if starts("Backfilling stats") {
        Some(Section::Backfill)
    } else if starts("Remote Procedure Call statistics by message type") {
        Some(Section::RpcByType)
    } else if starts("Pending RPC statistics") {
        Some(Section::PendingRpcs)
    } else if starts("Main scheduler exit")
        || starts("Backfill exit")
        || starts("Remote Procedure Call statistics by user")
        || starts("Pending RPCs")
    {
        Some(Section::Other)
    } else if line.ends_with(':') || !line.contains(':') {
        // A header this version added: skip its lines rather than misread them.
        Some(Section::Other)
    } else {
        None
    }
}

/// `\tREQUEST_NODE_INFO   ( 2007) count:1   ave_time:456   total_time:456`
fn parse_rpc(line: &str) -> Option<Rpc> {
    let t = line.trim();
    let name = t.split_whitespace().next()?;
    if !name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
        return None;
    }
    let field = |key: &str| -> Option<u64> {
        let at = t.find(key)? + key.len();
        t[at..].split_whitespace().next()?.parse().ok()
    };
    Some(Rpc {
        message_type: name.to_owned(),
        count: field("count:")?,
        total_time: field("total_time:").unwrap_or(0),
    })
}

/// JSON keys of the statistics object (23.02 on) and the metric each feeds.
const JSON_KEYS: &[(&str, &Metric)] = &[
    ("server_thread_count", &SERVER_THREAD_COUNT),
    ("agent_queue_size", &AGENT_QUEUE_SIZE),
    ("agent_count", &AGENT_COUNT),
    ("agent_thread_count", &AGENT_THREAD_COUNT),
    ("dbd_agent_queue_size", &DBD_AGENT_QUEUE_SIZE),
    ("jobs_submitted", &JOBS_SUBMITTED),
    ("jobs_started", &JOBS_STARTED),
    ("jobs_completed", &JOBS_COMPLETED),
    ("jobs_canceled", &JOBS_CANCELED),
    ("jobs_failed", &JOBS_FAILED),
    ("jobs_pending", &JOBS_PENDING),
    ("jobs_running", &JOBS_RUNNING),
    ("schedule_cycle_last", &MAIN_SCHED_LAST_CYCLE),
    ("schedule_cycle_max", &MAIN_SCHED_MAX_CYCLE),
    ("schedule_cycle_total", &MAIN_SCHED_TOTAL_CYCLES),
    ("schedule_cycle_mean", &MAIN_SCHED_MEAN_CYCLE),
    ("schedule_cycle_mean_depth", &MAIN_SCHED_MEAN_DEPTH),
    ("schedule_cycle_per_minute", &MAIN_SCHED_CYCLES_PER_MINUTE),
    ("schedule_queue_length", &MAIN_SCHED_LAST_QUEUE_LENGTH),
    ("bf_backfilled_jobs", &BACKFILL_JOBS_SINCE_START),
    ("bf_last_backfilled_jobs", &BACKFILL_JOBS_SINCE_CYCLE_START),
    ("bf_cycle_counter", &BACKFILL_TOTAL_CYCLES),
    ("bf_cycle_last", &BACKFILL_LAST_CYCLE),
    ("bf_cycle_max", &BACKFILL_MAX_CYCLE),
    ("bf_cycle_mean", &BACKFILL_MEAN_CYCLE),
    ("bf_last_depth", &BACKFILL_LAST_DEPTH),
    ("bf_last_depth_try", &BACKFILL_LAST_DEPTH_TRY),
    ("bf_depth_mean", &BACKFILL_DEPTH_MEAN),
    ("bf_depth_mean_try", &BACKFILL_DEPTH_MEAN_TRY),
    ("bf_queue_len", &BACKFILL_QUEUE_LENGTH),
    ("bf_queue_len_mean", &BACKFILL_QUEUE_LENGTH_MEAN),
];

/// Parses `sdiag --json` (data_parser v0.0.39 and later).
pub fn parse_json(text: &str) -> Result<Sdiag, SdiagError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| SdiagError::Json(e.to_string()))?;
    let stats = doc.get("statistics").ok_or_else(|| SdiagError::Json("no `statistics` object".into()))?;
    let mut s = Sdiag::default();
    for (key, m) in JSON_KEYS {
        if let Some(v) = stats.get(*key).filter(|v| is_set(v)) {
            s.values.push((m, number(Some(v)) as f64));
        }
    }
    // Cycles per minute: text prints them past a minute of data, JSON 0 before.
    let span = match (stats.get("req_time"), stats.get("req_time_start")) {
        (Some(now), Some(start)) => Some(number(Some(now)).saturating_sub(number(Some(start)))),
        _ => None,
    };
    let too_soon = span.is_some_and(|s| s < 60);
    let per_minute_too_soon = |m: &Metric| too_soon && std::ptr::eq(m, &MAIN_SCHED_CYCLES_PER_MINUTE);
    let left_out: Vec<&Metric> = s
        .values
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| mean_of_nothing(m, |count| s.get(count)) || per_minute_too_soon(m))
        .collect();
    s.values.retain(|(m, _)| !left_out.iter().any(|l| std::ptr::eq(*l, *m)));
    if let Some(list) = stats.get("rpcs_by_message_type").and_then(Value::as_array) {
        for r in list {
            let Some(name) = r.get("message_type").and_then(Value::as_str) else {
                continue;
            };
            s.rpcs.push(Rpc {
                message_type: name.to_owned(),
                count: number(r.get("count")),
                total_time: number(r.get("total_time")),
            });
        }
    }
    if let Some(list) = stats.get("pending_rpcs").and_then(Value::as_array) {
        s.pending_rpcs = Some(list.iter().map(|r| number(r.get("count"))).sum());
    }
    if s.values.is_empty() {
        return Err(SdiagError::Empty);
    }
    Ok(s)
}

/// False for `{"set": false, ...}` (a value slurmctld has not computed yet).
fn is_set(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.get("set").and_then(Value::as_bool).unwrap_or(true),
        Value::Number(_) => true,
        _ => false,
    }
}

#[cfg(test)]
#[path = "sdiag_tests.rs"]
mod tests;
