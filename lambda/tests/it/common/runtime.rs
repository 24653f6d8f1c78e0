//! A minimal Lambda Runtime API on 127.0.0.1: hands out one event, collects what the function
//! posts back (its response or error), as the Lambda service would.

#[path = "../../../../tests/support/http.rs"]
mod http;

use http::{read_message, respond};
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener};
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

/// The built `bootstrap` as the Lambda service starts it: pointed at `api`, calling the AWS
/// endpoint `url` with LocalStack's credentials, configured with `config` (JSON).
pub fn bootstrap(api: &RuntimeApi, url: &str, config: &str) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_bootstrap"));
    c.env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "slurm-cw")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/slurm-cw")
        .env("AWS_ENDPOINT_URL", url)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("SLURM_CW_LAMBDA_CONFIG", config);
    c
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
            while let Some(m) = read_message(&mut r) {
                let (method, path) = m.target();
                let body = m.body.clone();
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
                        ("content-type", "application/json".to_owned()),
                    ];
                    respond(&mut w, "200 OK", &headers, event.as_bytes());
                } else {
                    let _ = tx.send((path.to_owned(), String::from_utf8_lossy(&body).into_owned()));
                    respond(
                        &mut w,
                        "202 Accepted",
                        &[("content-type", "application/json".to_owned())],
                        b"{}",
                    );
                }
            }
        });
    }
}
