//! The CloudWatch dashboard, generated from the catalog into
//! `terraform/dashboards/cluster.json.tftpl` (a Terraform template: `${cluster_name}`,
//! `${namespace}` and `${region}` are filled in at deploy time), and the widgets over AWS PCS's
//! vended logs into `terraform/dashboards/pcs.json.tftpl`.
//!
//! Series whose dimension values are not known in advance (states, reasons, partitions, jobs)
//! are drawn with SEARCH expressions; the per-job section follows the dashboard's `JobId`
//! variable.

use crate::metrics::*;
use crate::{Kind, Metric, dims};
use serde_json::{Value, json};

mod pcs;
pub use pcs::pcs_widgets;

/// Replaced by the dashboard's JobId variable in every widget.
pub const JOB_PATTERN: &str = "JOBID";

const NS: &str = "${namespace}";
const CLUSTER: &str = "${cluster_name}";
const REGION: &str = "${region}";
/// The job log group, filled in by Terraform.
const JOB_LOG_GROUP: &str = "${job_log_group}";

/// The scheduler charts drawn from the head's `scheduler_sample` records with Logs Insights
/// rather than from metrics: no default alarm watches them, and as metrics they would be about
/// 15 series billed every hour the cluster works (docs/cost.md). RPCs by type are a table
/// beside them ([`RPC_RATE`]).
const SCHEDULER_RECORD_CHARTS: [(&str, &[&Metric]); 4] = [
    (
        "Scheduler cycles (microseconds)",
        &[&MAIN_SCHED_LAST_CYCLE, &MAIN_SCHED_MEAN_CYCLE, &BACKFILL_MEAN_CYCLE],
    ),
    (
        "Jobs per 5 minutes",
        &[
            &JOBS_SUBMITTED_RATE,
            &JOBS_STARTED_RATE,
            &JOBS_COMPLETED_RATE,
            &JOBS_FAILED_RATE,
            &JOBS_CANCELED_RATE,
            &BACKFILL_JOBS_RATE,
        ],
    ),
    ("slurmctld load", &[&SERVER_THREAD_COUNT, &AGENT_QUEUE_SIZE, &DBD_AGENT_QUEUE_SIZE, &PENDING_RPCS]),
    ("slurmctld response time (milliseconds)", &[&SLURMCTLD_RESPONSE_TIME]),
];

/// The counts by state the dashboard draws from the head's `scheduler_sample` records: a state
/// no default alarm watches and no metric chart draws is in the record only
/// (`views::state_in_record_only`); pending jobs, drained and draining nodes stay metrics too.
pub const RECORD_BY_STATE: [&Metric; 2] = [&NODE_COUNT, &JOB_COUNT];

/// Every state a count of [`RECORD_BY_STATE`] can have (its chart draws each); none for
/// another metric.
pub fn states_of(m: &Metric) -> Vec<&'static str> {
    if std::ptr::eq(m, &NODE_COUNT) {
        dims::NODE_STATES.to_vec()
    } else if std::ptr::eq(m, &JOB_COUNT) {
        dims::job_states().collect()
    } else {
        Vec::new()
    }
}

/// Every figure the dashboard reads from the head's `scheduler_sample` records: the record
/// must carry each (the catalog's `views::scheduler_detail`).
pub fn record_figures() -> Vec<&'static Metric> {
    let mut out: Vec<&'static Metric> =
        SCHEDULER_RECORD_CHARTS.iter().flat_map(|(_, f)| f.iter().copied()).collect();
    out.push(&RPC_RATE);
    out
}

/// A SEARCH over `metric` with these dimension names, in this cluster, plus `filter` terms.
fn search(m: &Metric, dims: &[&str], filter: &str, stat: &str) -> Value {
    search_every(m, dims, filter, stat, 60)
}

/// [`search`] over periods of `period` seconds.
fn search_every(m: &Metric, dims: &[&str], filter: &str, stat: &str, period: u32) -> Value {
    let mut names: Vec<&str> = dims.to_vec();
    names.push(dims::CLUSTER_NAME);
    names.sort_unstable();
    let schema = format!("{{{NS},{}}}", names.join(","));
    let expr = format!(
        "SEARCH('{schema} MetricName=\"{}\" ClusterName=\"{CLUSTER}\"{filter}', '{stat}', {period})",
        m.name
    );
    json!([{ "expression": expr, "label": "", "id": format!("s{}", m.name.to_lowercase()) }])
}

/// A plain metric line with the cluster dimension and `extra` dimensions.
fn line(m: &Metric, extra: &[(&str, &str)], stat: &str) -> Value {
    let mut v = vec![json!(NS), json!(m.name), json!(dims::CLUSTER_NAME), json!(CLUSTER)];
    for (k, val) in extra {
        v.push(json!(k));
        v.push(json!(val));
    }
    v.push(json!({ "stat": stat, "label": m.name }));
    Value::Array(v)
}

/// A plain metric line with the cluster dimension and `extra` dimensions, its own label and an
/// id that expressions name.
fn line_id(m: &Metric, extra: &[(&str, &str)], stat: &str, id: &str, label: &str) -> Value {
    let mut v = line(m, extra, stat);
    if let Some(Value::Object(opts)) = v.as_array_mut().and_then(|a| a.last_mut()) {
        opts.insert("id".into(), json!(id));
        opts.insert("label".into(), json!(label));
    }
    v
}

/// A metric math expression over lines with ids.
fn expression(expr: &str, label: &str, id: &str) -> Value {
    json!([{ "expression": expr, "label": label, "id": id }])
}

/// The drain view: nodes drained (idle, no jobs left) plus draining (jobs still running), the
/// nodes an administrator took out of service, with the two parts beside their sum.
fn drain_view() -> Vec<Value> {
    vec![
        expression("FILL(drained, 0) + FILL(draining, 0)", "drain (drained + draining)", "drain"),
        line_id(&NODE_COUNT, &[(dims::STATE, "drained")], "Maximum", "drained", "drained"),
        line_id(&NODE_COUNT, &[(dims::STATE, "draining")], "Maximum", "draining", "draining"),
    ]
}

struct Layout {
    widgets: Vec<Value>,
    x: u32,
    y: u32,
}

impl Layout {
    fn header(&mut self, text: &str) {
        if self.x > 0 {
            self.x = 0;
            self.y += 6;
        }
        self.widgets.push(json!({
            "type": "text", "x": 0, "y": self.y, "width": 24, "height": 1,
            "properties": { "markdown": format!("## {text}") }
        }));
        self.y += 1;
    }

    /// A Logs Insights table over the job log group.
    fn query(&mut self, title: &str, query: &str) {
        self.query_over(JOB_LOG_GROUP, title, query);
    }

    /// A Logs Insights table over `group`.
    fn query_over(&mut self, group: &str, title: &str, query: &str) {
        self.x = 0;
        self.widgets.push(json!({
            "type": "log", "x": 0, "y": self.y, "width": 24, "height": 6,
            "properties": {
                "title": title, "region": REGION, "view": "table",
                "query": format!("SOURCE '{group}' | {query}")
            }
        }));
        self.y += 6;
    }

    /// A Logs Insights chart over the head's `scheduler_sample` records: each figure by five
    /// minutes (a record is one flush, two minutes by default), an increase as its total, a
    /// level as its largest.
    fn record_chart(&mut self, title: &str, figures: &[&Metric]) {
        let stats: Vec<String> = figures
            .iter()
            .map(|m| format!("{}({})", if m.kind == Kind::Increase { "sum" } else { "max" }, m.name))
            .collect();
        self.record_stats(title, &stats);
    }

    /// A Logs Insights chart over the head's `scheduler_sample` records: `m` in each of its
    /// states (the record's `{"JobCount": {"running": 3}}`) by five minutes, its largest.
    fn record_states(&mut self, title: &str, m: &Metric) {
        let stats: Vec<String> = states_of(m).iter().map(|s| format!("max({}.{s}) as {s}", m.name)).collect();
        self.record_stats(title, &stats);
    }

    /// A Logs Insights line chart of `stats` over the head's records, by five minutes.
    fn record_stats(&mut self, title: &str, stats: &[String]) {
        let query = format!(
            "filter {} = '{}'\n| stats {} by bin(5m)",
            crate::records::TYPE.name,
            crate::records::kinds::SCHEDULER_SAMPLE,
            stats.join(", ")
        );
        self.place(json!({
            "type": "log", "width": 8, "height": 6,
            "properties": {
                "title": title, "region": REGION, "view": "timeSeries", "stacked": false,
                "query": format!("SOURCE '{JOB_LOG_GROUP}' | {query}")
            }
        }));
    }

    /// A Logs Insights table, a third of the row wide, over the job log group.
    fn record_table(&mut self, title: &str, query: &str) {
        self.place(json!({
            "type": "log", "width": 8, "height": 6,
            "properties": {
                "title": title, "region": REGION, "view": "table",
                "query": format!("SOURCE '{JOB_LOG_GROUP}' | {query}")
            }
        }));
    }

    /// Puts a widget a third of the row wide at the next free place.
    fn place(&mut self, mut widget: Value) {
        if self.x + 8 > 24 {
            self.x = 0;
            self.y += 6;
        }
        widget["x"] = json!(self.x);
        widget["y"] = json!(self.y);
        self.widgets.push(widget);
        self.x += 8;
    }

    /// The first free row below every widget.
    fn bottom(&self) -> u32 {
        if self.x > 0 { self.y + 6 } else { self.y }
    }

    fn chart(&mut self, title: &str, metrics: Vec<Value>, stacked: bool) {
        self.place(json!({
            "type": "metric", "width": 8, "height": 6,
            "properties": {
                "title": title, "region": REGION, "view": "timeSeries", "stacked": stacked,
                "period": 60, "metrics": metrics
            }
        }));
    }
}

/// The dashboard body (JSON text with the template's placeholders).
pub fn cluster_dashboard() -> String {
    let l = cluster_layout();
    let body = json!({
        "variables": [{
            "type": "pattern",
            "pattern": JOB_PATTERN,
            "inputType": "input",
            "id": "JobId",
            "label": "JobId",
            "defaultValue": JOB_PATTERN,
            "visible": true
        }],
        "widgets": l.widgets
    });
    let mut s = serde_json::to_string_pretty(&body).unwrap_or_default();
    s.push('\n');
    s
}

fn cluster_layout() -> Layout {
    let mut l = Layout { widgets: Vec::new(), x: 0, y: 0 };

    l.header("Cluster ${cluster_name}: nodes and jobs");
    l.record_states("Nodes by state (from the head's records)", &NODE_COUNT);
    l.chart("Nodes out of service: drained + draining", drain_view(), false);
    l.record_states("Jobs by state (from the head's records)", &JOB_COUNT);
    l.chart("Pending jobs by reason", vec![search(&PENDING_JOB_COUNT, &[dims::REASON], "", "Maximum")], true);
    l.chart(
        "CPU and GPU utilisation (allocated / total, %)",
        vec![line(&CLUSTER_CPU_UTILIZATION, &[], "Average"), line(&CLUSTER_GPU_UTILIZATION, &[], "Average")],
        false,
    );
    l.chart(
        "Autoscaling signal by partition",
        vec![search(&BACKLOG_NODES, &[dims::PARTITION], "", "Maximum")],
        false,
    );
    l.chart(
        "Demand waiting for nodes",
        vec![
            line(&PENDING_CPUS, &[], "Maximum"),
            line(&PENDING_GPUS, &[], "Maximum"),
            line(&PENDING_NODES, &[], "Maximum"),
        ],
        false,
    );

    l.header("Scheduler (slurmctld up and the backfill cycle, which alarms watch, as metrics; the rest from the head's scheduler_sample records)");
    l.chart("slurmctld up (1 answering, 0 not)", vec![line(&SLURMCTLD_UP, &[], "Minimum")], false);
    l.chart("Backfill cycle, last (microseconds)", vec![line(&BACKFILL_LAST_CYCLE, &[], "Maximum")], false);
    for (title, figures) in SCHEDULER_RECORD_CHARTS {
        l.record_chart(title, figures);
    }
    l.record_table(
        "RPCs by type, each record (one flush: 2 minutes by default), newest first",
        &format!(
            "parse @message '\"{rpc}\":{{*}}' as {rpc}\n| filter {ty} = '{kind}' and ispresent({rpc})\n| sort @timestamp desc\n| limit 20\n| display @timestamp, {rpc}",
            rpc = RPC_RATE.name, ty = crate::records::TYPE.name, kind = crate::records::kinds::SCHEDULER_SAMPLE,
        ),
    );

    l.header("Job population (across jobs, per cluster; per partition and account in CloudWatch)");
    l.chart(
        "Jobs flagged by the nodes",
        vec![
            line(&IDLE_GPU_JOBS, &[], "Sum"),
            line(&LOW_CPU_EFFICIENCY_JOBS, &[], "Sum"),
            line(&MEMORY_OVER_REQUESTED_JOBS, &[], "Sum"),
            line(&JOB_ALLOCATIONS, &[], "Sum"),
        ],
        false,
    );
    l.chart(
        "Job CPU efficiency (%): median and 10th percentile",
        vec![line(&JOB_CPU_EFFICIENCY, &[], "p50"), line(&JOB_CPU_EFFICIENCY, &[], "p10")],
        false,
    );
    l.chart(
        "Job peak memory over request (%): median and 90th percentile",
        vec![line(&JOB_MEMORY_PEAK_SHARE, &[], "p50"), line(&JOB_MEMORY_PEAK_SHARE, &[], "p90")],
        false,
    );
    l.chart(
        "GPU utilisation of GPU jobs (%) and idle GPUs",
        vec![
            line(&JOB_GPU_UTILIZATION, &[], "p50"),
            line(&JOB_GPUS_IDLE, &[], "Sum"),
            line(&GPU_HOURS_IDLE, &[], "Sum"),
        ],
        false,
    );
    l.chart(
        "Cluster CPU efficiency by partition (%)",
        vec![search(&CLUSTER_CPU_EFFICIENCY, &[dims::PARTITION], "", "Average")],
        false,
    );
    l.chart(
        "CPU efficiency by account (%), median",
        vec![search(&JOB_CPU_EFFICIENCY, &[dims::ACCOUNT], "", "p50")],
        false,
    );

    l.header("What jobs cost (US dollars an hour: price x share of the node; waste by the rule, see README *What jobs cost*)");
    l.chart(
        "Spend by account ($ an hour)",
        vec![search_every(&JOB_COST, &[dims::ACCOUNT], "", "Sum", 3600)],
        true,
    );
    l.chart(
        "Spend by partition ($ an hour)",
        vec![search_every(&JOB_COST, &[dims::PARTITION], "", "Sum", 3600)],
        true,
    );
    l.chart(
        "Waste by account ($ an hour)",
        vec![search_every(&JOB_WASTE, &[dims::ACCOUNT], "", "Sum", 3600)],
        true,
    );

    l.header(&format!("Job records (CloudWatch Logs Insights over {JOB_LOG_GROUP})"));
    let f = |field: &crate::records::Field| field.name;
    use crate::records::{self as r, kinds};
    l.query(
        "Most expensive jobs in the time range (set it to a day): cost and waste over their nodes",
        // A node may summarize a job's run twice (at its first TaskEpilog and when its cgroup
        // goes), each summary the whole run so far, under one RecordId (a requeued run has its
        // own): the latest of each, then the sum over nodes and runs.
        &format!(
            "filter {ty} = '{summary}' and ispresent({cost})\n| stats latest({cost}) as node_cost, latest({waste}) as node_waste by {id}, {job}, {user}, {account}, {partition}\n| stats sum(node_cost) as cost_usd, sum(node_waste) as waste_usd, count(*) as node_runs by {job}, {user}, {account}, {partition}\n| sort cost_usd desc\n| limit 20",
            ty = f(&r::TYPE), summary = kinds::JOB_SUMMARY, cost = f(&r::COST_USD), waste = f(&r::WASTE_USD),
            id = f(&r::RECORD_ID), job = f(&r::JOB_ID), user = f(&r::USER), account = f(&r::ACCOUNT),
            partition = f(&r::PARTITION),
        ),
    );
    l.query(
        "Top jobs by peak memory (summaries)",
        &format!(
            "fields {job}, {user}, {account}, {node}, {peak}, {req}, {share}\n| filter {ty} = '{summary}'\n| sort {peak} desc\n| limit 20",
            job = f(&r::JOB_ID), user = f(&r::USER), account = f(&r::ACCOUNT), node = f(&r::NODE_NAME),
            peak = f(&r::MEMORY_PEAK), req = f(&r::MEMORY_REQUESTED), share = f(&r::MEMORY_PEAK_PERCENT),
            ty = f(&r::TYPE), summary = kinds::JOB_SUMMARY,
        ),
    );
    l.query(
        "Lowest CPU efficiency (summaries of jobs over 10 minutes)",
        &format!(
            "fields {job}, {user}, {account}, {eff}, {cores}, {elapsed}\n| filter {ty} = '{summary}' and {elapsed} >= 600\n| sort {eff} asc\n| limit 20",
            job = f(&r::JOB_ID), user = f(&r::USER), account = f(&r::ACCOUNT), eff = f(&r::CPU_EFFICIENCY),
            cores = f(&r::CORES_ALLOCATED), elapsed = f(&r::ELAPSED_SECONDS), ty = f(&r::TYPE),
            summary = kinds::JOB_SUMMARY,
        ),
    );
    l.query(
        "Findings: idle GPUs, low efficiency, memory over-requested",
        &format!(
            "fields @timestamp, {finding}, {job}, {user}, {account}, {node}, {detail}\n| filter {ty} = '{kind}'\n| sort @timestamp desc\n| limit 50",
            finding = f(&r::FINDING), job = f(&r::JOB_ID), user = f(&r::USER), account = f(&r::ACCOUNT),
            node = f(&r::NODE_NAME), detail = f(&r::DETAIL), ty = f(&r::TYPE), kind = kinds::JOB_FINDING,
        ),
    );
    l.query(
        &format!("Job {JOB_PATTERN} over time (set the JobId variable above)"),
        &format!(
            "fields @timestamp, {node}, {rss}, {cpu}, {util}, {procs}\n| filter {ty} = '{sample}' and {job} = '{JOB_PATTERN}'\n| sort @timestamp asc",
            node = f(&r::NODE_NAME), rss = MEMORY_RSS.name, cpu = CPU_USAGE.name, util = CPU_UTILIZATION.name,
            procs = PROCESS_COUNT.name, ty = f(&r::TYPE), sample = kinds::JOB_SAMPLE, job = f(&r::JOB_ID),
        ),
    );

    l.header("Shippers");
    l.chart("Datums dropped (all nodes)", vec![line(&SHIPPER_DATUMS_DROPPED, &[], "Sum")], false);
    l.chart(
        "Backlog in the spool (largest node, bytes) and job records written",
        vec![line(&SHIPPER_SPOOL_BYTES, &[], "Maximum"), line(&JOB_RECORDS, &[], "Sum")],
        false,
    );
    l.chart(
        "Shipper memory, largest and smallest node (bytes)",
        vec![line(&SHIPPER_MEMORY_RSS, &[], "Maximum"), line(&SHIPPER_MEMORY_RSS, &[], "Minimum")],
        false,
    );
    l.chart(
        "Collection time by collector (ms)",
        vec![search(&SHIPPER_COLLECTION_DURATION, &[dims::COLLECTOR], "", "Maximum")],
        false,
    );
    l
}

/// Every metric name the dashboard draws (from its lines and its SEARCH expressions).
pub fn referenced_metrics(dashboard_json: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(v) = serde_json::from_str::<Value>(dashboard_json) else { return out };
    let widgets = v.get("widgets").and_then(Value::as_array).cloned().unwrap_or_default();
    for w in widgets {
        let metrics = w.pointer("/properties/metrics").and_then(Value::as_array).cloned().unwrap_or_default();
        for m in metrics {
            let Some(parts) = m.as_array() else { continue };
            for p in parts {
                if let Some(expr) = p.get("expression").and_then(Value::as_str)
                    && let Some(rest) = expr.split("MetricName=\"").nth(1)
                {
                    out.push(rest.split('"').next().unwrap_or("").to_owned());
                }
            }
            if let (Some(Value::String(_ns)), Some(Value::String(name))) = (parts.first(), parts.get(1)) {
                out.push(name.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
#[path = "dashboard_tests.rs"]
mod tests;
