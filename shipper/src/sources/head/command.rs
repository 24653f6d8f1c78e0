//! Runs Slurm commands: an argv (never a shell string), a time limit, bounded output, and an
//! error a person can act on.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most standard output kept of one command: squeue's text for some 300,000 jobs. More
/// is an error (figures from a cut listing would be wrong), and the command is killed.
pub const STDOUT_MAX: usize = 64 << 20;
/// The most standard error kept; the rest is read and dropped, so the command is not blocked.
pub const STDERR_MAX: usize = 1 << 20;
/// The standard error handed on with a result, for telling why a command refused an option.
const STDERR_KEPT: usize = 4096;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CommandError {
    #[error("{0} not found (looked in {1}); install the Slurm client or set slurm.bin_dir")]
    NotFound(String, String),
    #[error("{program} timed out after {timeout:?}")]
    Timeout { program: String, timeout: Duration },
    /// `stderr` is its first line, for people; `all_stderr` the first 4 KiB, for telling
    /// refusals apart.
    #[error("{program} exited with {status}: {stderr}")]
    Failed { program: String, status: String, stderr: String, all_stderr: String },
    #[error("{program} refused its {format} format, and the other one before: {stderr}")]
    Refused { program: String, format: &'static str, stderr: String },
    #[error("cannot run {program}: {error}")]
    Spawn { program: String, error: String },
    #[error("{program} printed more than {limit} bytes; stopped and its output dropped")]
    TooLarge { program: String, limit: usize },
}

/// Output of a command that succeeded.
#[derive(Debug)]
pub struct Output {
    pub stdout: String,
    /// The first 4 KiB of its standard error (warnings; sinfo and squeue report a format field
    /// they do not know there and still exit 0).
    pub stderr: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone)]
pub struct SlurmCommands {
    bin_dir: Option<PathBuf>,
    timeout: Duration,
    stdout_max: usize,
    stderr_max: usize,
    /// Outputs cut at their bound, standard output and error alike.
    cuts: Arc<AtomicU64>,
}

impl SlurmCommands {
    pub fn new(bin_dir: Option<PathBuf>, timeout: Duration) -> Self {
        SlurmCommands {
            bin_dir,
            timeout,
            stdout_max: STDOUT_MAX,
            stderr_max: STDERR_MAX,
            cuts: Arc::default(),
        }
    }

    /// Each command's time limit.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Other output bounds (tests).
    pub fn with_limits(mut self, stdout_max: usize, stderr_max: usize) -> Self {
        self.stdout_max = stdout_max;
        self.stderr_max = stderr_max;
        self
    }

    /// How many outputs were cut at their bound.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Relaxed)
    }

    /// Where `program` is: `slurm.bin_dir`, else `$PATH`, else /opt/slurm/bin (ParallelCluster),
    /// else AWS PCS's newest root-owned release (see [`pcs_bin_dir`]).
    pub fn locate(&self, program: &str) -> Result<PathBuf, CommandError> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        match &self.bin_dir {
            Some(d) => dirs.push(d.clone()),
            None => {
                if let Some(path) = std::env::var_os("PATH") {
                    dirs.extend(std::env::split_paths(&path));
                }
                dirs.push(PathBuf::from("/opt/slurm/bin"));
                dirs.extend(pcs_bin_dir(Path::new(PCS_SCHEDULER), 0));
            }
        }
        dirs.iter().map(|d| d.join(program)).find(|p| is_executable(p)).ok_or_else(|| {
            let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            CommandError::NotFound(program.to_owned(), looked.join(":"))
        })
    }

    /// Runs `program args...` and returns its standard output, or why it failed.
    pub async fn run(&self, program: &str, args: &[&str]) -> Result<Output, CommandError> {
        let path = self.locate(program)?;
        let started = Instant::now();
        let spawn_error =
            |e: std::io::Error| CommandError::Spawn { program: program.into(), error: e.to_string() };
        let mut child = tokio::process::Command::new(&path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(CommandError::Spawn { program: program.into(), error: "no output pipes".into() });
        };
        let (stdout_max, stderr_max) = (self.stdout_max, self.stderr_max);
        let too_large = || CommandError::TooLarge { program: program.into(), limit: stdout_max };
        let work = async {
            // Both at once, so neither pipe fills and blocks the command; a cut standard output
            // ends the wait for the other.
            let out = async {
                let (buf, cut) = read_capped(stdout, stdout_max).await.map_err(spawn_error)?;
                if cut { Err(too_large()) } else { Ok(buf) }
            };
            let err = async { drain_capped(stderr, stderr_max).await.map_err(spawn_error) };
            let (out, (err, err_dropped)) = tokio::try_join!(out, err)?;
            let status = child.wait().await.map_err(spawn_error)?;
            Ok::<_, CommandError>((status, out, err, err_dropped))
        };
        let (status, out, err, err_dropped) = match tokio::time::timeout(self.timeout, work).await {
            Err(_) => {
                return Err(CommandError::Timeout { program: program.into(), timeout: self.timeout });
            }
            Ok(Err(e)) => {
                if matches!(e, CommandError::TooLarge { .. }) {
                    self.note_cut(program, "standard output", stdout_max);
                }
                // Dropping `child` kills it (kill_on_drop); this just does not wait for that.
                let _ = child.start_kill();
                return Err(e);
            }
            Ok(Ok(done)) => done,
        };
        if err_dropped > 0 {
            self.note_cut(program, "standard error", stderr_max);
        }
        let stderr = String::from_utf8_lossy(&err[..err.len().min(STDERR_KEPT)]).into_owned();
        if !status.success() {
            let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no message)");
            return Err(CommandError::Failed {
                program: program.into(),
                status: status.to_string(),
                stderr: first.chars().take(300).collect(),
                all_stderr: stderr,
            });
        }
        // Slurm prints users' free text (job names, directories) in whatever bytes they chose:
        // one that is not UTF-8 is replaced, never the whole answer lost.
        let stdout =
            String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Ok(Output { stdout, stderr, elapsed: started.elapsed() })
    }

    /// Counts a cut output; the first is logged (the head collector logs the errors it causes).
    fn note_cut(&self, program: &str, what: &str, limit: usize) {
        if self.cuts.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(program, limit, "{what} of a Slurm command was larger than its bound; cut");
        }
    }
}

/// Where AWS PCS installs Slurm on its AMIs: one `slurm-<version>` directory per release.
pub const PCS_SCHEDULER: &str = "/opt/aws/pcs/scheduler";

/// `bin` of the newest `slurm-<version>` under `root` (AWS PCS's layout), where `root`, that
/// release and its `bin` are directories of `owner` (root) that no one else may write: a
/// systemd unit's `$PATH` does not name it, and nothing a user made is run as root.
pub fn pcs_bin_dir(root: &Path, owner: u32) -> Option<PathBuf> {
    let trusted =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_dir() && crate::role::owned_by(&m, owner));
    if !trusted(root) {
        return None;
    }
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version: Vec<u32> = name
                .strip_prefix("slurm-")?
                .split(['.', '-'])
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.parent().is_some_and(trusted) && trusted(bin))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

/// Up to `max` bytes of `r`; true when there was more (then the rest is left unread).
async fn read_capped(r: impl AsyncRead + Unpin, max: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    let mut r = r.take(max as u64);
    r.read_to_end(&mut buf).await?;
    // One byte more tells an output of exactly `max` from a longer one.
    let more = r.into_inner().read(&mut [0u8; 1]).await? > 0;
    Ok((buf, more))
}

/// Up to `max` bytes of `r`, then the rest read to its end and dropped; with how many were.
async fn drain_capped(r: impl AsyncRead + Unpin, max: usize) -> std::io::Result<(Vec<u8>, u64)> {
    let mut buf = Vec::new();
    let mut r = r.take(max as u64);
    r.read_to_end(&mut buf).await?;
    let dropped = tokio::io::copy(&mut r.into_inner(), &mut tokio::io::sink()).await?;
    Ok((buf, dropped))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[tokio::test]
    async fn runs_with_argv_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "echoargs", "printf '%s|' \"$@\"");
        script(dir.path(), "fails", "echo 'sinfo: error: Unable to contact slurm controller' >&2; exit 1");
        script(
            dir.path(),
            "warns",
            "echo 'sinfo: error: Invalid job format specification: Bogus' >&2; echo out",
        );
        script(dir.path(), "hangs", "exec sleep 600");
        let c = SlurmCommands::new(Some(dir.path().into()), Duration::from_millis(300));
        let out = c.run("echoargs", &["a b", "$(reboot)", "-o", "%N"]).await.unwrap();
        assert_eq!(out.stdout, "a b|$(reboot)|-o|%N|", "arguments pass verbatim, no shell");
        match c.run("fails", &[]).await {
            Err(CommandError::Failed { stderr, .. }) => {
                assert_eq!(stderr, "sinfo: error: Unable to contact slurm controller")
            }
            other => panic!("{other:?}"),
        }
        let out = c.run("warns", &[]).await.unwrap();
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str()),
            ("out\n", "sinfo: error: Invalid job format specification: Bogus\n"),
            "a command that succeeds hands on what it said on standard error"
        );
        let started = Instant::now();
        assert!(matches!(c.run("hangs", &[]).await, Err(CommandError::Timeout { .. })));
        // Bounds far from the child's own 600 s, so that a loaded machine cannot blur them.
        assert!(started.elapsed() < Duration::from_secs(60), "the timeout kills the child");
        let e = c.run("nope", &[]).await.unwrap_err();
        assert!(e.to_string().contains("nope not found"), "{e}");
    }

    #[tokio::test]
    async fn outputs_are_bounded_and_a_cut_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "exact", "yes | head -c 1000");
        script(dir.path(), "floods", "yes | head -c 5000000");
        script(dir.path(), "endless", "exec yes");
        script(dir.path(), "noisy", "yes error | head -c 3000000 >&2; echo done");
        script(dir.path(), "noisy_fails", "yes 'sinfo: error' | head -c 3000000 >&2; exit 1");
        let c = SlurmCommands::new(Some(dir.path().into()), Duration::from_secs(120)).with_limits(1000, 4096);
        assert_eq!(c.run("exact", &[]).await.unwrap().stdout.len(), 1000, "exactly the bound is whole");
        assert_eq!(c.cuts(), 0);
        for program in ["floods", "endless"] {
            let started = Instant::now();
            match c.run(program, &[]).await {
                Err(e @ CommandError::TooLarge { .. }) => {
                    assert!(e.to_string().contains("more than 1000 bytes"), "{e}")
                }
                other => panic!("{program}: {other:?}"),
            }
            assert!(started.elapsed() < Duration::from_secs(60), "stopped at the bound, not the timeout");
        }
        assert_eq!(c.cuts(), 2);
        // Standard error past its bound is dropped, not waited on; the first line still names
        // the failure.
        assert_eq!(c.run("noisy", &[]).await.unwrap().stdout, "done\n");
        match c.run("noisy_fails", &[]).await {
            Err(CommandError::Failed { stderr, all_stderr, .. }) => {
                assert_eq!(stderr, "sinfo: error");
                assert_eq!(all_stderr.len(), STDERR_KEPT, "what is handed on is bounded");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.cuts(), 4);

        // The default bound, with a command that prints past it.
        let c = SlurmCommands::new(Some(dir.path().into()), Duration::from_secs(20));
        script(dir.path(), "huge", &format!("yes | head -c {}", STDOUT_MAX + 10));
        script(dir.path(), "just_fits", &format!("yes | head -c {STDOUT_MAX}"));
        assert!(matches!(c.run("huge", &[]).await, Err(CommandError::TooLarge { limit: STDOUT_MAX, .. })));
        assert_eq!(c.run("just_fits", &[]).await.unwrap().stdout.len(), STDOUT_MAX);
        assert_eq!(c.cuts(), 1);
    }

    #[test]
    fn pcs_release_is_the_newest_trusted_one() {
        let me = crate::sys::euid();
        let root = tempfile::tempdir().unwrap();
        let scheduler = root.path().join("scheduler");
        let mode =
            |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        for release in ["slurm-24.11", "slurm-25.5", "slurm-25.11", "slurm-notes", "slurm-9.x"] {
            std::fs::create_dir_all(scheduler.join(release).join("bin")).unwrap();
            mode(&scheduler.join(release), 0o755);
            mode(&scheduler.join(release).join("bin"), 0o755);
        }
        mode(&scheduler, 0o755);
        let newest = scheduler.join("slurm-25.11/bin");
        assert_eq!(pcs_bin_dir(&scheduler, me), Some(newest.clone()), "25.11 over 25.5, by number");
        // A release others may write is passed over; so is the whole tree when root is not its owner.
        mode(&newest, 0o777);
        assert_eq!(pcs_bin_dir(&scheduler, me), Some(scheduler.join("slurm-25.5/bin")));
        assert_eq!(pcs_bin_dir(&scheduler, me.wrapping_add(1)), None);
        mode(&scheduler, 0o777);
        assert_eq!(pcs_bin_dir(&scheduler, me), None);
        assert_eq!(pcs_bin_dir(&root.path().join("absent"), me), None);
    }

    #[tokio::test]
    async fn a_command_that_keeps_its_pipes_open_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // Prints a little, then holds standard error open without writing.
        script(dir.path(), "quiet_hang", "echo partial; exec sleep 600 >&2");
        let c = SlurmCommands::new(Some(dir.path().into()), Duration::from_millis(300));
        let started = Instant::now();
        assert!(matches!(c.run("quiet_hang", &[]).await, Err(CommandError::Timeout { .. })));
        assert!(started.elapsed() < Duration::from_secs(60), "killed at its timeout, not at its end");
    }
}
