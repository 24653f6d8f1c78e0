//! The head node's Slurm in the cost bench: fake `sinfo`, `squeue` and `sdiag` that print the
//! scenario's cluster (busy, or idle: every node powered down, no job), sdiag's counters growing
//! with simulated time.

use super::{COLLECT, Scenario, node_name, noise, partition_name};
use std::path::{Path, PathBuf};

/// Where the head's fake sdiag prints from, and the simulated times its counters grow from.
pub struct FakeSdiag {
    pub dir: PathBuf,
    pub scenario: Scenario,
    pub t0: u64,
    /// When the cluster went idle.
    pub idle_from: Option<u64>,
}

impl FakeSdiag {
    pub fn write(&self, t: u64) {
        let busy_until = self.idle_from.unwrap_or(t).min(t);
        let (busy, idle) = (busy_until.saturating_sub(self.t0), t - busy_until);
        let text = sdiag_text(&self.scenario, busy as f64, idle as f64);
        std::fs::write(self.dir.join("sdiag.out"), text).expect("write the fake sdiag's output");
    }
}

/// The scenario's cluster as the head node's commands print it (the formats `sinfo::ARGS` and
/// `squeue::ARGS` ask for; sdiag as 22.05 prints it), in fake commands under `dir`.
pub fn fake_slurm(s: &Scenario, dir: &Path, idle: bool) {
    use std::fmt::Write as _;
    use std::os::unix::fs::PermissionsExt;
    let cpus = if s.cores >= 16 { 64 } else { 192 };
    let mut sinfo = String::new();
    for i in 0..s.nodes {
        let u = noise(i as u64, 7, 0);
        let (state, alloc) = match u {
            _ if idle => ("idle+cloud+powered_down", 0),
            u if u < 0.45 => ("mixed+cloud", cpus / 2),
            u if u < 0.70 => ("allocated+cloud", cpus),
            u if u < 0.88 => ("idle+cloud+powered_down", 0),
            u if u < 0.96 => ("idle+cloud", 0),
            u if u < 0.98 => ("mixed+cloud+completing", cpus / 4),
            u if u < 0.99 => ("idle+cloud+drain", 0),
            _ => ("down+cloud+not_responding", 0),
        };
        let p = i % s.partitions;
        let default = if p == 0 { "*" } else { "" };
        let other = if state.starts_with("down") { cpus } else { 0 };
        let free = cpus - alloc - other;
        let _ = writeln!(
            sinfo,
            "{}|{}{default}|{state}|{alloc}/{free}/{other}/{cpus}|{}|{}|(null)|(null)|",
            node_name(s, i),
            partition_name(p),
            cpus * 4000,
            alloc * 4000,
        );
    }
    let running = if idle { 0 } else { (s.jobs_per_day * s.job_minutes as f64 / 1440.0).round() as usize };
    // What squeue --states=all shows: running, pending, and what ended in the last MinJobAge (300 s).
    let ended = (s.jobs_per_day * 5.0 / 1440.0).round() as usize;
    let mut rows: Vec<(&str, &str, usize)> =
        vec![("RUNNING", "None", running), ("PENDING", "Resources", running / 3)];
    // Idle: nothing ran in the last MinJobAge either.
    if !idle {
        rows.extend([
            ("PENDING", "Priority", running / 3),
            ("PENDING", "Dependency", running / 10 + 1),
            ("PENDING", "QOSMaxJobsPerUserLimit", running / 20 + 1),
            ("COMPLETING", "None", ended / 50 + 1),
            ("COMPLETED", "None", ended * 85 / 100),
            ("FAILED", "NonZeroExitCode", ended / 20 + 1),
            ("CANCELLED", "None", ended / 25 + 1),
            ("TIMEOUT", "TimeLimit", ended / 50 + 1),
        ]);
    }
    let mut squeue = String::new();
    let mut k = 0;
    for (state, reason, n) in rows {
        for _ in 0..n {
            let _ = writeln!(
                squeue,
                "{}|{state}|{reason}|{}|1|{}|N/A|N/A|N/A|",
                partition_name(k % s.partitions),
                s.cores,
                s.cores
            );
            k += 1;
        }
    }
    let sdiag = sdiag_text(s, 0.0, 0.0);
    for (name, out) in [("sinfo", sinfo), ("squeue", squeue), ("sdiag", sdiag)] {
        std::fs::write(dir.join(format!("{name}.out")), out).expect("write a fake Slurm output");
        let script = dir.join(name);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'slurm 22.05.11'; exit 0; }}\ncat '{}'\n",
                dir.join(format!("{name}.out")).display()
            ),
        )
        .expect("write a fake Slurm command");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod a fake Slurm command");
    }
}

/// The message types sdiag lists, most frequent first.
const RPCS: [&str; 24] = [
    "REQUEST_PARTITION_INFO",
    "REQUEST_NODE_INFO_SINGLE",
    "REQUEST_JOB_INFO",
    "REQUEST_NODE_INFO",
    "REQUEST_SUBMIT_BATCH_JOB",
    "REQUEST_COMPLETE_BATCH_SCRIPT",
    "MESSAGE_EPILOG_COMPLETE",
    "REQUEST_STEP_COMPLETE",
    "REQUEST_COMPLETE_PROLOG",
    "REQUEST_JOB_STEP_CREATE",
    "REQUEST_JOB_INFO_SINGLE",
    "REQUEST_FED_INFO",
    "REQUEST_STATS_INFO",
    "REQUEST_UPDATE_NODE",
    "MESSAGE_NODE_REGISTRATION_STATUS",
    "REQUEST_JOB_USER_INFO",
    "REQUEST_KILL_JOB",
    "REQUEST_CANCEL_JOB_STEP",
    "REQUEST_RESOURCE_ALLOCATION",
    "REQUEST_JOB_READY",
    "REQUEST_BUILD_INFO",
    "REQUEST_PING",
    "REQUEST_SHARE_INFO",
    "REQUEST_UPDATE_JOB",
];

/// The Slurm commands the head's collection runs, each an RPC of these types.
const OWN_RPCS: [&str; 4] =
    ["REQUEST_PARTITION_INFO", "REQUEST_NODE_INFO", "REQUEST_JOB_INFO", "REQUEST_STATS_INFO"];

/// Seconds from the statistics' reset to the time `SDIAG_HEAD` prints.
const SDIAG_SINCE: f64 = 71_206.0;

/// sdiag as 22.05 prints it, `busy` seconds of the scenario's load and then `idle` seconds of
/// an idle cluster after `SDIAG_HEAD`'s moment: its counters grow (jobs at the scenario's
/// rate; each RPC type at the rate it reached its count, while idle only those of the head's
/// own commands, one each a collection), so the increases the head sends are those of a
/// cluster at work, and of one at rest.
fn sdiag_text(s: &Scenario, busy: f64, idle: f64) -> String {
    use std::fmt::Write as _;
    let jobs = s.jobs_per_day / (s.busy_hours * 3600.0) * busy;
    let grow = |text: String, label: &str, base: u64, by: f64| {
        text.replace(&format!("{label}{base}"), &format!("{label}{}", base + by as u64))
    };
    let mut sdiag = String::from(SDIAG_HEAD);
    sdiag = grow(sdiag, "Jobs submitted: ", 41233, jobs);
    sdiag = grow(sdiag, "Jobs started:   ", 40127, jobs);
    sdiag = grow(sdiag, "Jobs completed: ", 39508, jobs * 0.97);
    sdiag = grow(sdiag, "Jobs canceled:  ", 412, jobs * 0.02);
    sdiag = grow(sdiag, "Jobs failed:    ", 97, jobs * 0.01);
    sdiag = grow(sdiag, "\tTotal cycles: ", 4415, busy / 20.0 + idle / 60.0);
    sdiag = grow(sdiag, "(since last slurm start): ", 20512, jobs * 0.5);
    sdiag = grow(sdiag, "(since last stats cycle start): ", 8190, jobs * 0.5);
    sdiag = grow(sdiag, "\tTotal cycles: ", 2360, (busy + idle) / 30.0);
    if idle > 0.0 {
        sdiag = sdiag
            .replace("Jobs pending:   317", "Jobs pending:   0")
            .replace("Jobs running:   347", "Jobs running:   0");
    }
    for (i, r) in RPCS.iter().enumerate() {
        let base = 400_000.0 / (i + 1) as f64;
        let own = if OWN_RPCS.contains(r) { idle / COLLECT as f64 } else { 0.0 };
        let count = (base + base / SDIAG_SINCE * busy + own) as u64;
        let ave = 300 + i as u64;
        let _ = writeln!(
            sdiag,
            "\t{r:<40}( {}) count:{count:<6} ave_time:{ave}    total_time:{}",
            2000 + i,
            count * ave
        );
    }
    sdiag.push_str("\nRemote Procedure Call statistics by user\n\troot            (       0) count:29     ave_time:482    total_time:13985\n\nPending RPC statistics\n\tNo pending RPCs\n");
    sdiag
}

const SDIAG_HEAD: &str = "*******************************************************
sdiag output at Sat Nov 21 19:46:46 2026 (1795290406)
Data since      Sat Nov 21 00:00:00 2026 (1795219200)
*******************************************************
Server thread count:  3
Agent queue size:     0
Agent count:          0
Agent thread count:   0
DBD Agent queue size: 0

Jobs submitted: 41233
Jobs started:   40127
Jobs completed: 39508
Jobs canceled:  412
Jobs failed:    97

Job states ts:  Sat Nov 21 19:46:30 2026 (1795290390)
Jobs pending:   317
Jobs running:   347

Main schedule statistics (microseconds):
\tLast cycle:   5124
\tMax cycle:    61178
\tTotal cycles: 4415
\tMean cycle:   4441
\tMean depth cycle:  112
\tCycles per minute: 3
\tLast queue length: 317

Backfilling stats
\tTotal backfilled jobs (since last slurm start): 20512
\tTotal backfilled jobs (since last stats cycle start): 8190
\tTotal backfilled heterogeneous job components: 0
\tTotal cycles: 2360
\tLast cycle when: Sat Nov 21 19:46:12 2026 (1795290372)
\tLast cycle: 81234
\tMax cycle:  912345
\tMean cycle: 70012
\tLast depth cycle: 317
\tLast depth cycle (try sched): 120
\tDepth Mean: 290
\tDepth Mean (try depth): 110
\tLast queue length: 317
\tQueue length mean: 280
\tLast table size: 40

Latency for 1000 calls to gettimeofday(): 23 microseconds

Remote Procedure Call statistics by message type
";
