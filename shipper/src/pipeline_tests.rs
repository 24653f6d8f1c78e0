//! The pipeline's tests: final samples, and what a pull endpoint is shown between flushes.

use super::*;
use crate::sample::{JobFigures, JobInfo};
use crate::settings::Settings;
use crate::sinks::SinkKind;
use crate::transforms::shape::JobMetrics;

/// Answers a final sample with `answer`, after adding job 7's reading.
struct Stub(FinalSample);

#[async_trait::async_trait(?Send)]
impl Collector for Stub {
    fn name(&self) -> &'static str {
        "stub"
    }

    async fn collect(&mut self, out: &mut Batch, _errors: &mut Errors) {
        out.push(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1"), 5.0);
    }

    fn final_sample(&mut self, job: &str, _uid: u32, out: &mut Batch) -> Option<FinalSample> {
        let mut reading = JobReading::new(JobInfo {
            id: job.into(),
            names: Default::default(),
            node: "n1".into(),
            user: "u".into(),
            account: "a".into(),
            partition: "p".into(),
        });
        reading.job = JobFigures::from_figures(vec![(&CPU_USAGE, 1.0)]);
        out.jobs.push(reading);
        Some(self.0.clone())
    }
}

#[test]
fn each_collection_is_shown_to_a_pull_endpoint_before_any_flush() {
    use crate::sinks::prometheus::{live::Live, server::Body};
    let body: Body = Arc::default();
    let live = Live::new(body.clone(), std::time::Duration::from_secs(600), true);
    let parts = Parts {
        cluster: "c".into(),
        node: "n1".into(),
        metrics: [SinkKind::named("cloudwatch").unwrap(), SinkKind::named("prometheus").unwrap()]
            .map(|sink| Delivered { sink, stats: StatsHandle::default(), spool: None })
            .into(),
        records: None,
        prices: None,
        resume_from: None,
    };
    let collectors: Vec<Box<dyn Collector>> = vec![Box::new(Stub(FinalSample::Sampled(0)))];
    let mut p = Pipeline::new(&Options::default(), Role::Node, collectors, parts)
        .showing_live(vec![None, Some(live)]);
    let served = || body.lock().map(|b| b.to_string()).unwrap_or_default();
    assert_eq!(served(), "");
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(p.collect());
    let text = served();
    assert!(
        text.contains("slurm_shipper_memory_rss_bytes{cluster_name=\"c\",node_name=\"n1\"} 5\n"),
        "{text}"
    );
    // Nothing was drained: the flush still delivers the period.
    let f = p.flush();
    assert!(
        f.aggregates[1].iter().any(|d| d.metric.name == SHIPPER_MEMORY_RSS.name),
        "{:?}",
        f.aggregates[1]
    );
}

fn pipeline(answers: &[FinalSample]) -> Pipeline {
    let mut settings = Settings::default();
    settings.node.job_metrics = JobMetrics::Both;
    let collectors: Vec<Box<dyn Collector>> =
        answers.iter().map(|a| Box::new(Stub(a.clone())) as Box<dyn Collector>).collect();
    let parts = Parts {
        cluster: "c".into(),
        node: "n1".into(),
        metrics: vec![Delivered {
            sink: SinkKind::named("cloudwatch").unwrap(),
            stats: StatsHandle::default(),
            spool: None,
        }],
        records: None,
        prices: None,
        resume_from: None,
    };
    Pipeline::new(&settings.pipeline(), Role::Node, collectors, parts)
}

#[test]
fn a_refused_final_sample_keeps_no_collectors_samples() {
    for refusal in [FinalSample::Denied, FinalSample::TooSoon] {
        let mut p = pipeline(&[FinalSample::Sampled(1), refusal.clone(), FinalSample::Sampled(0)]);
        assert_eq!(p.final_sample("7", 1000), refusal);
        let f = p.flush();
        assert!(f.aggregates[0].iter().all(|d| d.metric.name != CPU_USAGE.name), "{refusal:?}");
        assert!(f.records.is_empty(), "{refusal:?}: {:?}", f.records);
    }
    let mut p = pipeline(&[FinalSample::Sampled(1), FinalSample::Sampled(0)]);
    assert_eq!(p.final_sample("7", 1000), FinalSample::Sampled(1));
    let f = p.flush();
    assert!(f.aggregates[0].iter().any(|d| d.metric.name == CPU_USAGE.name));
    assert!(!f.records.is_empty(), "the job's summary");
}

/// Scheduler figures as sdiag gives them, every collection.
struct Sched;

#[async_trait::async_trait(?Send)]
impl Collector for Sched {
    fn name(&self) -> &'static str {
        "sched"
    }

    async fn collect(&mut self, out: &mut Batch, _errors: &mut Errors) {
        out.push(&BACKFILL_LAST_CYCLE, Dims::new(), 1500.0);
        out.push(&BACKFILL_QUEUE_LENGTH, Dims::new(), 40.0);
    }
}

#[test]
fn the_head_sends_what_no_view_reads_as_one_record_where_records_go() {
    let run = |records: Option<StatsHandle>, options: &Options| {
        let parts = Parts { records, ..Parts::cloudwatch("c", "head") };
        let mut p = Pipeline::new(options, Role::Head, vec![Box::new(Sched)], parts);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(p.collect());
        rt.block_on(p.collect());
        let f = p.flush();
        let names: Vec<&str> = f.aggregates[0].iter().map(|a| a.metric.name).collect();
        (names, f.records)
    };
    let (names, records) = run(Some(StatsHandle::default()), &Options::default());
    assert!(names.contains(&"BackfillLastCycle") && !names.contains(&"BackfillQueueLength"), "{names:?}");
    assert_eq!(records.len(), 1);
    let v: serde_json::Value = serde_json::from_str(&records[0].message).unwrap();
    assert_eq!(
        (v["Type"].as_str(), v["BackfillQueueLength"].as_f64()),
        (Some("scheduler_sample"), Some(40.0))
    );
    // No destination takes records: metrics, as before.
    let (names, records) = run(None, &Options::default());
    assert!(names.contains(&"BackfillQueueLength") && records.is_empty(), "{names:?}");
    // `head.scheduler_detail = "metrics"`: metrics, and still the record the dashboard reads.
    let metrics = Options { scheduler_records: false, ..Options::default() };
    let (names, records) = run(Some(StatsHandle::default()), &metrics);
    assert!(names.contains(&"BackfillQueueLength") && records.len() == 1, "{names:?}");
    let v: serde_json::Value = serde_json::from_str(&records[0].message).unwrap();
    assert_eq!(v["BackfillQueueLength"].as_f64(), Some(40.0));
}

/// A head's collection of a cluster at rest, or with one job running.
struct Resting(std::rc::Rc<std::cell::Cell<bool>>);

#[async_trait::async_trait(?Send)]
impl Collector for Resting {
    fn name(&self) -> &'static str {
        "resting"
    }

    async fn collect(&mut self, out: &mut Batch, _errors: &mut Errors) {
        use slurm_cw_catalog::dims::STATE;
        let running = if self.0.get() { 0.0 } else { 1.0 };
        for (state, n) in [("pending", 0.0), ("running", running), ("suspended", 0.0), ("completing", 0.0)] {
            out.push(&JOB_COUNT, Dims::new().with(STATE, state), n);
        }
        out.push(&NODE_COUNT, Dims::new().with(STATE, "powered_down"), 10.0 - running);
        out.push(&NODE_COUNT, Dims::new().with(STATE, "allocated"), running);
        out.push(&NODE_COUNT, Dims::new().with(STATE, "drained"), 0.0);
        out.push(&SLURMCTLD_UP, Dims::new(), 1.0);
        out.push(&SERVER_THREAD_COUNT, Dims::new(), 3.0);
        out.push(&BACKFILL_LAST_CYCLE, Dims::new(), 1500.0);
    }
}

#[test]
fn at_rest_the_head_sends_what_alarms_watch_and_the_rest_in_its_record() {
    let resting = std::rc::Rc::new(std::cell::Cell::new(true));
    // CloudWatch, billed per series, and OTLP, billed by the byte.
    let mut parts = Parts::cloudwatch("c", "head");
    let otlp = SinkKind::named("otlp").unwrap();
    parts.metrics.push(crate::pipeline::Delivered { sink: otlp, stats: StatsHandle::default(), spool: None });
    let mut p =
        Pipeline::new(&Options::default(), Role::Head, vec![Box::new(Resting(resting.clone()))], parts);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut flush = || {
        rt.block_on(p.collect());
        let f = p.flush();
        let mut names: Vec<String> = f.aggregates[0]
            .iter()
            .map(|a| {
                format!(
                    "{}{}",
                    a.metric.name,
                    a.dims.get("State").map(|s| format!(":{s}")).unwrap_or_default()
                )
            })
            .collect();
        names.sort();
        let record: serde_json::Value =
            f.records.first().map(|r| serde_json::from_str(&r.message).unwrap()).unwrap_or_default();
        let otlp: Vec<&str> = f.aggregates[1].iter().map(|a| a.metric.name).collect();
        assert!(
            otlp.contains(&"ServerThreadCount"),
            "a destination billed by the byte takes everything: {otlp:?}"
        );
        (names, record)
    };
    let (names, record) = flush();
    assert_eq!(
        names,
        ["BackfillLastCycle", "JobCount:pending", "NodeCount:drained", "ShipperDatumsDropped", "SlurmctldUp"],
        "what the default alarms watch"
    );
    assert_eq!(record["ServerThreadCount"], 3.0, "{record}");
    assert_eq!(record["NodeCount"]["powered_down"], 10.0, "{record}");
    assert_eq!(
        record["ShipperCollectionDuration"].as_object().map(|o| o.contains_key("resting")),
        Some(true)
    );
    // The flush's own figures (what delivery did) of a flush at rest come in the next record.
    let (_, record) = flush();
    assert!(record["ShipperDatumsSent"].is_object() || record["ShipperDatumsSent"].is_number(), "{record}");
    // Work again: everything is a metric at once.
    resting.set(false);
    let (names, record) = flush();
    for name in ["NodeCount:drained", "JobCount:pending", "ShipperCollectionDuration"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    for name in ["ServerThreadCount", "JobCount:running", "NodeCount:allocated"] {
        assert!(!names.iter().any(|n| n == name), "the dashboard reads {name} from the record: {names:?}");
    }
    assert_eq!(
        (record["ServerThreadCount"].clone(), record["JobCount"]["running"].clone()),
        (3.0.into(), 1.0.into()),
        "{record}"
    );
    // Every node state, for the chart by state (drained a metric too: an alarm watches it).
    assert_eq!(
        (record["NodeCount"]["allocated"].clone(), record["NodeCount"]["drained"].clone()),
        (1.0.into(), 0.0.into()),
        "{record}"
    );
    assert!(record["JobCount"].get("pending").is_some(), "{record}");
}

/// One job in partition `batch`, every collection.
struct OneJob;

#[async_trait::async_trait(?Send)]
impl Collector for OneJob {
    fn name(&self) -> &'static str {
        "one-job"
    }

    async fn collect(&mut self, out: &mut Batch, _errors: &mut Errors) {
        let mut reading = JobReading::new(JobInfo {
            id: "7".into(),
            names: Default::default(),
            node: "n1".into(),
            user: "u".into(),
            account: "a".into(),
            partition: "batch".into(),
        });
        reading.job =
            JobFigures::from_figures(vec![(&CPU_USAGE, 1.0), (&CPUS_ALLOCATED, 2.0), (&MEMORY_USAGE, 1e9)]);
        out.jobs.push(reading);
        out.all_jobs = true;
    }
}

#[test]
fn a_node_sends_per_partition_and_account_only_what_a_view_reads_so() {
    let run = |node_per_partition: Toggle, node_per_account: Toggle, dim: &str| {
        let options = Options { node_per_partition, node_per_account, ..Options::default() };
        let mut p = Pipeline::new(&options, Role::Node, vec![Box::new(OneJob)], Parts::cloudwatch("c", "n1"));
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(p.collect());
        let f = p.flush();
        let mut names: Vec<&str> =
            f.aggregates[0].iter().filter(|a| a.dimension(dim).is_some()).map(|a| a.metric.name).collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    use Toggle::{Auto, Off, On};
    assert_eq!(run(Auto, Auto, "Partition"), ["JobCoresAllocated", "JobCoresUsed"], "what the Lambda reads");
    assert!(run(On, Auto, "Partition").contains(&"JobAllocations"), "on: every figure");
    assert!(run(Off, Auto, "Partition").is_empty(), "off: none");
    // One collection: no CPU efficiency yet, and no price here: no spend.
    assert!(run(Auto, Auto, "Account").is_empty(), "no figure a view reads per account yet");
    assert!(run(Auto, On, "Account").contains(&"JobAllocations"), "on: every figure");
    // Across the cluster: what a view reads so; each job's memory in use no view reads (the job
    // records carry it), unless some copy is asked for.
    let cluster = |p, a| {
        let options = Options { node_per_partition: p, node_per_account: a, ..Options::default() };
        let mut p = Pipeline::new(&options, Role::Node, vec![Box::new(OneJob)], Parts::cloudwatch("c", "n1"));
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(p.collect());
        let f = p.flush();
        let names: Vec<&str> =
            f.aggregates[0].iter().filter(|a| a.dims.names().count() == 1).map(|a| a.metric.name).collect();
        names
    };
    let auto = cluster(Auto, Auto);
    assert!(auto.contains(&"JobAllocations") && auto.contains(&"JobCoresUsed"), "{auto:?}");
    assert!(!auto.contains(&"JobMemoryUsed"), "{auto:?}");
    assert!(cluster(On, Auto).contains(&"JobMemoryUsed"));
}

#[test]
fn a_flush_says_up_to_when_job_costs_were_counted_for_the_next_daemon() {
    let mut p =
        Pipeline::new(&Options::default(), Role::Node, vec![Box::new(OneJob)], Parts::cloudwatch("c", "n1"));
    let before = std::time::SystemTime::now();
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(p.collect());
    let after = std::time::SystemTime::now();
    // Kept by the daemon once the flush is spooled (daemon.rs), not here.
    let counted = p.flush().counted_to.expect("a job runs");
    assert!(counted >= before && counted <= after, "{counted:?} not the collection's time");
    assert_eq!(p.flush().counted_to, Some(counted), "no collection since: the same time");
}
