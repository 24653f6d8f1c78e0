//! `stdout`: one JSON line per datum (see `datum.rs` for the shape) and per job record
//! (`{"time", "record"}`) on standard output. For a first look at what a node would send to
//! CloudWatch (its shape and rules are CloudWatch's), and for the GPU checks on machines
//! without AWS.

use crate::aggregate::Aggregate;
use crate::sinks::delivery::Checks;
use crate::sinks::{BuildError, Context, MetricDestination, MetricSink, Records};
use slurm_cw_sink::outcome::Outcome;
use std::io::Write;

/// `stdout` in the registry: CloudWatch's shape and rules, job records beside the datums.
pub struct Spec;

#[async_trait::async_trait]
impl crate::sinks::Component for Spec {
    type Section = ();

    fn name(&self) -> &'static str {
        "stdout"
    }

    /// It stands in for CloudWatch: the series CloudWatch would be sent.
    fn shape(&self, per_series: crate::transforms::shape::Shape) -> crate::transforms::shape::Shape {
        per_series
    }

    fn records(&self) -> Records {
        Records::Stdout
    }

    fn plain_self_metrics(&self) -> bool {
        true
    }

    async fn build(&self, _: &(), cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        Ok(Box::new(StdoutSink::new(cx.namespace)))
    }
}

pub struct StdoutSink {
    label: String,
}

impl StdoutSink {
    /// `label`: the namespace (datums) or log group (records) the lines stand for.
    pub fn new(label: impl Into<String>) -> Self {
        StdoutSink { label: label.into() }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Writes every line; an error means standard output is gone (a closed pipe).
    pub fn write_lines(&mut self, lines: impl Iterator<Item = String>) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        for line in lines {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}

/// Standard output closed by its reader (`| head`): the end Unix tools meet quietly.
pub fn closed_pipe(why: &str) -> bool {
    // The OS's text ("Broken pipe (os error 32)"), whatever its case.
    why.to_ascii_lowercase().contains("broken pipe")
}

/// What a failed write to standard output means: a closed pipe ends the sink for good.
fn stdout_failed<T>(items: Vec<T>, e: std::io::Error) -> Outcome<T> {
    let msg = format!("cannot write to standard output: {e}");
    let gone = e.kind() == std::io::ErrorKind::BrokenPipe;
    Outcome {
        undelivered: items,
        fatal: gone.then(|| msg.clone()),
        last_error: Some(msg),
        ..Outcome::default()
    }
}

/// Writes one line per item.
pub fn to_stdout<T>(s: &mut StdoutSink, items: Vec<T>, line: impl Fn(&T) -> String) -> Outcome<T> {
    match s.write_lines(items.iter().map(line)) {
        Ok(()) => Outcome { sent: items.len(), ..Outcome::default() },
        Err(e) => stdout_failed(items, e),
    }
}

#[async_trait::async_trait]
impl MetricDestination for StdoutSink {
    fn label(&self) -> &str {
        &self.label
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        Box::new(crate::sinks::cloudwatch::PutMetricDataRules::default())
    }

    /// Each aggregate's datum line.
    async fn put_in(&mut self, namespace: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        to_stdout(self, items, |a| slurm_cw_formats::spool::Item::to_line(a, namespace))
    }
}
