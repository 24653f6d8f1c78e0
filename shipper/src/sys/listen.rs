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

/// The TCP listener systemd passed for `address`, once: its own descriptor, closed on exec
/// (so the commands the daemon runs do not hold the port). None where none was passed for it.
pub fn tcp_listener(address: &SocketAddr) -> Option<TcpListener> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    for fd in passed() {
        if taken.contains(&fd) {
            continue;
        }
        // SAFETY: systemd passed `fd` to this process (LISTEN_PID is ours) and nothing else
        // owns it yet; ManuallyDrop leaves it open when it is not the one asked for.
        let probe = ManuallyDrop::new(unsafe { TcpListener::from_raw_fd(fd) });
        if probe.local_addr().ok().as_ref() != Some(address) {
            continue;
        }
        // SAFETY: fcntl on a descriptor we own, setting a flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        taken.insert(fd);
        return Some(ManuallyDrop::into_inner(probe));
    }
    None
}
