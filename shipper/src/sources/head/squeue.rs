//! squeue's job summary (parsed in slurm-cw-formats) as job counts, job flags, pending reasons
//! and demand for the cluster and each partition.

pub use slurm_cw_formats::slurm::squeue::*;

use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::{FLAG, PARTITION, REASON, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::state::CORE_JOB_STATES;

/// Job counts, pending reasons and demand for the cluster and, with `per_partition`, for
/// each partition. `top_reasons` reasons are shipped by name per set; the rest as Other.
pub fn emit(queue: &Queue, per_partition: bool, top_reasons: usize, out: &mut Batch) {
    emit_stats(&queue.cluster, &Dims::new(), top_reasons, out);
    if per_partition {
        for (p, s) in &queue.partitions {
            emit_stats(s, &Dims::new().with(PARTITION, p.as_str()), top_reasons, out);
        }
    }
}

fn emit_stats(s: &JobStats, dims: &Dims, top_reasons: usize, out: &mut Batch) {
    for state in CORE_JOB_STATES {
        if !s.states.contains_key(state) {
            out.push(&JOB_COUNT, dims.clone().with(STATE, *state), 0.0);
        }
    }
    for (state, n) in &s.states {
        out.push(&JOB_COUNT, dims.clone().with(STATE, *state), *n as f64);
    }
    for (flag, n) in &s.flags {
        out.push(&JOB_FLAG_COUNT, dims.clone().with(FLAG, *flag), *n as f64);
    }
    let mut reasons: Vec<(&String, &u64)> = s.pending_reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut other = 0;
    for (i, (reason, n)) in reasons.into_iter().enumerate() {
        if i < top_reasons && reason != OTHER {
            out.push(&PENDING_JOB_COUNT, dims.clone().with(REASON, reason.as_str()), *n as f64);
        } else {
            other += n;
        }
    }
    if other > 0 {
        out.push(&PENDING_JOB_COUNT, dims.clone().with(REASON, OTHER), other as f64);
    }
    out.push(&PENDING_CPUS, dims.clone(), s.pending_cpus as f64);
    out.push(&PENDING_GPUS, dims.clone(), s.pending_gpus as f64);
    out.push(&PENDING_NODES, dims.clone(), s.pending_nodes as f64);
    out.push(&RUNNING_CPUS, dims.clone(), s.running_cpus as f64);
    out.push(&RUNNING_GPUS, dims.clone(), s.running_gpus as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    // The sample the parser's own tests use.
    const OUT: &str = include_str!("../../../../formats/tests/fixtures/squeue-22.05-states.txt");

    #[test]
    fn emits_top_reasons_and_folds_the_rest_into_other() {
        let (q, _) = parse_text(OUT);
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&q, true, 2, &mut b);
        assert_eq!(b.value(&PENDING_JOB_COUNT, &[("Reason", "Resources")]), Some(2.0));
        // Priority, Dependency and ReqNodeNotAvail tie at 1; the first by name stays.
        assert_eq!(b.value(&PENDING_JOB_COUNT, &[("Reason", "Dependency")]), Some(1.0));
        assert_eq!(b.value(&PENDING_JOB_COUNT, &[("Reason", "Other")]), Some(2.0));
        assert_eq!(b.value(&JOB_COUNT, &[("State", "timeout")]), Some(0.0), "core states zero-filled");
        assert_eq!(b.value(&JOB_COUNT, &[("Partition", "debug"), ("State", "running")]), Some(1.0));
        assert_eq!(b.value(&PENDING_CPUS, &[("Partition", "batch")]), Some(5.0));
        assert_eq!(b.value(&RUNNING_GPUS, &[]), Some(2.0));
        for s in &b.samples {
            assert!(s.metric.accepts_dimensions(s.dims.names().chain(["ClusterName"])), "{}", s.metric);
        }
    }

    #[test]
    fn emits_job_flags_per_cluster_and_partition_only_where_some_job_has_them() {
        let json = r#"{"jobs": [
            {"job_state": ["COMPLETED", "COMPLETING"], "partition": "a"},
            {"job_state": ["RUNNING", "CONFIGURING"], "partition": "a,b"},
            {"job_state": ["RUNNING"], "partition": "b"}]}"#;
        let (q, _) = parse_json(json).unwrap();
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&q, true, 10, &mut b);
        assert_eq!(b.value(&JOB_FLAG_COUNT, &[("Flag", "completing")]), Some(1.0));
        assert_eq!(b.value(&JOB_FLAG_COUNT, &[("Flag", "configuring")]), Some(1.0));
        assert_eq!(b.value(&JOB_FLAG_COUNT, &[("Partition", "b"), ("Flag", "configuring")]), Some(1.0));
        assert_eq!(b.value(&JOB_FLAG_COUNT, &[("Partition", "b"), ("Flag", "completing")]), None);
        assert_eq!(b.value(&JOB_COUNT, &[("State", "completed")]), Some(1.0));
        assert_eq!(b.value(&JOB_COUNT, &[("State", "running")]), Some(2.0));
        assert_eq!(b.of(&JOB_FLAG_COUNT).count(), 5, "cluster 2, partition a 2, b 1: none at zero");
        for s in &b.samples {
            assert!(s.metric.accepts_dimensions(s.dims.names().chain(["ClusterName"])), "{}", s.metric);
        }
    }
}
