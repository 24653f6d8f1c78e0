//! A fault-injecting HTTP proxy on 127.0.0.1 between the shipper and LocalStack: by plan, a
//! request is forwarded, answered with a throttling error (HTTP 400, in the service's protocol:
//! CloudWatch's rpcv2-cbor `Throttling`, CloudWatch Logs' JSON `ThrottlingException`), answered
//! with a 500, dropped without an answer, or held before
//! it is forwarded (a request in flight). It counts requests, with their times.

#[path = "../../../../tests/support/http.rs"]
mod http;

use http::{read_message, respond};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    Forward,
    Throttle,
    ServerError,
    /// Close the connection before forwarding (the request never reached CloudWatch).
    Drop,
    /// Forward only after this long (a request in flight).
    Hold(Duration),
    /// Refuse everything, as if the endpoint were down.
    Down,
}

pub type Plan = Box<dyn FnMut(u64) -> Fault + Send>;

#[derive(Default)]
pub struct Counts {
    pub requests: AtomicU64,
    pub throttled: AtomicU64,
    pub errors: AtomicU64,
    pub dropped: AtomicU64,
    pub forwarded: AtomicU64,
    /// Requests being held right now (until upstream has answered them).
    pub held: AtomicU64,
    pub times: Mutex<Vec<Instant>>,
}

pub struct Proxy {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    plan: Arc<Mutex<Plan>>,
    /// Requests whose (uncompressed) body holds these bytes are refused as AccessDenied.
    deny: Arc<Mutex<Option<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

/// CBOR of `{"__type": <code>, "message": <message>}` (short strings only).
/// An error in the protocol of the request's service: CloudWatch's rpcv2-cbor (`code`), or
/// CloudWatch Logs' awsJson1.1 (`json_code`), as each service answers.
fn error_in_protocol(
    req: &http::Message,
    code: &str,
    json_code: &str,
    message: &str,
) -> ([(&'static str, String); 2], Vec<u8>) {
    if req.header("content-type").is_some_and(|t| t.starts_with("application/x-amz-json")) {
        let body = serde_json::json!({"__type": json_code, "message": message}).to_string().into_bytes();
        return (
            [
                ("content-type", "application/x-amz-json-1.1".to_owned()),
                ("x-amzn-errortype", json_code.to_owned()),
            ],
            body,
        );
    }
    let cbor =
        [("content-type", "application/cbor".to_owned()), ("smithy-protocol", "rpc-v2-cbor".to_owned())];
    (cbor, cbor_error(code, message))
}

fn cbor_error(code: &str, message: &str) -> Vec<u8> {
    let text = |s: &str| {
        let mut v = vec![0x60 | s.len() as u8];
        v.extend_from_slice(s.as_bytes());
        v
    };
    let mut out = vec![0xA2];
    for part in ["__type", code, "message", message] {
        out.extend(text(part));
    }
    out
}

impl Proxy {
    pub fn start(upstream: SocketAddr, plan: Plan) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("address");
        let counts = Arc::new(Counts::default());
        let plan = Arc::new(Mutex::new(plan));
        let stop = Arc::new(AtomicBool::new(false));
        let deny = Arc::new(Mutex::new(None));
        let (c, p, s, d) = (counts.clone(), plan.clone(), stop.clone(), deny.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let (c, p, d) = (c.clone(), p.clone(), d.clone());
                std::thread::spawn(move || serve(stream, upstream, c, p, d));
            }
        });
        Proxy { addr, counts, plan, deny, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Refuses every request whose body holds `needle` (a namespace, say) with CloudWatch's
    /// AccessDenied (HTTP 400), as IAM does for a namespace the role may not write.
    pub fn deny_body_containing(&self, needle: &[u8]) {
        *self.deny.lock().unwrap_or_else(|e| e.into_inner()) = Some(needle.to_vec());
    }

    /// Stops refusing (see [`Proxy::deny_body_containing`]).
    pub fn allow_all(&self) {
        *self.deny.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub fn set_plan(&self, plan: Plan) {
        *self.plan.lock().unwrap_or_else(|e| e.into_inner()) = plan;
    }

    /// Requests per second over the busiest `window` (how hard the shipper pushed).
    pub fn peak_rate(&self, window: Duration) -> f64 {
        let times = self.counts.times.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut best = 0;
        for (i, t) in times.iter().enumerate() {
            best = best.max(times[i..].iter().take_while(|u| u.duration_since(*t) < window).count());
        }
        best as f64 / window.as_secs_f64()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(
    stream: TcpStream,
    upstream: SocketAddr,
    counts: Arc<Counts>,
    plan: Arc<Mutex<Plan>>,
    deny: Arc<Mutex<Option<Vec<u8>>>>,
) {
    let Ok(mut w) = stream.try_clone() else { return };
    let mut r = BufReader::new(stream);
    while let Some(req) = read_message(&mut r) {
        let n = counts.requests.fetch_add(1, Ordering::Relaxed);
        counts.times.lock().unwrap_or_else(|e| e.into_inner()).push(Instant::now());
        let error =
            |code: &str, json_code: &str, message: &str| error_in_protocol(&req, code, json_code, message);
        let denied = deny.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(needle) = denied
            && req.body.windows(needle.len()).any(|w| w == needle.as_slice())
        {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            let (headers, body) = error("AccessDenied", "AccessDeniedException", "not authorized");
            respond(&mut w, "400 Bad Request", &headers, &body);
            continue;
        }
        let fault = (plan.lock().unwrap_or_else(|e| e.into_inner()))(n);
        match fault {
            Fault::Throttle => {
                counts.throttled.fetch_add(1, Ordering::Relaxed);
                let (headers, body) = error("Throttling", "ThrottlingException", "Rate exceeded");
                respond(&mut w, "400 Bad Request", &headers, &body);
            }
            Fault::ServerError => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                let (headers, body) =
                    error("InternalServiceFault", "ServiceUnavailableException", "injected");
                respond(&mut w, "500 Internal Server Error", &headers, &body);
            }
            Fault::Drop | Fault::Down => {
                counts.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Fault::Forward | Fault::Hold(_) => {
                let hold = if let Fault::Hold(d) = fault { Some(d) } else { None };
                if let Some(d) = hold {
                    counts.held.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(d);
                }
                let resp = forward(upstream, &req);
                // Held until upstream answered, so that "none held" means it has them.
                if hold.is_some() {
                    counts.held.fetch_sub(1, Ordering::Relaxed);
                }
                let Some(resp) = resp else { return };
                counts.forwarded.fetch_add(1, Ordering::Relaxed);
                if w.write_all(&resp.to_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}

fn forward(upstream: SocketAddr, req: &http::Message) -> Option<http::Message> {
    let mut up = TcpStream::connect(upstream).ok()?;
    up.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    up.write_all(&req.to_bytes()).ok()?;
    read_message(&mut BufReader::new(up))
}
