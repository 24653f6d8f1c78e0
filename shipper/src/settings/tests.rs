//! The settings' tests: files, environment, defaults and the example file.

use super::*;
use std::path::PathBuf;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn the_example_file_names_real_keys_with_their_defaults() {
    // Every commented `# key = value` line of the installed example, uncommented.
    let example = include_str!("../../../infra/systemd/config.toml.example");
    let text: String = example
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(kv)
                if kv
                    .split_once(" = ")
                    .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')) =>
            {
                kv
            }
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let mut c = Settings::from_toml(&text, "config.toml.example", env(&[])).unwrap_or_else(|e| panic!("{e}"));
    // The lines that show an example value rather than the default (which is "none").
    assert_eq!(c.cloudwatch.region.take().as_deref(), Some("us-east-1"));
    assert!(c.cloudwatch.endpoint.take().is_some());
    assert_eq!(c.logs.group.take().as_deref(), Some("/slurm-cw/hpc/jobs"));
    assert_eq!(c.cluster_name.take().as_deref(), Some("my-cluster"));
    // Shown as the default this cluster name gives.
    assert_eq!(c.namespace.take(), Some(slurm_cw_catalog::default_namespace("my-cluster")));
    assert_eq!(c.node_name.take().as_deref(), Some("compute-dy-c6i-1"));
    assert_eq!(c.slurm.conf.take(), Some(PathBuf::from("/opt/slurm/etc/slurm.conf")));
    assert_eq!(c.slurm.bin_dir.take(), Some(PathBuf::from("/opt/slurm/bin")));
    assert!(c.head.metrics_url.take().is_some() && c.head.metrics_token_file.take().is_some());
    assert!(c.prometheus.bearer_token_file.take().is_some());
    assert_eq!(c.head.metrics_token_user.take().as_deref(), Some("slurm-metrics"));
    assert!(c.otlp.endpoint.take().is_some_and(|e| e.ends_with("/v1/metrics")));
    assert_eq!(c.otlp.region.take().as_deref(), Some("us-east-1"));
    assert_eq!(c.emf.log_group.take().as_deref(), Some("/slurm-cw/my-cluster/metrics"));
    assert_eq!(c.emf.log_stream.take().as_deref(), Some("node-1"));
    assert_eq!(c.cost.hourly_price.take(), Some(3.06));
    assert_eq!(std::mem::take(&mut c.cost.prices).get("p5.48xlarge"), Some(&55.04));
    assert_eq!(c, Settings::default(), "every other key at its default");
}

#[test]
fn destinations_by_name_or_list_from_the_file_or_the_environment() {
    let c = Settings::from_toml("", "t", env(&[("SLURM_CW_SINK", "prometheus")])).unwrap();
    assert_eq!(c.sink, SinkKind::named("prometheus").unwrap());
    let c = Settings::from_toml(
        "sink = [\"cloudwatch\", \"otlp\"]\n[otlp]\nendpoint = \"http://127.0.0.1:1/v1/metrics\"\n",
        "t",
        env(&[("SLURM_CW_PROMETHEUS__ADDRESS", "127.0.0.1:29100")]),
    )
    .unwrap();
    assert_eq!(
        c.sink.iter().collect::<Vec<_>>(),
        [SinkKind::named("cloudwatch").unwrap(), SinkKind::named("otlp").unwrap()]
    );
    assert_eq!(c.prometheus.address, "127.0.0.1:29100");
    let c = Settings::from_toml("", "t", env(&[("SLURM_CW_SINK", "cloudwatch,prometheus")])).unwrap();
    assert!(
        c.sink.contains(SinkKind::named("prometheus").unwrap())
            && c.sink.contains(SinkKind::named("cloudwatch").unwrap())
    );
    for (bad, says) in [
        ("sink = \"kafka\"", "unknown destination"),
        ("[prometheus]\naddress = \"localhost\"", "prometheus.address"),
        ("[otlp]\nendpoint = \"monitoring.us-east-1.amazonaws.com\"", "otlp.endpoint"),
    ] {
        let e = Settings::from_toml(bad, "t", env(&[])).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn defaults_need_no_file() {
    let c = Settings::from_toml("", "t", env(&[])).unwrap();
    assert_eq!(c.namespace, None);
    assert_eq!(c.namespace_for("prod").unwrap(), "Slurm/prod", "one namespace per cluster");
    assert_eq!(c.collect_interval, Duration::from_secs(30));
    assert_eq!(c.flush_interval, Duration::from_secs(120));
    assert_eq!(c.sink, SinkKind::named("cloudwatch").unwrap());
    assert_eq!(c.role, None);
    assert_eq!(c.cloudwatch.storage_resolution, 60);
}

#[test]
fn file_values_are_read() {
    let c = Settings::from_toml(
        "cluster_name = \"prod\"\ncollect_interval = \"10s\"\n[cloudwatch]\nmax_retries = 2\n",
        "t",
        env(&[]),
    )
    .unwrap();
    assert_eq!(c.cluster_name.as_deref(), Some("prod"));
    assert_eq!(c.collect_interval, Duration::from_secs(10));
    assert_eq!(c.cloudwatch.max_retries, 2);
}

#[test]
fn environment_overrides_keys() {
    let c = Settings::from_toml(
        "cluster_name = \"file\"\n",
        "t",
        env(&[
            ("SLURM_CW_CLUSTER_NAME", "2024"),
            ("SLURM_CW_FLUSH_INTERVAL", "2m"),
            ("SLURM_CW_CLOUDWATCH__MAX_RETRIES", "3"),
            ("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false"),
            ("SLURM_CW_HEAD__PER_PARTITION", "false"),
            ("UNRELATED", "x"),
        ]),
    )
    .unwrap();
    assert_eq!(c.cluster_name.as_deref(), Some("2024"), "a numeric name stays a string");
    assert_eq!(c.flush_interval, Duration::from_secs(120));
    assert_eq!(c.cloudwatch.max_retries, 3);
    assert!(!c.delivery.flush_jitter, "the old key still works");
    assert_eq!(c.deprecated, ["cloudwatch.flush_jitter is now delivery.flush_jitter"]);
    assert_eq!(c.head.per_partition, Toggle::Off, "false, as when it was a boolean");
}

#[test]
fn delivery_keys_moved_out_of_cloudwatch() {
    let c =
        Settings::from_toml("[delivery]\nmax_backlog = 10\nflush_jitter = false\n", "t", env(&[])).unwrap();
    assert_eq!((c.delivery.max_backlog, c.delivery.flush_jitter), (10, false));
    assert!(c.deprecated.is_empty());
    let c = Settings::from_toml("[cloudwatch]\nmax_backlog = 7\n", "t", env(&[])).unwrap();
    assert_eq!(c.delivery.max_backlog, 7);
    assert_eq!(c.cloudwatch.max_backlog, None, "moved, not kept in two places");
    assert_eq!(c.deprecated, ["cloudwatch.max_backlog is now delivery.max_backlog"]);
}

#[test]
fn unknown_keys_are_errors_that_name_the_key() {
    let e = Settings::from_toml("colect_interval = \"10s\"\n", "cfg.toml", env(&[])).unwrap_err();
    assert!(e.to_string().contains("colect_interval") && e.to_string().contains("cfg.toml"), "{e}");
    assert!(e.to_string().contains("line 1"), "{e}");
    let e = Settings::from_toml("[cloudwatch]\nretries = 1\n", "cfg.toml", env(&[])).unwrap_err();
    assert!(e.to_string().contains("retries"), "{e}");
    let e = Settings::from_toml("", "t", env(&[("SLURM_CW_NO_SUCH_KEY", "1")])).unwrap_err();
    assert!(e.to_string().contains("no_such_key") && e.to_string().contains("SLURM_CW_NO_SUCH_KEY"), "{e}");
}

#[test]
fn bad_values_are_errors_that_name_the_key() {
    let cases = [
        ("collect_interval = \"soon\"\n", "collect_interval"),
        ("namespace = \"AWS/Slurm\"\n", "namespace"),
        ("flush_interval = \"5s\"\ncollect_interval = \"10s\"\n", "flush_interval"),
        ("[cloudwatch]\nstorage_resolution = 30\n", "storage_resolution"),
        ("sink = \"kafka\"\n", "kafka"),
        ("role = \"login\"\n", "login"),
        ("[cloudwatch]\nmax_retries = -1\n", "max_retries"),
        ("cluster_name = \"  \"\n", "cluster_name"),
        ("exclude_metrics = [\"NoSuchMetric\"]\n", "NoSuchMetric"),
        ("[node]\njob_dir_prefix = \"a/b\"\n", "job_dir_prefix"),
        ("[node]\ncgroup_version = \"v3\"\n", "v3"),
        ("[head]\nmetrics_token_user = \"root\"\n", "head.metrics_token_user"),
        ("[head]\nmetrics_token_user = \"a b\"\n", "head.metrics_token_user"),
        ("[node]\nprocess_every = 0\n", "process_every"),
    ];
    for (text, key) in cases {
        let e = Settings::from_toml(text, "t", env(&[])).unwrap_err();
        assert!(e.to_string().contains(key), "{text:?} -> {e}");
    }
    let e = Settings::from_toml("", "t", env(&[("SLURM_CW_COLLECT_INTERVAL", "fast")])).unwrap_err();
    assert!(e.to_string().contains("SLURM_CW_COLLECT_INTERVAL") && e.to_string().contains("fast"), "{e}");
}

#[test]
fn cluster_name_comes_from_slurm_conf() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "# comment\nclustername=from-conf\n").unwrap();
    let c =
        Settings::from_toml(&format!("[slurm]\nconf = {:?}\n", conf.display().to_string()), "t", env(&[]))
            .unwrap();
    assert_eq!(c.resolve_cluster_name().unwrap().0, "from-conf");
    std::fs::write(&conf, "SlurmctldHost=x\n").unwrap();
    let e = c.resolve_cluster_name().unwrap_err();
    assert!(e.to_string().contains("cluster_name"), "{e}");
}
