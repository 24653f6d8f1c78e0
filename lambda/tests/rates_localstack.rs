//! Derived rates against LocalStack: synthetic counter series with a reset and a gap go in, the
//! handler runs once per minute, and the rates read back equal hand-computed values and are
//! never negative.

mod common;

use common::*;
use slurm_cw_catalog::metrics::{JOBS_SUBMITTED, JOBS_SUBMITTED_RATE, RPC_COUNT, RPC_RATE};
use slurm_cw_lambda::handler::handle;
use std::collections::BTreeMap;

#[tokio::test]
async fn rates_are_reset_aware_and_gap_aware() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("RatesTest"), unique("c"));
    let base = minute_ago(40);
    let m = |k: i64| base + k * 60;
    // Minute: 0    1    2    3 (reset) 4   5-6 (gap)  7    8
    let counter =
        [(m(0), 100.0), (m(1), 110.0), (m(2), 125.0), (m(3), 5.0), (m(4), 20.0), (m(7), 50.0), (m(8), 55.0)];
    let mut data = series(&cluster, &JOBS_SUBMITTED, &[], &counter);
    data.extend(series(
        &cluster,
        &RPC_COUNT,
        &[("MessageType", "REQUEST_PING")],
        &[(m(0), 1000.0), (m(1), 1060.0), (m(2), 30.0)],
    ));
    put(&url, &ns, data).await;

    let cfg = config(&ns, &cluster);
    let clients = clients(&url).await;
    job_group(&clients, &cluster).await;
    for k in 0..=8 {
        let s = handle(&cfg, &clients, invocation_for(m(k))).await.expect("invocation");
        assert_eq!(s.datums_dropped, 0);
    }

    let got = read(&clients.cloudwatch, &ns, &cluster, &JOBS_SUBMITTED_RATE, &[], m(0), m(8)).await;
    // By hand: +10, +15, reset to 5 (counts since the reset), +15, nothing in the gap, then
    // (50 - 20) over 3 minutes, +5.
    let want: BTreeMap<i64, f64> =
        [(m(1), 10.0), (m(2), 15.0), (m(3), 5.0), (m(4), 15.0), (m(7), 10.0), (m(8), 5.0)]
            .into_iter()
            .collect();
    assert_eq!(got, want);
    assert!(got.values().all(|v| *v >= 0.0));

    let ping =
        read(&clients.cloudwatch, &ns, &cluster, &RPC_RATE, &[("MessageType", "REQUEST_PING")], m(0), m(8))
            .await;
    assert_eq!(ping, [(m(1), 60.0), (m(2), 30.0)].into_iter().collect(), "per message type, reset-aware");
}
