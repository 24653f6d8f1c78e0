//! What the shipper and the Lambda share on the way to CloudWatch: the [`datum::Datum`] (and its
//! JSON line form), [`validate`] against PutMetricData's rules, the [`cloudwatch`] client that
//! batches, retries with full-jitter backoff and splits requests refused as invalid, and the
//! [`logs`] client that does the same for job records with PutLogEvents. [`failure`] classifies
//! any SDK error for both, [`retry`] paces their retries, [`outcome`] says what a send did.

pub mod aws;
pub mod cloudwatch;
pub mod failure;
pub mod logs;
pub mod outcome;
pub mod retry;
pub mod send;
pub mod validate;

pub use slurm_cw_formats::{datum, log_once, record};
