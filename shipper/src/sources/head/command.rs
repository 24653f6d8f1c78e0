//! Runs Slurm commands: an argv (never a shell string), a time limit, and an error a person
//! can act on.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CommandError {
    #[error("{0} not found (looked in {1}); install the Slurm client or set slurm.bin_dir")]
    NotFound(String, String),
    #[error("{program} timed out after {timeout:?}")]
    Timeout { program: String, timeout: Duration },
    #[error("{program} exited with {status}: {stderr}")]
    Failed { program: String, status: String, stderr: String },
    #[error("cannot run {program}: {error}")]
    Spawn { program: String, error: String },
    #[error("{program} printed output that is not UTF-8")]
    NotUtf8 { program: String },
}

/// Output of a command that succeeded.
#[derive(Debug)]
pub struct Output {
    pub stdout: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone)]
pub struct SlurmCommands {
    bin_dir: Option<PathBuf>,
    timeout: Duration,
}

impl SlurmCommands {
    pub fn new(bin_dir: Option<PathBuf>, timeout: Duration) -> Self {
        SlurmCommands { bin_dir, timeout }
    }

    /// Where `program` is: `slurm.bin_dir`, else `$PATH`, else /opt/slurm/bin (ParallelCluster).
    pub fn locate(&self, program: &str) -> Result<PathBuf, CommandError> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        match &self.bin_dir {
            Some(d) => dirs.push(d.clone()),
            None => {
                if let Some(path) = std::env::var_os("PATH") {
                    dirs.extend(std::env::split_paths(&path));
                }
                dirs.push(PathBuf::from("/opt/slurm/bin"));
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
        let child = tokio::process::Command::new(&path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = match tokio::time::timeout(self.timeout, child).await {
            Err(_) => {
                return Err(CommandError::Timeout { program: program.into(), timeout: self.timeout });
            }
            Ok(Err(e)) => {
                return Err(CommandError::Spawn { program: program.into(), error: e.to_string() });
            }
            Ok(Ok(out)) => out,
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no message)");
            return Err(CommandError::Failed {
                program: program.into(),
                status: out.status.to_string(),
                stderr: first.chars().take(300).collect(),
            });
        }
        let stdout =
            String::from_utf8(out.stdout).map_err(|_| CommandError::NotUtf8 { program: program.into() })?;
        Ok(Output { stdout, elapsed: started.elapsed() })
    }
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
        script(dir.path(), "hangs", "exec sleep 30");
        let c = SlurmCommands::new(Some(dir.path().into()), Duration::from_millis(300));
        let out = c.run("echoargs", &["a b", "$(reboot)", "-o", "%N"]).await.unwrap();
        assert_eq!(out.stdout, "a b|$(reboot)|-o|%N|", "arguments pass verbatim, no shell");
        match c.run("fails", &[]).await {
            Err(CommandError::Failed { stderr, .. }) => {
                assert_eq!(stderr, "sinfo: error: Unable to contact slurm controller")
            }
            other => panic!("{other:?}"),
        }
        let started = Instant::now();
        assert!(matches!(c.run("hangs", &[]).await, Err(CommandError::Timeout { .. })));
        assert!(started.elapsed() < Duration::from_secs(5), "the timeout kills the child");
        let e = c.run("nope", &[]).await.unwrap_err();
        assert!(e.to_string().contains("nope not found"), "{e}");
    }
}
