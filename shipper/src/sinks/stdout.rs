//! `--sink stdout`: one JSON line per datum on standard output (see `datum.rs` for the shape).
//! For a first look at what a node would send, and for the GPU checks on machines without AWS.

use crate::datum::Datum;
use std::io::Write;

pub struct StdoutSink {
    namespace: String,
}

impl StdoutSink {
    pub fn new(namespace: impl Into<String>) -> Self {
        StdoutSink { namespace: namespace.into() }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Writes every datum; an error means standard output is gone (a closed pipe).
    pub fn put_in(&mut self, namespace: &str, datums: &[Datum]) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        for d in datums {
            out.write_all(d.to_json_line(namespace).as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}
