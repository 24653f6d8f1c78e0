//! Slurm node and job states, normalised the same way whatever the Slurm version or output
//! format: a node's one primary state plus its flags, a job's state in lowercase plus its
//! flags (in [`super::job_state`], re-exported here).
//!
//! Every value a parser can give is in a list ([`NODE_STATES`], [`NODE_FLAGS`], [`job_states`],
//! [`JOB_FLAGS`]); anything else becomes `other`. The catalog's help texts name every one of
//! them, and a test keeps the two in step (shipper/tests/it/state_help.rs).

pub use super::job_state::*;

/// Base node states Slurm knows (the part before the first `+` of StateComplete; the first
/// entry of a JSON state list).
const BASE_STATES: &[&str] = &["allocated", "mixed", "idle", "down", "future", "unknown", "error"];

/// Every primary node state [`NodeState::parse`] and [`NodeState::from_parts`] can give, and
/// those shipped even when no node is in them: the catalog names them (its dashboard draws
/// them from the head's record).
pub use slurm_cw_catalog::dims::{CORE_NODE_STATES, NODE_STATES};

/// Every node flag a parser can give: Slurm's flags (node_state_flags[] of 21.08 to 25.11),
/// lowercase, plus `power_down` from sinfo's `!` suffix; anything else is `other`.
pub const NODE_FLAGS: &[&str] = &[
    "blocked",
    "cloud",
    "completing",
    "drain",
    "dynamic",
    "dynamic_future",
    "dynamic_norm",
    "external",
    "fail",
    "invalid_reg",
    "maintenance",
    "not_responding",
    "perfctrs",
    "planned",
    "power_down",
    "power_up",
    "powered_down",
    "powering_down",
    "powering_up",
    "reboot_issued",
    "reboot_requested",
    "reserved",
    "resume",
    "other",
];

/// States in which a node's CPUs count as "other" (neither allocated nor usable).
const UNUSABLE: &[&str] = &[
    "down",
    "error",
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
    "blocked",
    "inval",
    "planned",
    "other",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// One of [`NODE_STATES`]: `other` for a base state this version does not know.
    pub primary: &'static str,
    /// Flags from [`NODE_FLAGS`], sorted; `other` for a flag this version does not know.
    pub flags: Vec<&'static str>,
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
        let mut flags: Vec<&'static str> = parts.filter(|p| !p.is_empty()).map(flag).collect();
        let (base, suffix_flags) = strip_suffixes(first);
        flags.extend(suffix_flags);
        let (base, implied) = expand_short(base);
        flags.extend(implied);
        Self::build(base, flags)
    }

    /// From a base state and flags as JSON outputs give them (any case).
    pub fn from_parts(base: &str, flags: impl IntoIterator<Item = String>) -> NodeState {
        let flags = flags.into_iter().map(|f| flag(&f.to_ascii_lowercase())).collect();
        Self::build(&base.to_ascii_lowercase(), flags)
    }

    fn build(base: &str, mut flags: Vec<&'static str>) -> NodeState {
        flags.sort_unstable();
        flags.dedup();
        let recognised = BASE_STATES.contains(&base);
        let primary = primary_state(base, &flags, recognised);
        NodeState { primary, flags, recognised }
    }

    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// True when the node's unallocated CPUs cannot take work.
    pub fn unusable(&self) -> bool {
        UNUSABLE.contains(&self.primary)
    }
}

/// The one state a node is counted in. Slurm's own order (node_state_string() of 22.05 to
/// 25.11) where it names the state: the base state first (`down$` is down, in maintenance),
/// flags that sinfo shows as a state of their own (drained, maint, inval...) over it; cloud
/// nodes' power states over idle, allocated and mixed, as ParallelCluster's `idle~` and
/// `alloc#` are best read.
fn primary_state(base: &str, flags: &[&str], recognised: bool) -> &'static str {
    let has = |f: &str| flags.contains(&f);
    let busy = matches!(base, "allocated" | "mixed") || has("completing");
    if !recognised {
        return "other";
    }
    if has("invalid_reg") {
        return "inval";
    }
    // sinfo: MAINT unless drained or allocated, mixed or down (then `alloc$`, `down$`...).
    if has("maintenance") && !has("drain") && !matches!(base, "allocated" | "mixed" | "down") {
        return "maint";
    }
    if has("drain") {
        return if busy { "draining" } else { "drained" };
    }
    if has("fail") {
        return if busy { "failing" } else { "fail" };
    }
    // A node down (or in error) is that, whatever its power or reboot flags.
    if base == "down" {
        return "down";
    }
    if base == "error" {
        return "error";
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
    if has("completing") {
        return "completing";
    }
    if base == "idle" {
        for (f, state) in [("reserved", "reserved"), ("blocked", "blocked"), ("planned", "planned")] {
            if has(f) {
                return state;
            }
        }
    }
    match base {
        "allocated" => "allocated",
        "mixed" => "mixed",
        "idle" => "idle",
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
        "err" => ("error", &[]),
        "futr" => ("future", &[]),
        "pow_up" | "powering_up" => ("idle", &["powering_up"]),
        "pow_dn" | "powering_down" => ("idle", &["powering_down"]),
        "powered_dn" | "powered_down" => ("idle", &["powered_down"]),
        "powering_dn" | "powring_dn" => ("idle", &["powering_down"]),
        "boot" => ("idle", &["reboot_issued"]),
        "block" | "blocked" => ("idle", &["blocked"]),
        other => (other, &[]),
    }
}

/// A flag as one of [`NODE_FLAGS`] (`other` when unknown), lowercase in.
fn flag(f: &str) -> &'static str {
    let f = match f {
        "maint" => "maintenance",
        "not_resp" | "no_respond" => "not_responding",
        "inval" => "invalid_reg",
        other => other,
    };
    NODE_FLAGS.iter().copied().find(|k| *k == f).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> (&'static str, Vec<&'static str>) {
        let n = NodeState::parse(s);
        (n.primary, n.flags)
    }

    #[test]
    fn state_complete_strings() {
        assert_eq!(p("idle").0, "idle");
        assert_eq!(p("mixed").0, "mixed");
        assert_eq!(p("allocated").0, "allocated");
        assert_eq!(p("idle+drain"), ("drained", vec!["drain"]));
        assert_eq!(p("mixed+drain").0, "draining");
        assert_eq!(p("allocated+drain").0, "draining");
        assert_eq!(p("idle+completing+drain").0, "draining");
        assert_eq!(p("down+drain+not_responding").0, "drained");
        assert_eq!(p("down+not_responding"), ("down", vec!["not_responding"]));
        assert_eq!(p("idle+cloud+powered_down"), ("powered_down", vec!["cloud", "powered_down"]));
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
    fn error_is_a_state_of_its_own() {
        assert_eq!(p("error"), ("error", vec![]));
        assert_eq!(p("ERROR+NOT_RESPONDING"), ("error", vec!["not_responding"]));
        assert_eq!(p("err*").0, "error", "the compact form");
        assert_eq!(p("error+drain").0, "drained", "a drained node is drained, whatever its base");
        let n = NodeState::from_parts("ERROR", Vec::<String>::new());
        assert_eq!(n.primary, "error");
        assert!(n.recognised && n.unusable());
    }

    /// sinfo prints DOWN+MAINT as `down$`, ALLOCATED+MAINT as `alloc$`, MIXED+MAINT as `mix$`:
    /// the base state, in a maintenance reservation; IDLE+MAINT alone is `maint`.
    #[test]
    fn maintenance_is_a_state_only_where_sinfo_says_maint() {
        assert_eq!(p("down+maintenance"), ("down", vec!["maintenance"]));
        assert_eq!(p("down$"), ("down", vec!["maintenance"]));
        assert_eq!(p("down$*").0, "down");
        assert_eq!(p("alloc$").0, "allocated");
        assert_eq!(p("mix$").0, "mixed");
        assert_eq!(p("drain$"), ("drained", vec!["drain", "maintenance"]));
        assert_eq!(p("maint*"), ("maint", vec!["maintenance", "not_responding"]));
        assert_eq!(p("idle+cloud+maintenance+powered_down").0, "maint", "sinfo: MAINT");
        assert_eq!(p("idle+completing+maintenance").0, "maint", "sinfo: MAINT");
        let n = NodeState::from_parts("DOWN", vec!["MAINTENANCE".into(), "NOT_RESPONDING".into()]);
        assert_eq!((n.primary, n.flags), ("down", vec!["maintenance", "not_responding"]));
    }

    #[test]
    fn a_down_node_is_down_whatever_its_power_flags() {
        assert_eq!(p("down~"), ("down", vec!["powered_down"]));
        assert_eq!(p("down+cloud+powered_down"), ("down", vec!["cloud", "powered_down"]));
        assert_eq!(p("down#").0, "down");
        assert_eq!(p("down%").0, "down");
    }

    #[test]
    fn invalid_registration_first_as_sinfo_does() {
        assert_eq!(p("idle+drain+invalid_reg").0, "inval");
        assert_eq!(p("down+invalid_reg").0, "inval");
        assert_eq!(p("idle+blocked").0, "blocked");
        assert_eq!(p("block").0, "blocked");
    }

    #[test]
    fn compact_states_with_suffixes() {
        assert_eq!(p("idle~").0, "powered_down");
        assert_eq!(p("alloc#").0, "powering_up");
        assert_eq!(p("down*"), ("down", vec!["not_responding"]));
        assert_eq!(p("drain*").0, "drained");
        assert_eq!(p("drng").0, "draining");
        assert_eq!(p("mix@"), ("mixed", vec!["reboot_requested"]));
        assert_eq!(p("idle%").0, "powering_down");
        assert_eq!(p("idle!"), ("idle", vec!["power_down"]));
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
    fn unknown_flags_are_other() {
        assert_eq!(p("idle+hibernating"), ("idle", vec!["other"]));
        assert_eq!(p("idle+sleepy+dreamy+cloud"), ("idle", vec!["cloud", "other"]));
        let n = NodeState::from_parts("IDLE", vec!["EXTERNAL".into(), "x\u{1}y".into()]);
        assert_eq!(n.flags, vec!["external", "other"]);
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

    /// Every base state with every combination of the flags that decide the primary state:
    /// the result is always in NODE_STATES, and every entry there is reachable.
    #[test]
    fn every_primary_state_is_listed_and_reachable() {
        const DECIDING: &[&str] = &[
            "invalid_reg",
            "maintenance",
            "drain",
            "fail",
            "powered_down",
            "powering_down",
            "powering_up",
            "completing",
            "reserved",
            "blocked",
            "planned",
            "not_responding",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for base in BASE_STATES.iter().chain(&["hibernating"]) {
            for mask in 0u32..(1 << DECIDING.len()) {
                let flags: Vec<String> = DECIDING
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, f)| f.to_string())
                    .collect();
                let n = NodeState::from_parts(base, flags.clone());
                assert!(NODE_STATES.contains(&n.primary), "{base}+{flags:?} -> {}", n.primary);
                assert!(n.flags.iter().all(|f| NODE_FLAGS.contains(f)));
                let text = NodeState::parse(&format!("{base}+{}", flags.join("+")));
                assert_eq!(text, n, "StateComplete and JSON agree: {base}+{flags:?}");
                seen.insert(n.primary);
            }
        }
        let missing: Vec<_> = NODE_STATES.iter().filter(|s| !seen.contains(*s)).collect();
        assert!(missing.is_empty(), "listed but never given: {missing:?}");
    }
}
