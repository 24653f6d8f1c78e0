//! A cluster at rest: no job pending, running, suspended or completing, and no node allocated,
//! mixed, completing, draining or powering up, as one collection of the head says it (sinfo
//! and squeue both answered). The most common ParallelCluster cluster scales to zero and rests
//! most of the day; its figures then say only that nothing happens, yet each series bills its
//! hour. At rest, the head's figures that no default alarm watches go in its `scheduler_sample`
//! record ([`super::scheduler_sample`]) instead of being metrics, where every destination bills
//! per series (CloudWatch, EMF) and records go somewhere; the first collection with work sends
//! them as metrics again (docs/cost.md).

use crate::sample::{Batch, Sample};
use slurm_cw_catalog::dims::{PARTITION, STATE};
use slurm_cw_catalog::metrics::{JOB_COUNT, NODE_COUNT};

/// Node states with work on them, or on its way.
const BUSY_NODES: [&str; 5] = ["allocated", "mixed", "completing", "draining", "powering_up"];
/// Job states that are work, waiting or under way (squeue always reports them, zeros included).
const BUSY_JOBS: [&str; 4] = ["pending", "running", "suspended", "completing"];

/// Whether the collection in `batch` found the cluster at rest. Unknown is not at rest: a
/// collection without the node counts or the job counts (sinfo or squeue failed) is not.
pub fn at_rest(batch: &Batch) -> bool {
    let cluster_wide = |s: &&Sample| s.dims.get(PARTITION).is_none();
    let (mut nodes, mut jobs) = (false, 0);
    for s in batch.samples.iter().filter(cluster_wide) {
        let Some(state) = s.dims.get(STATE) else { continue };
        let zero = s.scalar() == Some(0.0);
        if std::ptr::eq(s.metric, &NODE_COUNT) {
            nodes = true;
            if BUSY_NODES.contains(&state) && !zero {
                return false;
            }
        } else if std::ptr::eq(s.metric, &JOB_COUNT) && BUSY_JOBS.contains(&state) {
            if !zero {
                return false;
            }
            jobs += 1;
        }
    }
    nodes && jobs == BUSY_JOBS.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Dims;
    use std::time::SystemTime;

    fn batch(nodes: &[(&str, f64)], jobs: &[(&str, f64)]) -> Batch {
        let mut b = Batch::new(SystemTime::UNIX_EPOCH);
        for (state, n) in nodes {
            b.push(&NODE_COUNT, Dims::new().with(STATE, *state), *n);
        }
        for (state, n) in jobs {
            b.push(&JOB_COUNT, Dims::new().with(STATE, *state), *n);
        }
        b
    }

    #[test]
    fn at_rest_is_no_work_anywhere_as_sinfo_and_squeue_say() {
        let quiet_jobs =
            [("pending", 0.0), ("running", 0.0), ("suspended", 0.0), ("completing", 0.0), ("completed", 3.0)];
        let nodes = [("powered_down", 10.0), ("drained", 1.0), ("allocated", 0.0)];
        assert!(at_rest(&batch(&nodes, &quiet_jobs)), "jobs that ended are no work");
        assert!(!at_rest(&batch(&[("mixed", 1.0)], &quiet_jobs)), "a node with work");
        assert!(!at_rest(&batch(&[("powering_up", 2.0)], &quiet_jobs)), "nodes on their way");
        let pending = [("pending", 1.0), ("running", 0.0), ("suspended", 0.0), ("completing", 0.0)];
        assert!(!at_rest(&batch(&nodes, &pending)), "a job waiting");
        assert!(!at_rest(&batch(&[], &quiet_jobs)), "sinfo did not answer: unknown");
        assert!(!at_rest(&batch(&nodes, &quiet_jobs[..2])), "squeue's counts incomplete: unknown");
        let mut b = batch(&nodes, &quiet_jobs);
        b.push(&NODE_COUNT, Dims::new().with(STATE, "allocated").with(PARTITION, "p"), 0.0);
        assert!(at_rest(&b), "a partition's copy says the same");
    }
}
