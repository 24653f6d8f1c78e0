//! Between collection and the sinks: what the samples become.
//!
//! - [`derive`]: the head node's counters become increases; utilisation and backlog; [`trim`]:
//!   what the head leaves out (one partition's copies, state counts at zero);
//! - [`jobs`]: per-job typed readings -> job records (a sample per job and flush, a summary when the
//!   job ends on this node) and [`findings`] decided on the node; [`records`] is their JSON;
//! - [`node_sample`]: the node's own fabric, Lustre and RAPL figures per device, one record per
//!   flush; [`scheduler_sample`]: the head's figures no view reads, one record per flush, and
//!   at [`rest`] all it sends but what alarms watch;
//! - [`population`]: figures across jobs per cluster, partition and account;
//! - [`quiet`]: what a destination billed per series leaves out of a flush (counts of events at
//!   zero);
//! - [`shape`]: which series each destination takes, and with which dimensions
//!   (`node.job_metrics`, `node.per_node_dimensions`, `self_metrics_per_node`);
//!   [`job_series`]: per-job typed readings -> per-job series, in a destination's shape.

pub mod derive;
pub mod findings;
pub mod job_series;
pub mod jobs;
pub mod node_sample;
pub mod population;
pub mod quiet;
pub mod records;
pub mod rest;
pub mod scheduler_sample;
pub mod shape;
pub mod trim;
