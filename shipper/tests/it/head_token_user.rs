//! `head.metrics_token_user` set to slurm.conf's SlurmUser: that user's token is good for
//! every Slurm RPC and goes to the endpoint in clear text, so the shipper refuses to start with
//! it (exit 2, naming the key) and `--check` fails its row as a configuration error.
//!
//! And a user who binds slurmctld's port on the controller (while it restarts) gets no token:
//! a listener on this host owned by neither root nor SlurmUser is sent nothing.

use crate::common::shipper;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::head::config::HeadSource;
use slurm_cw_shipper::sources::head::openmetrics::{Endpoint, Resolved, TokenFrom};
use slurm_cw_shipper::sources::head::openmetrics_http::Url;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A stand-in for slurmctld's endpoint that wants a token (401 to every request), listening on
/// 127.0.0.1 as `uid` (this process's when None); what it was sent, once told to stop.
struct Listener {
    child: std::process::Child,
    port: u16,
}

/// Serves connections one at a time until its standard input closes; then takes those still
/// waiting in the backlog and prints everything it was sent.
const LISTENER: &str = r#"
import select, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
got = []
def serve(c):
    c.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            d = c.recv(4096)
            if not d:
                break
            data += d
        if data:
            c.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    c.close()
    got.append(data)
while True:
    r, _, _ = select.select([s, sys.stdin], [], [])
    if s in r:
        serve(s.accept()[0])
    elif sys.stdin.read() == "":
        break
s.setblocking(False)
while True:
    try:
        c = s.accept()[0]
    except BlockingIOError:
        break
    c.setblocking(True)
    serve(c)
print(len(got), repr(b"".join(got)), flush=True)
"#;

impl Listener {
    fn start(uid: Option<u32>) -> Listener {
        let mut c = Command::new("python3");
        c.args(["-c", LISTENER]).stdin(Stdio::piped()).stdout(Stdio::piped());
        if let Some(uid) = uid {
            c.uid(uid).gid(uid);
        }
        let mut child = c.spawn().expect("python3 to listen");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the listener's port: {line:?}"));
        Listener { child, port }
    }

    /// Everything it was sent.
    fn sent(mut self) -> String {
        drop(self.child.stdin.take());
        let mut out = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let _ = self.child.wait();
        out
    }
}

/// One fetch of the endpoint at `port` with a token in a file, as the daemon does it.
fn fetch(port: u16, token_file: &std::path::Path) -> Result<(), String> {
    let resolved = Resolved {
        url: Ok(Url { host: "127.0.0.1".into(), port, prefix: String::new() }),
        backups: Vec::new(),
        from: "test".into(),
        metrics_on: Some(true),
        gpus_tracked: true,
        gpus_configured: false,
    };
    let token = TokenFrom::File(token_file.to_owned());
    let mut ep =
        Endpoint::new(HeadSource::Openmetrics, resolved, token, Duration::from_secs(5)).trusting(vec![0]);
    let bin = tempfile::tempdir().unwrap();
    let cmds = SlurmCommands::new(Some(bin.path().to_owned()), Duration::from_secs(5));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(ep.fetch(&cmds, false)).map(|_| ())
}

#[test]
fn a_users_listener_on_slurmctlds_port_gets_no_token() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!in_ci, "CI=true requires root here, to listen as another user");
        eprintln!("SKIPPED: not root, so no listener of another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let mut f = std::fs::File::create(&token_file).unwrap();
    f.write_all(b"secret.jwt.token\n").unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // root's listener (slurmctld's user here): asked without, then with the token.
    let root = Listener::start(None);
    let e = fetch(root.port, &token_file).unwrap_err();
    assert!(e.contains("401"), "{e}");
    let sent = root.sent();
    assert!(sent.contains("X-SLURM-USER-TOKEN: secret.jwt.token"), "the control: {sent}");
    // nobody's listener on the same kind of address: nothing at all, the token least of all.
    let user = Listener::start(Some(65534));
    let e = fetch(user.port, &token_file).unwrap_err();
    assert!(e.contains("uid 65534") && e.contains("neither root nor SlurmUser"), "{e}");
    let sent = user.sent();
    assert!(!sent.contains("secret") && sent.ends_with("b''\n"), "sent to uid 65534: {sent}");
}

#[test]
fn slurm_user_as_the_token_user_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=tokens\nSlurmctldHost=head(127.0.0.1)\nSlurmUser=slurm\n").unwrap();
    let run = |user: &str, args: &[&str]| {
        shipper()
            .args(args)
            .env("SLURM_CW_SLURM__CONF", &conf)
            .env("SLURM_CW_HEAD__METRICS_TOKEN_USER", user)
            .env("SLURM_CW_SINK", "stdout")
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_GPU__ENABLED", "off")
            .output()
            .unwrap()
    };
    for args in [&["--once", "--role", "head"][..], &["--role", "head"][..]] {
        let out = run("slurm", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr
                .contains("bad configuration: head.metrics_token_user: \"slurm\" is slurm.conf's SlurmUser"),
            "{stderr}"
        );
    }
    let out = run("slurm", &["--check", "--role", "head"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("token user")).unwrap_or_default();
    assert!(row.contains("FAIL") && row.contains("SlurmUser"), "{table}");
    assert_eq!(out.status.code(), Some(2), "{table}");
    // Another user is no configuration error.
    let out = run("slurm-metrics", &["--check", "--role", "head"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("token user")).unwrap_or_default();
    assert!(row.contains(" ok "), "{table}");
    assert_ne!(out.status.code(), Some(2), "{table}");
    // Which figures go where (beside AWS PCS's managed collector, say): what views read as
    // metrics, the rest in the record.
    let row = table.lines().find(|l| l.starts_with("head figures")).unwrap_or_default();
    assert!(
        row.contains("SlurmctldUp")
            && row.contains("NodeCount (drained, draining)")
            && !row.contains("ServerThreadCount"),
        "{table}"
    );
}

/// `--check` says whether the JWT's file is kept from other users, never what it holds.
#[test]
fn check_says_a_token_file_other_users_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let jwt = dir.path().join("metrics.jwt");
    std::fs::write(&jwt, "eyJhbGciOiJIUzI1NiJ9.secret.jwt\n").unwrap();
    let row = |mode: u32| {
        std::fs::set_permissions(&jwt, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = shipper()
            .args(["--check", "--role", "head"])
            .env("SLURM_CW_HEAD__METRICS_TOKEN_FILE", &jwt)
            .env("SLURM_CW_SINK", "stdout")
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_GPU__ENABLED", "off")
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!table.contains("secret.jwt"), "the token never printed: {table}");
        table.lines().find(|l| l.starts_with("token file")).unwrap_or_default().to_owned()
    };
    let open = row(0o644);
    assert!(open.contains("warn") && open.contains("mode 644") && open.contains("chmod 600"), "{open}");
    let kept = row(0o600);
    assert!(kept.contains(" ok ") && kept.contains("kept from other users"), "{kept}");
}
