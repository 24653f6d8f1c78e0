//! A minimal Lambda Runtime API on 127.0.0.1: hands out one event, collects what the function
//! posts back (its response or error), as the Lambda service would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

pub struct RuntimeApi {
    pub addr: SocketAddr,
    /// (path, body) of every POST from the function.
    pub posted: mpsc::Receiver<(String, String)>,
}

impl RuntimeApi {
    pub fn start(event: String) -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let (tx, posted) = mpsc::channel();
        std::thread::spawn(move || serve(listener, event, tx));
        RuntimeApi { addr, posted }
    }
}

/// An EventBridge scheduled event at `time`.
pub fn scheduled_event(time: SystemTime) -> String {
    serde_json::json!({
        "version": "0", "id": "0d4e4c5c-0000-0000-0000-000000000000", "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000", "time": slurm_cw_sink::datum::format_timestamp(time),
        "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:000000000000:rule/slurm-cw"], "detail": {}
    })
    .to_string()
}

/// One HTTP/1.1 request: method, path, body.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse().ok()?,
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some((method, path, body))
}

fn respond(w: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &str) {
    let mut head =
        format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/json\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = w.write_all(head.as_bytes());
    let _ = w.write_all(body.as_bytes());
}

/// Serves one invocation of `event`; sends what the function posted back to `tx`.
fn serve(listener: TcpListener, event: String, tx: mpsc::Sender<(String, String)>) {
    let mut served = false;
    for stream in listener.incoming().flatten() {
        let tx = tx.clone();
        let event = event.clone();
        let first = !served;
        served = true;
        std::thread::spawn(move || {
            let mut w = stream.try_clone().unwrap();
            let mut r = BufReader::new(stream);
            let mut handed_out = !first;
            while let Some((method, path, body)) = read_request(&mut r) {
                if method == "GET" && path.ends_with("/invocation/next") {
                    if handed_out {
                        // No more events: hold the function here until the test ends.
                        std::thread::sleep(Duration::from_secs(600));
                        return;
                    }
                    handed_out = true;
                    let deadline = (std::time::SystemTime::now() + Duration::from_secs(60))
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis();
                    let headers = [
                        ("lambda-runtime-aws-request-id", "req-1".to_owned()),
                        ("lambda-runtime-deadline-ms", deadline.to_string()),
                        (
                            "lambda-runtime-invoked-function-arn",
                            "arn:aws:lambda:us-east-1:000000000000:function:slurm-cw".to_owned(),
                        ),
                        ("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".to_owned()),
                    ];
                    respond(&mut w, "200 OK", &headers, &event);
                } else {
                    let _ = tx.send((path, String::from_utf8_lossy(&body).into_owned()));
                    respond(&mut w, "202 Accepted", &[], "{}");
                }
            }
        });
    }
}
