//! The head collector's switches between squeue's and sinfo's explicit text format and
//! `--json`, and between `sdiag --json` and plain sdiag, driven by fake sinfo, squeue and sdiag
//! executables (`slurm.bin_dir`) that print what each Slurm version prints.
//!
//! Where the refusals come from:
//! - `<prog>: error: Invalid job format specification: <field>` on standard error, the column
//!   left empty, exit 0: real output of Slurm 22.05.8 (this machine's) for an unknown `-O`
//!   field; src/sinfo/opts.c and src/squeue/opts.c print the same in 20.11 to 25.11. Which
//!   field a version refuses is assumed (StateComplete is unknown before 21.08, from the source).
//! - `sdiag: unrecognized option '--json'` and exit 1: real, 22.05.8. The same getopt message
//!   for `sinfo --json` on 20.11 (which has no --json) is assumed.
//! - `sinfo: fatal: Unable to find plugin: serializer/json`: real, 22.05.8 with the plugin
//!   left out of PluginDir.
//! - `load_plugins: unable to find plugin: serializer/json` then `fatal: JSON plugin load
//!   failure`: from the 24.11.5 source (src/common/plugrack.c, src/sdiag/opts.c), not run.
//! - `squeue --json` applying the default state filter from 24.05.1 (finished jobs only with
//!   `--states=all`): from the 24.11.5 source and NEWS, emulated here.
//!
//! Outputs served: the real 22.05 captures and the built 24.11 files of formats/tests/fixtures/slurm.

use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::HeadConfig;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::head::{HeadCollector, sdiag, sinfo, squeue};
use slurm_cw_shipper::sources::{Collector, Errors};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn fixture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/slurm").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A directory of fake Slurm commands. Each logs its arguments to `calls.log`, one line a call.
struct FakeSlurm {
    dir: tempfile::TempDir,
}

impl FakeSlurm {
    fn new() -> Self {
        FakeSlurm { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A file the scripts can `cat` (as `$D/<name>`).
    fn file(&self, name: &str, content: &str) {
        std::fs::write(self.path().join(name), content).unwrap();
    }

    /// `program` runs the `case` arms in `arms` on its arguments.
    fn command(&self, program: &str, arms: &str) {
        let d = self.path().display();
        let body = format!(
            "#!/bin/sh\nD='{d}'\necho \"{program} $*\" >> \"$D/calls.log\"\ncase \"$*\" in\n{arms}\n*) echo \"{program}: unexpected arguments: $*\" >&2; exit 2 ;;\nesac\n"
        );
        let p = self.path().join(program);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The calls since the last time, and forgets them.
    fn calls(&self) -> Vec<String> {
        let p = self.path().join("calls.log");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        text.lines().map(str::to_owned).collect()
    }

    fn collector(&self) -> HeadCollector {
        HeadCollector::new(
            SlurmCommands::new(Some(self.path().to_owned()), Duration::from_secs(20)),
            HeadConfig {
                per_partition: slurm_cw_shipper::settings::Toggle::On,
                top_pending_reasons: 20,
                top_rpc_types: 50,
                ..HeadConfig::default()
            },
        )
    }
}

/// One collection: what it shipped and the errors per part.
async fn cycle(c: &mut HeadCollector) -> (Batch, Vec<(&'static str, u64)>) {
    let mut batch = Batch::new(SystemTime::UNIX_EPOCH);
    let mut errors = Errors::new();
    c.collect(&mut batch, &mut errors).await;
    (batch, errors.iter().collect())
}

fn errors_of(errors: &[(&'static str, u64)], part: &str) -> u64 {
    errors.iter().find(|(p, _)| *p == part).map_or(0, |(_, n)| *n)
}

/// Every sample of `metrics` in `want` is in `got` with the same value, and `got` has no other.
fn assert_same(got: &Batch, want: &Batch, metrics: &[&'static Metric]) {
    for m in metrics {
        let mut g: Vec<_> = got.of(m).map(|s| (s.dims.clone(), s.scalar())).collect();
        let mut w: Vec<_> = want.of(m).map(|s| (s.dims.clone(), s.scalar())).collect();
        g.sort_by(|a, b| a.0.cmp(&b.0));
        w.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(!w.is_empty(), "{}: nothing to compare", m.name);
        assert_eq!(g, w, "{}", m.name);
    }
}

const NODE_METRICS: &[&Metric] = &[
    &NODE_COUNT,
    &NODE_FLAG_COUNT,
    &CPUS_TOTAL,
    &CPUS_ALLOCATED,
    &CPUS_IDLE,
    &CPUS_OTHER,
    &MEMORY_TOTAL,
    &MEMORY_ALLOCATED,
    &GPUS_TOTAL,
    &GPUS_ALLOCATED,
];
const JOB_METRICS: &[&Metric] = &[
    &JOB_COUNT,
    &PENDING_JOB_COUNT,
    &PENDING_CPUS,
    &PENDING_GPUS,
    &PENDING_NODES,
    &RUNNING_CPUS,
    &RUNNING_GPUS,
];

/// The explicit-format output with one column emptied, as Slurm prints a field it does not know.
fn without_column(text: &str, column: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut f: Vec<&str> = line.split('|').collect();
        f[column] = "";
        out.push_str(&f.join("|"));
        out.push('\n');
    }
    out
}

/// The real 22.05 captures as a Slurm would give them that did not know one field of each
/// explicit format: both switch to --json (whose output is the real 22.05 JSON), for good, and
/// ship what the full explicit format would have given.
#[tokio::test]
async fn a_refused_text_field_switches_sinfo_and_squeue_to_json() {
    let f = FakeSlurm::new();
    f.file("sinfo.txt", &without_column(&fixture("22.05/sinfo.txt"), 2));
    f.file("sinfo.json", &fixture("22.05/sinfo.json"));
    f.file("squeue.txt", &without_column(&fixture("22.05/squeue.txt"), 8));
    f.file("squeue.json", &fixture("22.05/squeue.json"));
    f.file("sdiag.txt", &fixture("22.05/sdiag.txt"));
    f.command(
        "sinfo",
        r#"--version) echo "slurm-wlm 22.05.8" ;;
--json) cat "$D/sinfo.json" ;;
*--Format=*) cat "$D/sinfo.txt"; echo "sinfo: error: Invalid job format specification: StateComplete" >&2 ;;"#,
    );
    f.command(
        "squeue",
        r#""--json --all --states=all") cat "$D/squeue.json" ;;
*--Format=*) cat "$D/squeue.txt"; echo "squeue: error: Invalid job format specification: tres-per-task" >&2 ;;"#,
    );
    f.command(
        "sdiag",
        r#"--json) echo "sdiag: unrecognized option '--json'" >&2; echo 'Try "sdiag --help" for more information' >&2; exit 1 ;;
"") cat "$D/sdiag.txt" ;;"#,
    );
    let mut c = f.collector();
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors.iter().map(|e| e.1).sum::<u64>(), 0, "{errors:?}");
    assert_eq!(
        (c.format("sinfo"), c.format("squeue"), c.format("sdiag")),
        (Some("json"), Some("json"), Some("text"))
    );
    // In order, per command: the refused text format, then --json.
    let calls = f.calls();
    let of = |p: &str| calls.iter().filter(|l| l.starts_with(p)).cloned().collect::<Vec<_>>();
    assert_eq!(
        of("sinfo"),
        vec!["sinfo --version".to_owned(), format!("sinfo {}", sinfo::ARGS.join(" ")), "sinfo --json".into()]
    );
    assert_eq!(
        of("squeue"),
        vec![format!("squeue {}", squeue::ARGS.join(" ")), "squeue --json --all --states=all".into()]
    );
    assert_eq!(of("sdiag"), vec!["sdiag "], "22.05: plain sdiag");

    // What the full explicit format says (the capture before a column was taken out).
    let mut want = Batch::new(SystemTime::UNIX_EPOCH);
    sinfo::emit(&sinfo::parse_text(&fixture("22.05/sinfo.txt")).0, true, &mut want);
    squeue::emit(&squeue::parse_text(&fixture("22.05/squeue.txt")).0, true, 20, &mut want);
    assert_same(&batch, &want, NODE_METRICS);
    assert_same(&batch, &want, JOB_METRICS);
    // And what a person reads in the capture: c1 down, c2 drained, c3 and c4 mixed; the array
    // of four, the Resources job and the dependent one pending.
    for (state, n) in [("down", 1.0), ("drained", 1.0), ("mixed", 2.0), ("idle", 0.0)] {
        assert_eq!(batch.value(&NODE_COUNT, &[("State", state)]), Some(n), "{state}");
    }
    assert_eq!(batch.value(&JOB_COUNT, &[("State", "pending")]), Some(6.0));
    assert_eq!(batch.value(&PENDING_JOB_COUNT, &[("Reason", "Resources")]), Some(5.0));
    assert_eq!(batch.value(&SLURMCTLD_UP, &[]), Some(1.0));

    // The next cycle goes straight to --json.
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors.iter().map(|e| e.1).sum::<u64>(), 0, "{errors:?}");
    let mut calls = f.calls();
    calls.sort();
    assert_eq!(calls, vec!["sdiag ", "sinfo --json", "squeue --json --all --states=all"]);
    assert_same(&batch, &want, NODE_METRICS);
}

/// 24.11 without its JSON serializer plugin: sdiag --json fails (the source's messages), and
/// plain sdiag takes over for good, with every value the text carries.
#[tokio::test]
async fn sdiag_json_refused_falls_back_to_plain_sdiag() {
    let f = FakeSlurm::new();
    f.file("sinfo.txt", &fixture("22.05/sinfo.txt"));
    f.file("squeue.txt", &fixture("22.05/squeue.txt"));
    f.file("sdiag.txt", &fixture("24.11/sdiag.txt"));
    f.command(
        "sinfo",
        r#"--version) echo "slurm 24.11.5" ;;
*--Format=*) cat "$D/sinfo.txt" ;;"#,
    );
    f.command("squeue", r#"*--Format=*) cat "$D/squeue.txt" ;;"#);
    f.command(
        "sdiag",
        r#"--json) echo "sdiag: error: load_plugins: unable to find plugin: serializer/json" >&2; echo "sdiag: fatal: JSON plugin load failure" >&2; exit 1 ;;
"") cat "$D/sdiag.txt" ;;"#,
    );
    let mut c = f.collector();
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors_of(&errors, "sdiag"), 0, "{errors:?}");
    assert_eq!(c.format("sdiag"), Some("text"));
    let calls: Vec<String> = f.calls().into_iter().filter(|l| l.starts_with("sdiag")).collect();
    assert_eq!(calls, vec!["sdiag --json", "sdiag "], "--json first (24.11), then plain sdiag");
    let want = sdiag::parse_text(&fixture("24.11/sdiag.txt")).unwrap();
    assert_eq!(want.values.len(), 31);
    for (m, v) in &want.values {
        assert_eq!(batch.value(m, &[]), Some(*v), "{}", m.name);
    }
    assert_eq!(batch.value(&PENDING_RPCS, &[]), Some(4.0));

    let _ = cycle(&mut c).await;
    let calls: Vec<String> = f.calls().into_iter().filter(|l| l.starts_with("sdiag")).collect();
    assert_eq!(calls, vec!["sdiag "], "--json is not tried again");
}

/// sdiag --json that runs but prints what does not parse: that cycle's sdiag is an error, the
/// next reads plain sdiag.
#[tokio::test]
async fn sdiag_json_that_does_not_parse_falls_back_next_cycle() {
    let f = FakeSlurm::new();
    f.file("sdiag.txt", &fixture("24.11/sdiag.txt"));
    f.command(
        "sinfo",
        r#"--version) echo "slurm 23.11.10" ;;
*--Format=*) ;;"#,
    );
    f.command("squeue", r#"*--Format=*) ;;"#);
    f.command(
        "sdiag",
        r#"--json) echo '{"statistics": {"jobs_submitted": "many"' ;;
"") cat "$D/sdiag.txt" ;;"#,
    );
    let mut c = f.collector();
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors_of(&errors, "sdiag"), 1);
    assert_eq!(batch.value(&JOBS_SUBMITTED, &[]), None);
    assert_eq!(c.format("sdiag"), Some("text"));
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors_of(&errors, "sdiag"), 0);
    let want = sdiag::parse_text(&fixture("24.11/sdiag.txt")).unwrap();
    assert_eq!(batch.value(&JOBS_SUBMITTED, &[]), want.get(&JOBS_SUBMITTED));
    assert!(want.get(&JOBS_SUBMITTED).is_some());
}

/// 24.11's squeue --json filters by state like the text does (from 24.05.1): the fallback asks
/// for every state, so finished jobs are counted as the explicit format counts them.
#[tokio::test]
async fn squeue_json_fallback_asks_for_every_state() {
    let f = FakeSlurm::new();
    let full = fixture("24.11/squeue.json");
    let mut doc: serde_json::Value = serde_json::from_str(&full).unwrap();
    doc["jobs"].as_array_mut().unwrap().retain(|j| {
        let s = j["job_state"][0].as_str().unwrap();
        matches!(s, "PENDING" | "RUNNING")
    });
    f.file("squeue.json", &full);
    f.file("squeue-filtered.json", &doc.to_string());
    f.command(
        "sinfo",
        r#"--version) echo "slurm 24.11.5" ;;
*--Format=*) ;;"#,
    );
    f.command(
        "squeue",
        r#"*--json*--states=all*) cat "$D/squeue.json" ;;
*--json*) cat "$D/squeue-filtered.json" ;;
*--Format=*) echo "squeue: error: Invalid job format specification: tres-per-task" >&2 ;;"#,
    );
    f.command("sdiag", r#"--json) echo '{}' ;;"#);
    let mut c = f.collector();
    let (batch, errors) = cycle(&mut c).await;
    assert_eq!(errors_of(&errors, "squeue"), 0, "{errors:?}");
    assert_eq!(c.format("squeue"), Some("json"));
    // The scenario of formats/tests/fixtures/slurm/README.md.
    for (state, n) in
        [("running", 3.0), ("pending", 9.0), ("completed", 1.0), ("failed", 1.0), ("cancelled", 1.0)]
    {
        assert_eq!(batch.value(&JOB_COUNT, &[("State", state)]), Some(n), "{state}");
    }
    assert_eq!(batch.value(&PENDING_JOB_COUNT, &[("Reason", "Priority")]), Some(7.0));
}

/// Neither format works: sinfo is an error every cycle, nothing is shipped from output that
/// lacks its state column, and the collector does not go back and forth. squeue and sdiag carry
/// on. Slurm 20.11 knows neither StateComplete nor --json (getopt's message, assumed); a 22.05
/// built without its JSON plugin says so (real message), with a field refused as well.
#[tokio::test]
async fn both_formats_refused_is_an_error_each_cycle_and_nothing_wrong_is_shipped() {
    let cases = [
        (
            "slurm 20.11.9",
            r#"echo "sinfo: unrecognized option '--json'" >&2; echo 'Try "sinfo --help" for more information' >&2"#,
        ),
        ("slurm-wlm 22.05.8", r#"echo "sinfo: fatal: Unable to find plugin: serializer/json" >&2"#),
    ];
    for (version, json_refusal) in cases {
        let f = FakeSlurm::new();
        f.file("sinfo.txt", &without_column(&fixture("22.05/sinfo.txt"), 2));
        f.file("squeue.txt", &fixture("22.05/squeue.txt"));
        f.file("sdiag.txt", &fixture("22.05/sdiag.txt"));
        f.command(
            "sinfo",
            &format!(
                r#"--version) echo "{version}" ;;
--json) {json_refusal}; exit 1 ;;
*--Format=*) cat "$D/sinfo.txt"; echo "sinfo: error: Invalid job format specification: StateComplete" >&2 ;;"#
            ),
        );
        f.command("squeue", r#"*--Format=*) cat "$D/squeue.txt" ;;"#);
        f.command("sdiag", r#""") cat "$D/sdiag.txt" ;;"#);
        let mut c = f.collector();
        for round in 0..3 {
            let (batch, errors) = cycle(&mut c).await;
            assert_eq!(errors_of(&errors, "sinfo"), 1, "{version} round {round}: {errors:?}");
            assert_eq!((errors_of(&errors, "squeue"), errors_of(&errors, "sdiag")), (0, 0));
            assert_eq!(batch.of(&NODE_COUNT).count(), 0, "no node counts from a state column that is empty");
            assert_eq!(batch.of(&CPUS_TOTAL).count(), 0);
            assert_eq!(batch.value(&JOB_COUNT, &[("State", "pending")]), Some(6.0));
            assert_eq!(batch.value(&SLURMCTLD_UP, &[]), Some(1.0), "slurmctld answers");
            let sinfo_calls: Vec<String> = f
                .calls()
                .into_iter()
                .filter(|l| l.starts_with("sinfo") && !l.contains("--version"))
                .collect();
            let want: Vec<String> = if round == 0 {
                vec![format!("sinfo {}", sinfo::ARGS.join(" ")), "sinfo --json".into()]
            } else {
                vec!["sinfo --json".into()]
            };
            assert_eq!(sinfo_calls, want, "{version} round {round}: one try a cycle once both were refused");
        }
    }
}

/// A controller that does not answer is not a format refusal: the formats stay, the errors are
/// counted, SlurmctldUp is 0.
#[tokio::test]
async fn a_controller_away_changes_no_format() {
    let f = FakeSlurm::new();
    let away = r#"*) echo "$(basename "$0"): error: Unable to contact slurm controller (connect failure)" >&2; exit 1 ;;"#;
    f.command("sinfo", &format!("--version) echo \"slurm 24.11.5\" ;;\n{away}"));
    f.command("squeue", away);
    f.command("sdiag", away);
    let mut c = f.collector();
    for _ in 0..2 {
        let (batch, errors) = cycle(&mut c).await;
        for part in ["sinfo", "squeue", "sdiag"] {
            assert_eq!(errors_of(&errors, part), 1, "{part}: {errors:?}");
        }
        assert_eq!(batch.value(&SLURMCTLD_UP, &[]), Some(0.0));
        assert_eq!(
            (c.format("sinfo"), c.format("squeue"), c.format("sdiag")),
            (Some("text"), Some("text"), Some("json"))
        );
    }
    let calls = f.calls();
    assert_eq!(
        calls.iter().filter(|l| l.starts_with("sdiag")).count(),
        2,
        "one sdiag --json a cycle: {calls:?}"
    );
    assert!(calls.iter().all(|l| !l.contains("--json") || l.starts_with("sdiag")), "{calls:?}");
}
