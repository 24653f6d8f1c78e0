//! Pending reasons as Slurm's reason code (`Resources`, `Priority`, `ReqNodeNotAvail`...): one
//! of a fixed set, whichever output it came from.
//!
//! `squeue --json` gives the code (`state_reason`) and, apart, a description
//! (`state_description`). squeue's text `Reason` field (%r) prints the description instead of
//! the code when the job has one (`_print_job_reason` in src/squeue/print.c, 22.05 to 25.11),
//! so text needs mapping back: a code followed by details (`ReqNodeNotAvail,
//! UnavailableNodes:c[1-2]`) is that code; a description slurmctld writes is the code it sets
//! with it; any other text is [`OTHER`]. Descriptions carry node lists, uids, reservation and
//! QOS names: shipped as they are, each would be a CloudWatch metric of its own.

/// What a reason is shipped as when it cannot be named (and what the reasons past the top
/// few are summed into).
pub const OTHER: &str = "Other";

/// Descriptions slurmctld puts in place of a pending job's reason code, as (how it starts,
/// what else it holds, the code it sets with it). From Slurm 24.11.5's source (the first is the
/// same in 22.05: see tests/fixtures/slurm/22.05): src/slurmctld/job_scheduler.c (Resources),
/// job_mgr.c (held requeues), reservation.c, node_scheduler.c, partition_mgr.c and the
/// burst_buffer plugins.
const DESCRIPTIONS: &[(&str, &str, &str)] = &[
    ("Nodes required for job are DOWN, DRAINED", "reserved for jobs in higher priority", "Resources"),
    ("job requeued in held state", "", "JobHeldUser"),
    ("job requeued in special exit state", "", "JobHeldUser"),
    ("launch failed requeued held", "", "JobHeldUser"),
    ("launch failure limit exceeded requeued held", "", "JobHoldMaxRequeue"),
    ("Reservation ", " was deleted", "ReservationDeleted"),
    ("Reservation ", " is invalid", "ReservationInvalid"),
    ("uid ", " not in group permitted to use this partition", "AccountNotAllowed"),
    ("Job's QOS not ", " this partition", "QOSNotAllowed"),
    ("burst_buffer/", "", "BurstBufferOperation"),
    ("Burst buffer pre_run error", "", "BurstBufferOperation"),
    ("Could not find burst buffer record", "", "BurstBufferOperation"),
];

/// The reason code of what squeue printed (text or JSON): `(Priority)` -> `Priority`,
/// `ReqNodeNotAvail, UnavailableNodes:c[1-2]` -> `ReqNodeNotAvail`, `Nodes required for job are
/// DOWN, DRAINED or reserved for jobs in higher priority partitions` -> `Resources`, nothing ->
/// `None`, a description not known here -> [`OTHER`]. No allocation: squeue prints one per job.
pub fn reason_code(r: &str) -> &str {
    let r = r.trim().trim_start_matches('(').trim_end_matches(')').trim();
    if r.is_empty() || r == "None" || r == "null" {
        return "None";
    }
    // A code alone, or a code and its details after a comma or colon.
    let head = r.split([',', ':']).next().unwrap_or("").trim();
    if is_code(head) {
        return head;
    }
    DESCRIPTIONS
        .iter()
        .find(|(start, holds, _)| r.starts_with(start) && r.contains(holds))
        .map_or(OTHER, |(_, _, code)| code)
}

/// Slurm's reason codes are one CamelCase word (job_state_reason.c: `Resources`,
/// `QOSGrpCPUMinutesLimit`, `MaxMemoryRunMinsPerAccount`); a newer version's new code is too.
fn is_code(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.as_bytes()[0].is_ascii_alphabetic()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether a pending job with this reason code would start if nodes were free: not held, not
/// waiting for a dependency, a begin time, licenses, a reservation, a limit (QOS, association,
/// partition) or a partition that is down. This is the demand that more nodes would serve.
pub fn startable(reason: &str) -> bool {
    const WAITING: &[&str] = &[
        "Dependency",
        "DependencyNeverSatisfied",
        "JobHeldUser",
        "JobHeldAdmin",
        "JobHoldMaxRequeue",
        "BeginTime",
        "Licenses",
        "Reservation",
        "ReservationDeleted",
        "ReservationInvalid",
        "JobArrayTaskLimit",
        "AccountNotAllowed",
        "QOSNotAllowed",
    ];
    !(WAITING.contains(&reason)
        || reason.contains("Limit")
        || reason.starts_with("Partition")
        || reason.starts_with("Invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_lose_parentheses_and_details() {
        assert_eq!(reason_code("(Priority)"), "Priority");
        assert_eq!(reason_code("((ReqNodeNotAvail, UnavailableNodes:cs[100,101]))"), "ReqNodeNotAvail");
        assert_eq!(reason_code("ReqNodeNotAvail, May be reserved for other job"), "ReqNodeNotAvail");
        assert_eq!(reason_code("ReqNodeNotAvail, Reserved for maintenance"), "ReqNodeNotAvail");
        assert_eq!(reason_code("QOSGrpCPUMinutesLimit"), "QOSGrpCPUMinutesLimit");
        assert_eq!(reason_code("SomeCodeOfSlurm30"), "SomeCodeOfSlurm30", "a new code is a code");
        assert_eq!(reason_code("None"), "None");
        assert_eq!(reason_code(""), "None");
        assert_eq!(reason_code("(null)"), "None");
        assert_eq!(reason_code("  Resources  "), "Resources");
    }

    /// What squeue's text printed on real 22.05 and 24.11 for a job whose code is Resources: it
    /// used to be cut at its first comma into a reason of its own.
    #[test]
    fn descriptions_are_the_code_slurmctld_set_with_them() {
        let real =
            "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions";
        assert_eq!(reason_code(real), "Resources");
        assert_eq!(
            reason_code(
                "Nodes required for job are DOWN, DRAINED, REBOOTING or reserved for jobs in higher priority partitions"
            ),
            "Resources"
        );
        assert_eq!(reason_code("job requeued in held state"), "JobHeldUser");
        assert_eq!(reason_code("launch failure limit exceeded requeued held"), "JobHoldMaxRequeue");
        assert_eq!(reason_code("Reservation maint_0412 was deleted"), "ReservationDeleted");
        assert_eq!(reason_code("Reservation big, a name is invalid"), "ReservationInvalid");
        assert_eq!(
            reason_code("uid 1001 not in group permitted to use this partition (gpu). groups allowed: ml"),
            "AccountNotAllowed"
        );
        assert_eq!(
            reason_code("Job's QOS not permitted to use this partition (gpu allows high not low)"),
            "QOSNotAllowed"
        );
        assert_eq!(reason_code("burst_buffer/lua: setup: no space"), "BurstBufferOperation");
        // Free text: never a metric of its own.
        assert_eq!(reason_code("something the controller said, 42 times"), OTHER);
        assert_eq!(reason_code("Nodes required for job are DOWN"), OTHER, "a cut description is not known");
        assert_eq!(reason_code(&"x".repeat(100)), OTHER, "too long for a code");
        assert_eq!(reason_code("Prio\u{1}rity"), OTHER);
    }

    #[test]
    fn demand_counts_only_jobs_that_could_start() {
        for r in ["Resources", "Priority", "ReqNodeNotAvail", "None", OTHER] {
            assert!(startable(r), "{r}");
        }
        for r in [
            "Dependency",
            "JobHeldUser",
            "BeginTime",
            "QOSMaxJobsPerUserLimit",
            "AssocGrpCpuLimit",
            "PartitionDown",
            "InvalidAccount",
            "ReservationDeleted",
            "QOSNotAllowed",
        ] {
            assert!(!startable(r), "{r}");
        }
    }
}
