//! `slurm-cw-shipper report <jobid>`: a job's records read back from its log group and
//! summed up for its user: CPU efficiency, memory peak against the request, GPUs, advice.
//! A caller other than root sees only its own jobs unless configured ([`access`]).
//! Exit status: 0 a report was printed, 1 no records, the group cannot be read or the job is
//! another user's, 2 bad arguments or configuration.

pub mod access;
pub mod cost;
pub mod fetch;
pub mod model;
pub mod render;
pub mod series;
pub mod spark;

use crate::settings::Settings;
use fetch::FetchError;
use slurm_cw_catalog::records as r;
use slurm_cw_formats::slurm::job::{self as sjob, JobDetail};

/// Slurm prints local times without a zone: bounds widened by the largest UTC offset.
const ZONE_SLACK_S: i64 = 14 * 3600;
/// Summaries are written up to a collection (or a flush) after the job ends.
const AFTER_END_S: i64 = 15 * 60;

pub struct Request {
    pub job: String,
    pub json: bool,
    pub cluster: Option<String>,
}

/// A job id as Slurm names it (`123`, `123_4`, `123+1`); anything else is refused before it
/// reaches a filter pattern.
pub fn valid_job_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_digit() || c == '_' || c == '+')
}

/// Runs the report; returns the exit status.
pub async fn run(config: &Settings, req: &Request) -> u8 {
    if !valid_job_id(&req.job) {
        eprintln!("slurm-cw-shipper report: `{}` is not a Slurm job id (digits, `_`, `+`)", req.job);
        return 2;
    }
    let cluster = match (&req.cluster, config.resolve_cluster_name()) {
        (Some(c), _) => Some(c.clone()),
        (None, Ok((c, _))) => Some(c),
        (None, Err(_)) if config.logs.group.is_some() => None,
        (None, Err(e)) => {
            eprintln!("slurm-cw-shipper report: {e}; or give --cluster NAME");
            return 2;
        }
    };
    let group = config.logs.group_for(cluster.as_deref().unwrap_or_default());
    let detail = slurm_detail(config, &req.job).await;
    let (start, end) = bounds(detail.as_ref());
    // Records go by the job id Slurm gave (an array task's or het component's own id); one
    // Slurm no longer knows is found by the name it was asked by.
    let key = match &detail {
        Some(d) => (r::JOB_ID.name, d.job_id.as_str()),
        None if req.job.contains('_') => (r::ARRAY_TASK.name, req.job.as_str()),
        None if req.job.contains('+') => (r::HET_COMPONENT.name, req.job.as_str()),
        None => (r::JOB_ID.name, req.job.as_str()),
    };
    let client = match client(config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm-cw-shipper report: {e}");
            return 1;
        }
    };
    let records = match fetch::records(&client, &group, key, start, end).await {
        Ok(r) => r,
        Err(FetchError::GroupMissing) => {
            eprintln!(
                "slurm-cw-shipper report: log group {group} does not exist (ResourceNotFoundException): \
                 wrong cluster (--cluster) or logs.group, or the group was never created"
            );
            return 1;
        }
        Err(FetchError::AccessDenied(code)) => {
            eprintln!(
                "slurm-cw-shipper report: not allowed to read log group {group} ({code}): this needs \
                 logs:FilterLogEvents on it"
            );
            return 1;
        }
        Err(FetchError::Other(why)) => {
            eprintln!("slurm-cw-shipper report: cannot read log group {group}: {why}");
            return 1;
        }
    };
    if records.is_empty() {
        let state = detail.as_ref().and_then(|d| d.state.as_deref());
        let mut why = format!("no records of job {} in log group {group}", req.job);
        if state == Some("PENDING") {
            why.push_str(": the job has not started yet");
        } else {
            why.push_str(
                ". Likely causes: the job was shorter than one collection interval and had no TaskEpilog \
                 final sample; the wrong cluster or log group (--cluster, logs.group); its records not \
                 delivered yet (a running job's first records come after one flush interval)",
            );
        }
        eprintln!("slurm-cw-shipper report: {why}");
        return 1;
    }
    let mut rep = model::combine(&req.job, &records);
    rep.cluster = cluster;
    rep.log_group = group;
    if let Some(d) = &detail {
        rep.state = d.state.clone();
        rep.nodes = d.node_list.clone();
        rep.user = d.user_name.clone().or(rep.user);
        rep.account = d.account.clone().or(rep.account);
        rep.partition = d.partition.clone().or(rep.partition);
        // Both local times (or both epoch seconds): their difference needs no zone.
        let times = d.start_unix.zip(d.end_unix).or_else(|| {
            d.start_time
                .as_deref()
                .and_then(sjob::parse_local_time)
                .zip(d.end_time.as_deref().and_then(sjob::parse_local_time))
        });
        if let Some((s, e)) = times
            && e >= s
            && !matches!(d.state.as_deref(), Some("RUNNING") | Some("PENDING"))
        {
            rep.elapsed_seconds = Some((e - s) as f64);
        }
        if matches!(d.state.as_deref(), Some("RUNNING") | Some("SUSPENDED") | Some("COMPLETING")) {
            rep.incomplete = true;
        }
        if let Some(list) = &d.node_list {
            rep.nodes_without_records = model::missing_nodes(&rep, list);
            rep.incomplete |= !rep.nodes_without_records.is_empty();
        }
    }
    // Slurm's word on the job's user first, else the records'.
    if let Err(why) =
        access::check(&access::Caller::current(), rep.user.as_deref(), config.logs.report_all_users)
    {
        eprintln!("slurm-cw-shipper report: job {}: {why}", req.job);
        return 1;
    }
    if rep.nodes.is_none() {
        let nodes: Vec<&str> = rep.per_node.iter().map(|n| n.node.as_str()).collect();
        rep.nodes = Some(nodes.join(","));
    }
    rep.advice = model::advise(&rep);
    if req.json {
        match serde_json::to_string_pretty(&rep) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("slurm-cw-shipper report: {e}");
                return 1;
            }
        }
    } else {
        let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
        // The terminal's width; COLUMNS where set (a pipe has no width of its own).
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok())
            .or_else(crate::sys::term::stdout_columns)
            .unwrap_or(render::DEFAULT_WIDTH);
        print!("{}", render::text_width(&rep, colour, width));
    }
    0
}

/// What Slurm says of the job, when it is reachable and still knows it: `scontrol show job
/// --json` (Slurm 23.02+; an array task or het component by its name too), else the text
/// form, whose user-written fields only widen or narrow the search window here.
async fn slurm_detail(config: &Settings, job: &str) -> Option<JobDetail> {
    let cmds = config.slurm.commands();
    if let Ok(out) = cmds.run("scontrol", &["show", "job", "--json", job]).await {
        return slurm_cw_formats::slurm::job_json::parse(out.stdout.as_bytes(), job).ok();
    }
    let out = cmds.run("scontrol", &["show", "job", "-d", "-o", job]).await.ok()?;
    sjob::parse(&out.stdout).ok().filter(|d| d.job_id == job)
}

/// The search window in ms since the epoch: the job's span from Slurm (epoch seconds from
/// JSON; local times from the text form, widened for the zone). A job Slurm ran before (a
/// requeue, a node that failed) is searched from its submission: its start is the present
/// run's, and the earlier runs' records are before it.
fn bounds(d: Option<&JobDetail>) -> (Option<i64>, Option<i64>) {
    let t = |v: &Option<String>| v.as_deref().and_then(sjob::parse_local_time);
    let Some(d) = d else { return (None, None) };
    let (unix, local) = match d.restarts {
        Some(n) if n > 0 => (d.submit_unix, &d.submit_time),
        _ => (d.start_unix, &d.start_time),
    };
    let start = unix.map(|s| (s - 60) * 1000).or_else(|| t(local).map(|s| (s - ZONE_SLACK_S - 60) * 1000));
    let end = d
        .end_unix
        .map(|e| (e + AFTER_END_S) * 1000)
        .or_else(|| t(&d.end_time).map(|e| (e + ZONE_SLACK_S + AFTER_END_S) * 1000));
    (start, end)
}

async fn client(
    config: &Settings,
) -> Result<aws_sdk_cloudwatchlogs::Client, slurm_cw_sink::aws::NoCaCertificates> {
    let sdk = slurm_cw_sink::aws::sdk_config(config.cloudwatch.region.as_deref()).await?;
    let mut conf = aws_sdk_cloudwatchlogs::config::Builder::from(&sdk);
    if let Some(url) = &config.logs.endpoint {
        conf = conf.endpoint_url(url);
    }
    let conf = conf
        .timeout_config(
            aws_sdk_cloudwatchlogs::config::timeout::TimeoutConfig::builder()
                .operation_attempt_timeout(config.cloudwatch.attempt_timeout)
                .build(),
        )
        .build();
    Ok(aws_sdk_cloudwatchlogs::Client::from_conf(conf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_and_bounds() {
        assert!(valid_job_id("123") && valid_job_id("123_4") && valid_job_id("7+1"));
        assert!(!valid_job_id("") && !valid_job_id("1\" || 1") && !valid_job_id("abc"));
        let d = JobDetail {
            start_time: Some("1970-01-02T00:00:00".into()),
            end_time: None,
            ..JobDetail::default()
        };
        assert_eq!(bounds(Some(&d)), (Some((86_400 - ZONE_SLACK_S - 60) * 1000), None));
        assert_eq!(bounds(None), (None, None));
        // Requeued: Slurm's start is the present run's; the search goes back to the submission.
        let requeued = JobDetail {
            submit_unix: Some(1_000_000),
            start_unix: Some(1_010_800),
            end_unix: Some(1_014_400),
            restarts: Some(1),
            ..JobDetail::default()
        };
        assert_eq!(
            bounds(Some(&requeued)),
            (Some((1_000_000 - 60) * 1000), Some((1_014_400 + AFTER_END_S) * 1000))
        );
        let once = JobDetail { restarts: Some(0), ..requeued.clone() };
        assert_eq!(bounds(Some(&once)).0, Some((1_010_800 - 60) * 1000), "one run: from its start");
    }
}
