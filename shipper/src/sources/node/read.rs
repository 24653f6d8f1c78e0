//! Whole-file reads of cgroupfs and procfs files with as few syscalls as they allow.

use std::io::Read;
use std::path::Path;

/// The most one read asks for.
const READ_CHUNK: usize = 16 << 10;

/// Appends at most `limit` bytes of `f` to `buf`, with plain reads that stop at the first short
/// one. File's own read_to_end first asks for the size (statx + lseek), which means nothing on
/// cgroupfs and procfs, and then reads until a read returns nothing; but these files (seq_file
/// in the kernel) and regular files return less than asked only at their end, so a file that
/// fits the buffer costs one read, not two plus two.
pub fn read_end(f: &mut impl Read, buf: &mut Vec<u8>, limit: usize) -> std::io::Result<()> {
    let start = buf.len();
    loop {
        let room = limit - (buf.len() - start);
        if room == 0 {
            return Ok(());
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(room.min(buf.capacity().max(4096)));
        }
        // Each read zero-fills what it asks for: a bounded slice of a buffer grown large.
        let ask = (buf.capacity() - buf.len()).min(room).min(READ_CHUNK);
        let old = buf.len();
        buf.resize(old + ask, 0);
        match f.read(&mut buf[old..]) {
            Ok(n) => {
                buf.truncate(old + n);
                if n < ask {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(old),
            Err(e) => {
                buf.truncate(old);
                return Err(e);
            }
        }
    }
}

/// Reads a whole text file into `buf` (appending); false when it cannot be read or is not
/// UTF-8 (then `buf` is as it was).
pub fn read_into(path: &Path, buf: &mut String) -> bool {
    let mut bytes = std::mem::take(buf).into_bytes();
    let start = bytes.len();
    let ok = std::fs::File::open(path).and_then(|mut f| read_end(&mut f, &mut bytes, usize::MAX)).is_ok();
    match String::from_utf8(bytes) {
        Ok(s) => {
            *buf = s;
            ok
        }
        Err(e) => {
            let mut bytes = e.into_bytes();
            bytes.truncate(start);
            *buf = String::from_utf8(bytes).unwrap_or_default();
            false
        }
    }
}

/// Reads a whole file into `buf` (appending): for /proc files, whose command names may be any
/// bytes. False when it cannot be read.
pub fn read_bytes(path: &Path, buf: &mut Vec<u8>) -> bool {
    std::fs::File::open(path).and_then(|mut f| read_end(&mut f, buf, usize::MAX)).is_ok()
}
