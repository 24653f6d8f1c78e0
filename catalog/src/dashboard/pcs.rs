//! The widgets over AWS PCS's vended logs, generated into `terraform/dashboards/pcs.json.tftpl`.

use super::{Layout, cluster_layout};
use serde_json::json;

/// The AWS PCS scaling log group, filled in by Terraform.
const PCS_SCALING_LOG_GROUP: &str = "${pcs_scaling_log_group}";
/// The AWS PCS job completion log group, filled in by Terraform.
const PCS_JOBCOMP_LOG_GROUP: &str = "${pcs_jobcomp_log_group}";

/// The widgets over AWS PCS's vended logs (`terraform/dashboards/pcs.json.tftpl`): an object of
/// `scaling` and `jobcomp` widget lists, placed below the cluster dashboard; Terraform appends
/// each list where its log group is given. What PCS records is shown from its own records, not
/// rebuilt: each launch failure with its reason, the nodes' transitions, and each job's
/// completion record (state, times, nodes, instance ids and types). The job completion
/// record's fields are shown whole (`@message`): their names were not in the documentation this
/// was built from.
pub fn pcs_widgets() -> String {
    use crate::pcs::scaling as f;
    let top = cluster_layout().bottom();
    let mut l = Layout { widgets: Vec::new(), x: 0, y: top };
    l.header(&format!("AWS PCS scaling logs ({PCS_SCALING_LOG_GROUP})"));
    l.query_over(
        PCS_SCALING_LOG_GROUP,
        "Node launch failures and their reasons",
        &format!(
            "fields @timestamp, {node}, {group}, {reason}, {desc}, {details}.{ec2}, {details}.{itype}\n| filter {status} = '{failed}'\n| sort @timestamp desc\n| limit 50",
            node = f::SCHEDULER_NODE_ID, group = f::COMPUTE_NODE_GROUP_ID, reason = f::REASON_CODE,
            desc = f::DESCRIPTION, details = f::DETAILS, ec2 = f::details::EC2_ERROR_CODE,
            itype = f::details::INSTANCE_TYPE, status = f::STATUS_CODE, failed = f::LAUNCH_FAILED,
        ),
    );
    l.query_over(
        PCS_SCALING_LOG_GROUP,
        "Node transitions by status and reason",
        &format!(
            "stats count(*) as transitions by {status}, {reason}\n| sort transitions desc",
            status = f::STATUS_CODE,
            reason = f::REASON_CODE,
        ),
    );
    let scaling = std::mem::take(&mut l.widgets);
    l.header(&format!("AWS PCS job completion logs ({PCS_JOBCOMP_LOG_GROUP})"));
    l.query_over(
        PCS_JOBCOMP_LOG_GROUP,
        "Jobs ended, newest first (PCS's job completion records)",
        "fields @timestamp, @message\n| sort @timestamp desc\n| limit 50",
    );
    let body = json!({ "scaling": scaling, "jobcomp": l.widgets });
    let mut s = serde_json::to_string_pretty(&body).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn the_pcs_widgets_query_their_groups_below_the_cluster_dashboard() {
        let v: Value = serde_json::from_str(&pcs_widgets()).unwrap();
        let bottom = cluster_layout().bottom();
        let (scaling, jobcomp) = (v["scaling"].as_array().unwrap(), v["jobcomp"].as_array().unwrap());
        assert_eq!((scaling.len(), jobcomp.len()), (3, 2), "a header and its tables each");
        for (widgets, group) in [(scaling, PCS_SCALING_LOG_GROUP), (jobcomp, PCS_JOBCOMP_LOG_GROUP)] {
            for w in widgets {
                assert!(w["y"].as_u64().unwrap() >= u64::from(bottom), "below the cluster dashboard");
                if let Some(q) = w["properties"]["query"].as_str() {
                    assert!(q.starts_with(&format!("SOURCE '{group}' |")), "{q}");
                }
            }
        }
        let failures = scaling[1]["properties"]["query"].as_str().unwrap();
        assert!(failures.contains("filter status_code = 'LAUNCH_FAILED'"), "{failures}");
        assert!(failures.contains("details.ec2_error_code"), "{failures}");
        let rows: Vec<u64> = scaling.iter().chain(jobcomp).map(|w| w["y"].as_u64().unwrap()).collect();
        assert!(rows.windows(2).all(|p| p[0] < p[1]), "no two widgets on one row: {rows:?}");
    }
}
