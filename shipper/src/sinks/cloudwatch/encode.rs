//! Aggregates as PutMetricData datums, and PutMetricData's rules for them.
//!
//! A CloudWatch datum is an aggregate's stored form ([`Aggregate::to_datum`]): the metric's
//! name and unit, its dimensions, its time and its summary. Each one sent is carried beside its
//! aggregate, so what did not go comes back as the aggregate itself.

use crate::aggregate::Aggregate;
use crate::datum::Datum;
use crate::sinks::delivery::{Checks, StatsHandle};
use slurm_cw_sink::cloudwatch::AsDatum;
use slurm_cw_sink::validate::{Validator, check};
use std::time::SystemTime;

/// An aggregate and its datum.
pub struct Encoded {
    pub aggregate: Aggregate,
    datum: Datum,
}

impl Encoded {
    pub fn new(aggregate: Aggregate) -> Self {
        let datum = aggregate.to_datum();
        Encoded { aggregate, datum }
    }
}

impl AsDatum for Encoded {
    fn datum(&self) -> &Datum {
        &self.datum
    }
}

/// PutMetricData's rules (slurm-cw-sink's `validate`): the same for the datums of `emf` and
/// `stdout`, which CloudWatch reads too.
#[derive(Debug, Default)]
pub struct PutMetricDataRules(Validator);

impl Checks<Aggregate> for PutMetricDataRules {
    fn retain_sendable(&mut self, items: &mut Vec<Aggregate>, stats: &StatsHandle) {
        let now = SystemTime::now();
        items.retain_mut(|a| {
            let mut d = a.to_datum();
            match check(&mut d, now) {
                Ok(()) => {
                    // The check makes magnitudes too small for CloudWatch zero.
                    a.value = d.value;
                    true
                }
                Err((reason, why)) => {
                    self.0.log_once(reason, a.metric.name, &why);
                    stats.count_drop(reason, 1);
                    false
                }
            }
        });
    }
}
