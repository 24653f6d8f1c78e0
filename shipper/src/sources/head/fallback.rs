//! Which output format each head command is read in, and the switch to the other when this
//! Slurm refuses one: sinfo and squeue run an explicit text format and fall back to `--json`;
//! sdiag runs `--json` from 23.02 and falls back to plain text. A format once refused is not
//! tried again while the daemon runs.
//!
//! What Slurm prints when it refuses (each test in shipper/tests/it/head_fallback.rs says which it
//! fakes):
//! - a text field it does not know: sinfo and squeue print `<prog>: error: Invalid job format
//!   specification: <field>` on standard error, leave the column empty and exit 0 (real output
//!   of 22.05.8; the same code in src/sinfo/opts.c and src/squeue/opts.c of 23.02 to 25.11);
//! - no `--json`: `sdiag: unrecognized option '--json'` and exit 1 (real, 22.05.8);
//!   `<prog>: fatal: Unable to find plugin: serializer/json` or `openapi/v0.0.38` (real 22.05.8
//!   with the plugin left out of PluginDir); `<prog>: error: load_plugins: unable to find
//!   plugin: serializer/json` then `<prog>: fatal: JSON plugin load failure` (24.11.5 source,
//!   src/common/plugrack.c and src/*/opts.c); `application/json output not supported by
//!   data_parser/v0.0.42` (24.11.5 source, src/interfaces/data_parser.c).

use super::command::{CommandError, Output, SlurmCommands};
use super::{sinfo, squeue};

/// How a command's output is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
        }
    }

    fn other(self) -> Format {
        match self {
            Format::Text => Format::Json,
            Format::Json => Format::Text,
        }
    }
}

/// One command's format now, and which formats it refused.
#[derive(Debug, Clone, Copy)]
pub struct PartFormat {
    pub current: Format,
    text_refused: bool,
    json_refused: bool,
}

impl PartFormat {
    pub fn new(current: Format) -> Self {
        PartFormat { current, text_refused: false, json_refused: false }
    }

    /// Switches to `format` unless it was refused (sdiag from 23.02, once the version is known).
    pub fn prefer(&mut self, format: Format) {
        if !self.refused(format) {
            self.current = format;
        }
    }

    /// The current format cannot be used (its output does not parse): the other one from now on,
    /// if it was not refused too.
    pub fn give_up_current(&mut self) -> bool {
        self.mark_refused(self.current);
        let other = self.current.other();
        if self.refused(other) {
            return false;
        }
        self.current = other;
        true
    }

    fn refused(&self, f: Format) -> bool {
        match f {
            Format::Text => self.text_refused,
            Format::Json => self.json_refused,
        }
    }

    fn mark_refused(&mut self, f: Format) {
        match f {
            Format::Text => self.text_refused = true,
            Format::Json => self.json_refused = true,
        }
    }
}

/// The argv of `part` in `format` (after the program name).
pub fn args(part: &str, format: Format) -> &'static [&'static str] {
    match (part, format) {
        ("sinfo", Format::Text) => sinfo::ARGS,
        ("squeue", Format::Text) => squeue::ARGS,
        ("squeue", Format::Json) => squeue::JSON_ARGS,
        ("sdiag", Format::Text) => &[],
        _ => &["--json"],
    }
}

/// sinfo or squeue did not know a field of the explicit format (it still exits 0). Slurm's own
/// words only: a command that runs also prints warnings (about slurm.conf, say), and those
/// must not move it to the slower --json.
pub fn text_refused(stderr: &str) -> bool {
    stderr.contains("Invalid job format specification")
        || stderr.contains("Invalid node format specification")
}

/// This build or version has no `--json` (or not its JSON plugins).
pub fn json_refused(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    const SIGNS: &[&str] = &[
        "unrecognized option '--json'",
        "unrecognized option `--json'",
        "option '--json' doesn't allow an argument",
        "serializer/json",
        "json plugin",
        "openapi/v0.0",
        "output not supported by",
    ];
    SIGNS.iter().any(|sign| s.contains(sign))
}

/// Why `result` says that `part` refused `format`, if it does.
fn refusal(part: &str, format: Format, result: &Result<Output, CommandError>) -> Option<String> {
    let (stderr, failed) = match result {
        Ok(o) => (o.stderr.as_str(), false),
        Err(CommandError::Failed { all_stderr, .. }) => (all_stderr.as_str(), true),
        Err(_) => return None,
    };
    let refused = match format {
        // sdiag has no format to refuse.
        Format::Text => part != "sdiag" && text_refused(stderr),
        // A JSON output that came out is judged by its parser.
        Format::Json => failed && json_refused(stderr),
    };
    refused.then(|| stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").chars().take(300).collect())
}

/// Runs `part` in its current format; when this Slurm refuses that format, switches to the
/// other for good and runs again, unless that one was refused before: then the refusal is the
/// error, every cycle, and nothing is shipped from output that lacks a column.
pub async fn run_part(
    cmds: &SlurmCommands,
    part: &'static str,
    pf: &mut PartFormat,
) -> Result<Output, CommandError> {
    let mut result = cmds.run(part, args(part, pf.current)).await;
    loop {
        let Some(why) = refusal(part, pf.current, &result) else {
            return result;
        };
        let refused = pf.current;
        if !pf.give_up_current() {
            return Err(CommandError::Refused {
                program: part.into(),
                format: refused.as_str(),
                stderr: why,
            });
        }
        tracing::warn!(
            collector = part,
            refused = refused.as_str(),
            now = pf.current.as_str(),
            error = %why,
            "Slurm refused this output format; using the other from now on"
        );
        result = cmds.run(part, args(part, pf.current)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_other_failures() {
        // Real 22.05.8 output.
        assert!(text_refused("sinfo: error: Invalid job format specification: StateCompleteX\n"));
        assert!(json_refused(
            "sdiag: unrecognized option '--json'\nTry \"sdiag --help\" for more information\n"
        ));
        assert!(json_refused("sinfo: fatal: Unable to find plugin: serializer/json\n"));
        assert!(json_refused("squeue: fatal: Unable to find plugin: openapi/v0.0.38\n"));
        // From the 24.11.5 source.
        assert!(json_refused(
            "sinfo: error: load_plugins: unable to find plugin: serializer/json\nsinfo: fatal: JSON plugin load failure\n"
        ));
        assert!(json_refused("sdiag: error: application/json output not supported by data_parser/v0.0.42\n"));
        // The controller is away, or a warning about something else: no format is at fault.
        for other in [
            "sinfo: error: Invalid field value in gres.conf line 3",
            "squeue: error: Invalid user id: 70000",
            "sinfo: error: Unable to contact slurm controller (connect failure)",
            "squeue: error: slurm_receive_msg: Socket timed out on send/recv operation",
            "",
        ] {
            assert!(!text_refused(other) && !json_refused(other), "{other}");
        }
    }

    #[test]
    fn a_refused_format_is_not_tried_again() {
        let mut pf = PartFormat::new(Format::Text);
        assert!(pf.give_up_current());
        assert_eq!(pf.current, Format::Json);
        assert!(!pf.give_up_current(), "both refused");
        pf.prefer(Format::Text);
        assert_eq!(pf.current, Format::Json, "text was refused");
        let mut pf = PartFormat::new(Format::Text);
        pf.prefer(Format::Json);
        assert_eq!(pf.current, Format::Json);
    }

    #[test]
    fn argv_of_every_part_and_format() {
        assert_eq!(args("sdiag", Format::Text), &[] as &[&str]);
        assert_eq!(args("sdiag", Format::Json), &["--json"]);
        assert_eq!(args("sinfo", Format::Json), &["--json"]);
        assert_eq!(args("squeue", Format::Json), &["--json", "--all", "--states=all"]);
        assert_eq!(args("sinfo", Format::Text), sinfo::ARGS);
    }
}
