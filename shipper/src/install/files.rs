//! Files on the node: written only when their content or mode differs, through a temporary
//! file beside them and a rename, so a reader never sees half a file.

use super::InstallError;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The node's file system: `/` on a real node, a fake tree in tests.
#[derive(Debug, Clone)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(dir: &Path) -> Root {
        Root(dir.to_owned())
    }

    /// `abs` (a path on the node) under the root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        self.0.join(abs.strip_prefix("/").unwrap_or(abs))
    }

    pub fn is_real(&self) -> bool {
        self.0 == Path::new("/")
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

/// Creates `dir` (and its parents) when missing, then gives it `mode`.
pub fn create_dir(dir: &Path, mode: u32) -> Result<(), InstallError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| set_mode(dir, mode))
        .map_err(|e| InstallError::file(dir, "create", e))
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.permissions().mode() & 0o7777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// `text` at `path` with `mode`; true when the content changed (a mode alone is fixed quietly).
pub fn write(path: &Path, text: &[u8], mode: u32) -> Result<bool, InstallError> {
    if std::fs::read(path).is_ok_and(|old| old == text) {
        set_mode(path, mode).map_err(|e| InstallError::file(path, "set the mode of", e))?;
        return Ok(false);
    }
    replace(path, mode, |tmp| std::fs::write(tmp, text))?;
    Ok(true)
}

/// `src` copied to `dest` with `mode` unless `dest` already has its bytes; true when copied.
pub fn copy(src: &Path, dest: &Path, mode: u32) -> Result<bool, InstallError> {
    if same_bytes(src, dest).map_err(|e| InstallError::file(src, "read", e))? {
        set_mode(dest, mode).map_err(|e| InstallError::file(dest, "set the mode of", e))?;
        return Ok(false);
    }
    replace(dest, mode, |tmp| std::fs::copy(src, tmp).map(|_| ()))?;
    Ok(true)
}

/// Writes a temporary file beside `path` with `fill`, gives it `mode` and renames it over
/// `path`; removed again when any of that fails.
fn replace(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), InstallError> {
    let dir = path.parent().ok_or_else(|| InstallError::NoDirectory(path.to_owned()))?;
    std::fs::create_dir_all(dir).map_err(|e| InstallError::file(dir, "create", e))?;
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.new.{}", std::process::id()));
    let done = fill(&tmp)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)))
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    done.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        InstallError::file(path, "write", e)
    })
}

/// True when both files exist with the same bytes (compared in blocks: a binary is large).
fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    let mut fa = std::fs::File::open(a)?;
    let Ok(mut fb) = std::fs::File::open(b) else {
        return Ok(false);
    };
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        if n != read_full(&mut fb, &mut bb)? || ba[..n] != bb[..n] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Removes `path`; true when it was there.
pub fn remove(path: &Path) -> Result<bool, InstallError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(InstallError::file(path, "remove", e)),
    }
}
