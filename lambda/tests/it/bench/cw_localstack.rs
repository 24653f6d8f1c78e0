//! Reading series back from LocalStack: more series than one GetMetricData call takes, read by
//! calls in flight together, each value landing on its own series, and ListMetrics paged.

use crate::common;

use common::*;
use slurm_cw_catalog::dims::{ACCOUNT, JOB_ID, USER};
use slurm_cw_catalog::metrics::CPU_UTILIZATION;
use slurm_cw_lambda::cw::{Cw, MAX_QUERIES, Series, at_epoch};

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn fetch_reads_more_series_than_one_call_takes_each_in_its_place() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("CwTest"), unique("c"));
    let at = minute_ago(5);
    // Ids of one width: LocalStack matches dimensions by substring, so JobId=1 would also match 10.
    let jobs = 2 * MAX_QUERIES + 234;
    let ids: Vec<String> = (0..jobs).map(|i| format!("{}", 10_000 + i)).collect();
    let mut data = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let dims = [(JOB_ID, id.as_str()), (USER, "u"), (ACCOUNT, "a")];
        data.extend(series(&cluster, &CPU_UTILIZATION, &dims, &[(at, i as f64)]));
    }
    put(&url, &ns, data).await;

    let mut cw = Cw::new(clients(&url).await.cloudwatch, ns, cluster);
    let listed = cw.list_with(&CPU_UTILIZATION, &[JOB_ID, USER, ACCOUNT]).await.expect("ListMetrics");
    assert_eq!(listed.len(), jobs, "every series, across ListMetrics pages");
    let series: Vec<Series> = ids
        .iter()
        .map(|id| Series {
            metric: &CPU_UTILIZATION,
            dims: vec![(ACCOUNT.into(), "a".into()), (JOB_ID.into(), id.clone()), (USER.into(), "u".into())],
            stat: "Maximum",
        })
        .collect();
    let points = cw.fetch(&series, at_epoch(at), at_epoch(at + 60), 60).await.expect("GetMetricData");
    assert_eq!((cw.calls, cw.queries), (3, jobs as u32));
    for (i, p) in points.iter().enumerate() {
        assert_eq!(p.get(&at), Some(&(i as f64)), "series {i} ({})", ids[i]);
        assert_eq!(p.len(), 1);
    }
}
