//! Who holds a TCP port the endpoint wants: the uid the kernel lists for the listening socket
//! in /proc/net/tcp (tcp6), so the log and `--check` can say "held by uid 1000", not just
//! "in use". A wildcard listener (0.0.0.0, ::) on the same port holds it too.

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
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert_eq!(listener_uid(Path::new("/proc"), &address), Some(me));
        drop(held);
        assert_eq!(listener_uid(Path::new("/proc"), &address), None);
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
