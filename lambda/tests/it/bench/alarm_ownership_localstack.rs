//! Alarm ownership against LocalStack: two clusters whose names share a start, `hpc` and
//! `hpc-prod`, in one account. Syncing `hpc`, even with a rule removed and another changed,
//! never deletes or rewrites an alarm of `hpc-prod`, nor an alarm of someone's own carrying
//! `hpc`'s prefix: with the default prefix (`slurm-cw-<cluster>/`) and with the older
//! `slurm-cw-<cluster>-` kept through the `alarm_prefix` override, which lists the other
//! cluster's alarms too.

use crate::common;

use aws_sdk_cloudwatch::types::ComparisonOperator;
use common::*;
use slurm_cw_catalog::alarms::{Rule, default_rules};
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::{Clients, handle};
use std::collections::BTreeMap;

fn cfg(ns: &str, cluster: &str, topic: &str, rules: &[Rule], extra: &str) -> Config {
    Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "sns_topic_arn": "{topic}", "rules": {}{extra}}}"#,
        serde_json::to_string(rules).unwrap()
    ))
    .unwrap()
}

/// Every alarm named with `prefix`: name -> what would show a rewrite (its configuration's last
/// update, description, threshold, periods).
async fn snapshot(clients: &Clients, prefix: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut token = None;
    loop {
        let r = clients
            .cloudwatch
            .describe_alarms()
            .alarm_name_prefix(prefix)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        for a in r.metric_alarms() {
            out.insert(
                a.alarm_name().unwrap().to_owned(),
                format!(
                    "{:?} {:?} {:?} {:?}",
                    a.alarm_configuration_updated_timestamp(),
                    a.alarm_description(),
                    a.threshold(),
                    a.evaluation_periods()
                ),
            );
        }
        token = r.next_token().map(str::to_owned);
        if token.is_none() {
            return out;
        }
    }
}

/// Only the alarms of `all` named with `prefix`.
fn under(all: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    all.iter().filter(|(n, _)| n.starts_with(prefix)).map(|(n, v)| (n.clone(), v.clone())).collect()
}

async fn own_alarm(clients: &Clients, name: &str) {
    clients
        .cloudwatch
        .put_metric_alarm()
        .alarm_name(name)
        .alarm_description("an operator's own alarm")
        .namespace("Elsewhere")
        .metric_name("Load")
        .statistic(aws_sdk_cloudwatch::types::Statistic::Maximum)
        .period(60)
        .evaluation_periods(1)
        .threshold(1.0)
        .comparison_operator(ComparisonOperator::GreaterThanThreshold)
        .send()
        .await
        .unwrap();
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn syncing_one_cluster_never_touches_another_whose_name_it_begins() {
    let Some(url) = localstack() else { return };
    let clients = clients(&url).await;
    let ns = unique("OwnershipTest");
    let hpc = unique("hpc");
    let prod = format!("{hpc}-prod");
    for c in [&hpc, &prod] {
        job_group(&clients, c).await;
    }
    let topic = topic(&clients, "ownership").await;
    let rules = default_rules();
    // hpc's next rule set: one rule gone, one changed.
    let mut fewer = rules.clone();
    let removed = fewer.pop().unwrap();
    fewer[0].threshold += 1.0;

    for (legacy, label) in [(false, "default prefix"), (true, "legacy prefix via alarm_prefix")] {
        let prefix = |c: &str| if legacy { format!("slurm-cw-{c}-") } else { format!("slurm-cw-{c}/") };
        let extra =
            |c: &str| if legacy { format!(r#", "alarm_prefix": "{}""#, prefix(c)) } else { String::new() };
        let (hpc_prefix, prod_prefix) = (prefix(&hpc), prefix(&prod));
        let prod_cfg = cfg(&ns, &prod, &topic, &rules, &extra(&prod));
        let hpc_cfg = cfg(&ns, &hpc, &topic, &rules, &extra(&hpc));
        assert_eq!(prod_cfg.alarm_prefix(), prod_prefix);

        let s = handle(&prod_cfg, &clients, invocation_for(minute_ago(5))).await.unwrap();
        assert_eq!(s.alarms.created_or_updated.len(), rules.len(), "{label}");
        let s = handle(&hpc_cfg, &clients, invocation_for(minute_ago(5))).await.unwrap();
        assert_eq!(s.alarms.created_or_updated.len(), rules.len(), "{label}");
        assert!(s.alarms.deleted.is_empty(), "{label}: {:?}", s.alarms.deleted);
        let mine = format!("{hpc_prefix}operators-own");
        own_alarm(&clients, &mine).await;
        let prod_before = snapshot(&clients, &prod_prefix).await;
        assert_eq!(prod_before.len(), rules.len(), "{label}");
        if legacy {
            // The case the marker is for: hpc's prefix lists hpc-prod's alarms.
            let listed = snapshot(&clients, &hpc_prefix).await;
            assert_eq!(under(&listed, &prod_prefix), prod_before, "{label}");
        }

        let hpc_cfg = cfg(&ns, &hpc, &topic, &fewer, &extra(&hpc));
        let s = handle(&hpc_cfg, &clients, invocation_for(minute_ago(4))).await.unwrap();
        assert_eq!(s.alarms.deleted, vec![format!("{hpc_prefix}{}", removed.name)], "{label}");
        assert_eq!(s.alarms.created_or_updated, vec![format!("{hpc_prefix}{}", fewer[0].name)], "{label}");
        assert_eq!(s.alarms.unchanged, fewer.len() - 1, "{label}");
        // hpc-prod: every alarm still there, none rewritten.
        assert_eq!(snapshot(&clients, &prod_prefix).await, prod_before, "{label}");
        let s = handle(&prod_cfg, &clients, invocation_for(minute_ago(4))).await.unwrap();
        assert_eq!((s.alarms.unchanged, s.alarms.created_or_updated.len()), (rules.len(), 0), "{label}");
        // The operator's own alarm under hpc's prefix, without the marker, stays.
        let left = snapshot(&clients, &hpc_prefix).await;
        assert!(left.contains_key(&mine), "{label}");
        // (Under the legacy prefix, hpc's listing also holds hpc-prod's alarms of either prefix.)
        let hpc_own: Vec<&String> =
            left.keys().filter(|n| !n.starts_with(&format!("slurm-cw-{prod}"))).collect();
        assert_eq!(hpc_own.len(), fewer.len() + 1, "{label}: {hpc_own:?}");
    }
}
