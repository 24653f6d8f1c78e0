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
pub mod component;
pub mod config;
pub mod delivery;
pub mod emf;
pub mod logs;
pub mod open;
pub mod otlp;
pub mod pacing;
pub mod prometheus;
pub mod route;
pub mod self_metrics;
pub mod spool;
pub mod stdout;

pub use slurm_cw_sink::validate;

use crate::aggregate::Aggregate;
use crate::check::Row;
use crate::settings::Settings;
use crate::transforms::shape::Shape;
pub use component::{BuildError, Component, Context, Records, Spool};
use delivery::{Checks, Destination};
use serde::Deserialize;
use slurm_cw_sink::outcome::Outcome;

/// The registry: every destination, one line each with the section of the settings it is
/// given; the first is the default `sink`.
#[rustfmt::skip]
pub static REGISTRY: &[&dyn Registered] = &[
    &Entry { component: cloudwatch::Spec, section: |s| &s.cloudwatch },
    &Entry { component: stdout::Spec, section: |_| &() },
    &Entry { component: otlp::Spec, section: |s| &s.otlp },
    &Entry { component: prometheus::Spec, section: |s| &s.prometheus },
    &Entry { component: emf::Spec, section: |s| &s.emf },
];

/// A registered destination with the section it is given: a [`Component`] of any section type
/// behind one type, so that the registry can list them.
pub struct Entry<C: Component + 'static> {
    pub component: C,
    pub section: fn(&Settings) -> &C::Section,
}

/// What the daemon asks a registered destination ([`Component`]'s questions, with the settings
/// it takes its section from).
#[async_trait::async_trait]
pub trait Registered: Sync {
    fn component_name(&self) -> &'static str;
    fn shape(&self, per_series: Shape) -> Shape;
    fn spool(&self) -> Spool;
    fn records(&self) -> Records;
    fn uses_aws(&self) -> bool;
    fn plain_self_metrics(&self) -> bool;
    fn keys(&self) -> &'static [crate::config::docs::Key];
    async fn build(&self, settings: &Settings, cx: &Context<'_>) -> Result<MetricSink, BuildError>;
    async fn check(&self, settings: &Settings, cx: &Context<'_>) -> Vec<Row>;
}

#[async_trait::async_trait]
impl<C: Component + 'static> Registered for Entry<C> {
    fn component_name(&self) -> &'static str {
        self.component.name()
    }
    fn shape(&self, per_series: Shape) -> Shape {
        self.component.shape(per_series)
    }
    fn spool(&self) -> Spool {
        self.component.spool()
    }
    fn records(&self) -> Records {
        self.component.records()
    }
    fn uses_aws(&self) -> bool {
        self.component.uses_aws()
    }
    fn plain_self_metrics(&self) -> bool {
        self.component.plain_self_metrics()
    }
    fn keys(&self) -> &'static [crate::config::docs::Key] {
        self.component.keys()
    }
    async fn build(&self, settings: &Settings, cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        self.component.build((self.section)(settings), cx).await
    }
    async fn check(&self, settings: &Settings, cx: &Context<'_>) -> Vec<Row> {
        self.component.check((self.section)(settings), cx).await
    }
}

/// A destination named in the configuration (`sink`) or on the command line (`--sink`).
#[derive(Clone, Copy)]
pub struct SinkKind(&'static dyn Registered);

impl SinkKind {
    /// The registered destination of that name (any case).
    pub fn named(name: &str) -> Option<SinkKind> {
        REGISTRY.iter().find(|c| c.component_name().eq_ignore_ascii_case(name.trim())).map(|c| SinkKind(*c))
    }

    /// `--sink`'s parser.
    pub fn parse(name: &str) -> Result<SinkKind, String> {
        SinkKind::named(name).ok_or_else(|| format!("unknown destination {name:?}: {}", names().join(", ")))
    }

    pub fn as_str(self) -> &'static str {
        self.0.component_name()
    }

    /// What the destination is: how it is built, what it takes.
    pub fn component(self) -> &'static dyn Registered {
        self.0
    }

    /// Which series the destination takes, `per_series` being the settings' trim of what is
    /// billed per series.
    pub fn shape(self, per_series: Shape) -> Shape {
        self.0.shape(per_series)
    }

    /// Whether undelivered flushes wait on disk.
    pub fn spools(self) -> bool {
        self.0.spool() != Spool::None
    }

    /// Its spool directory under `spool.dir`, if it spools.
    pub fn spool_dir(self, spool_root: &std::path::Path) -> Option<std::path::PathBuf> {
        match self.0.spool() {
            Spool::None => None,
            Spool::Root => Some(spool_root.to_path_buf()),
            Spool::Own => Some(spool_root.join(self.as_str())),
        }
    }
}

impl Default for SinkKind {
    fn default() -> Self {
        SinkKind(REGISTRY[0])
    }
}

impl PartialEq for SinkKind {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SinkKind {}

impl std::fmt::Debug for SinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every registered destination's name.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|c| c.component_name()).collect()
}

/// The destination of metrics a name stands for, built from its section of `settings`.
pub async fn metric_sink(
    kind: SinkKind,
    settings: &Settings,
    cx: &Context<'_>,
) -> Result<MetricSink, BuildError> {
    kind.0.build(settings, cx).await
}

/// Where job records go with these destinations: CloudWatch Logs where one of them sends
/// there, else standard output where one prints, else nowhere.
pub fn records_for(sinks: &Sinks) -> Records {
    sinks.iter().map(|k| k.0.records()).max().unwrap_or(Records::None)
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

    /// Whether a destination of that name is among them.
    pub fn names(&self, name: &str) -> bool {
        self.0.iter().any(|k| k.as_str() == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = SinkKind> + '_ {
        self.0.iter().copied()
    }
}

impl Default for Sinks {
    fn default() -> Self {
        Sinks::one(SinkKind::default())
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
            kinds.push(SinkKind::parse(&n).map_err(serde::de::Error::custom)?);
        }
        Sinks::new(kinds).map_err(serde::de::Error::custom)
    }
}

/// A destination of metrics: takes aggregates, encodes them into its own wire form.
#[async_trait::async_trait]
pub trait MetricDestination: Send {
    /// What a batch held in memory is for (the namespace).
    fn label(&self) -> &str;
    /// Its rules: what it may be sent.
    fn checks(&self) -> Box<dyn Checks<Aggregate>>;
    /// Where each collection's aggregates are shown between flushes (a pull endpoint's).
    fn live(&self) -> Option<prometheus::live::Live> {
        None
    }
    async fn put_in(&mut self, label: &str, items: Vec<Aggregate>) -> Outcome<Aggregate>;
}

pub type MetricSink = Box<dyn MetricDestination>;

impl Destination for MetricSink {
    type Item = Aggregate;

    fn label(&self) -> &str {
        (**self).label()
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        (**self).checks()
    }

    async fn put_in(&mut self, label: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        (**self).put_in(label, items).await
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
        assert_eq!(parse("sink = \"prometheus\"").unwrap(), SinkKind::named("prometheus").unwrap());
        let both = parse("sink = [\"cloudwatch\", \"otlp\"]").unwrap();
        assert!(both.names("cloudwatch") && both.names("otlp"));
        assert_eq!(parse("sink = \"cloudwatch, otlp\"").unwrap(), both);
        assert!(parse("sink = \"kafka\"").unwrap_err().contains("unknown destination \"kafka\""));
        assert!(parse("sink = [\"otlp\", \"otlp\"]").unwrap_err().contains("named twice"));
        assert!(parse("sink = []").unwrap_err().contains("no destination"));
    }
}
