//! The endpoint's address from slurm.conf, its backups, tokens and the wait after failures.

use super::*;

fn entries(text: &str) -> Vec<(String, String)> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

#[test]
fn url_from_slurm_conf() {
    // ParallelCluster: a port range, the first port is slurmctld's.
    let u = url_from_conf(&entries("SlurmctldHost=ip-10-0-0-5(10.0.0.5)\nSlurmctldPort=6820-6829")).unwrap();
    assert_eq!(u.to_string(), "http://10.0.0.5:6820");
    let u = url_from_conf(&entries("SlurmctldHost=head\nSlurmctldHost=backup")).unwrap();
    assert_eq!(u.to_string(), "http://head:6817");
    // A login node's: the controller elsewhere by its address, primary then backups.
    let login =
        entries("SlurmctldHost=ctl-a(10.3.0.10)\nSlurmctldHost=ctl-b(10.3.0.11)\nSlurmctldHost=ctl-c");
    let urls: Vec<String> = urls_from_conf(&login).into_iter().map(|u| u.unwrap().to_string()).collect();
    assert_eq!(urls, ["http://10.3.0.10:6817", "http://10.3.0.11:6817", "http://ctl-c:6817"]);
    assert!(url_from_conf(&entries("ClusterName=x")).is_err());
}

#[test]
fn auto_waits_longer_after_each_failure_and_openmetrics_never() {
    let resolved = Resolved {
        url: Err("x".into()),
        backups: Vec::new(),
        from: String::new(),
        metrics_on: None,
        gpus_tracked: false,
        gpus_configured: false,
    };
    let mut ep =
        Endpoint::new(HeadSource::Auto, resolved.clone(), TokenFrom::Nowhere, Duration::from_secs(1));
    let mut tried = Vec::new();
    for _ in 0..10 {
        let due = ep.due();
        tried.push(due);
        if due {
            let _ = ep.outcome::<()>(Err("refused".into()));
        }
    }
    let t = true;
    let f = false;
    assert_eq!(tried, [t, f, t, f, f, t, f, f, f, f]);
    let _ = ep.outcome(Ok(()));
    assert_eq!(ep.backoff, 1);
    let mut ep = Endpoint::new(HeadSource::Openmetrics, resolved, TokenFrom::Nowhere, Duration::from_secs(1));
    let _ = ep.outcome::<()>(Err("refused".into()));
    assert!(ep.due());
}

/// A loopback endpoint that answers 401 unless the request carries token `T`.
fn wants_token() -> Url {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../formats/tests/fixtures/slurm/26.05-real/");
    let body = |p: &str| std::fs::read_to_string(format!("{fixtures}openmetrics-{p}.txt")).unwrap();
    endpoint(body("nodes"), body("partitions"), Some("T"))
}

#[tokio::test]
async fn a_token_only_from_the_file_or_the_named_user_never_roots_own() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let resolved = Resolved {
        url: Ok(wants_token()),
        backups: Vec::new(),
        from: String::new(),
        metrics_on: Some(true),
        gpus_tracked: true,
        gpus_configured: false,
    };
    // A scontrol that notes how it was asked and mints `T`.
    let asked = d.path().join("asked");
    let scontrol = d.path().join("scontrol");
    std::fs::write(&scontrol, format!("#!/bin/sh\necho \"$@\" >> {}\necho SLURM_JWT=T\n", asked.display()))
        .unwrap();
    std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmds = SlurmCommands::new(Some(d.path().to_owned()), Duration::from_secs(5));
    let fetch = |from: TokenFrom| {
        let (resolved, cmds) = (resolved.clone(), cmds.clone());
        async move {
            let mut ep = Endpoint::new(HeadSource::Openmetrics, resolved, from, Duration::from_secs(5));
            ep.fetch(&cmds, false).await.map(|f| f.nodes.samples.len())
        }
    };
    // Nowhere: no token is made, and the error says what to set.
    let none = fetch(TokenFrom::Nowhere).await.unwrap_err();
    assert!(none.contains("head.metrics_token_user"), "{none}");
    assert!(!asked.exists(), "scontrol token was not run");
    // A file.
    // Readable by others: a secret any user could take, refused and said.
    let file = crate::secret::secret_file(d.path(), "T\n", 0o644);
    let e = fetch(TokenFrom::File(file.clone())).await.unwrap_err();
    assert!(e.contains("head.metrics_token_file") && e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(fetch(TokenFrom::File(file)).await.unwrap() > 0);
    assert!(!asked.exists());
    // The named user's short-lived token.
    assert!(fetch(TokenFrom::User("slurm-metrics".into())).await.unwrap() > 0);
    let args = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(args.trim(), "token username=slurm-metrics lifespan=3600");
}

#[test]
fn tokens_of_scontrol() {
    assert_eq!(token_of("SLURM_JWT=eyJhbGc.eyJ.sig\n").as_deref(), Some("eyJhbGc.eyJ.sig"));
    assert_eq!(token_of("warning: x\n"), None);
    assert_eq!(token_of("SLURM_JWT=\n"), None);
}

/// A loopback endpoint answering every GET with these bodies (nodes, then partitions).
fn serving(nodes: String, parts: String) -> Url {
    endpoint(nodes, parts, None)
}

/// A loopback endpoint with these bodies; with `token`, only to requests that carry it (else
/// 401).
fn endpoint(nodes: String, parts: String, token: Option<&'static str>) -> Url {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut req = [0u8; 4096];
            let n = s.read(&mut req).unwrap_or(0);
            let req = String::from_utf8_lossy(&req[..n]);
            let text = if req.contains("/metrics/nodes") { &nodes } else { &parts };
            let allowed = token.is_none_or(|t| req.contains(&format!("X-SLURM-USER-TOKEN: {t}\r\n")));
            let answer = if allowed {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}", text.len())
            } else {
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_owned()
            };
            let _ = s.write_all(answer.as_bytes());
        }
    });
    Url::parse(&format!("http://127.0.0.1:{port}")).unwrap()
}

/// A loopback address nothing listens on (connections refused).
fn refusing() -> Url {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    Url::parse(&format!("http://127.0.0.1:{port}")).unwrap()
}

#[tokio::test]
async fn a_primary_that_does_not_answer_leaves_the_backups_to() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../formats/tests/fixtures/slurm/26.05-real/");
    let body = |p: &str| std::fs::read_to_string(format!("{fixtures}openmetrics-{p}.txt")).unwrap();
    let (dead, standby, active) = (
        refusing(),
        serving("# TYPE slurm_nodes gauge\nslurm_nodes 0\n".into(), String::new()),
        serving(body("nodes"), body("partitions")),
    );
    let resolved = |url: &Url, backups: Vec<Url>| Resolved {
        url: Ok(url.clone()),
        backups,
        from: "slurm.conf".into(),
        metrics_on: Some(true),
        gpus_tracked: true,
        gpus_configured: false,
    };
    let cmds = SlurmCommands::new(None, Duration::from_secs(5));
    let r = resolved(&dead, vec![standby.clone(), active.clone()]);
    let mut ep = Endpoint::new(HeadSource::Openmetrics, r, TokenFrom::Nowhere, Duration::from_secs(5));
    assert!(ep.fetch(&cmds, false).await.unwrap().nodes.samples.len() > 10);
    assert_eq!((ep.answering_role().as_str(), ep.answering()), ("backup 2", Ok(active.clone())));
    // The next cycle asks the backup that answered first.
    assert!(ep.fetch(&cmds, false).await.is_ok());
    assert_eq!(ep.answering_role(), "backup 2");
    // Only the standby one left: no figures, and the error says why for each.
    let r = resolved(&dead, vec![standby.clone()]);
    let mut ep = Endpoint::new(HeadSource::Openmetrics, r, TokenFrom::Nowhere, Duration::from_secs(5));
    let e = ep.fetch(&cmds, false).await.err().unwrap();
    assert!(e.contains("cannot connect") && e.contains("lists no node (in standby?)"), "{e}");
    // A primary that answers, wrongly, is not passed over for a backup.
    let r = resolved(&standby, vec![active]);
    let mut ep = Endpoint::new(HeadSource::Openmetrics, r, TokenFrom::Nowhere, Duration::from_secs(5));
    let f = ep.fetch(&cmds, false).await.unwrap();
    assert_eq!((f.nodes.value("slurm_nodes"), ep.answering_role().as_str()), (Some(0.0), "primary"));
}

/// A head collector on `url`, its Slurm commands in `bin` (where sinfo prints `down_rows` for
/// the down nodes): the cluster's `NodesDownUnplanned` of one collection.
async fn down_unplanned(url: Url, bin: &std::path::Path, down_rows: &str) -> Option<f64> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(bin.join("down"), down_rows).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> {0}/calls\ncase \"$*\" in *--states=down*) cat {0}/down ;; *) exit 1 ;; esac\n",
        bin.display()
    );
    std::fs::write(bin.join("sinfo"), script).unwrap();
    std::fs::set_permissions(bin.join("sinfo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let resolved = Resolved {
        url: Ok(url),
        backups: Vec::new(),
        from: "test".into(),
        metrics_on: Some(true),
        gpus_tracked: true,
        gpus_configured: false,
    };
    let ep = Endpoint::new(HeadSource::Openmetrics, resolved, TokenFrom::Nowhere, Duration::from_secs(60));
    let cmds = SlurmCommands::new(Some(bin.to_owned()), Duration::from_secs(5));
    let mut head =
        super::super::HeadCollector::new(cmds, crate::settings::Settings::default().head).with_endpoint(ep);
    let mut b = crate::sample::Batch::new(std::time::SystemTime::UNIX_EPOCH);
    crate::sources::Collector::collect(&mut head, &mut b, &mut crate::sources::Errors::new()).await;
    b.value(&slurm_cw_catalog::metrics::NODES_DOWN_UNPLANNED, &[])
}

#[tokio::test]
async fn down_nodes_the_counts_leave_a_guess_are_asked_of_sinfo() {
    // ParallelCluster: an idle node up, and a failed launch (`down~`): the counts say idle 1,
    // down 1, powered_down 1, which fit `idle~` beside a real `down` too. sinfo of the down
    // nodes tells: planned, no page.
    let nodes = "slurm_node_cpus{node=\"q-1\"} 2\nslurm_node_cpus{node=\"q-2\"} 2\nslurm_nodes 2\n\
                 slurm_nodes_idle 1\nslurm_nodes_down 1\nslurm_nodes_powered_down 1\nslurm_nodes_cloud 2\n";
    let url = serving(nodes.to_owned(), String::new());
    let bin = tempfile::tempdir().unwrap();
    let failed_launch = "q-2|q*|down+cloud+powered_down|0/0/2/2|2000|0|(null)|(null)|\n";
    assert_eq!(down_unplanned(url.clone(), bin.path(), failed_launch).await, Some(0.0));
    // The same counts with the node truly down (and an idle one powered down): it pages.
    let down = "q-2|q*|down+cloud|0/0/2/2|2000|0|(null)|(null)|\n";
    assert_eq!(down_unplanned(url, bin.path(), down).await, Some(1.0));
    // No node down: nothing to ask.
    let calls = std::fs::read_to_string(bin.path().join("calls")).unwrap_or_default();
    assert_eq!(calls.lines().filter(|l| l.contains("--states=down")).count(), 2);
    let quiet =
        "slurm_node_cpus{node=\"q-1\"} 2\nslurm_nodes 1\nslurm_nodes_idle 1\nslurm_nodes_powered_down 1\n";
    assert_eq!(down_unplanned(serving(quiet.to_owned(), String::new()), bin.path(), "").await, Some(0.0));
    let calls = std::fs::read_to_string(bin.path().join("calls")).unwrap_or_default();
    assert_eq!(calls.lines().filter(|l| l.contains("--states=down")).count(), 2, "not asked again");
}
