//! The host collector (EFA/InfiniBand, Lustre client, RAPL) on sysfs and procfs trees built
//! from the drivers' and the kernel's documentation (tests/fixtures/sys/README.md): each test
//! takes a reading, changes the counters as a real node would over the interval, takes a
//! second reading 30 or 60 s later, and checks the rates, the record and the resets exactly.

use crate::common::copy_tree;
use serde_json::{Value, json};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::host::{HostCollector, Roots};
use slurm_cw_shipper::transforms::node_sample::NodeSamples;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A copy of the named fixture trees: `sys/<name>` into one /sys, `proc/<name>` into one /proc.
fn tree(sys: &[&str], proc: &[&str]) -> (tempfile::TempDir, Roots) {
    let tmp = tempfile::tempdir().unwrap();
    let roots = Roots { sys: tmp.path().join("sys"), proc: tmp.path().join("proc") };
    std::fs::create_dir_all(&roots.sys).unwrap();
    std::fs::create_dir_all(&roots.proc).unwrap();
    for s in sys {
        copy_tree(&fixtures().join("sys").join(s), &roots.sys);
    }
    for p in proc {
        copy_tree(&fixtures().join("proc").join(p), &roots.proc);
    }
    (tmp, roots)
}

fn set(path: &Path, value: impl std::fmt::Display) {
    std::fs::write(path, format!("{value}\n")).unwrap();
}

fn add(path: &Path, by: u64) {
    let now: u64 = std::fs::read_to_string(path).unwrap().trim().parse().unwrap();
    set(path, now + by);
}

/// Two collections `secs` apart, `change` in between: (the second batch, its errors, the
/// node_sample record of both).
fn two_readings(roots: &Roots, secs: u64, change: impl FnOnce()) -> (Batch, Errors, Option<Value>) {
    let mut c = HostCollector::new(roots.clone(), "n1".into());
    let mut records = NodeSamples::new("n1".into());
    let t0 = Instant::now();
    let mut first = Batch::new(SystemTime::now());
    let mut e = Errors::new();
    c.collect_at(t0, &mut first, &mut e);
    assert!(first.samples.is_empty() && first.devices.is_empty(), "one reading has no rate yet");
    records.observe(&first);
    change();
    let mut second = Batch::new(SystemTime::now());
    let mut e = Errors::new();
    c.collect_at(t0 + Duration::from_secs(secs), &mut second, &mut e);
    records.observe(&second);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let record = records.flush(at).map(|r| serde_json::from_str(&r.message).unwrap());
    (second, e, record)
}

/// The one value of `m` for node n1.
fn value(b: &Batch, m: &'static Metric) -> Option<f64> {
    b.value(m, &[("NodeName", "n1")])
}

#[test]
fn efa_rates_from_two_readings_with_one_port_reset() {
    let (_tmp, roots) = tree(&["efa-2.17"], &[]);
    let port = |dev: &str, name: &str| roots.infiniband().join(dev).join("ports/1/hw_counters").join(name);
    let (b, e, rec) = two_readings(&roots, 30, || {
        for (name, by) in [
            ("rx_bytes", 3_000_000_000),
            ("tx_bytes", 1_500_000_000),
            ("rx_pkts", 300_000),
            ("tx_pkts", 150_000),
            ("rdma_read_bytes", 600_000_000),
            ("rdma_write_bytes", 1_200_000_000),
            ("rx_drops", 2),
            ("retrans_pkts", 4),
        ] {
            add(&port("rdmap16s27", name), by);
        }
        // The second device's driver was reloaded: its counters start again from zero.
        for f in std::fs::read_dir(roots.infiniband().join("rdmap32s27/ports/1/hw_counters")).unwrap() {
            set(&f.unwrap().path(), 0);
        }
        set(&port("rdmap32s27", "lifespan"), 10);
        for (name, v) in [
            ("rx_bytes", 90_000_000),
            ("tx_bytes", 30_000_000),
            ("rx_pkts", 9_000),
            ("tx_pkts", 3_000),
            ("rdma_write_bytes", 60_000_000),
        ] {
            set(&port("rdmap32s27", name), v);
        }
    });
    assert_eq!(e.total(), 0);
    assert_eq!(e.iter().collect::<Vec<_>>(), vec![("fabric", 0)], "no lustre or rapl part here");
    assert_eq!(value(&b, &FABRIC_RX_BYTES), Some(103_000_000.0));
    assert_eq!(value(&b, &FABRIC_TX_BYTES), Some(51_000_000.0));
    assert_eq!(value(&b, &FABRIC_ERRORS), Some(2.0));
    assert_eq!(b.samples.len(), 3, "three metrics, no Lustre or RAPL one");
    let rec = rec.unwrap();
    assert_eq!(
        rec["Fabric"],
        json!({
            "rdmap16s27/1": {
                "Seconds": 30.0, "RxBytesPerSecond": 100_000_000.0, "TxBytesPerSecond": 50_000_000.0,
                "RxPacketsPerSecond": 10_000.0, "TxPacketsPerSecond": 5_000.0,
                "RdmaReadBytesPerSecond": 20_000_000.0, "RdmaWriteBytesPerSecond": 40_000_000.0,
                "Errors": 2.0, "RetransmittedPackets": 4.0
            },
            "rdmap32s27/1": {
                "Seconds": 30.0, "RxBytesPerSecond": 3_000_000.0, "TxBytesPerSecond": 1_000_000.0,
                "RxPacketsPerSecond": 300.0, "TxPacketsPerSecond": 100.0,
                "RdmaReadBytesPerSecond": 0.0, "RdmaWriteBytesPerSecond": 2_000_000.0,
                "Errors": 0.0, "RetransmittedPackets": 0.0
            }
        })
    );
    assert_eq!(rec["CounterResets"], 1);
    assert_eq!(rec["Type"], "node_sample");
    assert_eq!(rec["NodeName"], "n1");
    assert_eq!(rec["Samples"], 1, "the first collection had no readings");
    assert!(rec.get("Lustre").is_none() && rec.get("Rapl").is_none());
}

#[test]
fn infiniband_port_counters_count_four_octet_words() {
    let (_tmp, roots) = tree(&["infiniband-mlx5"], &[]);
    let c = |name: &str| roots.infiniband().join("mlx5_0/ports/1/counters").join(name);
    let (b, e, rec) = two_readings(&roots, 30, || {
        add(&c("port_rcv_data"), 750_000_000);
        add(&c("port_xmit_data"), 375_000_000);
        add(&c("port_rcv_packets"), 600_000);
        add(&c("port_xmit_packets"), 300_000);
        add(&c("symbol_error"), 3);
        add(&c("link_downed"), 1);
        // Not an error counter: congestion, not loss.
        add(&c("port_xmit_wait"), 99);
    });
    assert_eq!(e.total(), 0);
    assert_eq!(value(&b, &FABRIC_RX_BYTES), Some(100_000_000.0));
    assert_eq!(value(&b, &FABRIC_TX_BYTES), Some(50_000_000.0));
    assert_eq!(value(&b, &FABRIC_ERRORS), Some(4.0));
    assert_eq!(
        rec.unwrap()["Fabric"],
        json!({"mlx5_0/1": {
            "Seconds": 30.0, "RxBytesPerSecond": 100_000_000.0, "TxBytesPerSecond": 50_000_000.0,
            "RxPacketsPerSecond": 20_000.0, "TxPacketsPerSecond": 10_000.0, "Errors": 4.0
        }})
    );
}

#[test]
fn older_efa_drivers_keep_port_counters_per_device() {
    let (_tmp, roots) = tree(&["efa-1.13"], &[]);
    let c = |name: &str| roots.infiniband().join("efa_0/hw_counters").join(name);
    let (b, e, rec) = two_readings(&roots, 30, || {
        add(&c("rx_bytes"), 60_000_000);
        add(&c("tx_bytes"), 30_000_000);
        add(&c("rdma_read_bytes"), 15_000_000);
    });
    assert_eq!(e.total(), 0);
    assert_eq!(value(&b, &FABRIC_RX_BYTES), Some(2_000_000.0));
    let f = &rec.unwrap()["Fabric"]["efa_0/1"];
    assert_eq!(f["RdmaReadBytesPerSecond"], 500_000.0);
    assert!(f.get("RdmaWriteBytesPerSecond").is_none(), "1.13 has no RDMA write counters");
    assert!(f.get("RetransmittedPackets").is_none());
}

/// Rewrites one counter line of an llite stats file: `samples` and, for counters with a sum,
/// `sum` (min and max kept).
fn lustre_set(stats: &Path, name: &str, samples: u64, sum: Option<u64>) {
    let text = std::fs::read_to_string(stats).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.first() != Some(&name) {
                return l.to_owned();
            }
            let mut f: Vec<String> = f.iter().map(|s| s.to_string()).collect();
            f[1] = samples.to_string();
            if let Some(s) = sum {
                f[6] = s.to_string();
            }
            format!("{:<25} {}", f[0], f[1..].join(" "))
        })
        .collect();
    std::fs::write(stats, out.join("\n") + "\n").unwrap();
}

#[test]
fn lustre_2_10_client_stats_in_procfs() {
    let (_tmp, roots) = tree(&[], &["lustre-2.10"]);
    let stats = roots.proc.join("fs/lustre/llite/abcd1234-ffff9c8fbd5f4000/stats");
    let (b, e, rec) = two_readings(&roots, 60, || {
        lustre_set(&stats, "read_bytes", 1100, Some(2_181_038_080 + 6_000_000_000));
        lustre_set(&stats, "write_bytes", 550, Some(1_090_519_040 + 3_000_000_000));
        lustre_set(&stats, "open", 371, None);
        lustre_set(&stats, "close", 371, None);
        lustre_set(&stats, "getattr", 1025, None);
        lustre_set(&stats, "create", 29, None);
        // Permission checks never reach a server: not metadata operations.
        lustre_set(&stats, "inode_permission", 3210, None);
    });
    assert_eq!(e.total(), 0);
    assert_eq!(value(&b, &LUSTRE_READ_BYTES), Some(100_000_000.0));
    assert_eq!(value(&b, &LUSTRE_WRITE_BYTES), Some(50_000_000.0));
    assert_eq!(value(&b, &LUSTRE_METADATA_OPS), Some(4.2));
    assert_eq!(
        rec.unwrap()["Lustre"],
        json!({"abcd1234": {
            "Seconds": 60.0, "ReadBytesPerSecond": 100_000_000.0, "WriteBytesPerSecond": 50_000_000.0,
            "ReadsPerSecond": 1.0, "WritesPerSecond": 0.5, "OpensPerSecond": 1.0, "MetadataOpsPerSecond": 4.2
        }})
    );
}

#[test]
fn lustre_2_15_client_stats_in_debugfs_with_one_cleared() {
    let (_tmp, roots) = tree(&["lustre-2.15"], &[]);
    let llite = roots.sys.join("kernel/debug/lustre/llite");
    let (busy, cleared) =
        (llite.join("abcd1234-ffff8d4a1b2c3000/stats"), llite.join("efgh5678-ffff8d4a1b2c7000/stats"));
    let (b, e, rec) = two_readings(&roots, 60, || {
        lustre_set(&busy, "read_bytes", 2348, Some(8_589_934_592 + 12_000_000_000));
        lustre_set(&busy, "write_bytes", 1144, Some(4_294_967_296 + 6_000_000_000));
        lustre_set(&busy, "open", 700, None);
        lustre_set(&busy, "close", 700, None);
        lustre_set(&busy, "getattr", 1980, None);
        // Someone wrote to the file (`lctl set_param llite.*.stats=clear`): it starts again.
        std::fs::write(
            &cleared,
            "snapshot_time             3665.021371004 secs.nsecs\n\
             start_time                3640.000000000 secs.nsecs\n\
             elapsed_time              25.021371004 secs.nsecs\n\
             read_bytes                6 samples [bytes] 4096 32768 61440 1073741824\n\
             open                      3 samples [usec] 10 30 60 1400\n\
             close                     3 samples [usec] 2 6 12 56\n",
        )
        .unwrap();
    });
    assert_eq!(e.total(), 0);
    assert_eq!(value(&b, &LUSTRE_READ_BYTES), Some(200_001_024.0));
    assert_eq!(value(&b, &LUSTRE_WRITE_BYTES), Some(100_000_000.0));
    assert_eq!(value(&b, &LUSTRE_METADATA_OPS), Some(5.1));
    let rec = rec.unwrap();
    assert_eq!(
        rec["Lustre"],
        json!({
            "abcd1234": {
                "Seconds": 60.0, "ReadBytesPerSecond": 200_000_000.0, "WriteBytesPerSecond": 100_000_000.0,
                "ReadsPerSecond": 5.0, "WritesPerSecond": 2.0, "OpensPerSecond": 1.0, "MetadataOpsPerSecond": 5.0
            },
            "efgh5678": {
                "Seconds": 60.0, "ReadBytesPerSecond": 1024.0, "WriteBytesPerSecond": 0.0,
                "ReadsPerSecond": 0.1, "WritesPerSecond": 0.0, "OpensPerSecond": 0.05, "MetadataOpsPerSecond": 0.1
            }
        })
    );
    assert_eq!(rec["CounterResets"], 1);
}

#[test]
fn lustre_mounts_of_one_file_system_are_told_apart_and_bad_files_counted() {
    // The same file system in both places (an old and a new mount): keyed by instance.
    let (_tmp, roots) = tree(&["lustre-2.15"], &["lustre-2.10"]);
    let bad = roots.sys.join("kernel/debug/lustre/llite/efgh5678-ffff8d4a1b2c7000/stats");
    std::fs::write(&bad, "snapshot_time 1.0 secs.nsecs\nread_bytes many samples [bytes] 1 2 3\n").unwrap();
    let (_, e, rec) = two_readings(&roots, 60, || {});
    assert_eq!(e.iter().collect::<Vec<_>>(), vec![("lustre", 1)], "the bad file, counted; the others read");
    let keys: Vec<String> = rec.unwrap()["Lustre"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["abcd1234-ffff8d4a1b2c3000", "abcd1234-ffff9c8fbd5f4000"]);
}

#[test]
fn rapl_package_power_with_a_wrap() {
    let (_tmp, roots) = tree(&["rapl-2-socket"], &[]);
    let energy = |zone: &str| roots.powercap().join(zone).join("energy_uj");
    // Package 1 close to the top of its range (max_energy_range_uj 262143328850).
    set(&energy("intel-rapl:1"), 262_000_000_000u64);
    let (b, e, rec) = two_readings(&roots, 30, || {
        add(&energy("intel-rapl:0"), 6_000_000_000);
        add(&energy("intel-rapl:0:0"), 900_000_000);
        // 143328850 uJ to the top, then from zero: 6000 J in all.
        set(&energy("intel-rapl:1"), 5_856_671_150u64);
        add(&energy("intel-rapl:1:0"), 600_000_000);
    });
    assert_eq!(e.total(), 0);
    assert_eq!(value(&b, &CPU_PACKAGE_POWER), Some(400.0), "packages only: 200 W each");
    let rec = rec.unwrap();
    assert_eq!(
        rec["Rapl"],
        json!({
            "package-0": {"Seconds": 30.0, "Joules": 6000.0, "Watts": 200.0},
            "package-0/dram": {"Seconds": 30.0, "Joules": 900.0, "Watts": 30.0},
            "package-1": {"Seconds": 30.0, "Joules": 6000.0, "Watts": 200.0},
            "package-1/dram": {"Seconds": 30.0, "Joules": 600.0, "Watts": 20.0}
        })
    );
    assert!(rec.get("CounterResets").is_none(), "a wrap is not a reset");
}

#[test]
fn no_source_no_sample_no_record() {
    let (_tmp, roots) = tree(&[], &[]);
    let (b, e, rec) = two_readings(&roots, 30, || {});
    assert!(b.samples.is_empty() && b.devices.is_empty());
    assert_eq!(e.iter().count(), 0, "not even a zero CollectorErrors series");
    assert!(rec.is_none());
}

#[test]
fn a_node_without_any_source_looks_again_every_tenth_collection() {
    use slurm_cw_shipper::sources::Collector;
    use slurm_cw_shipper::sources::host::LOOK_AGAIN_EVERY;
    let (tmp, roots) = tree(&[], &[]);
    let mut c = HostCollector::new(roots.clone(), "n1".into());
    let t0 = Instant::now();
    let mut collect = |i: u64| {
        let mut b = Batch::new(SystemTime::now());
        c.collect_at(t0 + Duration::from_secs(30 * i), &mut b, &mut Errors::new());
        b
    };
    collect(0);
    // EFA appears (a driver loaded late): not looked for until the tenth collection.
    copy_tree(&fixtures().join("sys/efa-2.17"), &roots.sys);
    for i in 1..u64::from(LOOK_AGAIN_EVERY) {
        assert!(collect(i).devices.is_empty(), "collection {i} does not look");
    }
    collect(u64::from(LOOK_AGAIN_EVERY));
    let port = roots.infiniband().join("rdmap16s27/ports/1/hw_counters/rx_bytes");
    add(&port, 3_000_000_000);
    let b = collect(u64::from(LOOK_AGAIN_EVERY) + 1);
    assert_eq!(value(&b, &FABRIC_RX_BYTES), Some(100_000_000.0), "found, then read every collection");
    assert!(!c.found_nothing());
    drop(tmp);
}
