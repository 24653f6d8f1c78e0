//! A month of a whole cluster from the simulated hour, priced at list prices, and printed.

use super::*;

// List prices, us-east-1 (docs/cost.md says where they come from).
pub const METRIC_TIERS: [(f64, f64); 4] =
    [(10_000.0, 0.30), (240_000.0, 0.10), (750_000.0, 0.05), (f64::INFINITY, 0.02)];
pub const PER_1000_REQUESTS: f64 = 0.01;
pub const PER_1000_SERIES_READ: f64 = 0.01;
pub const LOG_INGEST_PER_GB: f64 = 0.50;
pub const LOG_STORE_PER_GB_MONTH: f64 = 0.03;
pub const ALARM_METRIC_MONTH: f64 = 0.10;
pub const DASHBOARD_MONTH: f64 = 3.00;
/// Hours in a billing month, as AWS prorates metrics.
pub const HOURS: f64 = 730.0;
/// The job log group's retention assumed (days).
pub const RETENTION_DAYS: f64 = 30.0;
/// Flushes (and Lambda runs) a minute.
pub const MINUTES: f64 = HOURS * 60.0;

/// Dollars a month for `metric_months` custom metrics, by AWS's volume tiers.
pub fn metric_dollars(metric_months: f64) -> f64 {
    let (mut left, mut usd) = (metric_months, 0.0);
    for (size, price) in METRIC_TIERS {
        let n = left.min(size);
        usd += n * price;
        left -= n;
        if left <= 0.0 {
            break;
        }
    }
    usd
}

/// Alarm metrics of the default rules: one per alarm, or one per term of a metric-math alarm.
pub fn alarm_metrics() -> usize {
    slurm_cw_catalog::alarms::default_rules()
        .iter()
        .map(|r| if r.expression.is_some() { r.terms.len().max(1) } else { 1 })
        .sum()
}

/// A month of the whole cluster, from one simulated hour of a few of its nodes.
#[derive(Debug, Default)]
pub struct Month {
    /// PutMetricData requests of the Lambda alone (the rest are the shipper's).
    pub lambda_requests: f64,
    pub metric_months: f64,
    pub steady_metrics: f64,
    pub job_metric_hours: f64,
    pub metrics_usd: f64,
    pub put_requests: f64,
    pub put_usd: f64,
    pub log_gb: f64,
    pub logs_usd: f64,
    pub read_usd: f64,
    pub list_usd: f64,
    pub alarms_usd: f64,
    pub dashboard_usd: f64,
    pub total: f64,
}

pub fn month(r: &Run) -> Month {
    let s = &r.scenario;
    let l = &r.listing;
    let scope = |k: &str| l.by_scope.get(k).copied().unwrap_or(0) as f64;
    let scale = s.nodes as f64 / s.sim_nodes as f64;
    // Series per partition and per account, at the scenario's counts (all accounts run jobs every hour).
    let partitions = scope("partition") / l.partitions.len().max(1) as f64 * s.partitions as f64;
    let accounts = scope("account") / l.accounts.len().max(1) as f64 * s.accounts as f64;
    // Series only the nodes' figures feed are billed the hours the nodes run; the head's,
    // the shipper's own (the head sends them too) and the Lambda's every hour.
    let busy = s.busy_hours / 24.0;
    let node_only = l.by_role.get("node").copied().unwrap_or(0) as f64;
    let lambda_series = l.by_role.get("lambda").copied().unwrap_or(0) as f64;
    let steady = match r.idle_series.as_slice() {
        // Measured where the cluster idles: a busy hour's series the busy hours of a day; then
        // the head's (and the Lambda's, as in a busy hour: an upper bound) in its first idle
        // hour, and in the second for each idle hour after.
        [first, then] => {
            let all = scope("cluster") + partitions + accounts + scope("user") + scope("node") * scale;
            let idle = 24.0 - s.busy_hours;
            (s.busy_hours * all
                + (*first as f64 + lambda_series)
                + (idle - 1.0).max(0.0) * (*then as f64 + lambda_series))
                / 24.0
        }
        _ => {
            scope("cluster") + partitions + accounts + scope("user") + scope("node") * scale * busy
                - node_only * (1.0 - busy)
        }
    };
    // A job's series are billed for each clock hour they get data: 1 + duration/60 on average.
    let per_job = scope("job") / l.jobs.len().max(1) as f64;
    let jobs_a_month = s.jobs_per_day * HOURS / 24.0;
    let job_metric_hours = per_job * jobs_a_month * (1.0 + s.job_minutes as f64 / 60.0);
    let metric_months = steady + job_metric_hours / HOURS;
    let lambda = r.lambda.clone().unwrap_or(LambdaRun {
        series_read: 36,
        list_metrics_calls: 5,
        datums_published: 30,
        ..LambdaRun::default()
    });
    // Requests a minute: a node's, the head's, and the Lambda's (one run every
    // LAMBDA_EVERY_MINUTES, reading and publishing that many minutes at once).
    let minutes = SIM_SECONDS as f64 / 60.0;
    let node_requests = r.nodes.metric_requests as f64 / (s.sim_nodes as f64 * minutes);
    let lambda_runs = MINUTES / f64::from(LAMBDA_EVERY_MINUTES);
    let lambda_requests = (lambda.datums_published as f64 / 1000.0).ceil() * lambda_runs;
    let put_requests = (node_requests * s.nodes as f64 * busy + r.head.metric_requests as f64 / minutes)
        * MINUTES
        + lambda_requests;
    // The nodes' records while they run; the head's (its scheduler detail) every hour.
    let log_gb = (r.nodes.log_bytes as f64 * scale * busy + r.head.log_bytes as f64) * HOURS / 1e9;
    let logs_usd =
        log_gb * LOG_INGEST_PER_GB + log_gb * (RETENTION_DAYS * 24.0 / HOURS) * LOG_STORE_PER_GB_MONTH;
    let mut m = Month {
        lambda_requests,
        metric_months,
        steady_metrics: steady,
        job_metric_hours,
        metrics_usd: metric_dollars(metric_months),
        put_requests,
        put_usd: put_requests / 1000.0 * PER_1000_REQUESTS,
        log_gb,
        logs_usd,
        read_usd: lambda.series_read as f64 * lambda_runs / 1000.0 * PER_1000_SERIES_READ,
        list_usd: lambda.list_metrics_calls as f64 * lambda_runs / 1000.0 * PER_1000_REQUESTS,
        alarms_usd: alarm_metrics() as f64 * ALARM_METRIC_MONTH,
        dashboard_usd: DASHBOARD_MONTH,
        total: 0.0,
    };
    m.total =
        m.metrics_usd + m.put_usd + m.logs_usd + m.read_usd + m.list_usd + m.alarms_usd + m.dashboard_usd;
    m
}

/// One line per run: what was measured, then the month by item, the total and the verdict.
pub fn print(r: &Run, m: &Month, baseline_of: Option<f64>) {
    let s = &r.scenario;
    let l = &r.listing;
    let scope = |k: &str| l.by_scope.get(k).copied().unwrap_or(0);
    let role = |k: &str| l.by_role.get(k).copied().unwrap_or(0);
    let mut mode = if r.mode == JobMetrics::Metrics {
        "job_metrics=metrics (baseline)"
    } else {
        "default (job records)"
    }
    .to_owned();
    for var in ["COST_TOP_RPC_TYPES", "COST_EXCLUDE"] {
        if let Ok(v) = std::env::var(var) {
            mode.push_str(&format!(" {var}={v}"));
        }
    }
    let mut lambda = match &r.lambda {
        Some(x) if x.failed == "[]" => format!("Lambda {} series/run", x.series_read),
        Some(x) => format!("Lambda {} series/run (failed: {})", x.series_read, x.failed),
        None => "Lambda not run: 36 series/run assumed".into(),
    };
    if let [first, then] = r.idle_series.as_slice() {
        lambda.push_str(&format!(", idle: head {first} then {then} series an hour"));
    }
    let verdict = if m.total <= s.target { "meets" } else { "MISSES" };
    let ratio =
        baseline_of.map(|b| format!(", {:.1}x the default's ${b:.2}", m.total / b)).unwrap_or_default();
    println!(
        "{} {mode}: measured {}/{} nodes + head, 1 h: {} metrics ({} cluster, {} partition, {} account, {} job, {} node), {} PutMetricData, {} log bytes in {} events, {lambda} | month: {:.0} metrics ${:.2}, {:.1}M PutMetricData ${:.2}, {:.2} GB logs ${:.2}, GetMetricData ${:.2}, ListMetrics ${:.2}, alarms ${:.2}, dashboard ${:.2} = ${:.2} ({verdict} ${:.0}{ratio})",
        s.name,
        s.sim_nodes,
        s.nodes,
        l.total,
        scope("cluster"),
        scope("partition"),
        scope("account"),
        scope("job"),
        scope("node"),
        r.nodes.metric_requests + r.head.metric_requests,
        r.nodes.log_bytes + r.head.log_bytes,
        r.nodes.log_events + r.head.log_events,
        m.metric_months,
        m.metrics_usd,
        m.put_requests / 1e6,
        m.put_usd,
        m.log_gb,
        m.logs_usd,
        m.read_usd,
        m.list_usd,
        m.alarms_usd,
        m.dashboard_usd,
        m.total,
        s.target,
    );
    if std::env::var_os("COST_DETAIL").is_some() {
        let records: Vec<String> =
            r.nodes.records.iter().chain(&r.head.records).map(|(k, n)| format!("{n} {k}")).collect();
        let mut names: Vec<(&String, &usize)> = l.by_name.iter().collect();
        names.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = names.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let x = r.lambda.clone().unwrap_or_default();
        println!(
            "  detail: metrics from head {}, node population {}, shipper {}, Lambda {}; {} partitions, {} accounts, {} jobs listed; {} ListMetrics pages; PutMetricData {} nodes + {} head; records {} in {} PutLogEvents/CreateLogStream; Lambda {} GetMetricData, {} ListMetrics, {} datums, {} alarms, {:.1} s; month: {:.0} steady metrics + {:.0} job metric-hours; {:.0} s",
            role("head"),
            role("node"),
            role("shipper"),
            role("lambda"),
            l.partitions.len(),
            l.accounts.len(),
            l.jobs.len(),
            l.pages,
            r.nodes.metric_requests,
            r.head.metric_requests,
            if records.is_empty() { "none".into() } else { records.join(", ") },
            r.nodes.log_requests,
            x.get_metric_data_calls,
            x.list_metrics_calls,
            x.datums_published,
            x.alarms,
            x.seconds,
            m.steady_metrics,
            m.job_metric_hours,
            r.seconds,
        );
        println!("  metrics by name: {}", list.join(", "));
    }
}
