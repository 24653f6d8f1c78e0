//! Who holds a local TCP socket. Who holds a port the Prometheus endpoint wants: the uid
//! /proc/net/tcp (tcp6) lists for the listening socket, so the log and `--check` can say "held
//! by uid 1000", not just "in use"; a wildcard listener (0.0.0.0, ::) on the port holds it too.
//!
//! And who answers a connection made: [`untrusted_peer`] asks the kernel for the other end of a
//! connection to this host ([`crate::sys::sock_diag`], as the Prometheus endpoint does for each
//! connection it takes; an accepted socket carries its listener's uid), so a token goes to
//! slurmctld's port only when root or SlurmUser listens there, not a user who bound it while
//! slurmctld restarted.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// TCP_LISTEN in /proc/net/tcp's `st` column.
const LISTEN: &str = "0A";

/// The uid of the socket listening on `address` (or on the wildcard address of its port),
/// from `proc` (/proc in the daemon); None when no listener is listed or `address` does not
/// parse.
pub fn listener_uid(proc: &Path, address: &str) -> Option<u32> {
    let addr: SocketAddr = address.parse().ok()?;
    let (file, exact, wildcard) = match addr.ip() {
        IpAddr::V4(ip) => ("net/tcp", hex_v4(ip.octets()), hex_v4([0; 4])),
        IpAddr::V6(ip) => ("net/tcp6", hex_v6(ip.octets()), hex_v6([0; 16])),
    };
    let port = format!("{:04X}", addr.port());
    let text = std::fs::read_to_string(proc.join(file)).ok()?;
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (local, state, uid) = (f.get(1)?, f.get(3)?, f.get(7)?);
        let (ip, p) = local.split_once(':')?;
        (*state == LISTEN && p == port && (ip == exact || ip == wildcard)).then(|| uid.parse().ok())?
    })
}

/// Why the other end of a connection from `local` to `peer` is not to be trusted with a
/// secret: it is on this host and its socket belongs to none of `trusted` (nor to this
/// process's own uid), or it is on this host and cannot be found. None: trusted, or on another
/// host (which only the network can vouch for).
pub fn untrusted_peer(local: SocketAddr, peer: SocketAddr, trusted: &[u32]) -> Option<String> {
    let me = crate::sys::uid();
    let here = peer.ip().is_loopback() || peer.ip() == local.ip();
    match crate::sys::sock_diag::tcp_owner(peer, local) {
        Some(uid) if uid == me || trusted.contains(&uid) => None,
        Some(uid) => Some(format!("{peer} is held by {}", describe_uid(uid))),
        None if here => Some(format!("{peer} is on this host but the kernel names no owner of its socket")),
        None => None,
    }
}

/// The kernel prints each 32-bit word of an address in the host's byte order.
fn hex_v4(o: [u8; 4]) -> String {
    format!("{:08X}", u32::from_ne_bytes(o))
}

fn hex_v6(o: [u8; 16]) -> String {
    o.chunks(4).map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))).collect()
}

/// "uid 1000 (alice)", or "uid 1000" when the name cannot be had.
pub fn describe_uid(uid: u32) -> String {
    match crate::sources::node::owner::user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_of_a_port_is_found_with_its_uid() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = held.local_addr().unwrap().to_string();
        let me = crate::sys::uid();
        assert_eq!(listener_uid(Path::new("/proc"), &address), Some(me));
        drop(held);
        assert_eq!(listener_uid(Path::new("/proc"), &address), None);
    }

    #[test]
    fn the_other_end_of_a_loopback_connection_is_found_with_its_uid() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (local, peer) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        assert_eq!(untrusted_peer(local, peer, &[]), None, "this process's own uid");
        // A loopback peer that cannot be found is not trusted; another host's is the network's.
        let gone: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(untrusted_peer(local, gone, &[]).is_some());
        let away: SocketAddr = "192.0.2.1:6817".parse().unwrap();
        assert_eq!(untrusted_peer(local, away, &[]), None);
    }

    #[test]
    fn a_peer_another_user_listens_as_is_named_and_not_trusted() {
        use std::io::{BufRead, BufReader};
        use std::os::unix::process::CommandExt;
        if crate::sys::euid() != 0 {
            eprintln!("SKIPPED: not root, so no listener of another user");
            return;
        }
        // A user's listener on a loopback port, as one bound while slurmctld restarted.
        let listen = "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()";
        let mut user = std::process::Command::new("python3")
            .args(["-c", listen])
            .uid(65534)
            .gid(65534)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        BufReader::new(user.stdout.take().unwrap()).read_line(&mut port).unwrap();
        let client =
            std::net::TcpStream::connect(("127.0.0.1", port.trim().parse::<u16>().unwrap())).unwrap();
        let (local, peer) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        let why = untrusted_peer(local, peer, &[0]).unwrap();
        assert!(why.contains("held by uid 65534"), "{why}");
        assert_eq!(untrusted_peer(local, peer, &[65534]), None, "a trusted uid");
        drop(client);
        let _ = user.kill();
        let _ = user.wait();
    }

    #[test]
    fn a_wildcard_listener_holds_the_loopback_address_of_its_port() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("net")).unwrap();
        let line = |ip: &str, st: &str, uid: u32| {
            format!(
                "   0: {ip}:264D 00000000:0000 {st} 00000000:00000000 00:00000000 00000000  {uid}        0 1 1"
            )
        };
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
        let text = [header, &line("00000000", "01", 7), &line("00000000", "0A", 1000)].join("\n");
        std::fs::write(dir.path().join("net/tcp"), text).unwrap();
        assert_eq!(listener_uid(dir.path(), "127.0.0.1:9805"), Some(1000));
        assert_eq!(listener_uid(dir.path(), "127.0.0.1:9806"), None);
        assert_eq!(listener_uid(dir.path(), "[::1]:9805"), None, "no tcp6 file");
    }
}
