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
