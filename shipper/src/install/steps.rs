//! The steps, in order: what does not depend on the cluster first (IMDS, the TaskEpilog, which
//! a cluster-wide TaskEpilog= then finds even where the rest fails), then the binary, the
//! configuration, the unit and the service. The first failure stops the run; what it would have
//! replaced stays as it was.

use super::command::Runner;
use super::plan::{self, Imds};
use super::{
    BIN, CONFIG, EPILOG, EPILOG_TEXT, InstallArgs, InstallError, Root, Stop, files, imds, log,
    slurm_conf_edit, systemd,
};
use std::path::Path;

/// The changes made (empty: nothing changed).
pub fn run(args: &InstallArgs, root: &Root, runner: &Runner) -> Result<Vec<String>, Stop> {
    let setting = plan::check_args(args)?;
    if !root.is_real() {
        tracing::info!("installing under {}", root.dir().display());
    }
    if plan::parallelcluster_login_node(root, args) {
        tracing::info!(
            "ParallelCluster login node: nothing to install (the head node ships the cluster's figures)"
        );
        return Ok(Vec::new());
    }
    let slurm_conf = plan::slurm_conf(root, args);
    let role = plan::role(root, setting, slurm_conf.as_deref())?;
    let mut changes = Vec::new();

    // IMDS first: it matters whatever else fails. It fails the run only with --strict, and
    // only once the rest is done, so that the node still ships.
    let imds = match plan::imds(root, args, role, slurm_conf.as_deref()) {
        Imds::Restrict => imds::restrict(root, runner, &mut changes),
        Imds::Open => imds::open(root, runner, &mut changes),
        Imds::Leave(why) => {
            tracing::info!("IMDS left as it is: {why}");
            Ok(())
        }
    };
    if let Err(e) = &imds {
        tracing::warn!("IMDS: {e}");
        log::journal(runner, "warning", &format!("IMDS stays open to job users: {e}"));
    }

    let epilog = root.path(EPILOG);
    if let Some(dir) = epilog.parent() {
        files::create_dir(dir, 0o755)?;
    }
    if files::write(&epilog, EPILOG_TEXT.as_bytes(), 0o755)? {
        tracing::info!("installed {EPILOG}");
        changes.push(EPILOG.into());
    }

    let (cluster, config_text) = plan::config(root, args, role, slurm_conf.as_deref())?;
    let namespace = args.namespace.as_deref().unwrap_or("the cluster's own (Slurm/<cluster>)");
    tracing::info!("cluster {cluster}, namespace {namespace}");

    // What the service runs: a change restarts it.
    let mut restart = false;
    let binary = match &args.binary {
        Some(b) => root.path(b),
        None => std::env::current_exe().map_err(InstallError::ThisExecutable)?,
    };
    if install_binary(&binary, &root.path(BIN))? {
        tracing::info!("installed {BIN} from {}", binary.display());
        changes.push(BIN.into());
        restart = true;
    } else {
        tracing::info!("{BIN} is already this build");
    }
    if files::write(&root.path(CONFIG), config_text.as_bytes(), 0o644)? {
        tracing::info!("wrote {CONFIG}");
        changes.push(CONFIG.into());
        restart = true;
    }
    if systemd::install_unit(root, runner)? {
        changes.push("the systemd unit".into());
        restart = true;
    }
    if let Some(done) = systemd::ensure_running(runner, restart)? {
        changes.push(done.into());
    }

    if args.edit_slurm_conf {
        if role.runs_head() {
            if slurm_conf_edit::add_task_epilog(slurm_conf.as_deref(), runner)? {
                changes.push("TaskEpilog in slurm.conf".into());
            }
        } else {
            tracing::info!("--edit-slurm-conf: for the head node only; slurm.conf left alone");
        }
    }
    match imds {
        Err(e) if args.strict => Err(Stop::Failed(format!("IMDS stays open to job users: {e}"))),
        _ => Ok(changes),
    }
}

/// The executable copied into place unless it is already there; true when copied.
fn install_binary(src: &Path, dest: &Path) -> Result<bool, InstallError> {
    if let Some(dir) = dest.parent() {
        files::create_dir(dir, 0o755)?;
    }
    // Running the installed one (a second run, a boot script that found it current).
    let same = matches!((src.canonicalize(), dest.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if same {
        return Ok(false);
    }
    files::copy(src, dest, 0o755)
}
