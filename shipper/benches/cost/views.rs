//! Which of the views' metrics a run gave data: every metric the generated dashboard draws and
//! every metric the default alarm rules watch, by name, against the run's ListMetrics. A cut
//! of the bill must keep each of them with data where it had some (a GPU widget has none on a
//! cluster without GPUs, before as after). By name only: a widget or alarm on one dimension
//! set of a metric that has data on another is not told apart here.

use super::Listing;
use slurm_cw_catalog::alarms::default_rules;
use slurm_cw_catalog::dashboard::{cluster_dashboard, referenced_metrics};
use std::collections::BTreeSet;

/// One line: how many of the dashboard's and the alarms' metrics have data, and which not.
/// `earlier`: names the head sent before the hour measured (a figure at zero goes once a day:
/// listed in CloudWatch, without data in this hour).
pub fn print(scenario: &str, listing: &Listing, earlier: &BTreeSet<String>) {
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
    println!(
        "{scenario} views: the dashboard draws {} metrics, {} with data in this run (without: {}); the default alarms watch {}, {} with data (without: {})",
        drawn.len(),
        drawn.len() - drawn_none.len(),
        list(&drawn_none),
        watched.len(),
        watched.len() - watched_none.len(),
        list(&watched_none),
    );
}
