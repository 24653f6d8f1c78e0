//! A little HTTP/1.1 for tests that stand in for AWS on 127.0.0.1 (the Lambda Runtime API, a
//! fault-injecting proxy in front of LocalStack). Included with `#[path]` by the test crates.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// A request or response as read off the wire.
#[derive(Debug, Clone)]
pub struct Message {
    /// The request line or status line.
    pub first: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The request's method and path.
    pub fn target(&self) -> (&str, &str) {
        let mut p = self.first.split_whitespace();
        (p.next().unwrap_or(""), p.next().unwrap_or(""))
    }

    /// The message again, body with a content length (chunked bodies are joined), and
    /// `Connection: close`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.first);
        for (k, v) in &self.headers {
            let k_lower = k.to_ascii_lowercase();
            if k_lower == "content-length" || k_lower == "transfer-encoding" || k_lower == "connection" {
                continue;
            }
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", self.body.len()));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// Reads one message (request or response); None at the end of the stream or on garbage.
pub fn read_message(r: &mut BufReader<TcpStream>) -> Option<Message> {
    let mut first = String::new();
    if r.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut m = Message { first: first.trim_end().to_owned(), headers, body: Vec::new() };
    if m.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            m.body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(len) = m.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        m.body.resize(len, 0);
        r.read_exact(&mut m.body).ok()?;
    }
    Some(m)
}

/// Writes a response.
pub fn respond(w: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = w.write_all(head.as_bytes());
    let _ = w.write_all(body);
}
