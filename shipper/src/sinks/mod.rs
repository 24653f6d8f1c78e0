//! Where data goes. Each destination is a folder with its configuration section, its shape
//! (which series it takes), its rules (what it may be sent) and its client, registered below:
//!
//! - [`cloudwatch`]: PutMetricData (per-job detail as job records: custom metrics are billed);
//! - [`logs`]: the job records, to CloudWatch Logs (wherever `cloudwatch` goes);
//! - [`otlp`]: OpenTelemetry over HTTP (CloudWatch's OTLP endpoint, Amazon Managed Prometheus,
//!   any collector), per-job series included (billed by the byte);
//! - [`prometheus`]: a pull endpoint for a Prometheus server;
//! - [`stdout`]: JSON lines.
//!
//! What they share: [`delivery`] (checks, the spool's write-ahead, the backlog, counts) and
//! [`pacing`] in front of each, one [`spool`] directory each ([`route`]).

pub mod cloudwatch;
pub mod config;
pub mod delivery;
pub mod logs;
pub mod open;
pub mod otlp;
pub mod pacing;
pub mod prometheus;
pub mod route;
pub mod spool;
pub mod stdout;

pub use slurm_cw_sink::validate;

use crate::config::Config;
use crate::datum::Datum;
use crate::transforms::shape::Shape;
use delivery::{Checks, Destination};
use serde::Deserialize;
use slurm_cw_sink::outcome::Outcome;

/// A destination's name in the configuration (`sink`) and on the command line (`--sink`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    Cloudwatch,
    Stdout,
    Otlp,
    Prometheus,
}

impl SinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Cloudwatch => "cloudwatch",
            SinkKind::Stdout => "stdout",
            SinkKind::Otlp => "otlp",
            SinkKind::Prometheus => "prometheus",
        }
    }

    /// Which series the destination takes.
    pub fn shape(self, config: &Config) -> Shape {
        match self {
            SinkKind::Cloudwatch | SinkKind::Stdout => cloudwatch::shape(config),
            SinkKind::Otlp | SinkKind::Prometheus => Shape::Open,
        }
    }

    /// Whether undelivered flushes wait on disk (a pull endpoint has nothing to send again).
    pub fn spools(self) -> bool {
        matches!(self, SinkKind::Cloudwatch | SinkKind::Otlp)
    }
}

/// The registry: the destination of metrics a name stands for.
pub async fn metric_sink(kind: SinkKind, ctx: &Context<'_>) -> Result<MetricSink, String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", kind.as_str());
    Ok(match kind {
        SinkKind::Cloudwatch => Box::new(cloudwatch::build(ctx).await.map_err(|e| err(&e))?),
        SinkKind::Stdout => Box::new(stdout::StdoutSink::new(ctx.namespace)),
        SinkKind::Otlp => Box::new(otlp::build(ctx).await.map_err(|e| err(&e))?),
        SinkKind::Prometheus => Box::new(prometheus::build(ctx).await.map_err(|e| err(&e))?),
    })
}

/// What a destination is built from.
pub struct Context<'a> {
    pub config: &'a Config,
    pub cluster: &'a str,
    pub namespace: &'a str,
    pub node: &'a str,
}

/// `sink`: one destination's name or a list of them (`"cloudwatch"`, `["cloudwatch", "otlp"]`,
/// or in an environment variable `cloudwatch,otlp`), each at most once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sinks(Vec<SinkKind>);

impl Sinks {
    pub fn new(kinds: Vec<SinkKind>) -> Result<Self, String> {
        let mut out: Vec<SinkKind> = Vec::new();
        for k in kinds {
            if out.contains(&k) {
                return Err(format!("`{}` named twice", k.as_str()));
            }
            out.push(k);
        }
        if out.is_empty() {
            return Err("names no destination".into());
        }
        Ok(Sinks(out))
    }

    pub fn one(kind: SinkKind) -> Self {
        Sinks(vec![kind])
    }

    pub fn contains(&self, kind: SinkKind) -> bool {
        self.0.contains(&kind)
    }

    pub fn iter(&self) -> impl Iterator<Item = SinkKind> + '_ {
        self.0.iter().copied()
    }
}

impl Default for Sinks {
    fn default() -> Self {
        Sinks::one(SinkKind::Cloudwatch)
    }
}

/// "Only this destination".
impl PartialEq<SinkKind> for Sinks {
    fn eq(&self, kind: &SinkKind) -> bool {
        self.0 == [*kind]
    }
}

impl<'de> Deserialize<'de> for Sinks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        let names: Vec<String> = match Raw::deserialize(d)? {
            Raw::One(s) => s.split(',').map(|p| p.trim().to_owned()).collect(),
            Raw::Many(v) => v,
        };
        let mut kinds = Vec::new();
        for n in names {
            let kind = <SinkKind as clap::ValueEnum>::from_str(&n, true).map_err(|_| {
                serde::de::Error::custom(format!(
                    "unknown destination {n:?}: cloudwatch, stdout, otlp or prometheus"
                ))
            })?;
            kinds.push(kind);
        }
        Sinks::new(kinds).map_err(serde::de::Error::custom)
    }
}

/// A destination of metrics.
#[async_trait::async_trait]
pub trait MetricDestination: Send {
    /// What a batch held in memory is for (the namespace).
    fn label(&self) -> &str;
    /// Its rules: what it may be sent.
    fn checks(&self) -> Box<dyn Checks<Datum>>;
    /// Where each collection's aggregates are shown between flushes (a pull endpoint's).
    fn live(&self) -> Option<prometheus::live::Live> {
        None
    }
    async fn put_in(&mut self, label: &str, datums: Vec<Datum>) -> Outcome<Datum>;
}

pub type MetricSink = Box<dyn MetricDestination>;

impl Destination for MetricSink {
    type Item = Datum;

    fn label(&self) -> &str {
        (**self).label()
    }

    fn checks(&self) -> Box<dyn Checks<Datum>> {
        (**self).checks()
    }

    async fn put_in(&mut self, label: &str, datums: Vec<Datum>) -> Outcome<Datum> {
        (**self).put_in(label, datums).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<Sinks, String> {
        #[derive(Deserialize)]
        struct T {
            sink: Sinks,
        }
        toml::from_str::<T>(toml_text).map(|t| t.sink).map_err(|e| e.to_string())
    }

    #[test]
    fn a_name_a_list_or_names_with_commas() {
        assert_eq!(parse("sink = \"prometheus\"").unwrap(), SinkKind::Prometheus);
        let both = parse("sink = [\"cloudwatch\", \"otlp\"]").unwrap();
        assert!(both.contains(SinkKind::Cloudwatch) && both.contains(SinkKind::Otlp));
        assert_eq!(parse("sink = \"cloudwatch, otlp\"").unwrap(), both);
        assert!(parse("sink = \"kafka\"").unwrap_err().contains("unknown destination \"kafka\""));
        assert!(parse("sink = [\"otlp\", \"otlp\"]").unwrap_err().contains("named twice"));
        assert!(parse("sink = []").unwrap_err().contains("no destination"));
    }
}
