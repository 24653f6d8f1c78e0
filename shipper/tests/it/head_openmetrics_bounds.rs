//! A hostile or broken metrics endpoint cannot make the head collector hold more than a
//! bounded share of the unit's `MemoryMax=128M`: 40 MiB of `a 1` lines (each 4 bytes that
//! would parse into ~90), framed by length, by chunks or by the server closing, is an error and
//! a counted failure, and the process's peak RSS grows by far less than the body. Alone in its
//! test binary, so no other test moves the peak.

use crate::common;

use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::Settings;
use slurm_cw_shipper::sources::head::HeadCollector;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::head::config::HeadSource;
use slurm_cw_shipper::sources::head::openmetrics::{Endpoint, Resolved, TokenFrom};
use slurm_cw_shipper::sources::head::openmetrics_http::Url;
use slurm_cw_shipper::sources::{Collector, Errors};
use std::io::{Read, Write};
use std::time::Duration;

const MIB: usize = 1 << 20;
/// The most the peak RSS may pass the RSS before the first collection: a quarter of the unit's
/// `MemoryMax` (what the allocator keeps between collections included); without the bounds,
/// 40 MiB of `a 1` parse into some 900 MiB.
const PEAK_GROWTH_MAX: usize = 32 * MIB;

/// How the server frames its body.
#[derive(Clone, Copy)]
enum Framing {
    Length,
    Chunked,
    Close,
}

/// A loopback endpoint answering /metrics/nodes with `size` bytes of `line`s framed by `nodes`,
/// the others with `others` bytes chunked, written as they go (the test holds no copy).
fn hostile(size: usize, others: usize, line: &'static str, nodes: Framing) -> Url {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut req = [0u8; 4096];
                let n = s.read(&mut req).unwrap_or(0);
                let (size, framing) = if String::from_utf8_lossy(&req[..n]).contains("/metrics/nodes") {
                    (size, nodes)
                } else {
                    (others, Framing::Chunked)
                };
                let _ = answer(&mut s, size, line, framing);
            });
        }
    });
    Url::parse(&format!("http://127.0.0.1:{port}")).unwrap()
}

fn answer(s: &mut std::net::TcpStream, size: usize, line: &str, framing: Framing) -> std::io::Result<()> {
    let piece = line.repeat((64 << 10) / line.len());
    let head = match framing {
        Framing::Length => format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n"),
        Framing::Chunked => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
        Framing::Close => "HTTP/1.1 200 OK\r\n\r\n".to_owned(),
    };
    s.write_all(head.as_bytes())?;
    for _ in 0..size.div_ceil(piece.len()) {
        if let Framing::Chunked = framing {
            s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())?;
            s.write_all(piece.as_bytes())?;
            s.write_all(b"\r\n")?;
        } else {
            s.write_all(piece.as_bytes())?;
        }
    }
    if let Framing::Chunked = framing {
        s.write_all(b"0\r\n\r\n")?;
    }
    Ok(())
}

/// Peak RSS of this process since the last reset, in bytes.
fn peak() -> usize {
    common::proc_status(std::process::id(), "VmHWM") as usize * 1024
}

/// Sets the peak back to the current RSS (Linux 4.0+).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
}

fn endpoint(url: Url) -> Endpoint {
    let resolved = Resolved {
        url: Ok(url),
        backups: Vec::new(),
        from: "test".into(),
        metrics_on: Some(true),
        gpus_tracked: true,
        gpus_configured: false,
    };
    Endpoint::new(HeadSource::Openmetrics, resolved, TokenFrom::Nowhere, Duration::from_secs(60))
}

/// One head collection against `url`: its errors, and by how much its peak RSS passed `base`.
async fn collect(url: Url, base: usize) -> (Errors, usize) {
    let config = Settings::default();
    let bin = tempfile::tempdir().unwrap();
    let cmds = SlurmCommands::new(Some(bin.path().to_owned()), Duration::from_secs(5));
    let mut head = HeadCollector::new(cmds, config.head.clone()).with_endpoint(endpoint(url));
    let mut errors = Errors::new();
    let mut batch = Batch::new(std::time::SystemTime::now());
    reset_peak();
    head.collect(&mut batch, &mut errors).await;
    let grew = peak().saturating_sub(base);
    assert_eq!(head.node_source(), "commands", "the endpoint's figures were not taken");
    (errors, grew)
}

fn openmetrics_errors(errors: &Errors) -> u64 {
    errors.iter().find(|(part, _)| *part == "openmetrics").map_or(0, |(_, n)| n)
}

#[tokio::test]
async fn forty_mib_of_tiny_lines_is_a_counted_error_and_the_peak_rss_stays_bounded() {
    // The RSS before any collection: what each one's peak is measured from.
    let base = common::proc_status(std::process::id(), "VmRSS") as usize * 1024;
    for (framing, name) in
        [(Framing::Length, "length"), (Framing::Chunked, "chunked"), (Framing::Close, "close")]
    {
        let (errors, grew) = collect(hostile(40 * MIB, 40 * MIB, "a 1\n", framing), base).await;
        eprintln!("40 MiB framed by {name}: peak RSS {:.1} MiB over the start", grew as f64 / MIB as f64);
        assert_eq!(openmetrics_errors(&errors), 1, "{name}: one failure counted");
        assert!(grew < PEAK_GROWTH_MAX, "{name}: the peak RSS grew by {grew} bytes");
    }
    // Under the byte bound: a million samples, or 280,000 of four labels each. Counted before
    // parsing, and refused.
    for (line, what) in [("a 1\n", "a million samples"), ("a{b=\"c\",d=\"e\",f=\"g\",h=\"i\"} 1\n", "labels")]
    {
        let url = hostile(8 * MIB, 1, line, Framing::Length);
        let (errors, grew) = collect(url.clone(), base).await;
        let why = endpoint(url).fetch(&SlurmCommands::new(None, Duration::from_secs(5)), false).await.err();
        assert!(why.as_ref().is_some_and(|e| e.contains("samples and labels, past")), "{what}: {why:?}");
        eprintln!("8 MiB of {what}: peak RSS {:.1} MiB over the start", grew as f64 / MIB as f64);
        assert_eq!(openmetrics_errors(&errors), 1, "{what}: one failure counted");
        assert!(grew < PEAK_GROWTH_MAX, "{what}: the peak RSS grew by {grew} bytes");
    }
}
