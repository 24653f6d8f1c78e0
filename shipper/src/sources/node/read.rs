//! Whole-file reads of cgroupfs and procfs files with as few syscalls as they allow.

use std::fs::File;
use std::path::Path;

/// The most one read asks for.
const READ_CHUNK: usize = 16 << 10;

/// Appends at most `limit` bytes of `f`, from its start, to `buf`, with preads that stop at the
/// first short one. File's own read_to_end first asks for the size (statx + lseek), which means
/// nothing on cgroupfs and procfs, and then reads until a read returns nothing; but these
/// files (seq_file in the kernel) and regular files return less than asked only at their end,
/// so a file that fits the buffer costs one read, not two plus two. The buffer is not
/// zero-filled before a read (see [`crate::sys::fs::pread_spare`]).
pub fn read_end(f: &File, buf: &mut Vec<u8>, limit: usize) -> std::io::Result<()> {
    let start = buf.len();
    loop {
        let read = buf.len() - start;
        let room = limit - read;
        if room == 0 {
            return Ok(());
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(room.min(buf.capacity().max(4096)));
        }
        let ask = (buf.capacity() - buf.len()).min(room).min(READ_CHUNK);
        match crate::sys::fs::pread_spare(f, buf, ask, read as u64) {
            Ok(n) if n < ask => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads a whole text file into `buf` (appending); false when it cannot be read or is not
/// UTF-8 (then `buf` is as it was).
pub fn read_into(path: &Path, buf: &mut String) -> bool {
    let mut bytes = std::mem::take(buf).into_bytes();
    let start = bytes.len();
    let ok = File::open(path).and_then(|f| read_end(&f, &mut bytes, usize::MAX)).is_ok();
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
    File::open(path).and_then(|f| read_end(&f, buf, usize::MAX)).is_ok()
}
