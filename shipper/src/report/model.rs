//! A job's records combined into one report: per node from its summary (else its samples),
//! then the job: CPU-seconds and cores add up, memory peaks take the largest.

use super::cost::{self, NodeCost};
use serde::Serialize;
use serde_json::Value;
use slurm_cw_catalog::metrics::{
    CPU_USAGE, CPUS_ALLOCATED, GPU_MEMORY_TOTAL, GPU_MEMORY_USED, GPU_SM_ACTIVITY, GPU_UTILIZATION,
    MEMORY_LIMIT, MEMORY_MAX, MEMORY_RSS, MEMORY_USAGE,
};
use slurm_cw_catalog::records::{self as r, kinds};
use std::collections::BTreeMap;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeRow {
    pub node: String,
    /// job_summary or job_sample: where the row's figures come from.
    pub source: String,
    pub samples: f64,
    pub elapsed_seconds: f64,
    pub cpu_seconds: f64,
    pub cores_allocated: f64,
    pub cpu_efficiency_percent: Option<f64>,
    pub memory_peak_bytes: Option<f64>,
    pub memory_requested_bytes: Option<f64>,
    pub gpus: Option<f64>,
    pub gpu_idle_percent: Option<f64>,
    /// The most memory its GPUs here held together, and the memory they have.
    pub gpu_memory_peak_bytes: Option<f64>,
    pub gpu_memory_total_bytes: Option<f64>,
    /// Energy its GPUs here used, in kWh (NVML's counters).
    pub gpu_energy_kwh: Option<f64>,
    /// What the job cost on this node, where the records say.
    pub cost: Option<NodeCost>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuRow {
    pub node: String,
    /// The GPU's index, or `all` where the records hold the job's mean over its GPUs.
    pub gpu: String,
    pub utilization_mean_percent: Option<f64>,
    /// GPM's SM activity, where the GPU has GPM (Hopper and newer).
    pub sm_activity_mean_percent: Option<f64>,
    pub memory_used_peak_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    /// Energy the GPU used for the job, in kWh, from the node's summary.
    pub energy_kwh: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Report {
    pub job_id: String,
    pub cluster: Option<String>,
    pub log_group: String,
    pub user: Option<String>,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub nodes: Option<String>,
    pub state: Option<String>,
    pub elapsed_seconds: Option<f64>,
    /// Records may still arrive: the job runs, or a node has samples and no summary yet, or
    /// Slurm names a node none came from.
    pub incomplete: bool,
    /// Nodes Slurm says the job ran on that no record came from (a node's spool not delivered
    /// yet): its cost is missing from the total.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes_without_records: Vec<String>,
    pub records: usize,
    pub cpu_seconds: f64,
    pub cores_allocated: f64,
    pub cpu_efficiency_percent: Option<f64>,
    pub memory_peak_bytes: Option<f64>,
    pub memory_requested_bytes: Option<f64>,
    pub per_node: Vec<NodeRow>,
    pub gpus: Vec<GpuRow>,
    /// Its figures over time, per node (from the samples).
    pub series: Vec<super::series::Series>,
    /// US dollars, summed over the nodes whose records state a cost.
    pub cost_usd: Option<f64>,
    pub waste_usd: Option<f64>,
    pub advice: Vec<String>,
}

/// A finite number of a record's field.
pub(super) fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

pub(super) fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn max_of(vals: impl Iterator<Item = f64>) -> Option<f64> {
    vals.fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
}

fn mean_of(vals: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = vals.fold((0.0, 0.0), |(s, n), x| (s + x, n + 1.0));
    (n > 0.0).then(|| s / n)
}

/// RFC 3339 `Time` of a record, as seconds (for the span of a node's samples).
pub(super) fn seconds(v: &Value) -> Option<f64> {
    time_seconds(&text(v, r::TIME.name)?)
}

/// An RFC 3339 time in UTC as seconds.
fn time_seconds(t: &str) -> Option<f64> {
    let (whole, frac) = t.trim_end_matches('Z').split_once('.').unwrap_or((t.trim_end_matches('Z'), "0"));
    let s = slurm_cw_formats::slurm::job::parse_local_time(whole)? as f64;
    Some(s + format!("0.{frac}").parse::<f64>().unwrap_or(0.0))
}

fn from_summary(node: &str, s: &Value) -> NodeRow {
    NodeRow {
        node: node.to_owned(),
        source: kinds::JOB_SUMMARY.into(),
        samples: num(s, r::SAMPLES.name).unwrap_or(0.0),
        elapsed_seconds: num(s, r::ELAPSED_SECONDS.name).unwrap_or(0.0),
        cpu_seconds: num(s, r::CPU_SECONDS.name).unwrap_or(0.0),
        cores_allocated: num(s, r::CORES_ALLOCATED.name).unwrap_or(0.0),
        cpu_efficiency_percent: num(s, r::CPU_EFFICIENCY.name),
        memory_peak_bytes: num(s, r::MEMORY_PEAK.name),
        memory_requested_bytes: num(s, r::MEMORY_REQUESTED.name),
        gpus: num(s, r::GPUS.name),
        gpu_idle_percent: num(s, r::GPU_IDLE_PERCENT.name),
        gpu_memory_peak_bytes: num(s, r::GPU_MEMORY_PEAK.name),
        gpu_memory_total_bytes: num(s, r::GPU_MEMORY_TOTAL.name),
        gpu_energy_kwh: num(s, r::GPU_ENERGY_KWH.name),
        cost: cost::of(s),
    }
}

fn from_samples(node: &str, samples: &[&Value]) -> NodeRow {
    let times: Vec<f64> = samples.iter().filter_map(|s| seconds(s)).collect();
    let elapsed = match (max_of(times.iter().copied()), max_of(times.iter().map(|t| -t))) {
        (Some(last), Some(first)) => last + first,
        _ => 0.0,
    };
    let usage = mean_of(samples.iter().filter_map(|s| num(s, CPU_USAGE.name)));
    let cores = max_of(samples.iter().filter_map(|s| num(s, CPUS_ALLOCATED.name))).unwrap_or(0.0);
    let peak = max_of(
        samples
            .iter()
            .flat_map(|s| [MEMORY_MAX.name, MEMORY_USAGE.name, MEMORY_RSS.name].map(|k| num(s, k)))
            .flatten(),
    );
    // An unlimited cgroup reads as a huge limit: no request.
    let limit =
        max_of(samples.iter().filter_map(|s| num(s, MEMORY_LIMIT.name))).and_then(crate::sample::limited);
    NodeRow {
        node: node.to_owned(),
        source: kinds::JOB_SAMPLE.into(),
        samples: samples.iter().map(|s| num(s, r::SAMPLES.name).unwrap_or(1.0)).sum(),
        elapsed_seconds: elapsed,
        cpu_seconds: usage.unwrap_or(0.0) * elapsed,
        cores_allocated: cores,
        cpu_efficiency_percent: usage.filter(|_| cores > 0.0).map(|u| u / cores * 100.0),
        memory_peak_bytes: peak,
        memory_requested_bytes: limit,
        gpus: None,
        gpu_idle_percent: None,
        gpu_memory_peak_bytes: None,
        gpu_memory_total_bytes: None,
        gpu_energy_kwh: None,
        cost: cost::of_samples(samples),
    }
}

/// A GPU figure of a record by GPU: each GPU's from `PerGpu` (a job on several GPUs of the
/// node), else the job's one value over its GPUs, as `all`.
pub(super) fn by_gpu(rec: &Value, key: &str) -> Vec<(String, f64)> {
    match rec.get(r::PER_GPU.name) {
        Some(Value::Object(each)) => {
            each.iter().filter_map(|(gpu, f)| Some((gpu.clone(), num(f, key)?))).collect()
        }
        _ => num(rec, key).map(|v| ("all".to_owned(), v)).into_iter().collect(),
    }
}

/// Per GPU (or per node where the records keep the job's mean): utilisation and SM activity
/// means, memory peak of total, and energy from the summary.
fn gpu_rows(node: &str, samples: &[&Value], summary: Option<&Value>) -> Vec<GpuRow> {
    const KEYS: [&str; 4] =
        [GPU_UTILIZATION.name, GPU_SM_ACTIVITY.name, GPU_MEMORY_USED.name, GPU_MEMORY_TOTAL.name];
    // GPU -> each figure's values, in KEYS' order.
    let mut by: BTreeMap<String, [Vec<f64>; 4]> = BTreeMap::new();
    for s in samples {
        for (k, key) in KEYS.iter().enumerate() {
            for (gpu, v) in by_gpu(s, key) {
                by.entry(gpu).or_default()[k].push(v);
            }
        }
    }
    let energy: BTreeMap<String, f64> =
        summary.map(|s| by_gpu(s, r::GPU_ENERGY_KWH.name).into_iter().collect()).unwrap_or_default();
    for gpu in energy.keys() {
        by.entry(gpu.clone()).or_default();
    }
    by.into_iter()
        .filter(|(g, f)| !f[0].is_empty() || !f[2].is_empty() || energy.contains_key(g))
        .map(|(g, f)| GpuRow {
            energy_kwh: energy.get(&g).copied(),
            node: node.to_owned(),
            gpu: g,
            utilization_mean_percent: mean_of(f[0].iter().copied()),
            sm_activity_mean_percent: mean_of(f[1].iter().copied()),
            memory_used_peak_bytes: max_of(f[2].iter().copied()),
            memory_total_bytes: max_of(f[3].iter().copied()),
        })
        .collect()
}

/// A node's records by run. A job Slurm requeued onto a node of the same name (a Spot node
/// replaced) runs there once per Slurm start, which its samples and summaries carry (a run cut
/// short, its node reclaimed, has samples alone); a record goes to its run by its start, else
/// to the latest run started by its time. A later start with records of the earlier one after
/// it is the same run, its start moved (a cloud node's power up: "Resetting start time for node
/// power up"; the daemon asks Slurm again hourly, so samples carry the old start meanwhile), as
/// the daemon itself decides (`Job::new_run`). One run: no label; a run's label is its latest
/// start.
fn runs(recs: Vec<&Value>) -> Vec<(Option<String>, Vec<&Value>)> {
    let mut starts: Vec<(f64, String)> = recs
        .iter()
        .filter_map(|v| text(v, r::SLURM_START.name))
        .filter_map(|s| Some((time_seconds(&s)?, s)))
        .collect();
    starts.sort_by(|a, b| a.0.total_cmp(&b.0));
    starts.dedup_by(|a, b| a.1 == b.1);
    // The latest record time of each start.
    let last_at = |start: &str| {
        recs.iter()
            .filter(|v| text(v, r::SLURM_START.name).as_deref() == Some(start))
            .filter_map(|v| seconds(v))
            .reduce(f64::max)
    };
    // Each start's run: a new one where every record of the run so far is before it.
    let mut run_of: Vec<usize> = Vec::with_capacity(starts.len());
    let mut run_last = f64::NEG_INFINITY;
    for (i, (at, s)) in starts.iter().enumerate() {
        let same = i > 0 && run_last >= *at;
        let run = if same { run_of[i - 1] } else { run_of.last().map_or(0, |r| r + 1) };
        if !same {
            run_last = f64::NEG_INFINITY;
        }
        run_last = run_last.max(last_at(s).unwrap_or(f64::NEG_INFINITY));
        run_of.push(run);
    }
    let runs = run_of.last().map_or(0, |r| r + 1);
    if runs < 2 {
        return vec![(None, recs)];
    }
    let mut out: Vec<(Option<String>, Vec<&Value>)> = vec![(None, Vec::new()); runs];
    for (i, (_, s)) in starts.iter().enumerate() {
        out[run_of[i]].0 = Some(s.clone());
    }
    for v in recs {
        let by_start = text(v, r::SLURM_START.name).and_then(|s| starts.iter().position(|(_, x)| *x == s));
        let at = by_start.unwrap_or_else(|| {
            let t = seconds(v).unwrap_or(f64::NEG_INFINITY);
            starts.iter().rposition(|(s, _)| *s <= t).unwrap_or(0)
        });
        out[run_of[at]].1.push(v);
    }
    out
}

/// The nodes of Slurm's hostlist `list` (the first 4,096) that no row of `rep` came from;
/// none where no row's node is in it at all (the daemons' `node_name` is not Slurm's name for
/// the node, docs/node-role.md): the names cannot be matched, not every node missing.
pub fn missing_nodes(rep: &Report, list: &str) -> Vec<String> {
    let seen: std::collections::HashSet<&str> =
        rep.per_node.iter().map(|n| n.node.split(" (run from ").next().unwrap_or(&n.node)).collect();
    let names = slurm_cw_formats::slurm::job::hostlist_names(list, 4096);
    if !names.iter().any(|n| seen.contains(n.as_str())) {
        return Vec::new();
    }
    names.into_iter().filter(|n| !seen.contains(n.as_str())).collect()
}

/// The report of `records` (this job's samples and summaries, any order).
pub fn combine(job: &str, records: &[Value]) -> Report {
    let mut per_node: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for rec in records {
        let node = text(rec, r::NODE_NAME.name).unwrap_or_else(|| "unknown".into());
        per_node.entry(node).or_default().push(rec);
    }
    // (node, its row's name, samples, the latest summary) by node and run.
    let mut rows: Vec<(String, String, Vec<&Value>, Option<&Value>)> = Vec::new();
    for (node, recs) in per_node {
        for (run, recs) in runs(recs) {
            let label = run.map_or_else(|| node.clone(), |start| format!("{node} (run from {start})"));
            let (mut samples, mut summary) = (Vec::new(), None::<&Value>);
            for rec in recs {
                match text(rec, r::TYPE.name).as_deref() {
                    // Summaries of a run on a node share a RecordId; the latest wins.
                    Some(kinds::JOB_SUMMARY) => {
                        if summary
                            .is_none_or(|old| text(old, r::LAST_SEEN.name) <= text(rec, r::LAST_SEEN.name))
                        {
                            summary = Some(rec);
                        }
                    }
                    _ => samples.push(rec),
                }
            }
            // A summary a TaskEpilog wrote at the end of a step, and samples after it whose
            // cost went on (the job ran more steps; its node went before its end): the
            // samples are the newer word.
            let newer = cost::of_samples(&samples).map(|c| c.usd);
            if let (Some(s), Some(newer)) = (summary, newer)
                && cost::of(s).is_some_and(|c| newer > c.usd * (1.0 + 1e-6) + 1e-9)
            {
                summary = None;
            }
            rows.push((node.clone(), label, samples, summary));
        }
    }
    let mut rep = Report { job_id: job.to_owned(), records: records.len(), ..Report::default() };
    let first = |key: &str| records.iter().find_map(|v| text(v, key)).filter(|s| s != "unknown");
    rep.series = super::series::of(records);
    rep.user = first(r::USER.name);
    rep.account = first(r::ACCOUNT.name);
    rep.partition = first(r::PARTITION.name);
    // Cores held on a node: the most of its runs (one run follows another).
    let mut cores_on: BTreeMap<&str, f64> = BTreeMap::new();
    for (node, label, samples, summary) in &rows {
        let row = match summary {
            Some(s) => from_summary(label, s),
            None => {
                rep.incomplete = true;
                from_samples(label, samples)
            }
        };
        let most = cores_on.entry(node).or_default();
        *most = most.max(row.cores_allocated);
        rep.gpus.extend(gpu_rows(label, samples, *summary));
        rep.per_node.push(row);
    }
    rep.cores_allocated = cores_on.values().sum();
    let rows = &rep.per_node;
    rep.cpu_seconds = rows.iter().map(|n| n.cpu_seconds).sum();
    let core_seconds: f64 = rows.iter().map(|n| n.cores_allocated * n.elapsed_seconds).sum();
    // Each node's own efficiency (its CPU rate over the time it was seen), weighted by its
    // core-seconds: a node's CpuSeconds is its cgroup's whole count, its elapsed time only what
    // the daemon saw (one restarted 9 h into a 10 h job at 50 % made 500 %).
    let own: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|n| Some((n.cpu_efficiency_percent?, n.cores_allocated * n.elapsed_seconds)))
        .collect();
    let own_weight: f64 = own.iter().map(|(_, w)| w).sum();
    rep.cpu_efficiency_percent = if own.len() == rows.len() && own_weight > 0.0 {
        Some(own.iter().map(|(e, w)| e * w).sum::<f64>() / own_weight)
    } else if core_seconds > 0.0 {
        Some(rep.cpu_seconds / core_seconds * 100.0)
    } else {
        // Too short for a span: the per-node efficiencies, weighted by cores.
        let w: Vec<(f64, f64)> =
            rows.iter().filter_map(|n| Some((n.cpu_efficiency_percent?, n.cores_allocated))).collect();
        let cores: f64 = w.iter().map(|(_, c)| c).sum();
        (cores > 0.0).then(|| w.iter().map(|(e, c)| e * c).sum::<f64>() / cores)
    };
    rep.memory_peak_bytes = max_of(rows.iter().filter_map(|n| n.memory_peak_bytes));
    rep.memory_requested_bytes = max_of(rows.iter().filter_map(|n| n.memory_requested_bytes));
    rep.elapsed_seconds = max_of(rows.iter().map(|n| n.elapsed_seconds));
    (rep.cost_usd, rep.waste_usd) = cost::total(rows.iter().map(|n| &n.cost));
    rep
}

/// Short advice where the numbers call for it.
pub fn advise(rep: &Report) -> Vec<String> {
    let mut out = Vec::new();
    // Per node: `--mem` is a per-node request.
    if let (Some(peak), Some(req)) = (rep.memory_peak_bytes, rep.memory_requested_bytes)
        && req > 0.0
    {
        if peak < req * 0.5 && req - peak > 0.5 * GIB {
            let want = ((peak * 1.2) / GIB).ceil().max(1.0);
            out.push(format!(
                "peak memory {} of {} requested: `--mem={want}G` would do",
                bytes(peak),
                bytes(req)
            ));
        } else if peak >= req * 0.95 {
            out.push(format!(
                "peak memory {} reached {:.0}% of the {} requested: the job is close to being killed for memory; ask for more",
                bytes(peak),
                peak / req * 100.0,
                bytes(req)
            ));
        }
    }
    let cores = max_of(rep.per_node.iter().map(|n| n.cores_allocated)).unwrap_or(0.0);
    if let Some(eff) = rep.cpu_efficiency_percent
        && eff < 50.0
        && cores >= 2.0
        && !rep.incomplete_too_short()
    {
        let want = (cores * eff / 100.0).ceil().max(1.0);
        out.push(format!("CPU efficiency {eff:.0}% of {cores:.0} cores: try `-c {want:.0}`"));
    }
    if let Some(idle) = max_of(rep.per_node.iter().filter_map(|n| n.gpu_idle_percent))
        && idle >= 50.0
    {
        out.push(format!("GPUs idle for {idle:.0} % of the job: ask for fewer GPUs, or none"));
    }
    // The node whose GPUs' memory the job needed least of.
    let gpu_memory = rep.per_node.iter().filter_map(|n| {
        let (peak, total) = (n.gpu_memory_peak_bytes?, n.gpu_memory_total_bytes?);
        (total > 0.0).then_some((peak, total))
    });
    if let Some((peak, total)) = gpu_memory.min_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))
        && peak < total * 0.25
        && !rep.incomplete_too_short()
    {
        out.push(format!(
            "GPU memory peaked at {} of the GPUs' {} ({:.0}%): a smaller GPU, a MIG instance or a shard would do",
            bytes(peak),
            bytes(total),
            peak / total * 100.0
        ));
    }
    out
}

impl Report {
    /// Nothing measured over time yet: no advice on CPU from it.
    fn incomplete_too_short(&self) -> bool {
        self.elapsed_seconds.unwrap_or(0.0) <= 0.0 && self.cpu_efficiency_percent.is_none()
    }
}

/// `3.1 GB` style (GiB and MiB, as Slurm's `--mem` counts).
pub fn bytes(b: f64) -> String {
    if b >= GIB { format!("{:.1} GiB", b / GIB) } else { format!("{:.0} MiB", b / (1024.0 * 1024.0)) }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
