//! Replays every input the fuzzers ever crashed on (fuzz/regressions/<target>/): each parser
//! must now return, never panic.

use slurm_cw_formats::datum::Datum;
use slurm_cw_formats::slurm::{sdiag, sinfo, squeue};
use slurm_cw_formats::{cgroup, spool};
use std::path::Path;

fn replay(target: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).ok();
    match (target, text) {
        ("spool_file", _) => {
            drop(spool::decode::<Datum>(bytes));
            drop(spool::decode::<slurm_cw_formats::record::Record>(bytes));
        }
        (_, None) => {}
        ("sinfo_text", Some(t)) => drop(sinfo::parse_text(t)),
        ("sinfo_json", Some(t)) => drop(sinfo::parse_json(t)),
        ("squeue_text", Some(t)) => drop(squeue::parse_text(t)),
        ("squeue_json", Some(t)) => drop(squeue::parse_json(t)),
        ("sdiag_text", Some(t)) => drop(sdiag::parse_text(t)),
        ("sdiag_json", Some(t)) => drop(sdiag::parse_json(t)),
        ("datum_line", Some(t)) => drop(Datum::from_json_line(t)),
        ("scontrol_job", Some(t)) => drop(slurm_cw_formats::slurm::job::parse(t)),
        ("cgroup_files", Some(t)) => {
            let _ = (cgroup::flat_key(t, "x"), cgroup::single(t), cgroup::numbers(t), cgroup::cpu_list(t));
            let _ = (cgroup::io_stat(t), cgroup::blkio(t));
        }
        ("lustre_stats", Some(t)) => drop(slurm_cw_formats::lustre::parse(t)),
        ("infiniband_counters", Some(t)) => {
            use slurm_cw_formats::infiniband::{CounterSet, port_totals};
            let files: Vec<(&str, &str)> = t.lines().filter_map(|l| l.split_once(' ')).collect();
            let _ = (port_totals(CounterSet::Efa, &files), port_totals(CounterSet::Infiniband, &files));
        }
        ("powercap_energy", Some(t)) => {
            use slurm_cw_formats::powercap;
            for l in t.lines() {
                let _ = (powercap::zone(l), powercap::name(l), powercap::micro_joules(l));
            }
        }
        ("aws_prices", Some(t)) => {
            drop(slurm_cw_formats::price::spot_price(t, None));
            drop(slurm_cw_formats::price::on_demand_price(t.as_bytes()));
            drop(slurm_cw_formats::slurm::node::parse(t, "c1"));
        }
        (other, _) => panic!("fuzz/regressions/{other}: no such fuzz target"),
    }
}

#[test]
fn every_saved_crash_input_parses_without_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut replayed = 0;
    for dir in std::fs::read_dir(&root).unwrap().flatten().filter(|e| e.path().is_dir()) {
        let target = dir.file_name().to_string_lossy().into_owned();
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            replay(&target, &std::fs::read(file.path()).unwrap());
            replayed += 1;
        }
    }
    assert!(replayed >= 2, "fuzz/regressions holds at least the two known crash inputs, replayed {replayed}");
}
