//! Every call into libc, each behind a safe function: the rest of the crate denies `unsafe`
//! (lib.rs), so what touches raw memory is here to read in one place.
//!
//! - [`user`]: who this process is, and the passwd database (names and uids);
//! - [`fs`]: a directory's entries with one getdents64, an exclusive lock, a filesystem's type;
//! - [`limits`]: the open-file limit, the process's CPU time;
//! - [`listen`]: listening sockets systemd passes (socket activation);
//! - [`memory`]: how the allocator gives memory back;
//! - [`sock_diag`]: who owns the other end of a TCP connection on this host;
//! - [`term`]: the terminal's width;
//! - [`watch`]: inotify, whether directories' entries changed.
#![allow(unsafe_code)]

pub mod fs;
pub mod limits;
pub mod listen;
pub mod memory;
pub mod sock_diag;
pub mod term;
pub mod user;
pub mod watch;

pub use user::{euid, uid};
