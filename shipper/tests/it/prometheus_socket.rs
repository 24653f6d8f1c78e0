//! The Prometheus endpoint from systemd's socket (socket activation): systemd holds the port
//! from boot and through the daemon's restarts, so no local user can take it in between and be
//! sent the scraper's token. Run under `systemd-socket-activate`, which passes a listening
//! socket as systemd does (`LISTEN_PID`, `LISTEN_FDS`, descriptor 3): the daemon serves on it
//! and binds nothing itself; a descriptor passed for another address is left alone.

use crate::common::{Running, scrape, wait_until};
use std::process::Stdio;
use std::time::Duration;

/// `systemd-socket-activate`, where installed (it comes with systemd): required under CI.
fn activator() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("systemd-socket-activate"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "systemd-socket-activate is not installed");
        eprintln!("skipped: systemd-socket-activate is not installed (apt-get install systemd)");
    }
    found
}

/// A free loopback address.
fn free_address() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}

/// The daemon, `prometheus` alone, configured for `configured`, under the activator listening
/// on `passed`; the activator starts it at the first connection, passing the socket.
fn daemon(tool: &std::path::Path, configured: &str, passed: &str, dir: &std::path::Path) -> Running {
    let mut c = std::process::Command::new(tool);
    c.args(["-l", passed]);
    let vars = [
        ("SLURM_CW_CLUSTER_NAME", "socket".to_owned()),
        ("SLURM_CW_PROMETHEUS__ADDRESS", configured.to_owned()),
        ("SLURM_CW_NODE__CGROUP_ROOT", dir.display().to_string()),
        ("SLURM_CW_NODE__HOOK_SOCKET", dir.join("hook.sock").display().to_string()),
        ("SLURM_CW_COLLECT_INTERVAL", "1s".to_owned()),
        ("SLURM_CW_FLUSH_INTERVAL", "2s".to_owned()),
        ("SLURM_CW_LOG__LEVEL", "info".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ];
    // The activator passes only the variables it is told to.
    for (k, v) in &vars {
        c.arg("-E").arg(format!("{k}={v}"));
    }
    c.arg(env!("CARGO_BIN_EXE_slurm-cw-shipper")).args(["--role", "node", "--sink", "prometheus"]);
    Running::new(c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("systemd-socket-activate"))
}

#[test]
fn the_endpoint_serves_on_the_socket_systemd_passes_and_binds_nothing_itself() {
    let Some(tool) = activator() else { return };
    let dir = tempfile::tempdir().unwrap();
    let address = free_address();
    let mut d = daemon(&tool, &address, &address, dir.path());
    // The first connection starts it; it serves its own figures on the passed socket.
    wait_until("the endpoint to serve the daemon's figures", Duration::from_secs(60), || {
        scrape(&address).is_some_and(|t| t.contains("# TYPE slurm_shipper_memory_rss_bytes gauge"))
    });
    // Descriptor 3 is systemd's socket, closed on exec: no command the daemon runs holds it.
    let fdinfo = std::fs::read_to_string(format!("/proc/{}/fdinfo/3", d.pid())).unwrap();
    let flags = fdinfo.lines().find_map(|l| l.strip_prefix("flags:")).map(str::trim).unwrap_or_default();
    let flags = u32::from_str_radix(flags, 8).unwrap();
    assert_ne!(flags & libc::O_CLOEXEC as u32, 0, "{fdinfo}");
    let _ = d.child().try_wait();
    let out = d.stop();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Prometheus endpoint from systemd's socket"), "{log}");
    assert!(!log.contains("cannot listen"), "{log}");
}

#[test]
fn a_socket_passed_for_another_address_is_left_alone() {
    let Some(tool) = activator() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (configured, passed) = (free_address(), free_address());
    let d = daemon(&tool, &configured, &passed, dir.path());
    // Start it with a connection to the passed socket, then the daemon binds its own address.
    let mut start = None;
    wait_until("the activator to listen", Duration::from_secs(30), || {
        start = std::net::TcpStream::connect(&passed).ok();
        start.is_some()
    });
    wait_until("the endpoint at its configured address", Duration::from_secs(60), || {
        scrape(&configured).is_some_and(|t| t.contains("# TYPE slurm_shipper_memory_rss_bytes gauge"))
    });
    let out = d.stop();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("from systemd's socket"), "{log}");
}
