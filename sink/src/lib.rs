//! What the shipper and the Lambda share on the way to CloudWatch: the [`datum::Datum`] (and its
//! JSON line form), [`validate`] against PutMetricData's rules, and the [`cloudwatch`] client that
//! batches, retries with full-jitter backoff and splits requests refused as invalid.

pub mod aws;
pub mod cloudwatch;
pub mod validate;

pub use slurm_cw_formats::datum;
