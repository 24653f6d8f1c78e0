//! `prometheus.bearer_token_file`: the pull endpoint answers only a request that carries its
//! token (`Authorization: Bearer <token>`, as Prometheus sends with `authorization:
//! credentials_file:` and VictoriaMetrics with `bearer_token_file:`). Without one, any local
//! user reads the endpoint, and so every job's figures; with one, only the scraper does, and the
//! endpoint can listen beyond loopback on a network its scraper shares with job users.
//!
//! The token is a secret on a node where untrusted users run: its file must be one only root
//! (or the daemon's user) may read or write ([`crate::secret`]), else the daemon refuses to
//! start (exit 2). It is read once, at start; the comparison takes the same time whatever the
//! guess.

use std::path::Path;

/// The shortest token taken: a guess at a 16-character token is out of a flood's reach.
pub const MIN_LEN: usize = 16;
/// The endpoint's token. Never printed.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token in `path`: one line of printable ASCII without spaces, at least [`MIN_LEN`]
    /// long, in a file only its owner (root or the daemon's user) may read. The error says
    /// what to change.
    pub fn read(path: &Path) -> Result<Token, String> {
        let token = crate::secret::read(path)?.into_bytes();
        if token.len() < MIN_LEN {
            return Err(format!(
                "{}: the token has {} characters; use at least {MIN_LEN} (openssl rand -hex 32)",
                path.display(),
                token.len()
            ));
        }
        Ok(Token(token))
    }

    /// Whether the request head `head` (request line and headers) carries this token.
    pub fn admits(&self, head: &[u8]) -> bool {
        let mut found = false;
        for line in head.split(|b| *b == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // The headers end at the first empty line; what follows is no header.
            if line.is_empty() {
                break;
            }
            let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
            if !line[..colon].eq_ignore_ascii_case(b"authorization") {
                continue;
            }
            let value = line[colon + 1..].trim_ascii();
            let Some(space) = value.iter().position(|b| *b == b' ') else { continue };
            if value[..space].eq_ignore_ascii_case(b"bearer") {
                // Every Authorization header is compared, so the time taken does not say which.
                found |= same(value[space + 1..].trim_ascii(), &self.0);
            }
        }
        found
    }
}

/// `a == b` in a time that depends on their lengths alone.
fn same(a: &[u8], b: &[u8]) -> bool {
    let longest = a.len().max(b.len());
    let mut differ = u8::from(a.len() != b.len());
    for i in 0..longest {
        differ |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    std::hint::black_box(differ) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::secret_file as token_file;

    const SECRET: &str = "0123456789abcdef0123";

    #[test]
    fn a_short_token_or_a_file_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ok = Token::read(&token_file(dir.path(), &format!("{SECRET}\n"), 0o600)).unwrap();
        assert_eq!(ok.0, SECRET.as_bytes());
        assert_eq!(format!("{ok:?}"), "Token(..)", "never printed");
        let e = Token::read(&token_file(dir.path(), "short", 0o600)).unwrap_err();
        assert!(e.contains("5 characters") && e.contains("at least 16"), "{e}");
        let e = Token::read(&token_file(dir.path(), SECRET, 0o644)).unwrap_err();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn only_a_request_carrying_the_token_is_admitted() {
        let t = Token(SECRET.as_bytes().to_vec());
        let head = |auth: &str| format!("GET /metrics HTTP/1.1\r\nHost: node\r\n{auth}Accept: */*\r\n\r\n");
        assert!(t.admits(head(&format!("Authorization: Bearer {SECRET}\r\n")).as_bytes()));
        assert!(
            t.admits(head(&format!("authorization:bearer  {SECRET} \r\n")).as_bytes()),
            "any case, spaces"
        );
        assert!(
            t.admits(
                head(&format!("Authorization: Basic eDp5\r\nAuthorization: Bearer {SECRET}\r\n")).as_bytes()
            ),
            "one of several"
        );
        for wrong in [
            String::new(),
            "Authorization: Bearer 0123456789abcdef012\r\n".into(),
            "Authorization: Bearer 0123456789abcdef01234\r\n".into(),
            "Authorization: Bearer 0123456789abcdef0124\r\n".into(),
            format!("Authorization: Basic {SECRET}\r\n"),
            format!("Authorization: {SECRET}\r\n"),
            format!("X-Authorization: Bearer {SECRET}\r\n"),
            "Authorization: Bearer \r\n".into(),
        ] {
            assert!(!t.admits(head(&wrong).as_bytes()), "{wrong:?}");
        }
        // After the headers, in a body: no header.
        assert!(
            !t.admits(format!("GET /metrics HTTP/1.1\r\n\r\nAuthorization: Bearer {SECRET}\r\n").as_bytes())
        );
        // In the request line, not a header.
        assert!(
            !t.admits(format!("GET /metrics?Authorization:Bearer%20{SECRET} HTTP/1.1\r\n\r\n").as_bytes())
        );
        assert!(!t.admits(format!("Authorization: Bearer {SECRET}\r\n\r\n").as_bytes()), "the first line");
    }
}
