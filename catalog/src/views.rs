//! What the generated views read: the metrics the cluster dashboard draws and the default alarm
//! rules watch. A head figure of slurmctld's scheduler that neither reads goes, by default, into
//! the head's `scheduler_sample` record (billed by the byte) instead of being a custom metric
//! (billed by the hour whatever its value): [`scheduler_detail`].

use crate::alarms::default_rules;
use crate::dashboard::{cluster_dashboard, referenced_metrics};
use crate::{ALL, Group, Kind, Metric, Role};
use std::collections::BTreeSet;

/// Every metric name the cluster dashboard draws or a default alarm rule watches.
pub fn shown() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = referenced_metrics(&cluster_dashboard()).into_iter().collect();
    for r in default_rules() {
        names.extend(r.watch.iter().chain(r.terms.values()).map(|m| m.metric.clone()));
    }
    names
}

/// The scheduler's figures (sdiag's, RPCs by type, and their rates) that no view reads: sent
/// as the head's `scheduler_sample` record unless `head.scheduler_detail = "metrics"`.
pub fn scheduler_detail() -> Vec<&'static Metric> {
    let shown = shown();
    let scheduler =
        |m: &Metric| m.group == Group::Scheduler || m.rate_of.is_some_and(|c| c.group == Group::Scheduler);
    ALL.iter()
        .copied()
        .filter(|m| {
            m.roles == [Role::Head] && m.kind != Kind::Counter && scheduler(m) && !shown.contains(m.name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_is_the_scheduler_figures_no_view_reads() {
        let names: Vec<&str> = scheduler_detail().iter().map(|m| m.name).collect();
        for read in
            ["BackfillLastCycle", "MainSchedLastCycle", "RpcRate", "AgentQueueSize", "ServerThreadCount"]
        {
            assert!(!names.contains(&read), "{read} is drawn or watched: {names:?}");
        }
        for detail in ["RpcTimeRate", "AgentCount", "BackfillDepthMean", "MainSchedMeanDepth"] {
            assert!(names.contains(&detail), "{detail} is read by no view: {names:?}");
        }
        assert!(!names.contains(&"SlurmctldUp") && !names.contains(&"JobCount"), "{names:?}");
    }
}
