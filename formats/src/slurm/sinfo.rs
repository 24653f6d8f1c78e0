//! sinfo: one line per node and partition, parsed into [`NodeRow`]s.
//!
//! The collector asks for an explicit `-O` format (stable across Slurm versions and cheap);
//! [`parse_json`] reads `sinfo --json` of every version too, for fixtures and as a fallback.

use super::gres;
use super::state::NodeState;
use serde_json::Value;
use std::collections::HashMap;

/// The argv the collector runs (after the program name). `|` ends each field; the width 0
/// (no size given) means no truncation.
pub const ARGS: &[&str] = &[
    "--noheader",
    "--Node",
    "--all",
    "--Format=NodeList:|,Partition:|,StateComplete:|,CPUsState:|,Memory:|,AllocMem:|,Gres:|,GresUsed:|",
];

/// One node in one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub name: String,
    /// Without the `*` sinfo puts on the default partition; empty when in none.
    pub partition: String,
    pub state: NodeState,
    pub cpus_alloc: u64,
    pub cpus_idle: u64,
    pub cpus_other: u64,
    pub cpus_total: u64,
    pub memory_mb: u64,
    pub memory_alloc_mb: u64,
    pub gpus_total: u64,
    pub gpus_alloc: u64,
}

/// A line that could not be used: its number (a record's, in JSON), the field at fault where
/// one is, and why. Shown as `line 4, Memory: "lots" is not a number`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}{}: {reason}", .field.as_ref().map(|f| format!(", {f}")).unwrap_or_default())]
pub struct BadLine {
    pub line: usize,
    /// sinfo's `-O` field (`CPUsState`, `Memory`), an OpenMetrics sample's metric name.
    pub field: Option<String>,
    pub reason: String,
}

impl BadLine {
    /// A line bad as a whole, no one field at fault.
    pub fn new(line: usize, reason: impl Into<String>) -> BadLine {
        BadLine { line, field: None, reason: reason.into() }
    }
}

/// Why a line is bad, found by a parser's helpers; the loop adds the line's number.
#[derive(Debug)]
pub(super) struct Fault {
    field: Option<String>,
    reason: String,
}

impl Fault {
    pub(super) fn at(field: &str, reason: impl Into<String>) -> Fault {
        Fault { field: Some(field.to_owned()), reason: reason.into() }
    }

    pub(super) fn on_line(self, line: usize) -> BadLine {
        BadLine { line, field: self.field, reason: self.reason }
    }
}

impl From<String> for Fault {
    fn from(reason: String) -> Fault {
        Fault { field: None, reason }
    }
}

impl From<&str> for Fault {
    fn from(reason: &str) -> Fault {
        reason.to_owned().into()
    }
}

/// Why `sinfo --json` output cannot be read at all (one bad record is a [`BadLine`] instead).
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or cut short: serde_json gives the line and column.
    #[error("sinfo --json: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error("sinfo --json: neither a `sinfo` nor a `nodes` array")]
    NoNodes,
}

/// Parses the output of [`ARGS`]. Bad lines are skipped and returned, never fatal.
pub fn parse_text(out: &str) -> (Vec<NodeRow>, Vec<BadLine>) {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    // A cluster has few distinct state strings: parse each once.
    let mut states: HashMap<&str, NodeState> = HashMap::new();
    for (i, line) in out.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, &mut states) {
            Ok(r) => rows.push(r),
            Err(fault) => bad.push(fault.on_line(i + 1)),
        }
    }
    (rows, bad)
}

fn parse_line<'a>(line: &'a str, states: &mut HashMap<&'a str, NodeState>) -> Result<NodeRow, Fault> {
    let f: Vec<&str> = line.split('|').collect();
    // Eight fields and the empty string after the last `|`.
    if f.len() < 8 {
        return Err(format!("{} fields, expected 8: {line:?}", f.len().min(8)).into());
    }
    let name = f[0].trim();
    if name.is_empty() {
        return Err(Fault::at("NodeList", "empty node name"));
    }
    let not_cpus = || Fault::at("CPUsState", format!("{:?} is not A/I/O/T", f[3]));
    let cpus: Vec<u64> =
        f[3].split('/').map(|x| x.trim().parse::<u64>()).collect::<Result<_, _>>().map_err(|_| not_cpus())?;
    let [alloc, idle, other, total] = cpus[..] else {
        return Err(not_cpus());
    };
    let number = |field: &str, what: &str| -> Result<u64, Fault> {
        let t = field.trim();
        if t.is_empty() || t == "N/A" {
            return Ok(0);
        }
        // Memory may carry a `+` when nodes in a group differ; take the minimum part.
        t.trim_end_matches('+').parse().map_err(|_| Fault::at(what, format!("{t:?} is not a number")))
    };
    Ok(NodeRow {
        name: name.to_owned(),
        partition: f[1].trim().trim_end_matches('*').to_owned(),
        state: states.entry(f[2]).or_insert_with(|| NodeState::parse(f[2])).clone(),
        cpus_alloc: alloc,
        cpus_idle: idle,
        cpus_other: other,
        cpus_total: total,
        memory_mb: number(f[4], "Memory")?,
        memory_alloc_mb: number(f[5], "AllocMem")?,
        gpus_total: gres::gpus_in_gres(f[6]),
        gpus_alloc: gres::gpus_in_gres(f[7]),
    })
}

/// Parses `sinfo --json` of any version. 21.08 and 22.05 (openapi v0.0.37/38) list node
/// objects under `nodes` (`state` a string plus `state_flags`). From 23.02 (data_parser
/// v0.0.39+) the top level is `sinfo`: grouping records of nodes with the same partition and
/// state, carrying sums (`cpus`, `memory.allocated`) and per-node ranges (`memory.minimum`);
/// a record of several nodes is split evenly among them, exact for the usual one-node records
/// and for uniform groups.
pub fn parse_json(text: &str) -> Result<(Vec<NodeRow>, Vec<BadLine>), JsonError> {
    let doc: Value = serde_json::from_str(text)?;
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    if let Some(records) = doc.get("sinfo").and_then(Value::as_array) {
        for (i, r) in records.iter().enumerate() {
            match json_record(r) {
                Ok(mut nodes) => rows.append(&mut nodes),
                Err(reason) => bad.push(BadLine::new(i + 1, reason)),
            }
        }
        return Ok((rows, bad));
    }
    let nodes = doc.get("nodes").and_then(Value::as_array).ok_or(JsonError::NoNodes)?;
    for (i, n) in nodes.iter().enumerate() {
        match json_node(n) {
            Ok(mut per_partition) => rows.append(&mut per_partition),
            Err(reason) => bad.push(BadLine::new(i + 1, reason)),
        }
    }
    Ok((rows, bad))
}

/// A node state given as an array: base first, then flags.
fn state_from_list(list: &[Value], what: &str) -> Result<NodeState, String> {
    let mut words: Vec<String> = list.iter().filter_map(Value::as_str).map(str::to_owned).collect();
    if words.is_empty() {
        return Err(format!("{what}: empty state"));
    }
    let base = words.remove(0);
    Ok(NodeState::from_parts(&base, words))
}

/// One 23.02+ grouping record.
fn json_record(r: &Value) -> Result<Vec<NodeRow>, String> {
    let names = strings(r.get("nodes").and_then(|n| n.get("nodes")));
    if names.is_empty() {
        return Err("record without node names".into());
    }
    let state = match r.get("node").and_then(|n| n.get("state")) {
        Some(Value::Array(list)) => state_from_list(list, &names[0])?,
        Some(Value::String(s)) => NodeState::parse(s),
        _ => return Err(format!("record of {} without node.state", names[0])),
    };
    let partition =
        r.get("partition").and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or("").to_owned();
    let n = names.len() as u64;
    let cpus = r.get("cpus");
    let part = |key: &str| number(cpus.and_then(|c| c.get(key))) / n;
    let memory = r.get("memory");
    let gres = r.get("gres");
    let gres_of = |key: &str| gres.and_then(|g| g.get(key)).and_then(Value::as_str).unwrap_or("");
    Ok(names
        .into_iter()
        .map(|name| NodeRow {
            name,
            partition: partition.clone(),
            state: state.clone(),
            cpus_alloc: part("allocated"),
            cpus_idle: part("idle"),
            cpus_other: part("other"),
            cpus_total: part("total"),
            memory_mb: number(memory.and_then(|m| m.get("minimum"))),
            memory_alloc_mb: number(memory.and_then(|m| m.get("allocated"))) / n,
            gpus_total: gres::gpus_in_gres(gres_of("total")),
            gpus_alloc: gres::gpus_in_gres(gres_of("used")),
        })
        .collect())
}

fn json_node(n: &Value) -> Result<Vec<NodeRow>, String> {
    let name = n.get("name").and_then(Value::as_str).ok_or("node without a name")?;
    let state = match n.get("state") {
        Some(Value::String(base)) => {
            let flags = strings(n.get("state_flags"));
            NodeState::from_parts(base, flags)
        }
        Some(Value::Array(list)) => {
            let mut words: Vec<String> = list.iter().filter_map(Value::as_str).map(str::to_owned).collect();
            if words.is_empty() {
                return Err(format!("node {name}: empty state"));
            }
            let base = words.remove(0);
            NodeState::from_parts(&base, words)
        }
        _ => return Err(format!("node {name}: no state")),
    };
    let total = number(n.get("cpus"));
    let alloc = number(n.get("alloc_cpus"));
    let (idle, other) = if state.unusable() {
        (0, total.saturating_sub(alloc))
    } else {
        (number(n.get("alloc_idle_cpus").or(n.get("idle_cpus"))).min(total.saturating_sub(alloc)), 0)
    };
    let gres_total = n.get("gres").and_then(Value::as_str).unwrap_or("");
    let gres_used = n.get("gres_used").and_then(Value::as_str).unwrap_or("");
    let mut partitions = strings(n.get("partitions"));
    if partitions.is_empty() {
        partitions.push(String::new());
    }
    Ok(partitions
        .into_iter()
        .map(|partition| NodeRow {
            name: name.to_owned(),
            partition,
            state: state.clone(),
            cpus_alloc: alloc,
            cpus_idle: idle,
            cpus_other: other,
            cpus_total: total,
            memory_mb: number(n.get("real_memory")),
            memory_alloc_mb: number(n.get("alloc_memory")),
            gpus_total: gres::gpus_in_gres(gres_total),
            gpus_alloc: gres::gpus_in_gres(gres_used),
        })
        .collect())
}

/// A JSON number, or a 23.02+ `{set, infinite, number}` object; anything else is 0.
pub fn number(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)).unwrap_or(0),
        Some(Value::Object(o)) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(true);
            let infinite = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if set && !infinite { number(o.get("number")) } else { 0 }
        }
        _ => 0,
    }
}

/// A JSON array of strings (or a comma-separated string), as owned strings.
pub fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(s)) if !s.is_empty() => s.split(',').map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_collector_format() {
        let out = "c1|batch*|mixed|1/1/0/2|2000|1000|(null)|(null)|\n\
                   g1|gpu|allocated|8/0/0/8|64000|32000|gpu:a100:4(S:0-1)|gpu:a100:2(IDX:0-1)|\n\
                   c2|batch*|idle+drain|0/0/2/2|2000|0|(null)|(null)|\n";
        let (rows, bad) = parse_text(out);
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].partition, "batch");
        assert_eq!(rows[0].state.primary, "mixed");
        assert_eq!((rows[0].cpus_alloc, rows[0].cpus_idle, rows[0].cpus_total), (1, 1, 2));
        assert_eq!((rows[1].gpus_total, rows[1].gpus_alloc), (4, 2));
        assert_eq!(rows[1].memory_alloc_mb, 32000);
        assert_eq!(rows[2].state.primary, "drained");
        assert_eq!(rows[2].cpus_other, 2);
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let out = "c1|batch*|idle|0/2/0/2|2000|0|(null)|(null)|\n\
                   garbage\n\
                   c3|batch|idle|x/2/0/2|2000|0|(null)|(null)|\n\
                   c4|batch|idle|0/2/0/2|lots|0|(null)|(null)|\n\
                   c5|batch|idle|0/2/0|2000|0|(null)|(null)|\n\
                   c6|batch|idle|0/2/0/2|2000|0|(nu";
        let (rows, bad) = parse_text(out);
        assert_eq!(rows.len(), 1);
        let lines: Vec<usize> = bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6]);
        assert_eq!(bad[2].field.as_deref(), Some("Memory"));
        assert_eq!(bad[2].to_string(), r#"line 4, Memory: "lots" is not a number"#);
        assert!(bad[1].to_string().starts_with("line 3, CPUsState: "), "{}", bad[1]);
        assert!(matches!(parse_json("{"), Err(JsonError::Syntax(_))));
        assert!(matches!(parse_json("{}"), Err(JsonError::NoNodes)));
    }

    #[test]
    fn numbers_of_every_json_generation() {
        let v: Value = serde_json::json!({"a": 3, "b": {"set": true, "infinite": false, "number": 7},
            "c": {"set": false, "infinite": false, "number": 9}, "d": {"set": true, "infinite": true, "number": 0},
            "e": "x", "f": 2.9});
        assert_eq!(number(v.get("a")), 3);
        assert_eq!(number(v.get("b")), 7);
        assert_eq!(number(v.get("c")), 0);
        assert_eq!(number(v.get("d")), 0);
        assert_eq!(number(v.get("e")), 0);
        assert_eq!(number(v.get("f")), 2);
        assert_eq!(number(v.get("missing")), 0);
    }
}
