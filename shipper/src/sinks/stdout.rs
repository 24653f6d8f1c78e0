//! `--sink stdout`: one JSON line per datum (see `datum.rs` for the shape) and per job record
//! (`{"time", "record"}`) on standard output. For a first look at what a node would send, and
//! for the GPU checks on machines without AWS.

use std::io::Write;

pub struct StdoutSink {
    label: String,
}

impl StdoutSink {
    /// `label`: the namespace (datums) or log group (records) the lines stand for.
    pub fn new(label: impl Into<String>) -> Self {
        StdoutSink { label: label.into() }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Writes every line; an error means standard output is gone (a closed pipe).
    pub fn write_lines(&mut self, lines: impl Iterator<Item = String>) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        for line in lines {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}

/// Standard output closed by its reader (`| head`): the end Unix tools meet quietly.
pub fn closed_pipe(why: &str) -> bool {
    // The OS's text ("Broken pipe (os error 32)"), whatever its case.
    why.to_ascii_lowercase().contains("broken pipe")
}
