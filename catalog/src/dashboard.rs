//! The CloudWatch dashboard, generated from the catalog into
//! `terraform/dashboards/cluster.json.tftpl` (a Terraform template: `${cluster_name}`,
//! `${namespace}` and `${region}` are filled in at deploy time).
//!
//! Series whose dimension values are not known in advance (states, reasons, partitions, jobs)
//! are drawn with SEARCH expressions; the per-job section follows the dashboard's `JobId`
//! variable.

use crate::metrics::*;
use crate::{Metric, dims};
use serde_json::{Value, json};

/// Replaced by the dashboard's JobId variable in every widget.
pub const JOB_PATTERN: &str = "JOBID";

const NS: &str = "${namespace}";
const CLUSTER: &str = "${cluster_name}";
const REGION: &str = "${region}";

/// A SEARCH over `metric` with these dimension names, in this cluster, plus `filter` terms.
fn search(m: &Metric, dims: &[&str], filter: &str, stat: &str) -> Value {
    let mut names: Vec<&str> = dims.to_vec();
    names.push(dims::CLUSTER_NAME);
    names.sort_unstable();
    let schema = format!("{{{NS},{}}}", names.join(","));
    let expr = format!(
        "SEARCH('{schema} MetricName=\"{}\" ClusterName=\"{CLUSTER}\"{filter}', '{stat}', 60)",
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

    fn chart(&mut self, title: &str, metrics: Vec<Value>, stacked: bool) {
        if self.x + 8 > 24 {
            self.x = 0;
            self.y += 6;
        }
        self.widgets.push(json!({
            "type": "metric", "x": self.x, "y": self.y, "width": 8, "height": 6,
            "properties": {
                "title": title, "region": REGION, "view": "timeSeries", "stacked": stacked,
                "period": 60, "metrics": metrics
            }
        }));
        self.x += 8;
    }
}

/// The dashboard body (JSON text with the template's placeholders).
pub fn cluster_dashboard() -> String {
    let mut l = Layout { widgets: Vec::new(), x: 0, y: 0 };
    let job = format!(" JobId=\"{JOB_PATTERN}\"");

    l.header("Cluster ${cluster_name}: nodes and jobs");
    l.chart("Nodes by state", vec![search(&NODE_COUNT, &[dims::STATE], "", "Maximum")], true);
    l.chart("Jobs by state", vec![search(&JOB_COUNT, &[dims::STATE], "", "Maximum")], false);
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

    l.header("Scheduler");
    l.chart(
        "Scheduler cycles (microseconds)",
        vec![
            line(&MAIN_SCHED_LAST_CYCLE, &[], "Maximum"),
            line(&MAIN_SCHED_MEAN_CYCLE, &[], "Maximum"),
            line(&BACKFILL_LAST_CYCLE, &[], "Maximum"),
            line(&BACKFILL_MEAN_CYCLE, &[], "Maximum"),
        ],
        false,
    );
    l.chart(
        "Jobs per minute",
        vec![
            line(&JOBS_SUBMITTED_RATE, &[], "Sum"),
            line(&JOBS_STARTED_RATE, &[], "Sum"),
            line(&JOBS_COMPLETED_RATE, &[], "Sum"),
            line(&JOBS_FAILED_RATE, &[], "Sum"),
            line(&JOBS_CANCELED_RATE, &[], "Sum"),
            line(&BACKFILL_JOBS_RATE, &[], "Sum"),
        ],
        false,
    );
    l.chart(
        "slurmctld load",
        vec![
            line(&SERVER_THREAD_COUNT, &[], "Maximum"),
            line(&AGENT_QUEUE_SIZE, &[], "Maximum"),
            line(&DBD_AGENT_QUEUE_SIZE, &[], "Maximum"),
            line(&PENDING_RPCS, &[], "Maximum"),
        ],
        false,
    );
    l.chart(
        "slurmctld health",
        vec![line(&SLURMCTLD_UP, &[], "Minimum"), line(&SLURMCTLD_RESPONSE_TIME, &[], "Maximum")],
        false,
    );
    l.chart("RPCs per minute by type", vec![search(&RPC_RATE, &[dims::MESSAGE_TYPE], "", "Sum")], true);

    l.header("Efficiency");
    l.chart(
        "Wasteful jobs",
        vec![
            line(&IDLE_GPU_JOBS, &[], "Maximum"),
            line(&LOW_CPU_EFFICIENCY_JOBS, &[], "Maximum"),
            line(&MEMORY_OVER_REQUESTED_JOBS, &[], "Maximum"),
        ],
        false,
    );
    l.chart("GPU-hours held idle", vec![line(&GPU_HOURS_IDLE, &[], "Sum")], false);
    l.chart(
        "GPU utilisation of running jobs (%)",
        vec![search(&GPU_UTILIZATION, &[dims::JOB_ID, dims::USER, dims::ACCOUNT], "", "Average")],
        false,
    );

    l.header(&format!("Job {JOB_PATTERN} (set the JobId variable above)"));
    let job_dims = [dims::JOB_ID, dims::USER, dims::ACCOUNT];
    let per_job = |m: &Metric, stat: &str| search(m, &job_dims, &job, stat);
    l.chart(
        "Memory (bytes)",
        vec![
            per_job(&MEMORY_USAGE, "Maximum"),
            per_job(&MEMORY_RSS, "Maximum"),
            per_job(&MEMORY_LIMIT, "Maximum"),
        ],
        false,
    );
    l.chart("CPU (cores)", vec![per_job(&CPU_USAGE, "Average"), per_job(&CPUS_ALLOCATED, "Maximum")], false);
    l.chart("CPU utilisation (%)", vec![per_job(&CPU_UTILIZATION, "Average")], false);
    l.chart(
        "GPU",
        vec![
            per_job(&GPU_UTILIZATION, "Average"),
            per_job(&GPU_SM_ACTIVITY, "Average"),
            per_job(&GPU_TENSOR_ACTIVITY, "Average"),
        ],
        false,
    );
    l.chart(
        "GPU memory (bytes) and power (W)",
        vec![per_job(&GPU_MEMORY_USED, "Maximum"), per_job(&GPU_POWER, "Average")],
        false,
    );
    l.chart(
        "I/O (per second)",
        vec![
            per_job(&READ_BYTES, "Average"),
            per_job(&WRITE_BYTES, "Average"),
            per_job(&READ_OPS, "Average"),
            per_job(&WRITE_OPS, "Average"),
        ],
        false,
    );
    l.chart(
        "Processes and open files",
        vec![per_job(&PROCESS_COUNT, "Maximum"), per_job(&OPEN_FILES, "Maximum")],
        false,
    );

    l.header("Shippers");
    l.chart("Datums dropped (all nodes)", vec![line(&SHIPPER_DATUMS_DROPPED, &[], "Sum")], false);
    l.chart(
        "Shipper memory by node (bytes)",
        vec![search(&SHIPPER_MEMORY_RSS, &[dims::NODE_NAME], "", "Maximum")],
        false,
    );
    l.chart(
        "Collection time by collector (ms)",
        vec![search(&SHIPPER_COLLECTION_DURATION, &[dims::NODE_NAME, dims::COLLECTOR], "", "Maximum")],
        false,
    );

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
mod tests {
    use super::*;

    #[test]
    fn every_metric_drawn_is_in_the_catalog_and_the_layout_fits() {
        let d = cluster_dashboard();
        let names = referenced_metrics(&d);
        assert!(names.len() >= 40, "{}", names.len());
        for n in &names {
            assert!(crate::by_name(n).is_some(), "the dashboard draws {n}, which the catalog does not have");
        }
        let v: Value = serde_json::from_str(&d).unwrap();
        for w in v["widgets"].as_array().unwrap() {
            let x = w["x"].as_u64().unwrap() + w["width"].as_u64().unwrap();
            assert!(x <= 24, "a widget runs off the 24-column grid");
        }
        assert!(d.contains("${cluster_name}") && d.contains("${namespace}") && d.contains("${region}"));
        assert!(!d.contains("%{"), "no Terraform directives by accident");
    }
}
