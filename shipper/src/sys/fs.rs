//! Filesystem calls std does not offer.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// One getdents64 on the open directory `dir`: the linux_dirent64 records the kernel wrote
/// into `buf` (as many bytes as it wrote; none at the end of the directory).
pub fn getdents64<'b>(dir: &File, buf: &'b mut [u8]) -> io::Result<&'b [u8]> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which holds that many.
    let n = bytes_or_retry(|| unsafe {
        libc::syscall(libc::SYS_getdents64, dir.as_raw_fd(), buf.as_mut_ptr(), buf.len()) as isize
    })?;
    Ok(&buf[..n.min(buf.len())])
}

/// The byte count a read-like call returned, the call made again while a signal interrupts it.
fn bytes_or_retry(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One pread of `f` at `offset` into the spare capacity of `buf`, at most `max` bytes; `buf`
/// grows by what was read. Nothing is zero-filled first: a buffer kept for 8 KiB reads would
/// otherwise clear 8 KiB for every 9-byte cgroup counter.
pub fn pread_spare(f: &File, buf: &mut Vec<u8>, max: usize, offset: u64) -> io::Result<usize> {
    let len = buf.len();
    let spare = buf.spare_capacity_mut();
    let ask = spare.len().min(max);
    let offset = libc::off64_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the kernel writes at most `ask` bytes at the start of the spare capacity, which
    // holds at least that many.
    let n =
        bytes_or_retry(|| unsafe { libc::pread64(f.as_raw_fd(), spare.as_mut_ptr().cast(), ask, offset) })?
            .min(ask);
    // SAFETY: the first `n` bytes past `len` were written by the read above.
    unsafe { buf.set_len(len + n) };
    Ok(n)
}

/// An exclusive lock on `f`, taken without waiting: `WouldBlock` when another holds it.
pub fn lock_exclusive_now(f: &File) -> io::Result<()> {
    // SAFETY: flock on a file descriptor `f` owns for the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The filesystem type (statfs's f_type) of `path`, or None when it cannot be asked.
pub fn filesystem_type(path: &Path) -> Option<i64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statfs is plain data; all-zero is a valid value that statfs overwrites.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs fills the struct we pass; `c` is a valid C string.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut s) };
    (rc == 0).then_some(s.f_type as i64)
}
