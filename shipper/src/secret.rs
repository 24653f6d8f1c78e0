//! A secret the configuration names by file: the Prometheus endpoint's token
//! (`prometheus.bearer_token_file`), the JWT for slurmctld's endpoint
//! (`head.metrics_token_file`). On a node where untrusted users run, a job user who could read
//! the file could take the secret, and one who could write it (or its link) could choose it. So
//! it is read only from a regular file that root (or the daemon's user) owns and no one else
//! may read or write, never through a link nor from a FIFO, at most [`MAX_FILE`] bytes, one
//! token of printable characters, in directories no one else can write (as ssh asks of a key's):
//! whoever can write a directory on the way could put another file, or a link, in its place.
//! Each error names the file (or directory) and what to change.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The longest secret file read.
pub const MAX_FILE: u64 = 4096;

/// The token in the file at `path`, trimmed.
pub fn read(path: &Path) -> Result<String, String> {
    let at = path.display();
    directories(path)?;
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
    if !trusted_owner(meta.uid()) {
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

/// Who may own a secret and the directories on its way: root, or the daemon's own user.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == crate::sys::user::euid()
}

/// Links followed on the way to a secret at most (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// Every directory on the way to `path`, each link's own directory and its target's included,
/// is root's (or the daemon's user's) and writable by no one else, or sticky (`/tmp`: others
/// may add names there but not rename or remove root's).
fn directories(path: &Path) -> Result<(), String> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| format!("{}: {e}", path.display()))?.join(path)
    };
    let Some(parent) = abs.parent() else { return Ok(()) };
    let mut todo: VecDeque<OsString> = names(parent).into();
    // The directories walked so far, none a link: ".." is the last one's parent.
    let mut at = PathBuf::from("/");
    safe_dir(&at, &std::fs::symlink_metadata(&at).map_err(|e| format!("/: {e}"))?)?;
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        match name.to_str() {
            Some(".") => continue,
            Some("..") => {
                at.pop();
                continue;
            }
            _ => {}
        }
        let next = at.join(&name);
        let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        if meta.file_type().is_symlink() {
            // Only the link's directory (checked) can change it; where it points is walked.
            links += 1;
            if links > MAX_LINKS {
                return Err(format!("{}: more than {MAX_LINKS} links on the way", path.display()));
            }
            let target = std::fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for n in names(&target).into_iter().rev() {
                todo.push_front(n);
            }
            continue;
        }
        safe_dir(&next, &meta)?;
        at = next;
    }
    Ok(())
}

/// The names of `p`'s components below the root.
fn names(p: &Path) -> Vec<OsString> {
    p.components().filter(|c| !matches!(c, Component::RootDir)).map(|c| c.as_os_str().to_owned()).collect()
}

fn safe_dir(dir: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let at = dir.display();
    if !meta.is_dir() {
        return Err(format!("{at} is not a directory"));
    }
    if !trusted_owner(meta.uid()) {
        return Err(format!(
            "{at} belongs to uid {}: a secret's directories must be root's, or their owner could put another file in its place",
            meta.uid()
        ));
    }
    let sticky = meta.mode() & 0o1000 != 0;
    if meta.mode() & 0o022 != 0 && !sticky {
        return Err(format!(
            "{at} has mode {:o}: other users could put another file in the secret's place (chmod go-w {at})",
            meta.mode() & 0o777
        ));
    }
    Ok(())
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
    fn a_secret_in_a_directory_others_may_write_is_refused() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let chmod =
            |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        let top = tempfile::tempdir().unwrap();
        let open = top.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let file = secret_file(&open, SECRET, 0o600);
        for mode in [0o777, 0o775, 0o757] {
            chmod(&open, mode);
            let e = read(&file).unwrap_err();
            assert!(e.contains(&format!("mode {mode:o}")) && e.contains("chmod go-w"), "{e}");
        }
        // A sticky one (as /tmp, where the tests' own directories are): others cannot rename or
        // remove root's file there.
        chmod(&open, 0o1777);
        assert_eq!(read(&file).unwrap(), SECRET);
        // Reached through a link: the link's directory and its target's are both checked.
        chmod(&open, 0o777);
        let safe = top.path().join("safe");
        std::fs::create_dir(&safe).unwrap();
        let via = safe.join("via");
        symlink(&open, &via).unwrap();
        assert!(read(&via.join(file.file_name().unwrap())).unwrap_err().contains("chmod go-w"));
        chmod(&open, 0o755);
        assert_eq!(read(&via.join(file.file_name().unwrap())).unwrap(), SECRET);
        assert_eq!(read(&safe.join("..").join("open").join(file.file_name().unwrap())).unwrap(), SECRET);
        // A link in a directory others may write is theirs to point elsewhere.
        let other = top.path().join("other");
        std::fs::create_dir(&other).unwrap();
        chmod(&other, 0o777);
        symlink(&open, other.join("via")).unwrap();
        assert!(read(&other.join("via").join(file.file_name().unwrap())).unwrap_err().contains("chmod go-w"));
        // A loop of links ends.
        symlink(safe.join("b"), safe.join("a")).unwrap();
        symlink(safe.join("a"), safe.join("b")).unwrap();
        assert!(read(&safe.join("a").join("x")).unwrap_err().contains("links on the way"));
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
        // A directory another user owns: they could swap the file.
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        let p = secret_file(&theirs, SECRET, 0o600);
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("theirs belongs to uid 65534"), "{e}");
    }
}
