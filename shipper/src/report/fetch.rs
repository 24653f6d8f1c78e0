//! Reading a job's records back: FilterLogEvents on the job log group, every page.

use aws_sdk_cloudwatchlogs::Client;
use serde_json::Value;
use slurm_cw_catalog::records::{self as r, kinds};
use slurm_cw_sink::failure::{code, source_chain};

/// Why the records could not be read.
#[derive(Debug, PartialEq)]
pub enum FetchError {
    GroupMissing,
    AccessDenied(String),
    Other(String),
}

/// The job's sample and summary records in `group`, in `[start, end]` (ms since the epoch)
/// when given: those whose `field` (JobId, or ArrayTask for `<array job>_<task>`) is `job`.
/// The field is filtered by CloudWatch Logs, the type here: LocalStack 4.13 does not apply
/// `&&` in a filter pattern.
pub async fn records(
    client: &Client,
    group: &str,
    (field, job): (&str, &str),
    start: Option<i64>,
    end: Option<i64>,
) -> Result<Vec<Value>, FetchError> {
    let pattern = format!("{{ $.{field} = \"{job}\" }}");
    let mut out = Vec::new();
    let mut token = None;
    // A bound on pages, so a broken paginator cannot loop for ever.
    for _ in 0..10_000 {
        let page = client
            .filter_log_events()
            .log_group_name(group)
            .filter_pattern(&pattern)
            .set_start_time(start)
            .set_end_time(end)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| classify(code(&e), || source_chain(&e)))?;
        out.extend(page.events().iter().filter_map(|e| wanted(e.message()?, field, job)));
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}

/// The group missing and no permission get answers of their own; the rest say what happened.
fn classify(code: Option<&str>, why: impl FnOnce() -> String) -> FetchError {
    match code {
        Some("ResourceNotFoundException") => FetchError::GroupMissing,
        Some(c) if c.starts_with("AccessDenied") || c == "UnauthorizedOperation" => {
            FetchError::AccessDenied(c.to_owned())
        }
        _ => FetchError::Other(why()),
    }
}

/// A sample or summary record of this job; anything else (other events, bad JSON) is skipped.
fn wanted(message: &str, field: &str, job: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(message).ok()?;
    let is_job = v.get(field)?.as_str()? == job;
    let kind = v.get(r::TYPE.name)?.as_str()?;
    (is_job && (kind == kinds::JOB_SAMPLE || kind == kinds::JOB_SUMMARY)).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_jobs_samples_and_summaries() {
        assert!(wanted(r#"{"Type":"job_summary","JobId":"7"}"#, "JobId", "7").is_some());
        assert!(wanted(r#"{"Type":"job_sample","JobId":"7"}"#, "JobId", "7").is_some());
        assert!(wanted(r#"{"Type":"job_finding","JobId":"7"}"#, "JobId", "7").is_none());
        assert!(wanted(r#"{"Type":"job_sample","JobId":"77"}"#, "JobId", "7").is_none());
        assert!(wanted("not json", "JobId", "7").is_none());
    }

    #[test]
    fn missing_group_and_no_permission_are_told_apart() {
        let other = || "timeout".to_owned();
        assert_eq!(classify(Some("ResourceNotFoundException"), other), FetchError::GroupMissing);
        assert_eq!(
            classify(Some("AccessDeniedException"), other),
            FetchError::AccessDenied("AccessDeniedException".into())
        );
        assert_eq!(classify(Some("ThrottlingException"), other), FetchError::Other("timeout".into()));
        assert_eq!(classify(None, other), FetchError::Other("timeout".into()));
    }
}
