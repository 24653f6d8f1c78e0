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

    // Parsing is tested in slurm-cw-formats; this is about what is emitted.
    fn rpc(message_type: &str, count: u64, total_time: u64) -> Rpc {
        Rpc { message_type: message_type.to_owned(), count, total_time }
    }

    #[test]
    fn rpc_top_n_by_count() {
        let s = Sdiag {
            values: vec![(&SERVER_THREAD_COUNT, 3.0)],
            rpcs: vec![
                rpc("REQUEST_PARTITION_INFO", 4, 410),
                rpc("REQUEST_NODE_INFO", 12, 5472),
                rpc("MESSAGE_NODE_REGISTRATION_STATUS", 4, 391),
            ],
            pending_rpcs: Some(0),
            unknown: Vec::new(),
        };
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&s, 2, &mut b);
        assert_eq!(b.value(&SERVER_THREAD_COUNT, &[]), Some(3.0));
        assert_eq!(b.value(&RPC_COUNT, &[("MessageType", "REQUEST_NODE_INFO")]), Some(12.0));
        assert_eq!(b.value(&RPC_TOTAL_TIME, &[("MessageType", "REQUEST_NODE_INFO")]), Some(5472.0));
        // A tie on count goes to the message type first in alphabetical order.
        assert_eq!(b.value(&RPC_COUNT, &[("MessageType", "MESSAGE_NODE_REGISTRATION_STATUS")]), Some(4.0));
        assert_eq!(
            b.value(&RPC_COUNT, &[("MessageType", "REQUEST_PARTITION_INFO")]),
            None,
            "not in the top 2"
        );
        assert_eq!(b.value(&PENDING_RPCS, &[]), Some(0.0));
    }
}
