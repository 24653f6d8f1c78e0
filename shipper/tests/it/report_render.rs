//! `report`'s text against fixed records (tests/fixtures/report/, built): golden text at a
//! narrow and a wide terminal, a job without GPUs, a job on two nodes. `UPDATE_GOLDEN=1`
//! rewrites the golden files; the tmux run of the same text is `bench::report`'s.

use slurm_cw_shipper::report::{model, render};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The records of a fixture, one JSON object a line.
pub fn records(name: &str) -> Vec<serde_json::Value> {
    let path = fixtures().join("report").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON record a line")).collect()
}

/// The report of a fixture as `report` prints it at `width` columns, without colour.
pub fn rendered(name: &str, width: usize) -> String {
    let mut rep = model::combine("4242", &records(name));
    rep.cluster = Some("demo".into());
    rep.log_group = "/slurm-cw/demo/jobs".into();
    rep.advice = model::advise(&rep);
    render::text_width(&rep, false, width)
}

fn check(golden: &str, got: &str) {
    let path = fixtures().join("golden").join(golden);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        want == got,
        "{} differs (UPDATE_GOLDEN=1 rewrites it; review the diff):\n--- want\n{want}\n--- got\n{got}",
        path.display()
    );
}

#[test]
fn a_gpu_job_on_two_nodes_at_a_narrow_and_a_wide_terminal() {
    for width in [60, 120] {
        let text = rendered("two-nodes-gpus.jsonl", width);
        let over_time = text.lines().skip_while(|l| !l.starts_with("Over time")).skip(1);
        for line in over_time.take_while(|l| !l.is_empty()) {
            assert!(line.chars().count() <= width, "{width} columns: {line:?}");
        }
        check(&format!("report-two-nodes-gpus-{width}.txt"), &text);
    }
    let wide = rendered("two-nodes-gpus.jsonl", 120);
    let narrow = rendered("two-nodes-gpus.jsonl", 60);
    let cells = |t: &str| {
        t.lines()
            .find(|l| l.contains("g1 cpu"))
            .map(|l| l.chars().filter(|c| ('▁'..='█').contains(c) || *c == ' ').count())
    };
    assert!(cells(&wide) > cells(&narrow), "the sparklines fill the width");
    for series in ["g1 cpu", "g1 memory", "g1 gpu 0 util", "g1 gpu 1 memory", "g2 cpu", "g2 memory"] {
        assert!(wide.contains(series), "{series} in\n{wide}");
    }
    assert!(!wide.contains("g2 gpu"), "g2 holds no GPU");
}

#[test]
fn a_job_without_gpus() {
    let text = rendered("cpu-only.jsonl", 80);
    assert!(!text.contains("gpu") && !text.contains("GPU"), "{text}");
    check("report-cpu-only-80.txt", &text);
}

#[test]
fn json_keeps_the_series() {
    let rep = model::combine("4242", &records("two-nodes-gpus.jsonl"));
    let v = serde_json::to_value(&rep).unwrap();
    let series = v["series"].as_array().unwrap();
    let util = series.iter().find(|s| s["node"] == "g1" && s["figure"] == "gpu 0 util").unwrap();
    assert_eq!(util["unit"], "percent");
    assert_eq!(util["points"].as_array().map(Vec::len), Some(30));
}

/// Job 77 on node g1's GPUs 0 and 1, built here: two samples a minute apart and the summary.
/// GPU 0 busy (80 % then 60 %, 4 then 6 GiB), GPU 1 barely (20 % then 0 %, 1 GiB); the
/// summary's energy 0.25 kWh for GPU 0 and 0.05 kWh for GPU 1 (0.3 kWh together).
fn two_gpus() -> Vec<serde_json::Value> {
    use serde_json::json;
    const GIB: f64 = 1_073_741_824.0;
    let sample = |t: &str, (u0, m0): (f64, f64), (u1, m1): (f64, f64)| {
        json!({"Type": "job_sample", "NodeName": "g1", "JobId": "77", "Time": t, "Samples": 2,
               "GpuCount": 2.0, "GpuUtilization": (u0 + u1) / 2.0, "GpuMemoryUsed": m0 + m1,
               "PerGpu": {"0": {"GpuUtilization": u0, "GpuMemoryUsed": m0, "GpuMemoryTotal": 80.0 * GIB, "GpuPower": 400.0},
                          "1": {"GpuUtilization": u1, "GpuMemoryUsed": m1, "GpuMemoryTotal": 80.0 * GIB, "GpuPower": 150.0}}})
    };
    vec![
        sample("2026-11-27T10:00:00Z", (80.0, 4.0 * GIB), (20.0, GIB)),
        sample("2026-11-27T10:01:00Z", (60.0, 6.0 * GIB), (0.0, GIB)),
        json!({"Type": "job_summary", "NodeName": "g1", "JobId": "77", "Samples": 4.0, "ElapsedSeconds": 60.0,
               "Gpus": 2.0, "GpuIdlePercent": 0.0, "GpuEnergyKwh": 0.3, "LastSeen": "2026-11-27T10:01:00Z",
               "PerGpu": {"0": {"GpuEnergyKwh": 0.25}, "1": {"GpuEnergyKwh": 0.05}}}),
    ]
}

#[test]
fn each_gpus_figures_and_energy_from_records_by_gpu() {
    let rep = model::combine("77", &two_gpus());
    let rows: Vec<_> = rep
        .gpus
        .iter()
        .map(|g| (g.gpu.as_str(), g.utilization_mean_percent, g.memory_used_peak_bytes, g.energy_kwh))
        .collect();
    let gib = 1_073_741_824.0;
    assert_eq!(
        rows,
        [("0", Some(70.0), Some(6.0 * gib), Some(0.25)), ("1", Some(10.0), Some(gib), Some(0.05))],
        "means of 80 and 60, 20 and 0; the larger memory; each GPU's energy"
    );
    assert_eq!(rep.per_node[0].gpu_energy_kwh, Some(0.3));
    let text = render::text_width(&rep, false, 100);
    assert!(text.contains("GPUs 2, idle [....................]   0.0%  energy 0.300 kWh"), "{text}");
    assert!(text.contains("memory peak 6.0 GiB of 80.0 GiB  energy 0.250 kWh"), "{text}");
    assert!(text.contains("memory peak 1.0 GiB of 80.0 GiB  energy 0.050 kWh"), "{text}");
    let json = serde_json::to_value(&rep).unwrap();
    assert_eq!(json["gpus"][1]["energy_kwh"], 0.05, "--json keeps it");
    assert_eq!(json["per_node"][0]["gpu_energy_kwh"], 0.3);
}

#[test]
fn a_job_on_one_gpu_has_one_row_with_the_jobs_energy() {
    let mut recs = two_gpus();
    for r in &mut recs {
        r.as_object_mut().unwrap().remove("PerGpu");
    }
    let rep = model::combine("77", &recs);
    assert_eq!(rep.gpus.len(), 1);
    let g = &rep.gpus[0];
    assert_eq!((g.gpu.as_str(), g.utilization_mean_percent, g.energy_kwh), ("all", Some(40.0), Some(0.3)));
}
