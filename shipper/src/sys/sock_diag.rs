//! Who owns the other end of a TCP connection made on this host: the kernel's sock_diag
//! (`NETLINK_SOCK_DIAG`, what `ss` asks) for the one socket with a given pair of addresses. One
//! lookup in the kernel's hash of connections, where /proc/net/tcp is a read of every socket on
//! the host: a flood leaves thousands, and the Prometheus endpoint asks once a connection. The
//! head asks it too, of slurmctld's end before sending it a token ([`crate::peer`]).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `nlmsghdr`, 16 bytes; `inet_diag_req_v2`, 56.
const HEADER: usize = 16;
const REQUEST: usize = HEADER + 56;
/// In the answer's `inet_diag_msg`, after the header: the state, the socket's id, its uid.
const STATE_AT: usize = HEADER + 1;
const ID_AT: usize = HEADER + 4;
const UID_AT: usize = HEADER + 64;
/// The `inet_diag_sockid`: ports and addresses as the request gives them (48 bytes with the
/// interface and the cookie, of which ports and addresses are the first 36).
const ID_COMPARED: usize = 36;
/// The states of a socket a process holds (`include/net/tcp_states.h`): a listener (what the
/// kernel answers when no connection matches) or a closed end kept by the kernel alone
/// (TIME_WAIT, and FIN_WAIT2 once its process closed it, which the kernel keeps as a time-wait
/// socket owned by no one, uid 0) is nobody's connection.
const OWNED: [u8; 7] = [
    1,  // ESTABLISHED
    2,  // SYN_SENT
    4,  // FIN_WAIT1
    5,  // FIN_WAIT2, while its process holds it
    8,  // CLOSE_WAIT
    9,  // LAST_ACK
    11, // CLOSING
];

/// The uid that owns the TCP socket on this host whose own address is `local` and whose peer
/// is `remote`; None where there is none (it closed, or it is not on this host) or the kernel
/// cannot be asked.
pub fn tcp_owner(local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let request = request(local, remote)?;
    let answer = ask(&request).ok()?;
    owner(&request, &answer)
}

/// An IPv4 address an IPv6 socket took as `::ffff:a.b.c.d` is that IPv4 address: the socket
/// at the other end is an IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The request for the socket bound at `local` connected to `remote`.
fn request(local: SocketAddr, remote: SocketAddr) -> Option<[u8; REQUEST]> {
    let bytes = |ip: IpAddr| -> [u8; 16] {
        let mut b = [0; 16];
        match ip {
            IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => b = v6.octets(),
        }
        b
    };
    let family = match (canonical(local.ip()), canonical(remote.ip())) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return None,
    };
    let mut r = [0u8; REQUEST];
    r[0..4].copy_from_slice(&(REQUEST as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes());
    r[HEADER] = family as u8;
    r[HEADER + 1] = libc::IPPROTO_TCP as u8;
    // Every state: the answer's state is checked instead.
    r[HEADER + 4..HEADER + 8].copy_from_slice(&u32::MAX.to_ne_bytes());
    let id = HEADER + 8;
    r[id..id + 2].copy_from_slice(&local.port().to_be_bytes());
    r[id + 2..id + 4].copy_from_slice(&remote.port().to_be_bytes());
    r[id + 4..id + 20].copy_from_slice(&bytes(canonical(local.ip())));
    r[id + 20..id + 36].copy_from_slice(&bytes(canonical(remote.ip())));
    // No interface; no cookie (INET_DIAG_NOCOOKIE): the addresses alone choose.
    r[id + 40..id + 48].copy_from_slice(&[0xff; 8]);
    Some(r)
}

/// The uid in `answer`, where it is a connection's and the one `request` asked for.
fn owner(request: &[u8; REQUEST], answer: &[u8]) -> Option<u32> {
    let word = |at: usize| answer.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes);
    let kind = answer.get(4..6).and_then(|b| b.try_into().ok()).map(u16::from_ne_bytes)?;
    let state = *answer.get(STATE_AT)?;
    let id = answer.get(ID_AT..ID_AT + ID_COMPARED)?;
    let asked = &request[HEADER + 8..HEADER + 8 + ID_COMPARED];
    (kind == SOCK_DIAG_BY_FAMILY && OWNED.contains(&state) && same(asked, id)).then_some(())?;
    word(UID_AT)
}

/// Whether the socket answered is the one asked for: its ports and addresses, an IPv4 one
/// also as an IPv6 socket holds it (`::ffff:a.b.c.d`, a dual-stack socket that connected to
/// an IPv4 address).
fn same(asked: &[u8], answered: &[u8]) -> bool {
    let mapped = |a: &[u8], b: &[u8]| {
        a == b
            || (a[4..16].iter().all(|x| *x == 0)
                && b[..10].iter().all(|x| *x == 0)
                && b[10..12] == [0xff, 0xff]
                && b[12..] == a[..4])
    };
    asked[..4] == answered[..4]
        && mapped(&asked[4..20], &answered[4..20])
        && mapped(&asked[20..36], &answered[20..36])
}

/// Sends `request` to the kernel and returns its answer.
fn ask(request: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: socket takes constants and returns a new descriptor or -1.
    let raw = unsafe {
        libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG)
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: an all-zero sockaddr_nl is valid; the family is set below.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `request` and `kernel` are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&raw const kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // The kernel answers while it takes the request: the answer is queued when sendto returns,
    // so the read never waits.
    let mut buf = vec![0u8; 1024];
    // SAFETY: `buf` is valid for its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_owner_of_the_other_end_of_a_connection_is_this_process_uid() {
        let me = crate::sys::euid();
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = TcpListener::bind(bind) else { continue };
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, peer) = listener.accept().unwrap();
            let local = server.local_addr().unwrap();
            assert_eq!(tcp_owner(peer, local), Some(me), "{bind}: the client's end");
            assert_eq!(tcp_owner(local, peer), Some(me), "{bind}: the server's end");
            // A closed client: its end is the kernel's, or gone.
            drop(client);
            let mut buf = [0u8; 1];
            let _ = std::io::Read::read(&mut &server, &mut buf);
            drop(server);
            assert_eq!(tcp_owner(peer, local), None, "{bind}: after both closed");
        }
    }

    #[test]
    fn no_connection_and_a_listener_own_nothing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        // The kernel answers a lookup no connection matches with the listener on that address.
        assert_eq!(tcp_owner(at, "127.0.0.1:1".parse().unwrap()), None);
        assert_eq!(tcp_owner("127.0.0.1:1".parse().unwrap(), at), None);
        // A v4-mapped address is its IPv4 one; a v4 end and a v6 end are no connection.
        let client = TcpStream::connect(at).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mapped = |a: SocketAddr| match a.ip() {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        let (c, s) = (client.local_addr().unwrap(), server.local_addr().unwrap());
        assert_eq!(tcp_owner(mapped(c), mapped(s)), Some(crate::sys::euid()));
        assert_eq!(tcp_owner(c, "[::1]:1".parse().unwrap()), None);
    }
}
