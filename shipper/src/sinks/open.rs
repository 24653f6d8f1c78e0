//! What the destinations of the open shape share: their rules. They take any finite number and
//! many labels, and no CloudWatch limit applies (a name longer than CloudWatch allows, a series
//! with 31 labels).

use crate::aggregate::Aggregate;
use crate::sinks::delivery::{Checks, StatsHandle};
use crate::sinks::validate::{DropReason, Validator};

/// Labels one OpenTelemetry data point may carry in CloudWatch.
pub const MAX_LABELS: usize = 150;

#[derive(Debug, Default)]
pub struct OpenRules(Validator);

impl Checks<Aggregate> for OpenRules {
    fn retain_sendable(&mut self, items: &mut Vec<Aggregate>, stats: &StatsHandle) {
        items.retain(|d| {
            let why = if d.value.numbers().iter().any(|v| !v.is_finite()) {
                Some((DropReason::NonFinite, "a value that is not a finite number"))
            } else if d.dims.len() > MAX_LABELS {
                Some((DropReason::TooManyDimensions, "more than 150 labels"))
            } else if d.value.mean().is_none() {
                Some((DropReason::BadValues, "no value observed"))
            } else {
                None
            };
            match why {
                None => true,
                Some((reason, detail)) => {
                    self.0.log_once(reason, d.metric.name, detail);
                    stats.count_drop(reason, 1);
                    false
                }
            }
        });
    }
}
