//! `bootstrap`: the Lambda's entry point on provided.al2023.

use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::{self, Clients, Summary};
use std::time::{Duration, SystemTime};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .without_time()
        .init();
    let config = Config::from_env().map_err(|e| {
        tracing::error!(error = %e, "bad configuration");
        e
    })?;
    if config.rollup_minutes.is_some() {
        tracing::warn!(
            "rollup_minutes is ignored: findings are read every run and no run reads per-job series"
        );
    }
    let clients = Clients::from_env().await.map_err(|e| {
        tracing::error!(error = %e, "cannot reach AWS");
        e
    })?;
    let (config, clients) = (&config, &clients);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<EventBridgeEvent<serde_json::Value>>| async move {
            // The scheduled event's time, so that a late or repeated invocation derives the minute
            // it was meant for; the clock when the event has none.
            let now = match event.payload.time {
                Some(t) => SystemTime::UNIX_EPOCH + Duration::from_secs(t.timestamp().max(0) as u64),
                None => SystemTime::now(),
            };
            let summary: Summary = handler::run(config, clients, now).await;
            tracing::info!(
                minute = %summary.minute,
                published = summary.datums_published,
                findings = summary.findings.len(),
                launch_failures = summary.launch_failures.len(),
                pcs_scaling_malformed = summary.pcs_scaling_malformed,
                pcs_scaling_other_cluster = summary.pcs_scaling_other_cluster,
                alarms_changed = summary.alarms.created_or_updated.len(),
                failed_stages = summary.failed_stages.len(),
                "invocation done"
            );
            // Every stage has run; now a failed one fails the invocation, for Lambda's metrics
            // and dead-letter queue.
            Ok::<Summary, Error>(summary.into_result()?)
        },
    ))
    .await
}
