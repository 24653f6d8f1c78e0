//! The OpenMetrics / Prometheus text exposition, as slurmctld's `metrics/openmetrics` plugin
//! (Slurm 25.11+) serves it: `# TYPE`, `# HELP`, `# UNIT` and `# EOF` lines, then one sample a
//! line, `name{label="value",...} value [timestamp] [# exemplar]`.
//!
//! No I/O. A line that does not parse is counted in [`Exposition::bad`] and skipped: one
//! damaged series must not cost the others.

use super::sinfo::{BadLine, Fault};
use std::collections::BTreeMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order the line gives them.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A whole exposition.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Family name to its `# TYPE` (gauge, counter, ...).
    pub types: BTreeMap<String, String>,
    /// Family name to its `# HELP` text, unescaped.
    pub help: BTreeMap<String, String>,
    /// Lines skipped, with why: the first [`BAD_KEPT`] of them; `bad_total` counts them all.
    pub bad: Vec<BadLine>,
    pub bad_total: usize,
    /// `# EOF` was seen (OpenMetrics ends with it; a body cut short lacks it).
    pub eof: bool,
}

impl Exposition {
    /// The value of the first sample named `name` without labels.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.samples.iter().find(|s| s.name == name && s.labels.is_empty()).map(|s| s.value)
    }

    /// Samples named `name`, with any labels.
    pub fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }
}

/// Longest line read; longer ones are counted bad (a body is bounded by the caller anyway).
const MAX_LINE: usize = 64 * 1024;

/// Bad lines kept with their reason; a body of 64 MiB of junk must not become millions of them.
pub const BAD_KEPT: usize = 20;

/// Parses an exposition of at most `max` items, an item being a sample line or one of its
/// labels (each `=`); else the count, found before anything is parsed. What parsing holds
/// grows with items, not bytes: `a 1` (4 bytes) becomes a sample of ~90, each 6-byte `b="c"`
/// a label of ~110, so a body of millions of them is refused at the cost of one pass over it.
pub fn parse_at_most(text: &str, max: usize) -> Result<Exposition, usize> {
    let items: usize = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| 1 + l.bytes().filter(|b| *b == b'=').count())
        .sum();
    if items > max { Err(items) } else { Ok(parse(text)) }
}

/// Parses an exposition. Never fails: bad lines are counted.
pub fn parse(text: &str) -> Exposition {
    let mut e = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let result = if line.len() > MAX_LINE {
            Err(Fault::from("line too long"))
        } else if e.eof {
            Err(Fault::from("text after # EOF"))
        } else if let Some(rest) = line.strip_prefix('#') {
            comment(rest, &mut e).map_err(Fault::from)
        } else {
            sample(line).map(|s| e.samples.push(s))
        };
        if let Err(fault) = result {
            e.bad_total += 1;
            if e.bad.len() < BAD_KEPT {
                e.bad.push(fault.on_line(i + 1));
            }
        }
    }
    e
}

/// `# TYPE name type`, `# HELP name text`, `# UNIT name unit`, `# EOF`; other comments are
/// allowed by the Prometheus format and ignored.
fn comment(rest: &str, e: &mut Exposition) -> Result<(), String> {
    let rest = rest.trim_start();
    if rest.trim_end() == "EOF" {
        e.eof = true;
        return Ok(());
    }
    let (keyword, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    match keyword {
        "TYPE" | "HELP" | "UNIT" => {
            let rest = rest.trim_start();
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            if !valid_name(name) {
                return Err(format!("# {keyword} without a valid metric name"));
            }
            match keyword {
                "TYPE" => {
                    e.types.insert(name.to_owned(), text.trim().to_owned());
                }
                "HELP" => {
                    e.help.insert(name.to_owned(), unescape(text, false)?);
                }
                _ => {}
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Undoes `\\`, `\n` and (in label values) `\"`.
fn unescape(s: &str, quotes: bool) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            // The Prometheus format keeps an unknown escape as it is in HELP text.
            Some(other) if !quotes => {
                out.push('\\');
                out.push(other);
            }
            Some(other) => return Err(format!("unknown escape \\{other} in a label value")),
            None => out.push('\\'),
        }
    }
    Ok(out)
}

/// One sample line; a fault names its metric once the name is known.
fn sample(line: &str) -> Result<Sample, Fault> {
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("not a metric name: {:?}", name.chars().take(80).collect::<String>()).into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels).map_err(|why| Fault::at(name, why))?;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or_else(|| Fault::at(name, "no value"))?;
    let value = number(value).ok_or_else(|| Fault::at(name, format!("value {value:?} is not a number")))?;
    // A timestamp may follow, then an OpenMetrics exemplar after `#`; neither is used here.
    if let Some(ts) = fields.next()
        && ts != "#"
        && number(ts).is_none()
    {
        return Err(Fault::at(name, format!("timestamp {ts:?} is not a number")));
    }
    Ok(Sample { name: name.to_owned(), labels, value })
}

/// Reads `a="x",b="y"}` (the opening brace already taken) and returns what follows it.
fn parse_labels<'a>(mut s: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let eq = s.find('=').ok_or("label without =")?;
        let key = s[..eq].trim();
        if !valid_label_name(key) {
            return Err(format!("not a label name: {:?}", key.chars().take(80).collect::<String>()));
        }
        s = s[eq + 1..].trim_start().strip_prefix('"').ok_or("label value without quotes")?;
        let end = closing_quote(s).ok_or("label value without its closing quote")?;
        let value = unescape(&s[..end], true).map_err(|e| format!("label {key}: {e}"))?;
        if labels.iter().any(|(k, _)| k == key) {
            return Err(format!("label {key} twice"));
        }
        labels.push((key.to_owned(), value));
        s = s[end + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels not separated by commas".into());
        }
    }
}

/// The byte index of the first unescaped `"`.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// A sample value: a float, `+Inf`, `-Inf` or `NaN` (Rust's parser takes `inf`, `infinity`,
/// `nan` in any case too, which is no harm).
fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_types_help_labels_and_eof() {
        let text = "# HELP slurm_nodes Number of nodes\n\
                    # TYPE slurm_nodes gauge\n\
                    slurm_nodes 4\n\
                    slurm_node_cpus{node=\"n1\"} 2\n\
                    slurm_partition_jobs{partition=\"a \\\"b\\\" \\\\ c\\nd\",} 1.5e3 1700000000\n\
                    x_total{a=\"1\"} +Inf # {trace=\"x\"} 1\n\
                    # EOF\n";
        let e = parse(text);
        assert!(e.bad.is_empty(), "{:?}", e.bad);
        assert!(e.eof);
        assert_eq!(e.types.get("slurm_nodes").map(String::as_str), Some("gauge"));
        assert_eq!(e.help.get("slurm_nodes").map(String::as_str), Some("Number of nodes"));
        assert_eq!(e.value("slurm_nodes"), Some(4.0));
        assert_eq!(e.series("slurm_node_cpus").next().and_then(|s| s.label("node")), Some("n1"));
        let p = e.series("slurm_partition_jobs").next().unwrap();
        assert_eq!(p.label("partition"), Some("a \"b\" \\ c\nd"));
        assert_eq!(p.value, 1500.0);
        assert_eq!(e.series("x_total").next().unwrap().value, f64::INFINITY);
    }

    #[test]
    fn bad_lines_are_counted_and_the_rest_kept() {
        let text = "good 1\n\
                    9bad 1\n\
                    novalue\n\
                    nan_value NaN\n\
                    words one\n\
                    lab{a=\"x} 1\n\
                    lab{a=x} 1\n\
                    lab{a=\"x\" b=\"y\"} 1\n\
                    lab{a=\"x\",a=\"y\"} 1\n\
                    lab{a=\"\\q\"} 1\n\
                    lab{=\"x\"} 1\n\
                    stamp 1 later\n\
                    # TYPE\n\
                    also_good{x=\"}\"} 2\n\
                    # EOF\n\
                    after 1\n";
        let e = parse(text);
        let lines: Vec<usize> = e.bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, vec![2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16]);
        // Where a sample's name was read, the fault names it (and the label at fault).
        assert_eq!(e.bad[1].to_string(), "line 3, novalue: no value");
        assert_eq!(e.bad[2].to_string(), r#"line 5, words: value "one" is not a number"#);
        assert_eq!(e.bad[7].field.as_deref(), Some("lab"));
        assert!(e.bad[7].reason.starts_with("label a: unknown escape"), "{}", e.bad[7]);
        assert_eq!(e.bad[0].field, None, "9bad is no metric name");
        assert_eq!(e.value("good"), Some(1.0));
        assert!(e.value("nan_value").is_some_and(f64::is_nan));
        assert_eq!(e.series("also_good").next().and_then(|s| s.label("x")), Some("}"));
        assert!(e.eof);
    }

    #[test]
    fn more_samples_and_labels_than_allowed_are_counted_not_parsed() {
        let text = "# TYPE a gauge\n\na 1\na{b=\"c\",d=\"e\"} 2\n# EOF\n";
        assert_eq!(parse_at_most(text, 4).map(|e| e.samples.len()), Ok(2));
        assert_eq!(parse_at_most(text, 3).map(|e| e.samples.len()), Err(4), "two samples, two labels");
        assert_eq!(parse_at_most(&"a 1\n".repeat(1000), 999).map(|e| e.samples.len()), Err(1000));
    }

    #[test]
    fn odd_bytes_never_panic() {
        for text in [
            "{",
            "a{",
            "a{\"",
            "a{b",
            "a{b=",
            "a{b=\"\\",
            "é{é=\"é\"} 1",
            "# HELP é",
            "#",
            "a{b=\"c\"",
            "\r\n",
        ] {
            let _ = parse(text);
        }
    }
}
