//! Every text format the shipper reads or writes, in one crate with no I/O and no AWS SDK, so
//! that each parser can be fuzzed on its own (see fuzz/):
//!
//! - [`slurm`]: sinfo, squeue and sdiag output, text and JSON, of every supported version;
//! - [`cgroup`]: the small formats of cgroup v1 and v2 files;
//! - [`infiniband`], [`lustre`], [`powercap`]: EFA and InfiniBand port counters, the Lustre
//!   client's llite stats and RAPL energy counters;
//! - [`datum`]: a datum and its JSON line (the stdout sink's output and the spool's content);
//! - [`record`]: a job record, one CloudWatch Logs event;
//! - [`spool`]: the spool file, a checksummed batch of datums or records;
//! - [`gzip`]: gzip members from a kept compressor (spool files, OTLP bodies);
//! - [`log_once`]: which problems were logged already (the collectors', the validators'; the
//!   caller logs), here so that the collectors need not import the AWS crate for it.

pub mod cgroup;
pub mod datum;
pub mod gzip;
pub mod infiniband;
pub mod log_once;
pub mod lustre;
pub mod powercap;
pub mod price;
pub mod record;
pub mod slurm;
pub mod spool;
