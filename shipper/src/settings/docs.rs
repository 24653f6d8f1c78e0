//! The configuration table of docs/configuration.md, made from the code: every key of
//! [`Settings`] with its default and what it means. Tests fail when a key of the settings has
//! no line here, when a default shown here is not `Settings::default()`'s, and when the table in
//! docs/configuration.md is stale (`SLURM_CW_WRITE_DOCS=1 cargo test -p slurm-cw-shipper --lib
//! settings::docs` rewrites it).

#[cfg(doc)]
use super::Settings;

pub use crate::config::docs::{Key, Shown, key};
use Shown::{Unset, Value};

/// Every key, in the table's order: the top-level keys, each destination's section (its folder's
/// [`crate::sinks::Component::keys`], in the registry's order), then the other sections.
pub fn keys() -> Vec<&'static Key> {
    let (top, rest) = KEYS.split_at(KEYS.iter().position(|k| k.key.contains('.')).unwrap_or(KEYS.len()));
    let sinks = crate::sinks::REGISTRY.iter().flat_map(|c| c.keys());
    top.iter().chain(sinks).chain(rest).collect()
}

/// The keys of no destination's own section.
#[rustfmt::skip]
const KEYS: &[Key] = &[
    key("cluster_name", Unset("slurm.conf `ClusterName`"), "the `ClusterName` dimension of every metric"),
    key("namespace", Unset("`Slurm/<cluster>`"), "CloudWatch namespace: letters, digits, spaces and `. - _ / # :`, not `AWS/...`; one per cluster lets IAM keep each cluster's nodes to their own (see *Moving an existing cluster*)"),
    key("node_name", Unset("short host name"), "the `NodeName` dimension of this host's own figures"),
    key("role", Value("\"auto\""), "`auto`, `node`, `head` or `all`"),
    key("collect_interval", Value("\"30s\""), "how often collectors sample"),
    key("flush_interval", Value("\"120s\""), "how often aggregated samples are sent (one billed `PutMetricData` request per flush); samples in between become one `StatisticValues` (or `Values`/`Counts`) datum per series and minute"),
    key("sink", Value("\"cloudwatch\""), "where figures go: a destination of *Destinations* (`cloudwatch`: metrics, and job records to CloudWatch Logs), or several (`[\"cloudwatch\", \"prometheus\"]`; `cloudwatch,prometheus` in `SLURM_CW_SINK`); each with its own spool directory and failure counts (see *Destinations*)"),
    key("delivery.flush_jitter", Value("true"), "start flushing at a random offset in the flush interval, so a fleet does not call the API in the same second (was `cloudwatch.flush_jitter`, still read)"),
    key("delivery.max_backlog", Value("50000"), "undelivered items kept in memory per destination when the spool cannot take them; beyond it the oldest are dropped and counted (`ShipperDatumsDropped`, `Reason=queue_full`) (was `cloudwatch.max_backlog`, still read)"),
    key("spool.enabled", Value("true"), "write every flush to disk before sending it (see *Durable delivery*)"),
    key("spool.dir", Value("\"/var/lib/slurm-cw-shipper/spool\""), "the spool directory (created 0700; the systemd unit's `StateDirectory`)"),
    key("spool.max_bytes", Value("268435456"), "the size limit of each destination's spool (per destination: two destinations may use twice it on disk); beyond it the oldest flushes are dropped and counted (`Reason=spool_full`)"),
    key("spool.replay_rate", Value("2.0"), "requests per second while sending a backlog, so a fleet catching up after an outage does not throttle itself"),
    key("slurm.conf", Unset("`$SLURM_CONF`, `/opt/slurm/etc`, `/etc/slurm`, `/etc/slurm-llnl`"), "slurm.conf to read `ClusterName` from"),
    key("slurm.bin_dir", Unset("`$PATH`, then `/opt/slurm/bin`, then AWS PCS's newest `/opt/aws/pcs/scheduler/slurm-<version>/bin` (only where root owns it and alone may write it)"), "where sinfo, squeue and sdiag are"),
    key("slurm.command_timeout", Value("\"20s\""), "limit of each Slurm command"),
    key("head.per_partition", Value("\"auto\""), "node, capacity and job figures per partition as well as per cluster: `auto` those a view reads per partition (the autoscaling signal, `BacklogNodes` and `IdleNodes`; each other copy is a billed metric no widget, alarm or Lambda reads), `on` all (where the cluster has more than one partition), `off` none"),
    key("head.top_pending_reasons", Value("10"), "pending reasons shipped by name; the rest as `Other`"),
    key("head.top_rpc_types", Value("5"), "RPC message types shipped by name (by count): `RpcRate` and `RpcTimeRate` in the `scheduler_sample` record (the dashboard's RPC table)"),
    key("head.scheduler_detail", Value("\"records\""), "slurmctld's figures that no default alarm watches and the Lambda does not read (sdiag's cycles, depths, queue lengths and maxima, job and RPC rates, capacity totals, counts by flag; docs/metrics.md names them): `records`, only in the head's `scheduler_sample` record, one a flush in the job log group (billed by the byte; the dashboard's *Scheduler* row draws from it), or `metrics`, in the record and as metrics too (about 55 custom metrics, billed by the hour); metrics only where no destination takes records"),
    key("head.source", Value("\"auto\""), "node figures from slurmctld's OpenMetrics endpoint (Slurm 25.11+, `MetricsType=metrics/openmetrics`) or sinfo: `auto` (the endpoint where it is on, answers and counts the GPUs: with GresTypes=gpu, AccountingStorageTRES must track gres/gpu; else sinfo), `openmetrics`, `commands`; squeue runs either way, sdiag too unless `head.top_rpc_types = 0` (then the scheduler figures come from the endpoint)"),
    key("head.metrics_url", Unset("from slurm.conf"), "the endpoint, `http://host:port`; default: SlurmctldHost's address and the first SlurmctldPort (else 6817)"),
    key("head.metrics_token_file", Unset("none"), "a file (root's, mode 0600, in directories only root can write, else refused) holding a JWT for the endpoint (26.05 `MetricsAuthUsers`), read when it answers 401 or 403; sent on this host only to a listener of root or SlurmUser, to another host in clear text (trust that network)"),
    key("head.metrics_token_user", Unset("none"), "else a `MetricsAuthUsers` user: `scontrol token username=<user> lifespan=3600` makes its token. Never root's nor slurm.conf's SlurmUser's (refused, exit 2): their tokens are good for every Slurm RPC, and a user listening on the endpoint's port while slurmctld restarts would get it"),
    key("exclude_metrics", Value("[]"), "metric names never shipped, to trim cost (names from docs/metrics.md)"),
    key("self_metrics", Value("\"read\""), "the shipper's own figures sent to destinations billed per series (CloudWatch, `emf`): `read`, those a view reads (drops, spool backlog, memory, collection time, records written) and its counts of trouble (retries, missed collections, spool files, errors by collector; not sent while at zero), or `all` (also what it sent and how often, and its CPU: docs/metrics.md marks them); the head puts the rest in its `scheduler_sample` record; destinations billed by the byte (otlp, prometheus, stdout) take all"),
    key("self_metrics_per_node", Value("false"), "host figures (the shipper's own, jobs and GPUs on the node) per node as well as across the cluster"),
    key("logs.group", Unset("`/slurm-cw/<cluster>/jobs`"), "the CloudWatch Logs group of the job records (the Terraform module creates it, with a retention)"),
    key("logs.stream", Unset("the node name"), "this node's log stream in it"),
    key("logs.endpoint", Unset("the SDK's"), "endpoint URL (`AWS_ENDPOINT_URL_CLOUDWATCH_LOGS` and `AWS_ENDPOINT_URL` work too); region, retries and timeouts are `cloudwatch.*`'s"),
    key("logs.report_all_users", Value("false"), "`report` shows a caller other than root other users' jobs too; off, it shows only the caller's own (the records carry users, accounts and the names of the programs they run; see *Job reports*)"),
    key("node.cgroup_root", Value("\"/sys/fs/cgroup\""), "root of the cgroup file systems"),
    key("node.cgroup_version", Value("\"auto\""), "`auto`, `v1` or `v2`"),
    key("node.v1_slurm_dir", Value("\"slurm\""), "v1: Slurm's directory under each controller (`slurm` or `slurm_<node>`)"),
    key("node.v2_parent", Value("\"system.slice\""), "v2: the parent of Slurm's scope"),
    key("node.v2_scope", Value("\"slurmstepd.scope\""), "v2: Slurm's scope (`[<node>_]slurmstepd.scope`)"),
    key("node.job_dir_prefix", Value("\"job_\""), "prefix of job directories"),
    key("node.proc_root", Value("\"/proc\""), "root of /proc (also where Lustre clients up to 2.11 keep their stats)"),
    key("node.sys_root", Value("\"/sys\""), "root of /sys: EFA and InfiniBand counters, RAPL, Lustre 2.12+ stats in debugfs (see *EFA, Lustre and CPU power*)"),
    key("node.hook_socket", Value("\"/run/slurm-cw-shipper/hook.sock\""), "where the daemon listens for `--job-ended`"),
    key("node.job_metrics", Value("\"logs\""), "where per-job figures go: `logs` (job records), `metrics` (per-job custom metrics: 27 to 50 billed metrics a job, a full hour each, see [docs/cost.md](cost.md)) or `both`"),
    key("node.per_partition", Value("\"auto\""), "job population figures and spend per partition as well as per cluster: `auto` those a view reads per partition (`JobCoresUsed` and `JobCoresAllocated`, behind the Lambda's `ClusterCpuEfficiency` per partition, and `JobCost`: each a billed metric per partition), `on` all, `off` none; with this and `node.per_account` both `auto`, the cluster's own copy only of what a view reads across the cluster (not `JobCost` and `JobWaste`, the sum of the accounts' and partitions', nor `JobMemoryUsed`, which the job records carry)"),
    key("node.per_account", Value("\"auto\""), "the same per account: `auto` those a view reads per account (`JobCpuEfficiency`, `JobCost`, `JobWaste`: the dashboard's account widgets and the Lambda's budgets), `on` all (`JobAllocations`, `JobMemoryUsed`, GPU figures too), `off` none"),
    key("node.population_per_user", Value("false"), "job population metrics per user as well as per cluster, partition and account"),
    key("node.findings.idle_gpu_percent", Value("5.0"), "a job's GPUs under this utilisation count as idle (`job_finding` idle_gpu)"),
    key("node.findings.idle_gpu_minutes", Value("30"), "... for this many minutes without a break"),
    key("node.findings.low_cpu_efficiency_percent", Value("20.0"), "a job's CPU efficiency under this is low (`job_finding` low_cpu_efficiency)"),
    key("node.findings.low_cpu_minutes", Value("60"), "... for this many minutes"),
    key("node.findings.memory_over_requested_percent", Value("25.0"), "a job whose peak memory stays under this share of its limit asked for too much"),
    key("node.findings.gpu_memory_underused_percent", Value("10.0"), "a job whose GPUs' peak memory stays under this share of their memory needs a smaller GPU, a MIG instance or a shard (`job_finding` gpu_memory_underused; 0 turns it off)"),
    key("node.findings.gpu_memory_minutes", Value("60"), "... judged once the job has run this many minutes"),
    key("node.per_node_dimensions", Value("false"), "with `job_metrics = metrics`: add per-node detail (`NodeName`) to per-job metrics"),
    key("node.top_executables", Value("5"), "executables shipped by name in `ProcessCpuUsage` each cycle; over a job's life at most 4 times as many different names, later ones summed as `(others)` (a process renaming itself each cycle would make a new series each time)"),
    key("node.process_every", Value("10"), "read each job's processes in /proc at least every Nth collection, and whenever its process set changes (a step, a fork: seen from `cgroup.procs` and the job directory's link count); cgroup files every collection; a job's first and final samples always read them"),
    key("gpu.enabled", Value("\"auto\""), "`auto` (on when the NVIDIA driver is present), `on`, `off`"),
    key("gpu.per_gpu_dimensions", Value("false"), "add per-GPU detail to per-job GPU metrics"),
    key("gpu.uuid_dimension", Value("false"), "per-GPU detail by UUID rather than index"),
    key("cost.enabled", Value("true"), "job costs in dollars: `CostUsd` and `WasteUsd` in the job records and `report`, `JobCost` and `JobWaste` per account and partition (see *What jobs cost*)"),
    key("cost.hourly_price", Unset("AWS's price of this instance"), "this node's price in dollars an hour, whatever its instance type (Savings Plans, Reserved Instances and negotiated rates are known only to you); a number, 0 or more"),
    key("cost.prices", Value("{}"), "dollars an hour by instance type (`prices = { \"c5.xlarge\" = 0.11 }`), before AWS's prices"),
    key("cost.lookup", Value("true"), "without a configured price, ask AWS: the Spot price on a Spot instance (`ec2:DescribeSpotPriceHistory`, hourly), else the On-Demand Linux price (`pricing:GetProducts`, kept a day); the instance type, zone and life cycle come from IMDSv2"),
    key("cost.cache_file", Value("\"/var/lib/slurm-cw-shipper/prices.json\""), "where the On-Demand price is kept for a day, so a fleet's restart does not ask the Price List API once per node"),
    key("log.level", Value("\"warn\""), "a tracing filter (`info`, `debug`, `slurm_cw_shipper=debug`); `RUST_LOG` wins; the AWS SDK's own lines (its retries) show only at `debug` or where the filter names them (`warn,aws_config=warn`)"),
    key("log.format", Value("\"text\""), "`text` or `json`"),
];

/// Where the generated table sits in docs/configuration.md.
pub const BEGIN: &str = "<!-- configuration table: generated from shipper/src/settings/docs.rs -->";
pub const END: &str = "<!-- end of the configuration table -->";

/// The markdown table.
pub fn markdown_table() -> String {
    let mut out = String::from("| key | default | meaning |\n|---|---|---|\n");
    for k in keys() {
        let default = match k.default {
            // Strings without their quotes: what a person types is the text.
            Value(v) => format!("`{}`", v.trim_matches('"')),
            Unset(what) => what.to_owned(),
        };
        out.push_str(&format!("| `{}` | {} | {} |\n", k.key, default, k.meaning));
    }
    out
}

/// `text` with the part between [`BEGIN`] and [`END`] replaced by the table; None without both.
pub fn with_table(text: &str) -> Option<String> {
    let start = text.find(BEGIN)? + BEGIN.len();
    let end = start + text[start..].find(END)?;
    Some(format!("{}\n{}{}", &text[..start], markdown_table(), &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use std::collections::BTreeSet;

    /// The keys serde accepts in a section, from its own "expected one of" message.
    fn serde_keys(section: &str) -> BTreeSet<String> {
        let header = if section.is_empty() { String::new() } else { format!("[{section}]\n") };
        let e = toml::from_str::<Settings>(&format!("{header}no_such_key_ = 1\n")).unwrap_err().to_string();
        // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, ...".
        let list = e.split("expected").nth(1).unwrap_or_else(|| panic!("{e}"));
        let prefix = if section.is_empty() { String::new() } else { format!("{section}.") };
        list.split('`').skip(1).step_by(2).map(|k| format!("{prefix}{k}")).collect()
    }

    /// Whether the configuration has a section of that name.
    fn serde_keys_known(section: &str) -> bool {
        let e =
            toml::from_str::<Settings>(&format!("[{section}]\nno_such_key_ = 1\n")).unwrap_err().to_string();
        !e.contains(&format!("unknown field `{section}`"))
    }

    #[test]
    fn every_key_has_a_line_and_no_line_is_not_a_key() {
        let mut want = BTreeSet::new();
        // The destinations' sections, from the registry, and the others.
        let mut sections: Vec<&str> = crate::sinks::names();
        sections.extend([
            "",
            "delivery",
            "logs",
            "slurm",
            "head",
            "node",
            "node.findings",
            "gpu",
            "cost",
            "spool",
            "log",
        ]);
        let sections: Vec<&str> =
            sections.into_iter().filter(|s| s.is_empty() || serde_keys_known(s)).collect();
        for s in sections.iter().copied() {
            want.extend(serde_keys(s));
        }
        // Sections are not keys; the old places of moved keys are read but not documented.
        for s in sections.iter().filter(|s| !s.is_empty()) {
            want.remove(*s);
        }
        want.remove("node.findings");
        want.remove("cloudwatch.flush_jitter");
        want.remove("cloudwatch.max_backlog");
        let have: BTreeSet<String> = keys().iter().map(|k| k.key.to_owned()).collect();
        assert_eq!(have, want, "keys documented vs keys the configuration has");
    }

    #[test]
    fn every_default_shown_is_the_real_one() {
        let mut text = String::new();
        let mut section = "";
        let mut sorted: Vec<&Key> = keys();
        sorted.sort_by_key(|k| k.key.rsplit_once('.').map_or("", |(s, _)| s));
        for k in sorted {
            let Value(v) = k.default else { continue };
            let (s, name) = k.key.rsplit_once('.').unwrap_or(("", k.key));
            if s != section {
                text.push_str(&format!("[{s}]\n"));
                section = s;
            }
            text.push_str(&format!("{name} = {v}\n"));
        }
        let c = Settings::from_toml(&text, "docs.rs", Vec::new()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(c, Settings::default(), "a default shown in settings/docs.rs is not the code's:\n{text}");
    }

    #[test]
    fn the_docs_table_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let page = std::fs::read_to_string(path).unwrap();
        let fresh = with_table(&page).expect("docs/configuration.md has the table's markers");
        if std::env::var("SLURM_CW_WRITE_DOCS").is_ok() {
            std::fs::write(path, &fresh).unwrap();
            return;
        }
        assert!(
            page == fresh,
            "the configuration table of docs/configuration.md is stale: \
             SLURM_CW_WRITE_DOCS=1 cargo test -p slurm-cw-shipper --lib settings::docs"
        );
    }
}
