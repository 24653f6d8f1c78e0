//! `--edit-slurm-conf` on a head node: TaskEpilog= added to slurm.conf when neither it nor a
//! file it includes sets one, then `scontrol reconfigure`. Only for clusters that cannot set it
//! through their own settings (ParallelCluster before 3.6: CustomSlurmSettings).

use super::command::Runner;
use super::{EPILOG, InstallError};
use std::io::Write;
use std::path::Path;

/// True when slurm.conf was changed.
pub fn add_task_epilog(conf: Option<&Path>, runner: &Runner) -> Result<bool, InstallError> {
    let Some(conf) = conf.filter(|c| c.is_file()) else {
        return Err(InstallError::NoSlurmConf);
    };
    let entries = crate::slurm_conf::entries(conf)?;
    match crate::slurm_conf::value(&entries, "TaskEpilog") {
        Some(v) if v == EPILOG => {
            tracing::info!("slurm.conf already has TaskEpilog={EPILOG}");
            return Ok(false);
        }
        Some(v) => {
            tracing::warn!(
                "slurm.conf already has a TaskEpilog ({v}): left alone; have it run {EPILOG} too, \
                 so short jobs get their final samples"
            );
            return Ok(false);
        }
        None => {}
    }
    let old = std::fs::read(conf).map_err(|e| InstallError::file(conf, "read", e))?;
    let newline = if old.last().is_some_and(|b| *b != b'\n') { "\n" } else { "" };
    let lines = format!("{newline}# slurm-cw-shipper: the final sample of each job\nTaskEpilog={EPILOG}\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(conf)
        .and_then(|mut f| f.write_all(lines.as_bytes()))
        .map_err(|e| InstallError::file(conf, "write", e))?;
    tracing::info!("added TaskEpilog={EPILOG} to {}", conf.display());
    // Err reads "scontrol reconfigure failed: ...".
    runner.run("scontrol", &["reconfigure"])?;
    tracing::info!("scontrol reconfigure done");
    Ok(true)
}
