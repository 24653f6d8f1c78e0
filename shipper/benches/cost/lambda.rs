//! The real Lambda run once, as Lambda would, through a stand-in Runtime API.

use super::*;

/// The Terraform module's `every_minutes` (default): a Lambda run derives that many minutes
/// with one read of each series.
pub const LAMBDA_EVERY_MINUTES: u32 = 5;

/// What one Lambda run reported (its Summary).
#[derive(Debug, Default, Clone)]
pub struct LambdaRun {
    pub series_read: u64,
    pub get_metric_data_calls: u64,
    pub list_metrics_calls: u64,
    pub datums_published: u64,
    pub alarms: u64,
    pub seconds: f64,
    pub failed: String,
}

/// Runs the real `bootstrap` once, as Lambda would, for the minute `minute` (epoch seconds).
pub fn run_lambda(bootstrap: &Path, url: &str, namespace: &str, cluster: &str, minute: u64) -> LambdaRun {
    // The handler derives up to the minute four minutes before the event's time (nodes flushing
    // every two minutes): here the minute before `minute`, and the four before it.
    let event = serde_json::json!({
        "version": "0", "id": "0d4e4c5c-0000-0000-0000-00000000c057", "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000", "time": format_timestamp(at(minute + 180 + 7)),
        "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:000000000000:rule/slurm-cw"], "detail": {}
    })
    .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let (tx, posted) = mpsc::channel::<(String, String)>();
    std::thread::spawn(move || runtime_api(listener, event, tx));
    let config = serde_json::json!({
        "namespace": namespace,
        "cluster_name": cluster,
        "every_minutes": LAMBDA_EVERY_MINUTES,
        "rules": serde_json::from_str::<serde_json::Value>(&slurm_cw_catalog::alarms::default_rules_json()).expect("the catalog's rules are JSON"),
    })
    .to_string();
    let started = Instant::now();
    let mut child = std::process::Command::new(bootstrap)
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "slurm-cw")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "cost")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/slurm-cw")
        .env("AWS_ENDPOINT_URL", url)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "error")
        .env("SLURM_CW_LAMBDA_CONFIG", config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Lambda's bootstrap");
    let answer = posted.recv_timeout(Duration::from_secs(300));
    let seconds = started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    let (path, body) = answer.expect("the Lambda answered within 300 s");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    let alarms = v["alarms"]["created_or_updated"].as_array().map_or(0, Vec::len) as u64
        + v["alarms"]["unchanged"].as_u64().unwrap_or(0);
    LambdaRun {
        series_read: n("metrics_read"),
        get_metric_data_calls: n("get_metric_data_calls"),
        list_metrics_calls: n("list_metrics_calls"),
        datums_published: n("datums_published"),
        alarms,
        seconds,
        failed: if path.ends_with("/response") { v["failed_stages"].to_string() } else { body },
    }
}

/// A stand-in Lambda Runtime API: hands out `event` once, passes back what the function posts.
pub fn runtime_api(listener: TcpListener, event: String, tx: mpsc::Sender<(String, String)>) {
    let mut handed_out = false;
    for stream in listener.incoming().flatten() {
        let Ok(mut w) = stream.try_clone() else { continue };
        let mut r = BufReader::new(stream);
        while let Some(m) = http::read_message(&mut r) {
            let (method, path) = m.target();
            if method == "GET" && path.ends_with("/invocation/next") {
                if handed_out {
                    // No second event: the function waits here until it is stopped.
                    std::thread::sleep(Duration::from_secs(600));
                    return;
                }
                handed_out = true;
                let deadline = epoch(SystemTime::now()) * 1000 + 300_000;
                let headers = [
                    ("lambda-runtime-aws-request-id", "cost-1".to_owned()),
                    ("lambda-runtime-deadline-ms", deadline.to_string()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:000000000000:function:slurm-cw".to_owned(),
                    ),
                    ("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".to_owned()),
                    ("content-type", "application/json".to_owned()),
                ];
                http::respond(&mut w, "200 OK", &headers, event.as_bytes());
            } else {
                let _ = tx.send((path.to_owned(), String::from_utf8_lossy(&m.body).into_owned()));
                http::respond(
                    &mut w,
                    "202 Accepted",
                    &[("content-type", "application/json".to_owned())],
                    b"{}",
                );
            }
        }
    }
}
