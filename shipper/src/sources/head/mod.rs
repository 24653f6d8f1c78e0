//! The head-node collector: node states and capacity (sinfo), job states and demand (squeue),
//! scheduler statistics (sdiag) and slurmctld health. One call of each command per cycle, run
//! together, each with a time limit; a part that fails leaves the others shipping.

pub mod command;
pub mod gres;
pub mod sinfo;
pub mod state;

use super::{Collector, Errors};
use crate::config::HeadConfig;
use crate::sample::{Batch, Dims};
use command::{CommandError, SlurmCommands};
use slurm_cw_catalog::metrics::{SLURMCTLD_RESPONSE_TIME, SLURMCTLD_UP};

pub struct HeadCollector {
    cmds: SlurmCommands,
    cfg: HeadConfig,
    /// The last error logged per part, so a persisting failure is logged once, not every cycle.
    last_error: std::collections::HashMap<&'static str, String>,
    controller_up: Option<bool>,
}

impl HeadCollector {
    pub fn new(cmds: SlurmCommands, cfg: HeadConfig) -> Self {
        HeadCollector {
            cmds,
            cfg,
            last_error: Default::default(),
            controller_up: None,
        }
    }

    fn note_error(&mut self, part: &'static str, errors: &mut Errors, message: String) {
        errors.add(part, 1);
        if self.last_error.get(part) != Some(&message) {
            tracing::warn!(collector = part, error = %message, "head collector part failed");
            self.last_error.insert(part, message);
        }
    }

    fn note_ok(&mut self, part: &'static str) {
        if self.last_error.remove(part).is_some() {
            tracing::info!(collector = part, "head collector part works again");
        }
    }

    fn note_controller(&mut self, up: bool, why: Option<&CommandError>) {
        if self.controller_up != Some(up) {
            match (up, why) {
                (true, _) => tracing::info!("slurmctld answers"),
                (false, Some(e)) => tracing::warn!(error = %e, "slurmctld does not answer"),
                (false, None) => tracing::warn!("slurmctld does not answer"),
            }
            self.controller_up = Some(up);
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for HeadCollector {
    fn name(&self) -> &'static str {
        "head"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        errors.ran("sinfo");
        let sinfo = self.cmds.run("sinfo", sinfo::ARGS).await;
        let (up, response) = match &sinfo {
            Ok(o) => (true, Some(o.elapsed)),
            Err(_) => (false, None),
        };
        match sinfo {
            Ok(o) => {
                let (rows, bad) = sinfo::parse_text(&o.stdout);
                for b in &bad {
                    self.note_error(
                        "sinfo",
                        errors,
                        format!("sinfo line {}: {}", b.line, b.reason),
                    );
                }
                if bad.is_empty() {
                    self.note_ok("sinfo");
                }
                sinfo::emit(&rows, self.cfg.per_partition, out);
                self.note_controller(true, None);
            }
            Err(e) => {
                self.note_controller(false, Some(&e));
                self.note_error("sinfo", errors, e.to_string());
            }
        }
        out.push(&SLURMCTLD_UP, Dims::new(), if up { 1.0 } else { 0.0 });
        if let Some(t) = response {
            out.push(
                &SLURMCTLD_RESPONSE_TIME,
                Dims::new(),
                t.as_secs_f64() * 1000.0,
            );
        }
    }
}
