//! `--check`: what the shipper needs on this host, as a table an admin can act on.
//!
//! Exit status: 0 when everything the role needs works, 1 when something it needs does not,
//! 2 when the configuration itself cannot work (no cluster name, no role).

use crate::Exit;
use crate::role::Role;
use crate::role::detect as detect_role;
use crate::settings::Settings;
use crate::sources::node::discover::{Layout, V1_CONTROLLERS, Version};
use aws_credential_types::provider::ProvideCredentials;
use std::fmt::Write;
use std::time::Duration;

mod controller;
mod destinations;
mod gpu;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Works, but something is worth knowing.
    Warn,
    /// Not needed by this role or turned off.
    Skip,
    /// Needed and not working.
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Skip => "skip",
            Status::Fail => "FAIL",
        }
    }
}

pub struct Row {
    pub check: &'static str,
    pub status: Status,
    pub detail: String,
    /// A failure here is the configuration's (exit status 2), not the host's.
    pub config: bool,
}

pub(crate) fn row(check: &'static str, status: Status, detail: impl Into<String>) -> Row {
    Row { check, status, detail: detail.into(), config: false }
}

/// A row whose failure means the configuration cannot work on this host.
pub(crate) fn config_row(check: &'static str, status: Status, detail: impl Into<String>) -> Row {
    Row { config: true, ..row(check, status, detail) }
}

pub async fn run(config: &Settings) -> Exit {
    let rows = collect_rows(config).await;
    print!("{}", render(&rows));
    exit(&rows)
}

/// 2 when a configuration row failed, 1 when another did, else 0.
pub fn exit(rows: &[Row]) -> Exit {
    let failed = |config: bool| rows.iter().any(|r| r.status == Status::Fail && r.config == config);
    if failed(true) {
        Exit::BadConfig("the configuration cannot work here (see the table)".into())
    } else if failed(false) {
        Exit::Failed("some checks failed (see the table)".into())
    } else {
        Exit::Ok
    }
}

pub fn render(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.check.len()).max().unwrap_or(5).max(5);
    let mut out = String::new();
    let _ = writeln!(out, "{:<width$}  {:<6}  DETAIL", "CHECK", "STATUS");
    for r in rows {
        let _ = writeln!(out, "{:<width$}  {:<6}  {}", r.check, r.status.as_str(), r.detail);
    }
    out
}

async fn collect_rows(config: &Settings) -> Vec<Row> {
    let mut rows = vec![row("configuration", Status::Ok, "valid")];
    // What the rows below resolve once: the cluster and namespace (empty where they cannot be
    // had: their rows say why), slurm.conf, the node's name.
    let (mut cluster, mut namespace) = (String::new(), String::new());
    match config.resolve_cluster_name() {
        Ok((name, from)) => {
            rows.push(config_row("cluster name", Status::Ok, format!("{name} (from {from})")));
            rows.push(match config.namespace_for(&name) {
                Ok(ns) => {
                    namespace.clone_from(&ns);
                    config_row("namespace", Status::Ok, ns)
                }
                Err(e) => config_row("namespace", Status::Fail, e.to_string()),
            });
            cluster = name;
        }
        Err(e) => rows.push(config_row("cluster name", Status::Fail, e.to_string())),
    }
    let conf = config.slurm_conf_path();
    let node = config.node_name();
    let role = match detect_role(config.role, &config.node.proc_root, conf.as_deref()) {
        Ok((r, why)) => {
            rows.push(config_row("role", Status::Ok, format!("{} ({why})", r.as_str())));
            Some(r)
        }
        Err(e) => {
            rows.push(config_row("role", Status::Fail, e.to_string()));
            None
        }
    };
    rows.push(row("node name", Status::Ok, node.clone()));
    match &conf {
        Some(p) => rows.push(row("slurm.conf", Status::Ok, p.display().to_string())),
        None => rows.push(row("slurm.conf", Status::Warn, "not found")),
    }
    if let Some(user) = &config.head.metrics_token_user {
        let entries = conf.as_deref().and_then(|p| crate::slurm_conf::entries(p).ok());
        rows.push(match entries.map(|e| config.head.check_with_slurm_conf(&e)) {
            Some(Ok(())) => {
                config_row("token user", Status::Ok, format!("{user}: not slurm.conf's SlurmUser"))
            }
            Some(Err(e)) => config_row("token user", Status::Fail, e.to_string()),
            None => {
                config_row("token user", Status::Warn, format!("{user}: no slurm.conf to check SlurmUser in"))
            }
        });
    }
    // The head's alone: one configuration on every node names a file the head alone has.
    if let Some(f) = config.head.metrics_token_file.as_ref().filter(|_| role.is_some_and(|r| r.runs_head())) {
        rows.push(match crate::secret::read(f) {
            Ok(_) => row("token file", Status::Ok, format!("{}: kept from other users", f.display())),
            Err(e) => row(
                "token file",
                Status::Warn,
                format!(
                    "{e}: the endpoint gets no token, so the head reads the commands where it asks for one"
                ),
            ),
        });
    }
    rows.extend(aws_rows(config).await);
    rows.push(log_group_row(config, role).await);
    let cx = config.sink_context(&cluster, &namespace, &node, conf.as_deref());
    rows.extend(destinations::destination_rows(config, &cx).await);
    let cmds = config.slurm.commands();
    let head = role.is_some_and(|r| r.runs_head());
    for program in ["sinfo", "squeue", "sdiag"] {
        let r = match cmds.locate(program) {
            Ok(p) => match cmds.run(program, &["--version"]).await {
                Ok(o) => row(program, Status::Ok, format!("{} ({})", p.display(), o.stdout.trim())),
                Err(e) => row(program, if head { Status::Fail } else { Status::Warn }, e.to_string()),
            },
            Err(e) => row(program, if head { Status::Fail } else { Status::Skip }, e.to_string()),
        };
        rows.push(r);
    }
    if head {
        let entries = conf.as_deref().and_then(|p| crate::slurm_conf::entries(p).ok()).unwrap_or_default();
        let hosts = crate::slurm_conf::controller_hosts(&entries);
        rows.push(controller::slurmctld_row(&cmds, head, &hosts).await);
        rows.push(
            match crate::sources::head::openmetrics::describe(&config.head, conf.as_deref(), &cmds).await {
                Ok(d) => row("head source", Status::Ok, d),
                Err(d) => row("head source", Status::Warn, d),
            },
        );
        rows.push(head_figures_row(config));
    }
    rows.push(cgroup_row(config, role.is_some_and(|r| r.runs_node())));
    let nvml = gpu::nvml_row(config);
    // Where the GPU collector runs, how it reads Slurm's GPU numbers.
    let gpus = nvml.status == Status::Ok || nvml.status == Status::Warn;
    rows.push(nvml);
    if gpus {
        rows.push(gpu::gres_row(config));
    }
    rows.extend(host_rows(config, role.is_some_and(|r| r.runs_node())));
    if role.is_some_and(|r| r.runs_node()) && config.cost.enabled {
        rows.push(match crate::cost::lookup::describe(&config.cost, cmds.clone(), &node).await {
            Ok(d) => row("price", Status::Ok, d),
            Err(d) => row("price", Status::Warn, d),
        });
    }
    rows
}

/// Which of the head's figures go where: as metrics what a view reads, the rest in its record;
/// beside AWS PCS's managed Prometheus collector, which sends slurmctld's own endpoint to
/// CloudWatch for PromQL, only those are there twice.
fn head_figures_row(config: &Settings) -> Row {
    let also = if config.head.scheduler_records() { "" } else { " (and as metrics: head.scheduler_detail)" };
    row(
        "head figures",
        Status::Ok,
        format!(
            "as metrics, what the module's dashboard, alarms and Lambda read: {}; every other slurmctld figure in the scheduler_sample record{also}. slurmctld's own endpoint (:6817/metrics, Slurm 25.11+) is what AWS PCS's managed Prometheus collector sends to CloudWatch for PromQL: with it on, only the metrics above are there twice",
            slurm_cw_catalog::views::head_metrics().join(", ")
        ),
    )
}

/// EFA/InfiniBand, the Lustre client and RAPL: found or not, never a failure (a node without
/// them ships none of their figures).
fn host_rows(config: &Settings, node_role: bool) -> Vec<Row> {
    let roots = crate::sources::host::Roots::from_config(&config.node);
    crate::sources::host::survey(&roots)
        .into_iter()
        .map(|(check, found)| match found {
            _ if !node_role => row(check, Status::Skip, "read on the node role only"),
            Ok(detail) => row(check, Status::Ok, detail),
            Err(looked) => row(check, Status::Skip, looked),
        })
        .collect()
}

async fn aws_rows(config: &Settings) -> Vec<Row> {
    if !config.sink.iter().any(|k| k.component().uses_aws()) {
        return vec![row("aws", Status::Skip, "no AWS destination in sink")];
    }
    let sdk = match crate::aws::sdk_config(config.cloudwatch.region.as_deref()).await {
        Ok(sdk) => sdk,
        Err(e) => return vec![row("ca certificates", Status::Fail, e.to_string())],
    };
    let mut rows = Vec::new();
    let region = sdk.region().map(|r| r.to_string());
    match &region {
        Some(r) => rows.push(row("aws region", Status::Ok, r.clone())),
        None => rows.push(row(
            "aws region",
            Status::Fail,
            "none: set cloudwatch.region or AWS_REGION (on EC2 it comes from instance metadata)",
        )),
    }
    match sdk.credentials_provider() {
        None => rows.push(row("aws credentials", Status::Fail, "no credentials provider")),
        Some(p) => match tokio::time::timeout(Duration::from_secs(10), p.provide_credentials()).await {
            Ok(Ok(c)) => {
                let id = c.access_key_id();
                let shown: String = id.chars().take(4).collect();
                rows.push(row("aws credentials", Status::Ok, format!("found (access key {shown}...)")));
            }
            Ok(Err(e)) => rows.push(row(
                "aws credentials",
                Status::Fail,
                crate::sinks::cloudwatch::source_chain(&e).to_string(),
            )),
            Err(_) => rows.push(row("aws credentials", Status::Fail, "timed out looking for credentials")),
        },
    }
    let endpoint = config
        .cloudwatch
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_CLOUDWATCH").ok())
        .or_else(|| sdk.endpoint_url().map(str::to_owned))
        .unwrap_or_else(|| {
            format!("https://monitoring.{}.amazonaws.com", region.as_deref().unwrap_or("REGION"))
        });
    rows.push(endpoint_row(&endpoint).await);
    rows
}

/// The job log group a node writes its job records to, and the head its `scheduler_sample`
/// records: it must exist (the Terraform module creates it); this host's stream is created here
/// if missing.
async fn log_group_row(config: &Settings, role: Option<Role>) -> Row {
    let check = "job log group";
    if !role.is_some_and(|r| config.writes_records(r)) {
        return row(check, Status::Skip, "no records on this role (node.job_metrics, head.scheduler_detail)");
    }
    if crate::sinks::records_for(&config.sink) != crate::sinks::Records::Logs {
        return row(check, Status::Skip, "no destination named sends job records to CloudWatch Logs");
    }
    let Ok((cluster, _)) = config.resolve_cluster_name() else {
        return row(check, Status::Skip, "no cluster name");
    };
    let group = config.logs.group_for(&cluster);
    crate::sinks::logs::probe_row(
        check,
        crate::sinks::logs::settings(&config.cloudwatch, &config.logs, &group, &config.node_name()),
    )
    .await
}

pub(crate) async fn endpoint_row(url: &str) -> Row {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let addr = if authority.contains(':') {
        authority.to_owned()
    } else if url.starts_with("http://") {
        format!("{authority}:80")
    } else {
        format!("{authority}:443")
    };
    match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(&addr)).await {
        Ok(Ok(_)) => row("endpoint", Status::Ok, format!("{url} (reachable)")),
        Ok(Err(e)) => row("endpoint", Status::Fail, format!("{url}: {e}")),
        Err(_) => row("endpoint", Status::Fail, format!("{url}: no answer in 5 s")),
    }
}

/// The cgroup hierarchy as the node collector sees it (see [`Layout::from_config`]).
fn cgroup_row(config: &Settings, needed: bool) -> Row {
    let root = &config.node.cgroup_root;
    let miss = if needed { Status::Fail } else { Status::Skip };
    match Layout::from_config(&config.node).map(|l| l.version) {
        Some(Version::V2) if root.join("cgroup.controllers").is_file() => {
            row("cgroup root", Status::Ok, format!("{} (cgroup v2)", root.display()))
        }
        Some(Version::V2) => row(
            "cgroup root",
            miss,
            format!("{}: not a cgroup v2 hierarchy (node.cgroup_version = v2)", root.display()),
        ),
        Some(Version::V1) => {
            let found: Vec<&str> = V1_CONTROLLERS.iter().copied().filter(|c| root.join(c).is_dir()).collect();
            if found.is_empty() {
                let wanted = V1_CONTROLLERS.join(" ");
                row(
                    "cgroup root",
                    miss,
                    format!("{}: none of the cgroup v1 controllers {wanted}", root.display()),
                )
            } else {
                row("cgroup root", Status::Ok, format!("{} (cgroup v1: {})", root.display(), found.join(" ")))
            }
        }
        None => row("cgroup root", miss, format!("{}: no cgroup v1 or v2 hierarchy", root.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_with_root(root: &std::path::Path) -> Settings {
        let mut c = Settings::default();
        c.node.cgroup_root = root.to_owned();
        c
    }

    #[test]
    fn the_exit_status_comes_from_the_rows_kind_not_their_labels() {
        let host_fail = || row("role", Status::Fail, "a host row that happens to be called role");
        assert!(matches!(exit(&[host_fail()]), Exit::Failed(_)));
        let config_fail = config_row("cluster name", Status::Fail, "none");
        assert!(matches!(exit(&[host_fail(), config_fail]), Exit::BadConfig(_)));
        assert!(matches!(
            exit(&[config_row("role", Status::Ok, "node"), row("x", Status::Warn, "")]),
            Exit::Ok
        ));
    }

    #[test]
    fn every_v1_controller_the_collector_reads_counts_as_a_hierarchy() {
        for only in V1_CONTROLLERS {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join(only)).unwrap();
            let r = cgroup_row(&config_with_root(dir.path()), true);
            assert_eq!(r.status, Status::Ok, "{only}: {}", r.detail);
            assert!(r.detail.ends_with(&format!("(cgroup v1: {only})")), "{}", r.detail);
        }
        let empty = tempfile::tempdir().unwrap();
        let r = cgroup_row(&config_with_root(empty.path()), true);
        assert_eq!((r.status, r.detail.ends_with("no cgroup v1 or v2 hierarchy")), (Status::Fail, true));
        assert_eq!(cgroup_row(&config_with_root(empty.path()), false).status, Status::Skip);
    }

    #[test]
    fn a_configured_version_is_checked_against_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("memory")).unwrap();
        let mut c = config_with_root(dir.path());
        c.node.cgroup_version = crate::settings::CgroupVersion::V2;
        let r = cgroup_row(&c, true);
        assert_eq!(r.status, Status::Fail, "{}", r.detail);
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        c.node.cgroup_version = crate::settings::CgroupVersion::V1;
        let r = cgroup_row(&c, true);
        assert_eq!((r.status, r.detail.ends_with("(cgroup v1: memory)")), (Status::Ok, true), "{}", r.detail);
    }
}
