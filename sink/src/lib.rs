//! What the shipper and the Lambda share on the way to CloudWatch: the [`datum::Datum`] (and its
//! JSON line form), [`validate`] against PutMetricData's rules, the [`cloudwatch`] client that
//! batches, retries with full-jitter backoff and splits requests refused as invalid, and what
//! any client of an AWS service needs: [`failure`] classifies an SDK error, [`retry`] paces
//! retries, [`outcome`] says what a send did, [`aws`] loads the SDK's configuration. The
//! shipper's CloudWatch Logs client, which the Lambda does not use, is the shipper's own
//! (`shipper/src/sinks/logs/`).

pub mod aws;
pub mod cloudwatch;
pub mod failure;
pub mod outcome;
pub mod retry;
pub mod send;
pub mod validate;

pub use slurm_cw_formats::{datum, log_once, record};
