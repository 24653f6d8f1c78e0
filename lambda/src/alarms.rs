//! Keeps CloudWatch alarms equal to the rule set, idempotently: an alarm is written only when its
//! rule (or what it depends on: namespace, cluster, topic) changed, and our alarms that no rule
//! names are deleted. The rule's fingerprint rides in the alarm description.
//!
//! An alarm is ours when it has our prefix (`slurm-cw-<cluster>/`) *and* ends its description
//! with this cluster's marker line (`[slurm-cw cluster=<name>]`): a prefix alone is not proof,
//! as `slurm-cw-hpc-` also begins `slurm-cw-hpc-prod-...`, and someone may name an alarm of their
//! own with our prefix. Alarms without the marker are never deleted.

use anyhow::{Context, Result};
use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricStat, StandardUnit, Statistic,
};
use serde::Serialize;
use slurm_cw_catalog::alarms::{MetricRef, Rule};
use slurm_cw_catalog::dims::CLUSTER_NAME;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct SyncReport {
    pub created_or_updated: Vec<String>,
    pub unchanged: usize,
    pub deleted: Vec<String>,
}

/// What an alarm depends on besides its rule.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub cluster: &'a str,
    pub prefix: &'a str,
    pub topic: Option<&'a str>,
}

/// FNV-1a: a fingerprint that stays the same from one build to the next.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

fn fingerprint(rule: &Rule, t: &Target<'_>) -> String {
    let text = format!(
        "{}|{}|{}|{}",
        serde_json::to_string(rule).unwrap_or_default(),
        t.namespace,
        t.cluster,
        t.topic.unwrap_or("")
    );
    format!("[slurm-cw {:016x}]", fnv(text.as_bytes()))
}

/// The last line of every alarm description the function writes for `cluster`.
pub fn marker(cluster: &str) -> String {
    format!("[slurm-cw cluster={cluster}]")
}

/// Whether an alarm's description says that `cluster`'s function manages it.
pub fn owned(description: &str, cluster: &str) -> bool {
    description.lines().last() == Some(marker(cluster).as_str())
}

/// CloudWatch takes descriptions of up to 1024 characters.
const MAX_DESCRIPTION: usize = 1024;

/// The whole description of `rule`'s alarm: the rule's words, its fingerprint, the marker.
fn description(rule: &Rule, t: &Target<'_>) -> String {
    let tail = format!("{}\n{}", fingerprint(rule, t), marker(t.cluster));
    let room = MAX_DESCRIPTION.saturating_sub(tail.chars().count() + 1);
    let words: String = rule.description.trim().chars().take(room).collect();
    if words.is_empty() { tail } else { format!("{words} {tail}") }
}

fn comparison(c: &str) -> ComparisonOperator {
    match c {
        ">=" => ComparisonOperator::GreaterThanOrEqualToThreshold,
        "<" => ComparisonOperator::LessThanThreshold,
        "<=" => ComparisonOperator::LessThanOrEqualToThreshold,
        _ => ComparisonOperator::GreaterThanThreshold,
    }
}

fn dimensions(m: &MetricRef, cluster: &str) -> Vec<Dimension> {
    let mut d = vec![Dimension::builder().name(CLUSTER_NAME).value(cluster).build()];
    d.extend(m.dimensions.iter().map(|(k, v)| Dimension::builder().name(k).value(v).build()));
    d
}

async fn put(client: &Client, rule: &Rule, t: &Target<'_>) -> Result<()> {
    let name = format!("{}{}", t.prefix, rule.name);
    let description = description(rule, t);
    let actions: Vec<String> =
        if rule.notify { t.topic.map(|a| vec![a.to_owned()]).unwrap_or_default() } else { vec![] };
    let mut req = client
        .put_metric_alarm()
        .alarm_name(&name)
        .alarm_description(description)
        .comparison_operator(comparison(&rule.comparison))
        .threshold(rule.threshold)
        .evaluation_periods(rule.evaluation_periods)
        .set_datapoints_to_alarm(rule.datapoints_to_alarm)
        .treat_missing_data(&rule.treat_missing_data)
        .actions_enabled(!actions.is_empty())
        .set_alarm_actions(Some(actions.clone()))
        .set_ok_actions(Some(actions));
    if let Some(m) = &rule.watch {
        let unit = slurm_cw_catalog::by_name(&m.metric).map(|c| StandardUnit::from(c.unit.as_str()));
        req = req
            .namespace(t.namespace)
            .metric_name(&m.metric)
            .set_dimensions(Some(dimensions(m, t.cluster)))
            .statistic(Statistic::from(m.statistic.as_str()))
            .period(rule.period)
            .set_unit(unit);
    } else if let Some(expr) = &rule.expression {
        let mut queries = vec![
            MetricDataQuery::builder().id("e1").expression(expr).label(&rule.name).return_data(true).build(),
        ];
        for (id, m) in &rule.terms {
            queries.push(
                MetricDataQuery::builder()
                    .id(id)
                    .metric_stat(
                        MetricStat::builder()
                            .metric(
                                Metric::builder()
                                    .namespace(t.namespace)
                                    .metric_name(&m.metric)
                                    .set_dimensions(Some(dimensions(m, t.cluster)))
                                    .build(),
                            )
                            .period(rule.period)
                            .stat(&m.statistic)
                            .build(),
                    )
                    .return_data(false)
                    .build(),
            );
        }
        req = req.set_metrics(Some(queries));
    }
    req.send().await.with_context(|| format!("PutMetricAlarm {name}"))?;
    Ok(())
}

/// Existing alarms with our prefix: name -> description.
async fn existing(client: &Client, prefix: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut token = None;
    loop {
        let resp = client
            .describe_alarms()
            .alarm_name_prefix(prefix)
            .set_next_token(token)
            .send()
            .await
            .context("DescribeAlarms")?;
        for a in resp.metric_alarms() {
            if let Some(n) = a.alarm_name() {
                out.insert(n.to_owned(), a.alarm_description().unwrap_or("").to_owned());
            }
        }
        token = resp.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok(out);
        }
    }
}

/// Creates or updates an alarm per rule and deletes our alarms (prefix and marker) no rule names.
pub async fn sync(client: &Client, rules: &[Rule], t: &Target<'_>) -> Result<SyncReport> {
    let have = existing(client, t.prefix).await?;
    let mut report = SyncReport::default();
    let mut wanted = Vec::new();
    for rule in rules {
        let name = format!("{}{}", t.prefix, rule.name);
        let current = have.get(&name).is_some_and(|d| *d == description(rule, t));
        if current {
            report.unchanged += 1;
        } else {
            put(client, rule, t).await?;
            report.created_or_updated.push(name.clone());
        }
        wanted.push(name);
    }
    let stale: Vec<String> = have
        .iter()
        .filter(|(n, d)| !wanted.contains(n) && owned(d, t.cluster))
        .map(|(n, _)| n.clone())
        .collect();
    for chunk in stale.chunks(100) {
        client.delete_alarms().set_alarm_names(Some(chunk.to_vec())).send().await.context("DeleteAlarms")?;
    }
    report.deleted = stale;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_follow_the_rule_and_its_target() {
        let rule = slurm_cw_catalog::alarms::default_rules().remove(0);
        let t = Target { namespace: "Slurm", cluster: "a", prefix: "p-", topic: None };
        let f = fingerprint(&rule, &t);
        assert_eq!(f, fingerprint(&rule, &t));
        let mut changed = rule.clone();
        changed.threshold += 1.0;
        assert_ne!(f, fingerprint(&changed, &t));
        let other = Target { cluster: "b", ..t };
        assert_ne!(f, fingerprint(&rule, &other));
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn the_marker_names_one_cluster_exactly() {
        let rule = slurm_cw_catalog::alarms::default_rules().remove(0);
        let t = Target { namespace: "Slurm", cluster: "hpc", prefix: "slurm-cw-hpc/", topic: None };
        let d = description(&rule, &t);
        assert!(d.starts_with(rule.description.trim()), "{d}");
        assert!(d.ends_with("\n[slurm-cw cluster=hpc]"), "{d}");
        assert!(owned(&d, "hpc"));
        assert!(!owned(&d, "hpc-prod") && !owned(&d, "hp"));
        let other = Target { cluster: "hpc-prod", ..t };
        assert!(!owned(&description(&rule, &other), "hpc"));
        assert!(!owned("someone's own alarm", "hpc"));
        assert!(!owned("[slurm-cw cluster=hpc] not the last line\nmore", "hpc"));
        let mut long = rule.clone();
        long.description = "w".repeat(2_000);
        let d = description(&long, &t);
        assert_eq!(d.chars().count(), MAX_DESCRIPTION);
        assert!(owned(&d, "hpc"), "the marker survives a long description");
    }
}
