//! A secret the configuration names by file: the Prometheus endpoint's token
//! (`prometheus.bearer_token_file`), the JWT for slurmctld's endpoint
//! (`head.metrics_token_file`). On a node where untrusted users run, a job user who could read
//! the file could take the secret, and one who could write it (or its link) could choose it. So
//! it is read only from a regular file that root (or the daemon's user) owns and no one else
//! may read or write, never through a link nor from a FIFO, at most [`MAX_FILE`] bytes, one
//! token of printable characters. Each error names the file and what to change.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The longest secret file read.
pub const MAX_FILE: u64 = 4096;

/// The token in the file at `path`, trimmed.
pub fn read(path: &Path) -> Result<String, String> {
    let at = path.display();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        // Nor does a FIFO put there hold the reader up.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{at}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{at}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{at} is not a regular file"));
    }
    if meta.uid() != 0 && meta.uid() != crate::sys::user::euid() {
        return Err(format!(
            "{at} belongs to uid {}: it must be root's (or the daemon's user's), or its owner could change it",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{at} has mode {:o}: other users could read or change the secret (chmod 600 {at})",
            meta.mode() & 0o777
        ));
    }
    let mut text = Vec::new();
    (&mut file).take(MAX_FILE + 1).read_to_end(&mut text).map_err(|e| format!("{at}: {e}"))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{at} is larger than {MAX_FILE} bytes: not one token"));
    }
    let token = text.trim_ascii();
    if token.is_empty() {
        return Err(format!("{at} holds no token"));
    }
    // Printable ASCII alone, so also UTF-8.
    match std::str::from_utf8(token) {
        Ok(t) if t.bytes().all(|b| b.is_ascii_graphic()) => Ok(t.to_owned()),
        _ => Err(format!("{at}: the token is one line of printable characters without spaces")),
    }
}

/// A file in `dir` holding `text`, of mode `mode`: the tests' secret files.
#[cfg(test)]
pub(crate) fn secret_file(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(format!("secret-{mode:o}-{}", text.len()));
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123";

    #[test]
    fn a_secret_file_others_may_read_or_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(&secret_file(dir.path(), &format!("{SECRET}\n"), 0o600)).unwrap(), SECRET);
        assert!(read(&secret_file(dir.path(), SECRET, 0o400)).is_ok());
        for mode in [0o640, 0o604, 0o660, 0o606, 0o644, 0o620, 0o602] {
            let e = read(&secret_file(dir.path(), SECRET, mode)).unwrap_err();
            assert!(e.contains(&format!("mode {mode:o}")) && e.contains("chmod 600"), "{e}");
        }
        assert!(read(&secret_file(dir.path(), " \n", 0o600)).unwrap_err().contains("holds no token"));
        let e = read(&secret_file(dir.path(), "two words are not a token\n", 0o600)).unwrap_err();
        assert!(e.contains("without spaces"), "{e}");
        assert!(read(&secret_file(dir.path(), &"a".repeat(5000), 0o600)).unwrap_err().contains("4096"));
        assert!(read(&dir.path().join("missing")).unwrap_err().contains("missing"));
        assert!(read(dir.path()).is_err(), "a directory");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read(&fifo).unwrap_err().contains("not a regular file"), "a FIFO, at once");
        // A link is not followed: whoever can make one in its directory could point it anywhere.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(secret_file(dir.path(), SECRET, 0o600), &link).unwrap();
        assert!(read(&link).is_err());
    }

    #[test]
    fn another_users_secret_file_is_refused() {
        if crate::sys::user::euid() != 0 {
            eprintln!("SKIPPED: not root, so no file of another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = secret_file(dir.path(), SECRET, 0o600);
        std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("uid 65534"), "{e}");
    }
}
