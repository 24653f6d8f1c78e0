//! sdiag's statistics (parsed in slurm-cw-formats) as scheduler metrics.

pub use slurm_cw_formats::slurm::sdiag::*;

use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::MESSAGE_TYPE;
use slurm_cw_catalog::metrics::*;

/// Every value, the RPCs of the `top_rpc_types` most frequent message types, and the
/// pending RPCs.
pub fn emit(s: &Sdiag, top_rpc_types: usize, out: &mut Batch) {
    for (m, v) in &s.values {
        out.push(m, Dims::new(), *v);
    }
    let mut rpcs: Vec<&Rpc> = s.rpcs.iter().collect();
    rpcs.sort_by(|a, b| b.count.cmp(&a.count).then(a.message_type.cmp(&b.message_type)));
    for r in rpcs.into_iter().take(top_rpc_types) {
        let d = Dims::new().with(MESSAGE_TYPE, r.message_type.as_str());
        out.push(&RPC_COUNT, d.clone(), r.count as f64);
        out.push(&RPC_TOTAL_TIME, d, r.total_time as f64);
    }
    if let Some(p) = s.pending_rpcs {
        out.push(&PENDING_RPCS, Dims::new(), p as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT_2205: &str = "\
*******************************************************
sdiag output at Sat Nov 21 19:34:15 2026 (1795289655)
Data since      Sat Nov 21 19:34:15 2026 (1795289655)
*******************************************************
Server thread count:  3
Agent queue size:     1
Agent count:          2
Agent thread count:   4
DBD Agent queue size: 5

Jobs submitted: 10
Jobs started:   9
Jobs completed: 7
Jobs canceled:  1
Jobs failed:    2

Job states ts:  Sat Nov 21 19:34:15 2026 (1795289655)
Jobs pending:   3
Jobs running:   4

Main schedule statistics (microseconds):
\tLast cycle:   111
\tMax cycle:    222
\tTotal cycles: 33
\tMean cycle:   44
\tMean depth cycle:  5
\tCycles per minute: 6
\tLast queue length: 7

Backfilling stats
\tTotal backfilled jobs (since last slurm start): 8
\tTotal backfilled jobs (since last stats cycle start): 9
\tTotal backfilled heterogeneous job components: 0
\tTotal cycles: 10
\tLast cycle when: Sat Nov 21 19:34:10 2026 (1795289650)
\tLast cycle: 1100
\tMax cycle:  1200
\tMean cycle: 1300
\tLast depth cycle: 14
\tLast depth cycle (try sched): 15
\tDepth Mean: 16
\tDepth Mean (try depth): 17
\tLast queue length: 18
\tQueue length mean: 19
\tLast table size: 20
\tMean table size: 21

Latency for 1000 calls to gettimeofday(): 29 microseconds

Remote Procedure Call statistics by message type
\tMESSAGE_NODE_REGISTRATION_STATUS        ( 1002) count:4      ave_time:1026   total_time:4104
\tREQUEST_PARTITION_INFO                  ( 2009) count:1      ave_time:315    total_time:315
\tREQUEST_NODE_INFO                       ( 2007) count:12     ave_time:456    total_time:5472

Remote Procedure Call statistics by user
\troot            (       0) count:6      ave_time:812    total_time:4875

Pending RPC statistics
\tNo pending RPCs
";

    #[test]
    fn rpc_top_n_by_count() {
        let s = parse_text(TEXT_2205).unwrap();
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&s, 2, &mut b);
        assert_eq!(b.value(&RPC_COUNT, &[("MessageType", "REQUEST_NODE_INFO")]), Some(12.0));
        assert_eq!(b.value(&RPC_TOTAL_TIME, &[("MessageType", "REQUEST_NODE_INFO")]), Some(5472.0));
        assert_eq!(b.value(&RPC_COUNT, &[("MessageType", "MESSAGE_NODE_REGISTRATION_STATUS")]), Some(4.0));
        assert_eq!(
            b.value(&RPC_COUNT, &[("MessageType", "REQUEST_PARTITION_INFO")]),
            None,
            "not in the top 2"
        );
        assert_eq!(b.value(&PENDING_RPCS, &[]), Some(0.0));
    }
}
