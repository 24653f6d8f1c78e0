//! The dashboard generated from the catalog is accepted by CloudWatch (PutDashboard in
//! LocalStack) once Terraform's placeholders are filled in, and draws only catalog metrics.

use crate::common;

use common::*;
use slurm_cw_catalog::dashboard::{cluster_dashboard, pcs_widgets, referenced_metrics};

fn template() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../terraform/dashboards/cluster.json.tftpl"
    ))
    .unwrap()
}

fn pcs_template() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../terraform/dashboards/pcs.json.tftpl"))
        .unwrap()
}

#[test]
fn the_committed_template_is_the_catalogs_and_draws_only_catalog_metrics() {
    let template = template();
    assert_eq!(
        template,
        cluster_dashboard(),
        "the committed template is stale: cargo run -p slurm-cw-catalog -- write"
    );
    for name in referenced_metrics(&template) {
        assert!(slurm_cw_catalog::by_name(&name).is_some(), "{name} is not in the catalog");
    }
    assert_eq!(pcs_template(), pcs_widgets(), "the committed PCS template is stale");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn put_dashboard_accepts_the_generated_body() {
    let Some(url) = localstack() else { return };
    let template = template();
    // What Terraform's templatefile() does with it.
    let body = template
        .replace("${cluster_name}", "prod")
        .replace("${namespace}", "Slurm")
        .replace("${region}", "us-east-1")
        .replace("${job_log_group}", "/slurm-cw/prod/jobs");
    // With both AWS PCS groups given: their widgets appended, as terraform/dashboard.tf does.
    let pcs = pcs_template()
        .replace("${region}", "us-east-1")
        .replace("${pcs_scaling_log_group}", "/aws/vendedlogs/pcs/pcs_abc123de45/scaling")
        .replace("${pcs_jobcomp_log_group}", "/aws/vendedlogs/pcs/pcs_abc123de45/jobcomp");
    let pcs: serde_json::Value = serde_json::from_str(&pcs).unwrap();
    let mut whole: serde_json::Value = serde_json::from_str(&body).unwrap();
    for part in ["scaling", "jobcomp"] {
        let widgets = pcs[part].as_array().unwrap().clone();
        whole["widgets"].as_array_mut().unwrap().extend(widgets);
    }
    let body = whole.to_string();
    assert!(!body.contains("${"), "an unfilled placeholder");
    let cw = clients(&url).await.cloudwatch;
    let name = unique("slurm-cw-dashboard");
    let out =
        cw.put_dashboard().dashboard_name(&name).dashboard_body(&body).send().await.expect("PutDashboard");
    assert!(out.dashboard_validation_messages().is_empty(), "{:?}", out.dashboard_validation_messages());
    let back = cw.get_dashboard().dashboard_name(&name).send().await.unwrap();
    let stored: serde_json::Value = serde_json::from_str(back.dashboard_body().unwrap()).unwrap();
    let sent: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["widgets"].as_array().map(Vec::len), sent["widgets"].as_array().map(Vec::len));
    cw.delete_dashboards().dashboard_names(&name).send().await.unwrap();
}
