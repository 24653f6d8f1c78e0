//! Slurm node and job states, normalised the same way whatever the Slurm version or output
//! format: a node's one primary state plus its flags, a job's state in lowercase.

/// Base node states Slurm knows (the part before the first `+` of StateComplete).
const BASE_STATES: &[&str] = &["allocated", "mixed", "idle", "down", "future", "unknown", "error"];

/// Node states shipped even when no node is in them, so dashboards and alarms see zeros
/// rather than gaps. Other states appear only while a node is in them.
pub const CORE_NODE_STATES: &[&str] = &[
    "allocated",
    "mixed",
    "idle",
    "down",
    "drained",
    "draining",
    "fail",
    "completing",
    "powered_down",
    "powering_up",
];

/// States in which a node's CPUs count as "other" (neither allocated nor usable).
const UNUSABLE: &[&str] = &[
    "down",
    "drained",
    "draining",
    "fail",
    "failing",
    "powered_down",
    "powering_up",
    "powering_down",
    "future",
    "unknown",
    "maint",
    "inval",
    "planned",
    "other",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// One of allocated, mixed, idle, down, drained, draining, completing, fail, failing,
    /// maint, reserved, future, planned, powered_down, powering_up, powering_down, inval,
    /// unknown, or `other` for a state this version does not know.
    pub primary: &'static str,
    /// Lowercase flags (drain, not_responding, cloud, powered_down, maintenance, ...).
    pub flags: Vec<String>,
    /// False when the base state was not recognised (counted, never fatal).
    pub recognised: bool,
}

impl NodeState {
    /// From sinfo's StateComplete (`idle+drain+not_responding`), or a compact/long state with
    /// sinfo's suffix characters (`idle~`, `down*`, `alloc#`).
    pub fn parse(s: &str) -> NodeState {
        let s = s.trim().to_ascii_lowercase();
        let mut parts = s.split('+');
        let first = parts.next().unwrap_or("");
        let mut flags: Vec<String> = parts.filter(|p| !p.is_empty()).map(normalise_flag).collect();
        let (base, suffix_flags) = strip_suffixes(first);
        flags.extend(suffix_flags.iter().map(|f| (*f).to_owned()));
        let (base, implied) = expand_short(base);
        flags.extend(implied.iter().map(|f| (*f).to_owned()));
        Self::from_parts(base, flags)
    }

    /// From a base state and flags as JSON outputs give them (any case).
    pub fn from_parts(base: &str, flags: impl IntoIterator<Item = String>) -> NodeState {
        let base = base.to_ascii_lowercase();
        let mut flags: Vec<String> =
            flags.into_iter().map(|f| normalise_flag(&f.to_ascii_lowercase())).collect();
        flags.sort();
        flags.dedup();
        let recognised = BASE_STATES.contains(&base.as_str());
        let primary = primary_state(&base, &flags, recognised);
        NodeState { primary, flags, recognised }
    }

    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// True when the node's unallocated CPUs cannot take work.
    pub fn unusable(&self) -> bool {
        UNUSABLE.contains(&self.primary)
    }
}

fn primary_state(base: &str, flags: &[String], recognised: bool) -> &'static str {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let busy = matches!(base, "allocated" | "mixed") || has("completing");
    if !recognised {
        return "other";
    }
    if has("drain") {
        return if busy { "draining" } else { "drained" };
    }
    if has("fail") {
        return if busy { "failing" } else { "fail" };
    }
    if has("invalid_reg") || has("inval") {
        return "inval";
    }
    if has("powered_down") {
        return "powered_down";
    }
    if has("powering_down") {
        return "powering_down";
    }
    if has("powering_up") {
        return "powering_up";
    }
    if has("maintenance") && !busy {
        return "maint";
    }
    if has("completing") {
        return "completing";
    }
    if base == "idle" && has("reserved") {
        return "reserved";
    }
    if base == "idle" && has("planned") {
        return "planned";
    }
    match base {
        "allocated" => "allocated",
        "mixed" => "mixed",
        "idle" => "idle",
        "down" | "error" => "down",
        "future" => "future",
        _ => "unknown",
    }
}

/// sinfo's one-character suffixes on compact and long states.
fn strip_suffixes(s: &str) -> (&str, Vec<&'static str>) {
    let mut base = s;
    let mut flags = Vec::new();
    while let Some(c) = base.chars().last() {
        let flag = match c {
            '*' => "not_responding",
            '~' => "powered_down",
            '#' => "powering_up",
            '!' => "power_down",
            '%' => "powering_down",
            '$' => "maintenance",
            '@' => "reboot_requested",
            '^' => "reboot_issued",
            '-' => "planned",
            _ => break,
        };
        flags.push(flag);
        base = &base[..base.len() - 1];
    }
    (base, flags)
}

/// Compact and long state names that imply a flag on a base state.
fn expand_short(s: &str) -> (&str, &'static [&'static str]) {
    match s {
        "alloc" | "allocated" => ("allocated", &[]),
        "mix" | "mixed" => ("mixed", &[]),
        "drain" | "drained" => ("idle", &["drain"]),
        "drng" | "draining" => ("allocated", &["drain"]),
        "comp" | "completing" => ("allocated", &["completing"]),
        "maint" => ("idle", &["maintenance"]),
        "resv" | "reserved" => ("idle", &["reserved"]),
        "plnd" | "planned" => ("idle", &["planned"]),
        "fail" => ("down", &["fail"]),
        "failg" | "failing" => ("allocated", &["fail"]),
        "inval" => ("unknown", &["invalid_reg"]),
        "unk" => ("unknown", &[]),
        "futr" => ("future", &[]),
        "pow_up" | "powering_up" => ("idle", &["powering_up"]),
        "pow_dn" | "powering_down" => ("idle", &["powering_down"]),
        "powered_dn" | "powered_down" => ("idle", &["powered_down"]),
        "powering_dn" => ("idle", &["powering_down"]),
        "boot" => ("idle", &["reboot_issued"]),
        "block" | "blocked" => ("idle", &["blocked"]),
        other => (other, &[]),
    }
}

fn normalise_flag(f: &str) -> String {
    match f {
        "maint" => "maintenance".to_owned(),
        "not_resp" | "no_respond" => "not_responding".to_owned(),
        other => other.to_owned(),
    }
}

/// Job states shipped even when no job is in them.
pub const CORE_JOB_STATES: &[&str] =
    &["pending", "running", "suspended", "completing", "completed", "failed", "cancelled", "timeout"];

/// Job states Slurm documents; anything else is shipped as `other`.
const JOB_STATES: &[&str] = &[
    "pending",
    "running",
    "suspended",
    "completing",
    "configuring",
    "completed",
    "cancelled",
    "failed",
    "timeout",
    "preempted",
    "node_fail",
    "out_of_memory",
    "boot_fail",
    "deadline",
    "requeued",
    "requeue_hold",
    "requeue_fed",
    "resizing",
    "revoked",
    "signaling",
    "special_exit",
    "stage_out",
    "stopped",
    "resv_del_hold",
    "update_db",
    "power_up_node",
    "launch_failed",
    "reconfig_fail",
];

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
    ("CF", "configuring"),
    ("PR", "preempted"),
    ("NF", "node_fail"),
    ("OOM", "out_of_memory"),
    ("BF", "boot_fail"),
    ("DL", "deadline"),
    ("CANCELED", "cancelled"),
];

/// A job state (squeue %T or %t, or the first of a JSON job_state list) as a lowercase name
/// from the documented list, or `None` when unknown. No allocation: squeue prints one per job.
pub fn job_state(s: &str) -> Option<&'static str> {
    // squeue prints `CANCELLED by <uid>` in some versions.
    let word = s.split_whitespace().next().unwrap_or("");
    JOB_STATES
        .iter()
        .copied()
        .find(|k| k.eq_ignore_ascii_case(word))
        .or_else(|| JOB_CODES.iter().find(|(c, _)| c.eq_ignore_ascii_case(word)).map(|(_, n)| *n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> (&'static str, Vec<String>) {
        let n = NodeState::parse(s);
        (n.primary, n.flags)
    }

    #[test]
    fn state_complete_strings() {
        assert_eq!(p("idle").0, "idle");
        assert_eq!(p("mixed").0, "mixed");
        assert_eq!(p("allocated").0, "allocated");
        assert_eq!(p("idle+drain"), ("drained", vec!["drain".into()]));
        assert_eq!(p("mixed+drain").0, "draining");
        assert_eq!(p("allocated+drain").0, "draining");
        assert_eq!(p("idle+completing+drain").0, "draining");
        assert_eq!(p("down+drain+not_responding").0, "drained");
        assert_eq!(p("down+not_responding"), ("down", vec!["not_responding".into()]));
        assert_eq!(
            p("idle+cloud+powered_down"),
            ("powered_down", vec!["cloud".into(), "powered_down".into()])
        );
        assert_eq!(p("allocated+cloud+powering_up").0, "powering_up");
        assert_eq!(p("idle+cloud+powering_down").0, "powering_down");
        assert_eq!(p("idle+maintenance").0, "maint");
        assert_eq!(p("allocated+maintenance").0, "allocated");
        assert_eq!(p("idle+reserved").0, "reserved");
        assert_eq!(p("idle+planned").0, "planned");
        assert_eq!(p("allocated+completing").0, "completing");
        assert_eq!(p("idle+fail").0, "fail");
        assert_eq!(p("mixed+fail").0, "failing");
        assert_eq!(p("future").0, "future");
        assert_eq!(p("unknown+not_responding").0, "unknown");
        assert_eq!(p("idle+reboot_requested").0, "idle");
        assert_eq!(p("IDLE+DRAIN").0, "drained", "case does not matter");
    }

    #[test]
    fn compact_states_with_suffixes() {
        assert_eq!(p("idle~").0, "powered_down");
        assert_eq!(p("alloc#").0, "powering_up");
        assert_eq!(p("down*"), ("down", vec!["not_responding".into()]));
        assert_eq!(p("drain*").0, "drained");
        assert_eq!(p("drng").0, "draining");
        assert_eq!(p("mix@"), ("mixed", vec!["reboot_requested".into()]));
        assert_eq!(p("idle%").0, "powering_down");
        assert_eq!(p("idle!"), ("idle", vec!["power_down".into()]));
        assert_eq!(p("comp").0, "completing");
        assert_eq!(p("maint").0, "maint");
        assert_eq!(p("resv").0, "reserved");
        assert_eq!(p("plnd").0, "planned");
        assert_eq!(p("inval").0, "inval");
    }

    #[test]
    fn unknown_states_are_other_and_flagged() {
        let n = NodeState::parse("hibernating+drain");
        assert_eq!(n.primary, "other");
        assert!(!n.recognised);
        assert!(n.unusable());
        let n = NodeState::parse("");
        assert_eq!(n.primary, "other");
    }

    #[test]
    fn json_parts() {
        let n = NodeState::from_parts("IDLE", vec!["DRAIN".into(), "NOT_RESPONDING".into()]);
        assert_eq!(n.primary, "drained");
        assert_eq!(n.flags, vec!["drain", "not_responding"]);
        let n = NodeState::from_parts("mixed", vec!["MAINTENANCE".into()]);
        assert_eq!(n.primary, "mixed");
        assert!(n.has("maintenance"));
    }

    #[test]
    fn job_states() {
        assert_eq!(job_state("PENDING"), Some("pending"));
        assert_eq!(job_state("CANCELLED by 0"), Some("cancelled"));
        assert_eq!(job_state("OUT_OF_MEMORY"), Some("out_of_memory"));
        assert_eq!(job_state("CD"), Some("completed"));
        assert_eq!(job_state("WEIRD"), None);
    }
}
