//! AWS PCS's scaling logs against LocalStack: records shaped as the PCS User Guide documents them
//! (tests/fixtures/pcs, built from the documentation, not captured), put where PCS would deliver
//! them (a log group, stream `AWSLogs/PCS/<cluster-id>/node_lifecycle.log`). A launch failure
//! reaches EventBridge once with its reason; the next run repeats nothing and reports only what
//! came since; records that match but are not as documented are counted, not fatal; a scan
//! longer than a run's pages goes on in the next run. Issue 31: a saved scan token that
//! FilterLogEvents refuses starts the window again (no wedge); a chunk EventBridge refuses leaves
//! the chunks it took remembered (not sent again); another cluster's record is skipped.

use crate::common;

use common::*;
use serde_json::Value;
use slurm_cw_catalog::events;
use slurm_cw_catalog::pcs::{LAUNCH_FAILED_DETAIL_TYPE, event, scaling as f};
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::{Budgets, Summary, run_within};
use slurm_cw_lambda::scaling::{CURSOR_STREAM, CURSOR_TYPE, LOOKBACK_MINUTES};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

const STREAM: &str = "AWSLogs/PCS/pcs_abc123de45/node_lifecycle.log";
/// The cluster id of the fixtures' records.
const PCS_ID: &str = "pcs_abc123de45";

/// A fixture record with its event time moved to `ms` (the window is the last hour), compacted
/// to one line as PCS delivers it.
fn record(fixture: &str, ms: i64, node: Option<&str>) -> (i64, String) {
    let path = format!("{}/tests/fixtures/pcs/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v[f::EVENT_TIMESTAMP] = ms.into();
    if let Some(n) = node {
        v[f::SCHEDULER_NODE_ID] = n.into();
    }
    (ms, v.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn nodes(s: &Summary) -> BTreeSet<String> {
    s.launch_failures.iter().map(|l| l.field(f::SCHEDULER_NODE_ID).to_owned()).collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// A bus of its own (other tests' rules on the default bus take every `slurm-cw` event) with a
/// rule sending its launch-failure events to a queue: (bus, SQS client, queue URL).
async fn launch_failure_queue(
    url: &str,
    clients: &slurm_cw_lambda::handler::Clients,
) -> (String, aws_sdk_sqs::Client, String) {
    let bus = unique("pcs-bus");
    clients.eventbridge.create_event_bus().name(&bus).send().await.unwrap();
    let pattern =
        serde_json::json!({ "source": [events::SOURCE], "detail-type": [LAUNCH_FAILED_DETAIL_TYPE] });
    let (sqs, q_url) = rule_to_queue(url, clients, Some(&bus), "launch-failed", &pattern.to_string()).await;
    (bus, sqs, q_url)
}

/// Every event on the queue: those that came within `wait`, then whatever follows within 2 s.
async fn events(sqs: &aws_sdk_sqs::Client, q: &str, wait: Duration) -> Vec<Value> {
    drained(sqs, q, wait).await.iter().map(|m| serde_json::from_str::<Value>(m).unwrap()).collect()
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn launch_failures_reach_eventbridge_once_with_their_reason() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("PcsScalingTest"), unique("c"));
    let clients = clients(&url).await;
    let jobs = job_group(&clients, &cluster).await;
    let scaling = format!("/aws/vendedlogs/pcs/{}/scaling", unique("pcs"));
    log_group(&clients.logs, &scaling).await;
    let (bus, sqs, q) = launch_failure_queue(&url, &clients).await;
    let cfg = Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "event_bus": "{bus}", "pcs_scaling_log_group": "{scaling}", "pcs_cluster_id": "{PCS_ID}"}}"#
    ))
    .unwrap();
    const MIN: i64 = 60_000;
    let now = now_ms();

    // Two launch failures and a launch within the hour; a failure two hours old (out of the
    // window); two records that match the pattern but are not as documented.
    let mut records = vec![
        record("scaling-launched.json", now - 20 * MIN, None),
        record("scaling-launch-failed.json", now - 15 * MIN, None),
        record("scaling-limit-exceeded.json", now - 10 * MIN, None),
        record("scaling-launch-failed.json", now - 120 * MIN, Some("compute-old")),
        (
            now - 9 * MIN,
            r#"{"status_code": "LAUNCH_FAILED", "description": "no node, no reason"}"#.to_owned(),
        ),
    ];
    let (t, bad) = record("scaling-launch-failed.json", now - 8 * MIN, Some("compute-bad"));
    let mut bad: Value = serde_json::from_str(&bad).unwrap();
    bad[f::DETAILS] = "capacity".into();
    records.push((t, bad.to_string()));
    put_records(&clients.logs, &scaling, STREAM, &records).await;

    // Pages of one record: the first run reads three pages and stops; the next goes on with the
    // rest. (AWS applies the pattern, so that only the four that name LAUNCH_FAILED are read;
    // LocalStack returns every record of the window, and the launch among them is skipped.)
    let budgets = Budgets { scaling_page_limit: 1, ..Budgets::default() };
    let first = run_within(&cfg, &clients, SystemTime::now(), budgets).await;
    assert!(first.failed_stages.is_empty(), "{:?}", first.failed_stages);
    assert_eq!((first.pcs_scaling_pages, first.pcs_scaling_scan_continues), (3, true));
    let second = run_within(&cfg, &clients, SystemTime::now(), budgets).await;
    assert!(second.failed_stages.is_empty(), "{:?}", second.failed_stages);
    assert!(!second.pcs_scaling_scan_continues, "the rest of the scan in one run");
    let both: BTreeSet<String> = nodes(&first).union(&nodes(&second)).cloned().collect();
    assert_eq!(both, set(&["compute-2", "compute-3"]));
    assert_eq!(first.launch_failures.len() + second.launch_failures.len(), 2, "each once");
    assert_eq!(
        first.pcs_scaling_malformed + second.pcs_scaling_malformed,
        2,
        "the two records not as documented are counted, not fatal"
    );

    let got = events(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let mut by_node: Vec<&Value> = got.iter().collect();
    by_node.sort_by_key(|e| e["detail"][f::SCHEDULER_NODE_ID].as_str().unwrap_or_default().to_owned());
    let (a, b) = (&by_node[0], &by_node[1]);
    assert_eq!(a["detail-type"], LAUNCH_FAILED_DETAIL_TYPE);
    assert_eq!(a["source"], events::SOURCE);
    let d = &a["detail"];
    assert_eq!(d[event::CLUSTER], cluster.as_str());
    assert_eq!(d[f::SCHEDULER_NODE_ID], "compute-2");
    assert_eq!(d[f::REASON_CODE], "INSUFFICIENT_CAPACITY");
    assert_eq!(d[f::details::EC2_ERROR_CODE], "InsufficientInstanceCapacity");
    assert_eq!(d[f::COMPUTE_NODE_GROUP_ID], "pcs_abcdef01");
    assert_eq!(d[f::RESOURCE_ID], "pcs_abc123de45");
    assert_eq!(
        d[f::DESCRIPTION],
        "Node did not get an instance because there was not enough capacity available."
    );
    assert_eq!(d[event::TIME], slurm_cw_lambda::cw::rfc3339_ms(now - 15 * MIN).as_str());
    let d = &b["detail"];
    assert_eq!(
        (d[f::REASON_CODE].as_str(), d[f::details::EC2_ERROR_CODE].as_str()),
        (Some("LIMIT_EXCEEDED"), Some("VcpuLimitExceeded"))
    );
    assert_eq!(
        (d[f::details::INSTANCE_TYPE].as_str(), d[f::details::SUBNET_ID].as_str()),
        (Some("hpc7a.96xlarge"), Some("subnet-0123456789abcdef0"))
    );

    // A new failure: the next run reads the whole window again and reports it alone.
    put_records(
        &clients.logs,
        &scaling,
        STREAM,
        &[record("scaling-launch-failed.json", now_ms() - MIN, Some("compute-9"))],
    )
    .await;
    let s = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    assert!(s.failed_stages.is_empty(), "{:?}", s.failed_stages);
    assert_eq!(nodes(&s), set(&["compute-9"]));
    assert_eq!(
        (s.pcs_scaling_malformed, s.pcs_scaling_scan_continues),
        (0, false),
        "each record counted once"
    );
    let got = events(&sqs, &q, Duration::from_secs(20)).await;
    let got: Vec<&str> = got.iter().filter_map(|e| e["detail"][f::SCHEDULER_NODE_ID].as_str()).collect();
    assert_eq!(got, ["compute-9"], "nothing sent twice");

    // The cursor lives in the job log group's own stream, apart from the findings' cursor.
    let ev = clients
        .logs
        .get_log_events()
        .log_group_name(&jobs)
        .log_stream_name(CURSOR_STREAM)
        .send()
        .await
        .unwrap();
    assert!(!ev.events().is_empty());
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn without_the_pcs_key_nothing_is_read_and_a_missing_group_fails_only_its_stage() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("PcsScalingTest"), unique("c"));
    let clients = clients(&url).await;
    job_group(&clients, &cluster).await;
    let s = run_within(&config(&ns, &cluster), &clients, SystemTime::now(), Budgets::default()).await;
    assert!(s.failed_stages.is_empty(), "{:?}", s.failed_stages);
    assert_eq!(s.pcs_scaling_pages, 0, "no PCS stage without pcs_scaling_log_group");
    let cfg = Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "pcs_scaling_log_group": "/aws/vendedlogs/pcs/none-{cluster}", "pcs_cluster_id": "{PCS_ID}"}}"#
    ))
    .unwrap();
    let s = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    let failed: Vec<&str> = s.failed_stages.iter().map(|f| f.stage.as_str()).collect();
    assert_eq!(failed, ["pcs_scaling"], "the other stages still ran");
    assert!(s.failed_stages[0].error.contains("FilterLogEvents"), "{:?}", s.failed_stages);
}

/// A saved scan token that AWS no longer takes. LocalStack takes any token (and answers an empty
/// page), so the logs client here refuses this one before it is sent, as AWS refuses an expired
/// token.
const BOGUS_TOKEN: &str = "expired-scan-token";

#[derive(Debug)]
struct RefuseBogusToken;

impl aws_sdk_cloudwatchlogs::config::Intercept for RefuseBogusToken {
    fn name(&self) -> &'static str {
        "RefuseBogusToken"
    }

    fn read_before_execution(
        &self,
        ctx: &aws_sdk_cloudwatchlogs::config::interceptors::BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut aws_sdk_cloudwatchlogs::config::ConfigBag,
    ) -> Result<(), aws_sdk_cloudwatchlogs::error::BoxError> {
        use aws_sdk_cloudwatchlogs::operation::filter_log_events::FilterLogEventsInput;
        match ctx.input().downcast_ref::<FilterLogEventsInput>() {
            Some(i) if i.next_token() == Some(BOGUS_TOKEN) => {
                Err("InvalidParameterException: the nextToken has expired".into())
            }
            _ => Ok(()),
        }
    }
}

/// A launch failure of `node` at `ms` in PCS cluster `cluster_id`, with a description of
/// `description_bytes` (0: the fixture's).
fn failure(ms: i64, node: &str, cluster_id: &str, description_bytes: usize) -> (i64, String) {
    let (t, msg) = record("scaling-launch-failed.json", ms, Some(node));
    let mut v: Value = serde_json::from_str(&msg).unwrap();
    v[f::RESOURCE_ID] = cluster_id.into();
    if description_bytes > 0 {
        v[f::DESCRIPTION] = "d".repeat(description_bytes).into();
    }
    (t, v.to_string())
}

/// (config, clients, job log group, scaling log group, SQS client, queue) for one test.
async fn pcs_setup(
    url: &str,
) -> (Config, slurm_cw_lambda::handler::Clients, String, String, aws_sdk_sqs::Client, String) {
    let (ns, cluster) = (unique("PcsScalingTest"), unique("c"));
    let clients = clients(url).await;
    let jobs = job_group(&clients, &cluster).await;
    let scaling = format!("/aws/vendedlogs/pcs/{}/scaling", unique("pcs"));
    log_group(&clients.logs, &scaling).await;
    let (bus, sqs, q) = launch_failure_queue(url, &clients).await;
    let cfg = Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "event_bus": "{bus}", "pcs_scaling_log_group": "{scaling}", "pcs_cluster_id": "{PCS_ID}"}}"#
    ))
    .unwrap();
    (cfg, clients, jobs, scaling, sqs, q)
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_refused_saved_token_starts_the_window_again_and_another_clusters_records_are_skipped() {
    let Some(url) = localstack() else { return };
    let (cfg, mut clients, jobs, scaling, sqs, q) = pcs_setup(&url).await;
    const MIN: i64 = 60_000;
    let now = now_ms();
    put_records(
        &clients.logs,
        &scaling,
        STREAM,
        &[
            failure(now - 15 * MIN, "compute-2", PCS_ID, 0),
            failure(now - 12 * MIN, "compute-other", "pcs_0ther0cluster", 0),
            failure(now - 10 * MIN, "compute-3", PCS_ID, 0),
        ],
    )
    .await;
    // The cursor an earlier run left: a scan cut by the page bound, whose token has expired.
    let cursor = serde_json::json!({
        "Type": CURSOR_TYPE,
        "Seen": [],
        "Scan": { "From": now - LOOKBACK_MINUTES * MIN, "Token": BOGUS_TOKEN },
    });
    put_records(&clients.logs, &jobs, CURSOR_STREAM, &[(now - MIN, cursor.to_string())]).await;
    let sdk = sdk(&url).await;
    let logs_cfg = aws_sdk_cloudwatchlogs::config::Builder::from(&sdk).interceptor(RefuseBogusToken).build();
    clients.logs = aws_sdk_cloudwatchlogs::Client::from_conf(logs_cfg);

    let s = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    assert!(s.failed_stages.is_empty(), "the refused token wedges the stage: {:?}", s.failed_stages);
    assert_eq!(nodes(&s), set(&["compute-2", "compute-3"]), "the whole window read again");
    assert_eq!(s.pcs_scaling_other_cluster, 1, "another cluster's record counted, not sent");
    let got = events(&sqs, &q, Duration::from_secs(20)).await;
    let sent: BTreeSet<String> =
        got.iter().filter_map(|e| e["detail"][f::SCHEDULER_NODE_ID].as_str().map(str::to_owned)).collect();
    assert_eq!(sent, set(&["compute-2", "compute-3"]), "{got:?}");
    assert!(
        got.iter().all(|e| e["detail"][f::RESOURCE_ID] == PCS_ID
            && e["detail"][event::CLUSTER] == cfg.cluster_name.as_str())
    );

    // The next run goes on as usual: nothing failed, nothing again.
    let s = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    assert!(s.failed_stages.is_empty(), "{:?}", s.failed_stages);
    assert!(s.launch_failures.is_empty(), "nothing sent twice: {:?}", nodes(&s));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_refused_chunk_leaves_the_chunks_eventbridge_took_remembered() {
    let Some(url) = localstack() else { return };
    let (cfg, clients, _jobs, scaling, sqs, q) = pcs_setup(&url).await;
    const MIN: i64 = 60_000;
    let now = now_ms();
    // Ten launch failures (the first PutEvents chunk), then one whose description passes an
    // event's 256 KiB (a log event may hold 1 MB): its chunk is refused.
    let mut records: Vec<(i64, String)> =
        (0..10).map(|i| failure(now - (30 - i) * MIN, &format!("compute-{i}"), PCS_ID, 0)).collect();
    records.push(failure(now - 5 * MIN, "compute-big", PCS_ID, 270_000));
    put_records(&clients.logs, &scaling, STREAM, &records).await;

    let first = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    let failed: Vec<&str> = first.failed_stages.iter().map(|f| f.stage.as_str()).collect();
    assert_eq!(failed, ["pcs_scaling"], "the refused chunk fails the stage");
    assert!(first.failed_stages[0].error.contains("PutEvents"), "{:?}", first.failed_stages);
    assert_eq!(first.launch_failures.len(), 10, "the first chunk went out");
    let got = events(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 10, "{got:?}");

    // The next run is refused the same chunk again, and sends none of the ten again. A marker
    // put on the bus after it shows that the queue has everything the run sent.
    let second = run_within(&cfg, &clients, SystemTime::now(), Budgets::default()).await;
    assert_eq!(second.failed_stages.len(), 1, "{:?}", second.failed_stages);
    assert!(second.launch_failures.is_empty(), "sent again: {:?}", nodes(&second));
    let marker = serde_json::json!({ f::SCHEDULER_NODE_ID: "marker" });
    slurm_cw_lambda::notify::put_events(
        &clients.eventbridge,
        &cfg.event_bus,
        LAUNCH_FAILED_DETAIL_TYPE,
        [marker],
    )
    .await
    .unwrap();
    let got = events(&sqs, &q, Duration::from_secs(20)).await;
    let got: Vec<&str> = got.iter().filter_map(|e| e["detail"][f::SCHEDULER_NODE_ID].as_str()).collect();
    assert_eq!(got, ["marker"], "no chunk EventBridge took is sent again");
}
