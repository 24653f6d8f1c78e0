//! Alarm rules: the declarative format the Lambda turns into CloudWatch alarms, and the default
//! set (generated into `terraform/rules/default-rules.json`).

use crate::metrics::*;
use crate::{Metric, dims};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One metric an alarm (or one term of its expression) watches. `ClusterName` is added by the
/// Lambda; `dimensions` holds the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricRef {
    pub metric: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dimensions: BTreeMap<String, String>,
    #[serde(default = "default_statistic")]
    pub statistic: String,
}

fn default_statistic() -> String {
    "Maximum".into()
}

fn default_one() -> i32 {
    1
}

fn default_period() -> i32 {
    60
}

fn default_missing() -> String {
    "missing".into()
}

fn yes() -> bool {
    true
}

/// A rule: either one metric (`watch`) or a metric-math `expression` over `terms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The alarm is named `<alarm_prefix><name>`.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<MetricRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// Expression terms by id (`m1`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub terms: BTreeMap<String, MetricRef>,
    /// Seconds: 10, 30 or a multiple of 60.
    #[serde(default = "default_period")]
    pub period: i32,
    #[serde(default = "default_one")]
    pub evaluation_periods: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datapoints_to_alarm: Option<i32>,
    /// `>`, `>=`, `<` or `<=`.
    pub comparison: String,
    pub threshold: f64,
    /// `missing`, `notBreaching`, `breaching` or `ignore`.
    #[serde(default = "default_missing")]
    pub treat_missing_data: String,
    /// Notify the SNS topic on ALARM and OK.
    #[serde(default = "yes")]
    pub notify: bool,
}

/// Why a rule cannot become an alarm: the rule, the metric at fault where it is one of the
/// rule's, and what is wrong. Written by hand: the catalog keeps to serde alone.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    pub rule: String,
    pub metric: Option<String>,
    pub why: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.metric {
            Some(m) => write!(f, "rule {}, metric {m}: {}", self.rule, self.why),
            None => write!(f, "rule {}: {}", self.rule, self.why),
        }
    }
}

impl std::error::Error for RuleError {}

/// Checks that a rule can become an alarm.
pub fn check_rule(r: &Rule) -> Result<(), RuleError> {
    let fail = |metric: Option<&str>, why: String| RuleError {
        rule: r.name.clone(),
        metric: metric.map(str::to_owned),
        why,
    };
    let name_ok = !r.name.is_empty()
        && r.name.len() <= 200
        && r.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        // The name itself is bad: quoted, so an empty or odd one shows.
        let why = "name must be 1-200 letters, digits, '-' or '_'".into();
        return Err(RuleError { rule: format!("{:?}", r.name), metric: None, why });
    }
    let check_ref = |m: &MetricRef| -> Result<(), RuleError> {
        let metric = Some(m.metric.as_str());
        let known = crate::by_name(&m.metric)
            .ok_or_else(|| fail(metric, "not a metric of the catalog (see docs/metrics.md)".into()))?;
        let mut names: Vec<&str> = m.dimensions.keys().map(String::as_str).collect();
        names.push(dims::CLUSTER_NAME);
        if !known.accepts_dimensions(names) {
            let given = m.dimensions.keys().collect::<Vec<_>>();
            return Err(fail(
                metric,
                format!("not published with dimensions {given:?} (see docs/metrics.md)"),
            ));
        }
        const STATS: &[&str] = &["Average", "Sum", "Minimum", "Maximum", "SampleCount"];
        if !STATS.contains(&m.statistic.as_str()) {
            return Err(fail(metric, format!("statistic {:?} is not one of {STATS:?}", m.statistic)));
        }
        Ok(())
    };
    match (&r.watch, &r.expression) {
        (Some(m), None) if r.terms.is_empty() => check_ref(m)?,
        (None, Some(_)) if !r.terms.is_empty() => {
            for (id, m) in &r.terms {
                if !id.starts_with(|c: char| c.is_ascii_lowercase()) {
                    let why = format!("term id {id:?} must start with a lowercase letter");
                    return Err(fail(Some(&m.metric), why));
                }
                check_ref(m)?;
            }
        }
        _ => return Err(fail(None, "give either `watch`, or `expression` with `terms`".into())),
    }
    if !(r.period == 10 || r.period == 30 || (r.period >= 60 && r.period % 60 == 0)) {
        return Err(fail(None, format!("period {} must be 10, 30 or a multiple of 60", r.period)));
    }
    if r.evaluation_periods < 1 || r.datapoints_to_alarm.is_some_and(|d| d < 1 || d > r.evaluation_periods) {
        return Err(fail(None, "need 1 <= datapoints_to_alarm <= evaluation_periods".into()));
    }
    if !matches!(r.comparison.as_str(), ">" | ">=" | "<" | "<=") {
        return Err(fail(None, format!("comparison {:?} is not >, >=, < or <=", r.comparison)));
    }
    if !matches!(r.treat_missing_data.as_str(), "missing" | "notBreaching" | "breaching" | "ignore") {
        return Err(fail(None, format!("treat_missing_data {:?} is not valid", r.treat_missing_data)));
    }
    if !r.threshold.is_finite() {
        return Err(fail(None, "threshold must be a number".into()));
    }
    Ok(())
}

fn watch(m: &Metric, dims: &[(&str, &str)], statistic: &str) -> MetricRef {
    MetricRef {
        metric: m.name.to_owned(),
        dimensions: dims.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        statistic: statistic.to_owned(),
    }
}

/// The rules a new deployment starts with.
pub fn default_rules() -> Vec<Rule> {
    let simple = |name: &str,
                  description: &str,
                  m: MetricRef,
                  evals: i32,
                  cmp: &str,
                  threshold: f64,
                  missing: &str| Rule {
        name: name.into(),
        description: description.into(),
        watch: Some(m),
        expression: None,
        terms: BTreeMap::new(),
        period: 60,
        evaluation_periods: evals,
        datapoints_to_alarm: None,
        comparison: cmp.into(),
        threshold,
        treat_missing_data: missing.into(),
        notify: true,
    };
    vec![
        simple(
            "nodes-down",
            "Nodes have been down for 5 minutes, outside maintenance and not powered-down cloud nodes.",
            watch(&NODES_DOWN_UNPLANNED, &[], "Maximum"),
            5,
            ">",
            0.0,
            "notBreaching",
        ),
        simple(
            "nodes-drained",
            "Nodes have been drained for 30 minutes.",
            watch(&NODE_COUNT, &[(dims::STATE, "drained")], "Maximum"),
            30,
            ">",
            0.0,
            "notBreaching",
        ),
        simple(
            "slurmctld-not-reporting",
            "slurmctld has not answered for 3 minutes, or the head node shipper stopped reporting.",
            watch(&SLURMCTLD_UP, &[], "Minimum"),
            3,
            "<",
            1.0,
            "breaching",
        ),
        simple(
            "backfill-cycle-too-long",
            "The backfill scheduler's last cycle took over 30 s, 3 minutes in a row.",
            watch(&BACKFILL_LAST_CYCLE, &[], "Maximum"),
            3,
            ">",
            30_000_000.0,
            "notBreaching",
        ),
        Rule {
            name: "pending-jobs-growing".into(),
            description: "The number of pending jobs has grown for 30 minutes.".into(),
            watch: None,
            expression: Some("DIFF(m1)".into()),
            terms: BTreeMap::from([("m1".into(), watch(&JOB_COUNT, &[(dims::STATE, "pending")], "Maximum"))]),
            period: 300,
            evaluation_periods: 6,
            datapoints_to_alarm: None,
            comparison: ">".into(),
            threshold: 0.0,
            treat_missing_data: "notBreaching".into(),
            notify: true,
        },
        simple(
            "idle-gpu-jobs",
            "Jobs hold GPUs they have not used for the configured idle time.",
            watch(&IDLE_GPU_JOBS, &[], "Sum"),
            1,
            ">",
            0.0,
            "notBreaching",
        ),
        Rule {
            period: 300,
            ..simple(
                "shipper-datums-dropped",
                "Shippers dropped datums (see ShipperDatumsDropped by NodeName and Reason).",
                watch(&SHIPPER_DATUMS_DROPPED, &[], "Sum"),
                1,
                ">",
                0.0,
                "notBreaching",
            )
        },
    ]
}

/// `terraform/rules/default-rules.json`.
pub fn default_rules_json() -> String {
    let mut s = serde_json::to_string_pretty(&default_rules()).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules_are_valid_and_round_trip() {
        let rules = default_rules();
        for r in &rules {
            check_rule(r).unwrap();
        }
        let back: Vec<Rule> = serde_json::from_str(&default_rules_json()).unwrap();
        assert_eq!(back, rules);
    }

    #[test]
    fn bad_rules_are_refused_with_the_rule_name() {
        let mut r = default_rules().remove(0);
        r.watch.as_mut().unwrap().metric = "NodeCoutn".into();
        let e = check_rule(&r).unwrap_err();
        assert_eq!((e.rule.as_str(), e.metric.as_deref()), ("nodes-down", Some("NodeCoutn")));
        assert!(e.to_string().contains("nodes-down") && e.to_string().contains("NodeCoutn"), "{e}");
        let mut r = default_rules().remove(0);
        r.watch.as_mut().unwrap().dimensions.insert("Flag".into(), "x".into());
        assert!(check_rule(&r).unwrap_err().to_string().contains("dimensions"));
        let mut r = default_rules().remove(0);
        r.period = 45;
        assert!(check_rule(&r).is_err());
        let mut r = default_rules().remove(0);
        r.comparison = "=".into();
        assert!(check_rule(&r).is_err());
        let mut r = default_rules().remove(0);
        r.expression = Some("m1".into());
        assert!(check_rule(&r).is_err(), "watch and expression together");
        let parsed: Result<Rule, _> = serde_json::from_str(
            r#"{"name":"x","watch":{"metric":"NodeCount"},"comparison":">","threshold":1,"colour":"red"}"#,
        );
        assert!(parsed.unwrap_err().to_string().contains("colour"));
    }
}
