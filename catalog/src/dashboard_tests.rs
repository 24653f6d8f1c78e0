use super::*;

#[test]
fn every_metric_drawn_is_in_the_catalog_and_the_layout_fits() {
    let d = cluster_dashboard();
    let names = referenced_metrics(&d);
    assert!(names.len() >= 25, "{}", names.len());
    for m in record_figures() {
        assert!(!names.contains(&m.name.to_owned()), "{} is drawn from the record, not a metric", m.name);
        assert!(d.contains(&format!("({})", m.name)) || m.name == RPC_RATE.name, "{} has its chart", m.name);
    }
    for n in &names {
        assert!(crate::by_name(n).is_some(), "the dashboard draws {n}, which the catalog does not have");
    }
    let v: Value = serde_json::from_str(&d).unwrap();
    for w in v["widgets"].as_array().unwrap() {
        let x = w["x"].as_u64().unwrap() + w["width"].as_u64().unwrap();
        assert!(x <= 24, "a widget runs off the 24-column grid");
    }
    assert!(d.contains("${cluster_name}") && d.contains("${namespace}") && d.contains("${region}"));
    assert!(d.contains("SOURCE '${job_log_group}'"), "Logs Insights widgets over the job records");
    assert!(!d.contains("SEARCH('{${namespace},Account,ClusterName,JobId"), "no per-job metric is drawn");
    assert!(!d.contains("%{"), "no Terraform directives by accident");
}

/// The drain view sums exactly the NodeCount lines of State=drained and State=draining.
#[test]
fn the_drain_view_sums_drained_and_draining() {
    let v: Value = serde_json::from_str(&cluster_dashboard()).unwrap();
    let widget = v["widgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["properties"]["title"].as_str().is_some_and(|t| t.contains("drained + draining")))
        .expect("a drain widget");
    let metrics = widget["properties"]["metrics"].as_array().unwrap();
    let expr = metrics.iter().find_map(|m| m[0]["expression"].as_str()).expect("an expression");
    let mut ids = Vec::new();
    for m in metrics.iter().filter_map(Value::as_array).filter(|m| m[0].is_string()) {
        let opts = m.last().unwrap();
        assert_eq!(m[1], NODE_COUNT.name);
        let state = m.iter().position(|x| x == dims::STATE).map(|i| m[i + 1].as_str().unwrap()).unwrap();
        let id = opts["id"].as_str().unwrap();
        assert!(expr.contains(&format!("FILL({id}, 0)")), "{expr} sums {id}");
        ids.push((state, id));
    }
    ids.sort();
    assert_eq!(ids, vec![("drained", "drained"), ("draining", "draining")]);
    assert_eq!(expr.matches("FILL(").count(), 2, "{expr}: nothing else in the sum");
    assert!(expr.split('+').count() == 2);
}
