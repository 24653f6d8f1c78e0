//! `scontrol show job -d -o <id>`: what Slurm itself says of one job (account, partition, user,
//! and the GPU indices it holds on each node). The node role asks this instead of believing the
//! job's own environment, which its user can write.
//!
//! One line of `Key=Value` words; the per-node part repeats `Nodes=<hostlist> CPU_IDs=..
//! Mem=.. GRES=gpu:<n>(IDX:<list>)` for each group of nodes.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobDetail {
    pub job_id: String,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub user_id: Option<u32>,
    /// The user's name, from `UserId=alice(1001)`.
    pub user_name: Option<String>,
    /// `JobState` (RUNNING, COMPLETED, ...).
    pub state: Option<String>,
    /// `NodeList`: the hostlist the job runs or ran on.
    pub node_list: Option<String>,
    /// `StartTime` and `EndTime` as Slurm prints them (local time, no zone); None for
    /// `Unknown`/`None`. See [`parse_local_time`].
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    /// StartTime and EndTime in seconds since the epoch, where Slurm gives them so (JSON).
    pub start_unix: Option<i64>,
    pub end_unix: Option<i64>,
    /// `SubmitTime`, in either form: before every run of the job.
    pub submit_time: Option<String>,
    pub submit_unix: Option<i64>,
    /// `Restarts` (`restart_cnt`): runs before the present one (a requeue, a node failure).
    pub restarts: Option<u32>,
    /// (node hostlist expression, GPU indices there), in the order Slurm prints them.
    pub gpus: Vec<(String, BTreeSet<u32>)>,
    /// Slurm 26.05's unique job id (`SLUID=`), which names the job's cgroup v2 directory.
    pub sluid: Option<String>,
    /// (ArrayJobId, ArrayTaskId) of an array task.
    pub array: Option<(u64, u64)>,
    /// (HetJobId, HetJobOffset) of a heterogeneous job's component.
    pub het: Option<(u64, u64)>,
    /// What it holds on each node, where Slurm says (JSON).
    pub allocation: Vec<NodeAllocation>,
}

/// What a job holds on one node, as Slurm allocated it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeAllocation {
    pub node: String,
    pub cpus: Option<f64>,
    pub memory_bytes: Option<f64>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum JobError {
    #[error("no JobId= in scontrol's answer")]
    NoJobId,
    #[error("scontrol's answer is not the JSON it should be")]
    Unreadable,
}

/// Parses the one-line form. Unknown and malformed words are skipped.
pub fn parse(text: &str) -> Result<JobDetail, JobError> {
    let mut d = JobDetail::default();
    let mut nodes: Option<String> = None;
    for word in text.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else { continue };
        let value = value.trim();
        let set = |v: &str| (!v.is_empty() && v != "(null)").then(|| v.to_owned());
        match key {
            "JobId" if d.job_id.is_empty() => d.job_id = value.to_owned(),
            "Account" => d.account = set(value),
            "Partition" => d.partition = set(value),
            "UserId" => {
                d.user_id = value.split_once('(').and_then(|(_, n)| n.trim_end_matches(')').parse().ok());
                d.user_name = value.split_once('(').and_then(|(u, _)| set(u));
            }
            "JobState" => d.state = set(value),
            "NodeList" => d.node_list = set(value),
            "SLUID" => d.sluid = set(value),
            "StartTime" => d.start_time = time_word(value),
            "SubmitTime" => d.submit_time = time_word(value),
            "Restarts" => d.restarts = value.parse().ok(),
            "EndTime" => d.end_time = time_word(value),
            "Nodes" => nodes = Some(value.to_owned()),
            "GRES" => {
                if let Some(n) = nodes.take() {
                    d.gpus.push((n, gpu_indices(value)));
                }
            }
            _ => {}
        }
    }
    if d.job_id.is_empty() { Err(JobError::NoJobId) } else { Ok(d) }
}

/// A time word, or None for Slurm's `Unknown`, `None`, `N/A`.
fn time_word(v: &str) -> Option<String> {
    parse_local_time(v).map(|_| v.to_owned())
}

/// `2026-11-23T13:59:04` -> seconds since the epoch, read as if it were UTC. Slurm prints the
/// controller's local time without a zone, so a caller bounding a search with it must allow
/// for any offset (up to 14 hours).
pub fn parse_local_time(v: &str) -> Option<i64> {
    let (date, time) = v.split_once('T')?;
    let d: Vec<i64> = date.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let t: Vec<i64> = time.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let (&[y, mo, day], &[h, mi, sec]) = (d.as_slice(), t.as_slice()) else { return None };
    // Bounded on every side: a fuzzer's year 9e18 or hour -9e18 must not overflow below.
    let ok = (1970..=9999).contains(&y)
        && (1..=12).contains(&mo)
        && (1..=31).contains(&day)
        && (0..=23).contains(&h)
        && (0..=59).contains(&mi)
        && (0..=60).contains(&sec);
    if !ok {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (yy, m) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}

/// The GPUs a job's GRES on one node takes, whole or in part: every `gpu` GRES's indices
/// (`gpu:2(IDX:0-1)`, `gpu:a100:1(IDX:3),gpu:t4:2(IDX:0,2)`), and the GPUs a shared GRES takes
/// part of: `shard` or `mps` as Slurm prints one allocated per GPU, what the job holds of what
/// each GPU of the node has (`shard:6(6/8,0/8)`: 6 of GPU 0's 8 shards, none of GPU 1's;
/// `_build_shared_gres_details` in Slurm's gres_stepmgr.c), or by index (`shard:2(IDX:0)`).
pub(super) fn gpu_indices(gres: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for entry in split_outside(gres, '(', ')') {
        let Some((head, detail)) = entry.split_once('(') else { continue };
        let name = head.trim().split(':').next().unwrap_or_default();
        if !matches!(name, "gpu" | "shard" | "mps") {
            continue;
        }
        let detail = detail.trim_end().trim_end_matches(')');
        if let Some(list) = detail.strip_prefix("IDX:") {
            out.extend(numbers(list));
        } else if name != "gpu" {
            for (i, part) in detail.split(',').enumerate().take(4096) {
                let held = part.split_once('/').and_then(|(held, _)| held.trim().parse::<u64>().ok());
                if held.is_some_and(|n| n > 0) {
                    out.insert(i as u32);
                }
            }
        }
    }
    out
}

/// `0-1,3` -> 0, 1, 3 (bounded: no range past 4096).
fn numbers(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>())
                    && a <= b
                    && b - a < 4096
                {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.trim().parse::<u32>().ok()),
        }
    }
    out
}

/// The names of a Slurm hostlist (`c4`, `c[1-3,7]`, `gpu-[01-02],c1`), at most `max` of them;
/// a part it cannot read is left out.
pub fn hostlist_names(list: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for part in split_outside_brackets(list) {
        match part.split_once('[') {
            None if !part.is_empty() => out.push(part.to_owned()),
            None => {}
            Some((prefix, ranges)) => {
                for r in ranges.trim_end_matches(']').split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let (Ok(lo), Ok(hi)) = (a.parse::<u64>(), b.parse::<u64>()) else { continue };
                    // Zero-padded ranges (`[01-12]`) keep their width.
                    let width = if a.len() > 1 && a.starts_with('0') { a.len() } else { 0 };
                    for n in (lo..=hi).take(max.saturating_sub(out.len())) {
                        out.push(format!("{prefix}{n:0width$}"));
                    }
                }
            }
        }
        if out.len() >= max {
            out.truncate(max);
            break;
        }
    }
    out
}

/// Whether `node` is in a Slurm hostlist (`c4`, `c[1-3,7]`, `gpu-[01-02],c1`).
pub fn hostlist_contains(list: &str, node: &str) -> bool {
    split_outside_brackets(list).into_iter().any(|p| match p.split_once('[') {
        None => p == node,
        Some((prefix, ranges)) => {
            let ranges = ranges.trim_end_matches(']');
            let Some(suffix) = node.strip_prefix(prefix) else { return false };
            ranges.split(',').any(|r| match r.split_once('-') {
                None => r == suffix,
                Some((a, b)) => {
                    // Zero-padded ranges (`[01-12]`) name zero-padded nodes only.
                    let padded = a.len() > 1 && a.starts_with('0');
                    match (a.parse::<u64>(), b.parse::<u64>(), suffix.parse::<u64>()) {
                        (Ok(lo), Ok(hi), Ok(n)) => {
                            (lo..=hi).contains(&n) && (!padded || suffix.len() == a.len())
                        }
                        _ => false,
                    }
                }
            })
        }
    })
}

/// The items of a comma-separated Slurm list whose items may hold bracketed ranges
/// (`c[1-3,7],gpu1`, `/dev/nvidia[0,2],/dev/nvidia7`).
pub(super) fn split_outside_brackets(s: &str) -> Vec<&str> {
    split_outside(s, '[', ']')
}

/// `s` split at commas outside `open`..`close` (`a(x,y),b(z)` -> `a(x,y)`, `b(z)`).
pub(super) fn split_outside(s: &str, open: char, close: char) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        } else if c == ',' && depth <= 0 {
            parts.push(&s[start..i]);
            start = i + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

impl JobDetail {
    /// What it holds on `node`.
    pub fn allocation_on(&self, node: &str) -> Option<&NodeAllocation> {
        self.allocation.iter().find(|a| a.node == node)
    }

    /// The names Slurm also gives this job besides its id: `<array job>_<task>` for an array
    /// task, `<het job>+<offset>` for a heterogeneous job's component.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.array_task().into_iter().chain(self.het_component())
    }

    /// `<array job>_<task>` of an array task.
    pub fn array_task(&self) -> Option<String> {
        self.array.map(|(j, t)| format!("{j}_{t}"))
    }

    /// `<het job>+<offset>` of a heterogeneous job's component.
    pub fn het_component(&self) -> Option<String> {
        self.het.map(|(j, o)| format!("{j}+{o}"))
    }

    /// The GPU indices the job holds on `node`, when Slurm says.
    pub fn gpus_on(&self, node: &str) -> Option<&BTreeSet<u32>> {
        self.gpus.iter().find(|(list, _)| hostlist_contains(list, node)).map(|(_, g)| g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured here from Slurm 22.05 (`scontrol show job -d -o 51`), the bench's node c4.
    const ONE: &str = "JobId=51 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901711 Nice=0 Account=physics QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-23T13:59:04 EligibleTime=2026-11-23T13:59:04 AccrueTime=2026-11-23T13:59:04 StartTime=2026-11-23T13:59:04 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-23T13:59:04 Scheduler=Main Partition=debug AllocNode:Sid=localhost:1058 ReqNodeList=c4 ExcNodeList=(null) NodeList=c4 BatchHost=c4 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=100M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=gpu:2   Nodes=c4 CPU_IDs=0 Mem=100 GRES=gpu:2(IDX:0-1) MinCPUsNode=1 MinMemoryCPU=100M MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= TresPerNode=gres:gpu:2 ";

    #[test]
    fn a_real_job_line() {
        let d = parse(ONE).unwrap();
        assert_eq!(d.job_id, "51");
        assert_eq!(
            (d.account.as_deref(), d.partition.as_deref(), d.user_id),
            (Some("physics"), Some("debug"), Some(0))
        );
        assert_eq!(d.gpus_on("c4"), Some(&BTreeSet::from([0, 1])));
        assert_eq!(d.gpus_on("c3"), None);
        assert_eq!(
            (d.user_name.as_deref(), d.state.as_deref(), d.node_list.as_deref()),
            (Some("root"), Some("RUNNING"), Some("c4"))
        );
        assert_eq!((d.start_time.as_deref(), d.end_time.as_deref()), (Some("2026-11-23T13:59:04"), None));
        assert_eq!((d.submit_time.as_deref(), d.restarts), (Some("2026-11-23T13:59:04"), Some(0)));
    }

    #[test]
    fn local_times() {
        assert_eq!(parse_local_time("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_local_time("2026-11-23T13:59:04"), Some(1_795_442_344));
        assert_eq!(parse_local_time("2024-02-29T12:00:00"), Some(1_709_208_000));
        for bad in [
            "Unknown",
            "None",
            "N/A",
            "2026-13-01T00:00:00",
            "2026-11-23",
            "2026-11-23T1:2",
            "",
            "9223372036854775807-01-01T00:00:00",
            "2026-01-01T-9223372036854775808:00:00",
            "2026-01-01T00:-1:00",
        ] {
            assert_eq!(parse_local_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn several_node_groups_and_typed_gres() {
        let text = "JobId=7 UserId=alice(1001) Account=bio Partition=gpu Nodes=gpu-[01-02] CPU_IDs=0-7 Mem=0 GRES=gpu:a100:2(IDX:0-1),gpu:t4:1(IDX:3) Nodes=gpu-05 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:7)";
        let d = parse(text).unwrap();
        assert_eq!(d.user_id, Some(1001));
        assert_eq!(d.gpus_on("gpu-02"), Some(&BTreeSet::from([0, 1, 3])));
        assert_eq!(d.gpus_on("gpu-05"), Some(&BTreeSet::from([7])));
        assert_eq!(d.gpus_on("gpu-03"), None);
        assert_eq!(d.gpus_on("gpu-2"), None, "zero-padded names match exactly");
    }

    /// Shared GRES as Slurm prints them, built from its source (gres_stepmgr.c,
    /// `gres_stepmgr_job_build_details` and `_build_shared_gres_details`): no capture here, the
    /// test cluster has no GPU.
    #[test]
    fn shards_and_mps_name_the_gpus_they_take_part_of() {
        let cases: [(&str, &[u32]); 8] = [
            ("shard:6(6/8,0/8)", &[0]),
            ("shard:4(2/8,2/8)", &[0, 1]),
            ("mps:50(0/100,50/100)", &[1]),
            ("shard:2(IDX:0)", &[0]),
            ("gpu:1(IDX:0),shard:2(0/4,2/4)", &[0, 1]),
            ("gpu:1(CNT:1)", &[]),
            ("license:x:1(IDX:3),shard:1(x/y,/)", &[]),
            ("shard:1(0/8,0/8,1/8", &[2]),
        ];
        for (gres, want) in cases {
            assert_eq!(gpu_indices(gres), want.iter().copied().collect(), "{gres}");
        }
        let d = parse("JobId=8 Nodes=g1 CPU_IDs=0 Mem=0 GRES=shard:6(6/8,0/8)").unwrap();
        assert_eq!(d.gpus_on("g1"), Some(&BTreeSet::from([0])));
    }

    #[test]
    fn no_gres_no_account_and_junk() {
        let d = parse("JobId=9 Account=(null) Partition=batch Nodes=c1 CPU_IDs=0 Mem=0 GRES=").unwrap();
        assert_eq!((d.account.clone(), d.gpus_on("c1").map(|g| g.len())), (None, Some(0)));
        assert_eq!(parse("no job here"), Err(JobError::NoJobId));
        assert_eq!(parse(""), Err(JobError::NoJobId));
        assert_eq!(numbers("5-1,x,2-99999"), Vec::<u32>::new());
        assert!(hostlist_contains("c[1-3,7],d1", "c7") && hostlist_contains("c[1-3,7],d1", "d1"));
        assert!(!hostlist_contains("c[1-3]", "c4"));
        assert_eq!(hostlist_names("gpu-[01-02,10],c1", 100), ["gpu-01", "gpu-02", "gpu-10", "c1"]);
        assert_eq!(hostlist_names("c[1-999999999]", 3), ["c1", "c2", "c3"], "bounded");
        assert_eq!(hostlist_names("c[x-2],,d", 10), ["d"]);
    }
}
