//! The Lambda's tests that need LocalStack (`scripts/bench/localstack.sh`): each is
//! `#[ignore = "needs LocalStack: ..."]`, and the test command runs them a module at a time,
//! as when each module was a binary of its own.

mod alarm_ownership_localstack;
mod alarms_notices_localstack;
mod cw_localstack;
mod dashboard_localstack;
mod findings_localstack;
mod minutes_localstack;
mod pcs_scaling_localstack;
mod runtime_api;
mod scale_localstack;
