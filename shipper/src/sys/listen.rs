//! Listening sockets systemd passes (socket activation: `LISTEN_PID`, `LISTEN_FDS`, the
//! descriptors from 3 on), so that a port no privilege guards stays held while the daemon
//! restarts: systemd's socket unit holds it from boot, and no user can take it in between.

use std::collections::HashSet;
use std::mem::ManuallyDrop;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::Mutex;

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const FIRST: RawFd = 3;

/// Descriptors already taken: each is handed out once.
static TAKEN: Mutex<Option<HashSet<RawFd>>> = Mutex::new(None);

/// The descriptors passed to this process, none where `LISTEN_PID` names another (a parent's
/// variables inherited by a command it ran).
fn passed() -> std::ops::Range<RawFd> {
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u32>().ok());
    match (var("LISTEN_PID"), var("LISTEN_FDS")) {
        (Some(pid), Some(n)) if pid == std::process::id() && n > 0 && n < 1024 => FIRST..FIRST + n as RawFd,
        _ => FIRST..FIRST,
    }
}

/// An int socket option of `fd`; None where it is no socket (or has no such option).
fn int_option(fd: RawFd, option: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`, an int we own.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, (&raw mut value).cast(), &mut len) };
    (r == 0).then_some(value)
}

/// The TCP listener systemd passed for `address`, once: its own descriptor, closed on exec
/// (as every passed descriptor is from the first call on, so the commands the daemon runs hold
/// none of them). None where none was passed for it: a listening stream socket of that address.
pub fn tcp_listener(address: &SocketAddr) -> Option<TcpListener> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    let first = taken.is_none();
    let taken = taken.get_or_insert_with(HashSet::new);
    for fd in passed() {
        if first {
            // SAFETY: fcntl on a descriptor systemd passed to this process, setting a flag (a
            // descriptor closed since only makes it fail).
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        let listening = int_option(fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
            && int_option(fd, libc::SO_ACCEPTCONN) == Some(1);
        if taken.contains(&fd) || !listening {
            continue;
        }
        // SAFETY: systemd passed `fd`, an open listening stream socket (asked above), to this
        // process (LISTEN_PID is ours) and nothing else owns it yet; ManuallyDrop leaves it open
        // when it is not the one asked for.
        let probe = ManuallyDrop::new(unsafe { TcpListener::from_raw_fd(fd) });
        if probe.local_addr().ok().as_ref() != Some(address) {
            continue;
        }
        taken.insert(fd);
        return Some(ManuallyDrop::into_inner(probe));
    }
    None
}
