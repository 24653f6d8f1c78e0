//! Files in the repository that are generated from the catalog. `cargo run -p slurm-cw-catalog
//! -- write` rewrites them; a test fails when any is stale.

/// (path relative to the repository root, content)
pub fn files() -> Vec<(&'static str, String)> {
    vec![
        ("docs/metrics.md", crate::docs::metrics_markdown()),
        ("docs/records.md", crate::records::records_markdown()),
        ("terraform/rules/default-rules.json", crate::alarms::default_rules_json()),
        ("terraform/dashboards/cluster.json.tftpl", crate::dashboard::cluster_dashboard()),
        ("terraform/dashboards/pcs.json.tftpl", crate::dashboard::pcs_widgets()),
    ]
}
