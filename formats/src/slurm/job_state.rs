//! A job's state: squeue's text prints one word (a flag such as COMPLETING in place of the base
//! state where there is one); `squeue --json` of 23.11+ lists the base state and the flags.

/// Job states shipped even when no job is in them.
pub use slurm_cw_catalog::dims::CORE_JOB_STATES;

/// A job's base states (JOB_STATE_BASE): what `squeue --json` of 23.11+ lists first; its state
/// flags (JOB_STATE_FLAGS of 21.08 to 25.11, lowercase; `other` for one this version does not
/// know). The catalog names them: its dashboard draws each from the head's record.
pub use slurm_cw_catalog::dims::{JOB_BASE_STATES, JOB_FLAGS, job_states};

/// squeue's compact state codes (%t) and their long names.
const JOB_CODES: &[(&str, &str)] = &[
    ("PD", "pending"),
    ("R", "running"),
    ("CG", "completing"),
    ("CD", "completed"),
    ("CA", "cancelled"),
    ("F", "failed"),
    ("TO", "timeout"),
    ("S", "suspended"),
    ("ST", "stopped"),
    ("CF", "configuring"),
    ("PR", "preempted"),
    ("NF", "node_fail"),
    ("OOM", "out_of_memory"),
    ("BF", "boot_fail"),
    ("DL", "deadline"),
    ("RD", "resv_del_hold"),
    ("RF", "requeue_fed"),
    ("RH", "requeue_hold"),
    ("RQ", "requeued"),
    ("RS", "resizing"),
    ("RV", "revoked"),
    ("SI", "signaling"),
    ("SE", "special_exit"),
    ("SO", "stage_out"),
    ("CANCELED", "cancelled"),
];

/// A job state as squeue's text prints it (%T or %t; `CANCELLED by <uid>` in some versions)
/// as one of [`job_states`], or `None` when unknown. No allocation: squeue prints one per job.
pub fn job_state(s: &str) -> Option<&'static str> {
    let word = s.split_whitespace().next().unwrap_or("");
    find(JOB_BASE_STATES, word)
        .or_else(|| find(JOB_FLAGS, word))
        .filter(|s| *s != "other")
        .or_else(|| JOB_CODES.iter().find(|(c, _)| c.eq_ignore_ascii_case(word)).map(|(_, n)| *n))
}

/// A job flag (any case) as one of [`JOB_FLAGS`]; `other` when unknown.
pub fn job_flag(s: &str) -> &'static str {
    find(JOB_FLAGS, s.trim()).unwrap_or("other")
}

/// The flag a state squeue's text prints stands for (`completing` for COMPLETING), if it is one.
pub fn flag_of_state(state: &str) -> Option<&'static str> {
    find(JOB_FLAGS, state).filter(|f| *f != "other")
}

/// A job state list of `squeue --json` 23.11+ (`["COMPLETED", "COMPLETING"]`): the base state
/// (`other` when none is known; the first base state where there are several) and the flags.
pub fn job_state_list<'a>(list: impl IntoIterator<Item = &'a str>) -> (&'static str, Vec<&'static str>) {
    let mut base = None;
    let mut flags = Vec::new();
    for word in list {
        match find(JOB_BASE_STATES, word.trim()) {
            Some(b) if base.is_none() => base = Some(b),
            Some(_) => {}
            None => flags.push(job_flag(word)),
        }
    }
    flags.sort_unstable();
    flags.dedup();
    (base.unwrap_or("other"), flags)
}

fn find(list: &[&'static str], word: &str) -> Option<&'static str> {
    list.iter().copied().find(|k| k.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_states() {
        assert_eq!(job_state("PENDING"), Some("pending"));
        assert_eq!(job_state("CANCELLED by 0"), Some("cancelled"));
        assert_eq!(job_state("OUT_OF_MEMORY"), Some("out_of_memory"));
        assert_eq!(job_state("CD"), Some("completed"));
        assert_eq!(job_state("CG"), Some("completing"));
        assert_eq!(job_state("REQUEUE_HOLD"), Some("requeue_hold"));
        assert_eq!(job_state("WEIRD"), None);
        assert_eq!(job_state("other"), None, "not a state Slurm prints");
    }

    #[test]
    fn json_state_lists_give_the_base_state_and_flags() {
        assert_eq!(job_state_list(["RUNNING"]), ("running", vec![]));
        assert_eq!(job_state_list(["COMPLETED", "COMPLETING"]), ("completed", vec!["completing"]));
        assert_eq!(
            job_state_list(["COMPLETING", "CANCELLED"]),
            ("cancelled", vec!["completing"]),
            "any order"
        );
        assert_eq!(
            job_state_list(["RUNNING", "CONFIGURING", "POWER_UP_NODE"]),
            ("running", vec!["configuring", "power_up_node"])
        );
        assert_eq!(
            job_state_list(["PENDING", "REQUEUED", "FROBNICATED"]),
            ("pending", vec!["other", "requeued"])
        );
        assert_eq!(job_state_list(["REQUEUED"]), ("other", vec!["requeued"]), "no base state");
        assert_eq!(job_state_list([]), ("other", vec![]));
        for f in JOB_FLAGS {
            assert_eq!(flag_of_state(f), (*f != "other").then_some(*f));
            assert_eq!(job_state(f), (*f != "other").then_some(*f), "squeue prints every flag as a state");
        }
        for s in JOB_BASE_STATES {
            assert_eq!(job_state(s), Some(*s));
            assert_eq!(flag_of_state(s), None);
        }
    }
}
