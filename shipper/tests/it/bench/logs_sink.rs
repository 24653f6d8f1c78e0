//! The job-record path against LocalStack's CloudWatch Logs: records spooled while the service
//! cannot be reached are delivered once, oldest first, when it answers; records CloudWatch Logs
//! would refuse are dropped with a counted reason; `--check` names a missing log group.
//! (LocalStack does not run Logs Insights or EMF extraction; nothing here relies on them.)

use crate::common;

use common::*;
use slurm_cw_formats::record::Record;
use slurm_cw_shipper::sinks::cloudwatch::retry::Backoff;
use slurm_cw_shipper::sinks::delivery::{Delivery, Intake, StatsHandle, Step};
use slurm_cw_shipper::sinks::logs::{LogsSink, Settings};
use slurm_cw_shipper::sinks::logs::{PutLogEventsRules, RecordSink};
use slurm_cw_shipper::sinks::spool::Spool;
use slurm_cw_shipper::sinks::validate::DropReason;
use std::time::{Duration, SystemTime};

fn settings(url: &str, group: &str) -> Settings {
    Settings {
        group: group.into(),
        stream: "n1".into(),
        region: Some("us-east-1".into()),
        endpoint: Some(url.into()),
        backoff: Backoff { base: Duration::from_millis(50), cap: Duration::from_millis(200), max_retries: 2 },
        attempt_timeout: Duration::from_secs(10),
    }
}

fn record(job: &str, age: Duration) -> Record {
    Record {
        time: SystemTime::now() - age,
        message: format!(
            r#"{{"Type":"job_sample","JobId":"{job}","RecordId":"n1:{job}:s1","MemoryRss":314572800}}"#
        ),
    }
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn records_wait_in_their_spool_through_an_outage_and_arrive_once() {
    let Some(url) = localstack() else { return };
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "records_outage").await;
    let dir = tempfile::tempdir().unwrap();
    let (spool, _) = Spool::<Record>::open(dir.path(), 1 << 20).unwrap();
    let spool = std::sync::Arc::new(std::sync::Mutex::new(spool));
    let stats = StatsHandle::default();
    let mut intake =
        Intake::new(&group, Some(spool.clone()), stats.clone(), Box::new(PutLogEventsRules::default()));
    let down = LogsSink::new(settings("http://127.0.0.1:9", &group)).await.unwrap();
    let mut delivery = Delivery::new(RecordSink::Logs(down), Some(spool.clone()), 1000, stats.clone());
    delivery.hold(
        intake.take(vec![record("41", Duration::from_secs(120)), record("42", Duration::from_secs(110))]),
    );
    let step = delivery.drain().await;
    assert!(matches!(&step, Step::Failed(e) if e.contains("cannot reach")), "{step:?}");
    // One too old for CloudWatch Logs (14 days), dropped and counted before it is spooled.
    delivery.hold(
        intake.take(vec![
            record("43", Duration::from_secs(60)),
            record("old", Duration::from_secs(15 * 86400)),
        ]),
    );
    assert_eq!(delivery.waiting(), (0, 2), "two flushes on disk");
    let s = stats.take();
    assert_eq!(s.dropped.get(&DropReason::Timestamp), Some(&1));
    assert_eq!(s.sent, 0);

    let up = LogsSink::new(settings(&url, &group)).await.unwrap();
    let mut delivery = Delivery::new(RecordSink::Logs(up), Some(spool.clone()), 1000, stats.clone());
    assert_eq!(delivery.drain().await, Step::Empty);
    assert_eq!(delivery.waiting(), (0, 0), "the spool is empty once delivered");
    assert_eq!(stats.take().sent, 3);
    let got = records(&logs, &group, &[("Type", "job_sample")]).await;
    let mut jobs: Vec<&str> = got.iter().filter_map(|r| r["JobId"].as_str()).collect();
    jobs.sort_unstable();
    assert_eq!(jobs, vec!["41", "42", "43"], "each once, the stream created on first use");
    assert_eq!(got[0]["MemoryRss"], 314572800);
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn check_names_a_missing_job_log_group() {
    let Some(url) = localstack() else { return };
    let cluster = unique_namespace("checkgroup").replace('/', "-");
    let run = || {
        shipper()
            .args(["--check", "--role", "node"])
            .envs(shipper_env(&url, "SlurmCheck"))
            .env("SLURM_CW_CLUSTER_NAME", &cluster)
            .env("SLURM_CW_NODE_NAME", "n1")
            .env("SLURM_CW_GPU__ENABLED", "off")
            .output()
            .unwrap()
    };
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("job log group")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("FAIL") && line.contains(&format!("/slurm-cw/{cluster}/jobs does not exist")),
        "{line}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");

    let logs = logs(&url).await;
    let group = format!("/slurm-cw/{cluster}/jobs");
    logs.create_log_group().log_group_name(&group).send().await.unwrap();
    let text = String::from_utf8_lossy(&run().stdout).to_string();
    let line = text.lines().find(|l| l.starts_with("job log group")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(" ok ") && line.contains("stream n1"), "{line}");
}
