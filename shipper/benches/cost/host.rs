//! One simulated shipper: the real pipeline on simulated time, into the real routes, and
//! what it sent.

use super::*;

/// What one simulated host sent.
#[derive(Debug, Default, Clone)]
pub struct Sent {
    pub metric_requests: u64,
    pub datums: u64,
    pub log_requests: u64,
    pub log_events: u64,
    pub log_bytes: u64,
    /// Records by Type.
    pub records: BTreeMap<String, u64>,
}

/// One shipper on simulated time: the real `Pipeline` (transforms, aggregator, self-metrics)
/// over its collectors, with the node collector's readings of the scenario's jobs fed in, into
/// the real routes.
pub struct Host {
    pub node: String,
    pub pipeline: Pipeline,
    pub runs_node: bool,
    pub metrics: Route<MetricSink>,
    pub records: Option<Route<RecordSink>>,
    pub sent: Sent,
    /// Per job on this node: (last reading, collections since the processes were read).
    pub seen: HashMap<String, (u64, u32)>,
    pub process_every: u32,
    pub cluster: String,
    pub namespace: String,
    pub otlp: otlp::OtlpBytes,
    pub emf: emf::EmfBytes,
    /// The head's fake sdiag, rewritten before each collection.
    pub sdiag: Option<FakeSdiag>,
}

impl Host {
    /// One reading of `job` by the node collector at `t` (a collection, or its final sample).
    pub fn read_job(&mut self, out: &mut Batch, job: &Job, t: u64, final_sample: bool) {
        let before = self.seen.get(&job.info.id).copied();
        let with_procs = final_sample || before.is_none_or(|(_, since)| since + 1 >= self.process_every);
        emit_job(out, job, t, before.map(|(p, _)| p), with_procs);
        let since = if with_procs { 0 } else { before.map_or(0, |(_, s)| s + 1) };
        self.seen.insert(job.info.id.clone(), (t, since));
    }

    /// A collection at simulated time `t`: this node's jobs read as the node collector would
    /// (None on the head), then the pipeline's own collectors.
    pub async fn collect(&mut self, t: u64, jobs: Option<&[&Job]>) {
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        if let Some(jobs) = jobs {
            // TaskEpilog: the final sample of each job that ended since the last collection.
            for job in
                jobs.iter().filter(|j| j.end > t.saturating_sub(COLLECT) && j.end <= t && j.start < j.end)
            {
                let mut last = Batch::new(at(job.end));
                self.read_job(&mut last, job, job.end, true);
                self.pipeline.add(last);
            }
            let mut batch = Batch::new(at(t));
            let started = Instant::now();
            let running: Vec<&Job> = jobs.iter().copied().filter(|j| j.start <= t && t < j.end).collect();
            for job in &running {
                self.read_job(&mut batch, job, t, false);
            }
            self.seen.retain(|id, _| running.iter().any(|j| &j.info.id == id));
            batch.all_jobs = true;
            batch.push(&JOBS_ON_NODE, host.clone(), running.len() as f64);
            batch.push(
                &SHIPPER_COLLECTION_DURATION,
                host.clone().with(COLLECTOR, "node"),
                started.elapsed().as_secs_f64() * 1e3,
            );
            batch.push(&COLLECTOR_ERRORS, host.clone().with(COLLECTOR, "cgroup"), 0.0);
            self.pipeline.add(batch);
        }
        if let Some(f) = &self.sdiag {
            f.write(t);
        }
        self.pipeline.collect_at(at(t)).await;
    }

    /// `Pipeline::flush` at simulated time `t`, then delivery of what it made.
    pub async fn flush(&mut self, t: u64) {
        let flushed = self.pipeline.flush_at(at(t));
        // What the last delivery did, as the self-metrics saw it: this bench's counts.
        // CloudWatch's route is the first destination; the OTLP lane (its own shape: per-job
        // series) is only encoded, for its bytes.
        self.sent.metric_requests += flushed.delivered.first().map_or(0, |d| d.requests);
        if let Some(r) = &flushed.records_delivered {
            self.sent.log_requests += r.requests;
            self.sent.log_bytes += r.bytes;
            self.sent.log_events += r.sent;
        }
        let mut lanes = flushed.aggregates.into_iter();
        let (mut cloudwatch, open) = (lanes.next().unwrap_or_default(), lanes.next().unwrap_or_default());
        // CloudWatch as configured alone (the default): without the OTLP destination's own
        // delivery figures, four more metrics when both are on.
        cloudwatch.retain(|d| d.dimension(slurm_cw_catalog::dims::SINK).is_none());
        self.sent.datums += cloudwatch.len() as u64;
        self.otlp.flush(&self.cluster, &self.node, open);
        self.emf.flush(&self.namespace, &cloudwatch);
        let held = self.metrics.intake.take(cloudwatch);
        self.metrics.delivery.hold(held);
        deliver(&mut self.metrics, "PutMetricData").await;
        if let Some(r) = &mut self.records {
            for rec in &flushed.records {
                let kind = serde_json::from_str::<serde_json::Value>(&rec.message)
                    .ok()
                    .and_then(|v| v["Type"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                *self.sent.records.entry(kind).or_default() += 1;
            }
            let held = r.intake.take(flushed.records);
            r.delivery.hold(held);
            deliver(r, "PutLogEvents").await;
        }
    }

    /// The head through `hours` simulated hours from `from` of the cluster the fake commands
    /// print, the distinct series its CloudWatch lane had in each hour. Counted, not delivered:
    /// these hours lie outside the hour the Lambda reads (the head's warm-up before it, the
    /// idle hours after), and only their number of series is billed differently.
    pub async fn undelivered_hours(
        &mut self,
        what: &str,
        from: u64,
        hours: u64,
        flush: u64,
    ) -> Vec<BTreeSet<String>> {
        let mut out = Vec::new();
        for hour in 0..hours {
            let mut series = BTreeSet::new();
            for step in 0..SIM_SECONDS / COLLECT {
                let t = from + hour * SIM_SECONDS + step * COLLECT;
                if let Some(f) = &self.sdiag {
                    f.write(t);
                }
                self.pipeline.collect_at(at(t)).await;
                if (step + 1) % (flush / COLLECT) == 0 {
                    let flushed = self.pipeline.flush_at(at(t + COLLECT - 1));
                    let cloudwatch = flushed.aggregates.into_iter().next().unwrap_or_default();
                    for a in cloudwatch.iter().filter(|a| a.dimension(slurm_cw_catalog::dims::SINK).is_none())
                    {
                        series.insert(format!("{} {:?}", a.metric.name, a.dims));
                    }
                }
            }
            if std::env::var_os("COST_DETAIL").is_some() && !self.runs_node {
                let names: Vec<&str> = series.iter().map(|s| s.as_str()).collect();
                eprintln!("  {what} hour {}: {} series: {}", hour + 1, names.len(), names.join("; "));
            }
            out.push(series);
        }
        out
    }

    /// What the last delivery did (after the last flush).
    pub fn finish(&mut self) {
        self.sent.metric_requests += self.metrics.stats.take().requests;
        if let Some(r) = &self.records {
            let r = r.stats.take();
            self.sent.log_requests += r.requests;
            self.sent.log_bytes += r.bytes;
            self.sent.log_events += r.sent;
        }
    }
}

/// Sends what waits (all of it: LocalStack is up).
pub async fn deliver<D: Destination>(route: &mut Route<D>, what: &str) {
    let step = route.delivery.drain().await;
    assert!(matches!(step, Step::Sent | Step::Empty), "{what} to LocalStack failed: {step:?}");
}

impl Sent {
    pub fn add(&mut self, o: &Sent) {
        self.metric_requests += o.metric_requests;
        self.datums += o.datums;
        self.log_requests += o.log_requests;
        self.log_events += o.log_events;
        self.log_bytes += o.log_bytes;
        for (k, n) in &o.records {
            *self.records.entry(k.clone()).or_default() += n;
        }
    }
}
