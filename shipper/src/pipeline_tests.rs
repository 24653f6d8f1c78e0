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
