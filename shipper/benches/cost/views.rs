//! Which of the views' figures a run gave data: every metric the generated dashboard draws and
//! every metric the default alarm rules watch, by name, against the run's ListMetrics; every
//! figure the dashboard's Logs Insights charts read from the head's `scheduler_sample` records,
//! against the records read back from CloudWatch Logs (LocalStack answers StartQuery with a
//! stub, so the queries themselves are not run here: the fields they read are checked). A cut
//! of the bill must keep each of them with data where it had some (a GPU widget has none on a
//! cluster without GPUs; a count that never rose above zero is not sent). By name only: a
//! widget or alarm on one dimension set of a metric that has data on another is not told apart
//! here.

use super::Listing;
use slurm_cw_catalog::alarms::default_rules;
use slurm_cw_catalog::dashboard::{RECORD_BY_STATE, cluster_dashboard, record_figures, referenced_metrics};
use slurm_cw_catalog::views::quiet_at_zero;
use std::collections::BTreeSet;

/// Every field (and `field.key` of an object field) of the `scheduler_sample` records in `group`.
pub async fn record_fields(logs: &aws_sdk_cloudwatchlogs::Client, group: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut token = None;
    loop {
        let Ok(page) = logs
            .filter_log_events()
            .log_group_name(group)
            .filter_pattern(r#"{ $.Type = "scheduler_sample" }"#)
            .set_next_token(token)
            .send()
            .await
        else {
            break;
        };
        for e in page.events() {
            let Ok(serde_json::Value::Object(m)) = serde_json::from_str(e.message().unwrap_or_default())
            else {
                continue;
            };
            for (k, v) in m {
                if let serde_json::Value::Object(o) = v {
                    out.extend(o.keys().map(|key| format!("{k}.{key}")));
                }
                out.insert(k);
            }
        }
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    out
}

/// One line: how many of the dashboard's and the alarms' metrics have data, and which not.
/// `earlier`: names the head sent before the hour measured (a figure at zero goes once a day:
/// listed in CloudWatch, without data in this hour).
pub fn print(scenario: &str, listing: &Listing, earlier: &BTreeSet<String>, record: &BTreeSet<String>) {
    let drawn: BTreeSet<String> = referenced_metrics(&cluster_dashboard()).into_iter().collect();
    let watched: BTreeSet<String> = default_rules()
        .iter()
        .flat_map(|r| r.watch.iter().chain(r.terms.values()).map(|m| m.metric.clone()).collect::<Vec<_>>())
        .collect();
    let without = |set: &BTreeSet<String>| -> Vec<String> {
        set.iter().filter(|n| !listing.by_name.contains_key(*n) && !earlier.contains(*n)).cloned().collect()
    };
    let (drawn_none, watched_none) = (without(&drawn), without(&watched));
    let list = |v: &[String]| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
    // A count at zero all run is not sent (shipper transforms/quiet.rs): told apart.
    let quiet = |n: &String| slurm_cw_catalog::by_name(n).is_some_and(quiet_at_zero);
    let (drawn_quiet, drawn_none): (Vec<String>, Vec<String>) = drawn_none.into_iter().partition(quiet);
    // The figures the Logs Insights charts read: every one, and every state a count had.
    let read: Vec<&str> = record_figures().iter().map(|m| m.name).collect();
    let record_none: Vec<String> =
        read.iter().filter(|n| !record.contains(**n)).map(|n| (*n).to_owned()).collect();
    let states: Vec<&String> = record
        .iter()
        .filter(|f| RECORD_BY_STATE.iter().any(|m| f.starts_with(&format!("{}.", m.name))))
        .collect();
    println!(
        "{scenario} views: the dashboard draws {} metrics, {} with data in this run (without: {}; at zero all run, so not sent: {}); its Logs Insights charts read {} figures of the head's records, {} with data (without: {}), and {} counts by state; the default alarms watch {}, {} with data (without: {})",
        drawn.len(),
        drawn.len() - drawn_none.len() - drawn_quiet.len(),
        list(&drawn_none),
        list(&drawn_quiet),
        read.len(),
        read.len() - record_none.len(),
        list(&record_none),
        states.len(),
        watched.len(),
        watched.len() - watched_none.len(),
        list(&watched_none),
    );
}
