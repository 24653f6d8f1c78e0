//! The real `bootstrap` binary against the Lambda Runtime API: a minimal Runtime API on
//! 127.0.0.1 hands it one EventBridge scheduled event (GET .../invocation/next) and receives its
//! response (POST .../invocation/{id}/response), or its error when a stage failed (POST
//! .../invocation/{id}/error), as the Lambda service would.

use crate::common;

use common::runtime::{RuntimeApi, bootstrap, scheduled_event};
use common::*;
use slurm_cw_catalog::metrics::{CLUSTER_CPU_EFFICIENCY, JOB_CORES_ALLOCATED, JOB_CORES_USED};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[test]
fn bootstrap_answers_a_scheduled_event_through_the_runtime_api() {
    let Some(url) = localstack() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (ns, cluster) = (unique("RuntimeApiTest"), unique("c"));
    let minute = minute_ago(6);
    rt.block_on(async {
        put(
            &url,
            &ns,
            [
                series(&cluster, &JOB_CORES_USED, &[], &[(minute, 12.0)]),
                series(&cluster, &JOB_CORES_ALLOCATED, &[], &[(minute, 48.0)]),
            ]
            .concat(),
        )
        .await;
        job_group(&clients(&url).await, &cluster).await;
    });

    let api = RuntimeApi::start(scheduled_event(invocation_for(minute)));

    let config = format!(r#"{{"namespace": "{ns}", "cluster_name": "{cluster}"}}"#);
    let mut child =
        bootstrap(&api, &url, &config).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let got = api.posted.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let (path, body) =
        got.unwrap_or_else(|_| panic!("no response; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    eprintln!("invocation answered in {:?}", started.elapsed());
    assert_eq!(path, "/2018-06-01/runtime/invocation/req-1/response", "{body}");
    let summary: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        summary["minute"],
        slurm_cw_sink::datum::format_timestamp(slurm_cw_lambda::cw::at_epoch(minute))
    );
    assert!(summary["datums_published"].as_u64().unwrap() >= 1, "{summary}");

    let efficiency = rt.block_on(async {
        let c = clients(&url).await;
        read(&c.cloudwatch, &ns, &cluster, &CLUSTER_CPU_EFFICIENCY, &[], minute, minute).await
    });
    assert_eq!(efficiency.get(&minute), Some(&25.0), "the binary published the cluster figures");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[test]
fn a_failed_stage_fails_the_invocation_after_the_others_ran() {
    let Some(url) = localstack() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (ns, cluster) = (unique("RuntimeApiFailTest"), unique("c"));
    let minute = minute_ago(6);
    // No job log group: the findings stage fails.
    rt.block_on(put(
        &url,
        &ns,
        [
            series(&cluster, &JOB_CORES_USED, &[], &[(minute, 12.0)]),
            series(&cluster, &JOB_CORES_ALLOCATED, &[], &[(minute, 48.0)]),
        ]
        .concat(),
    ));
    let api = RuntimeApi::start(scheduled_event(invocation_for(minute)));
    let config = format!(r#"{{"namespace": "{ns}", "cluster_name": "{cluster}"}}"#);
    let mut child =
        bootstrap(&api, &url, &config).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let got = api.posted.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let (path, body) =
        got.unwrap_or_else(|_| panic!("no response; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(path, "/2018-06-01/runtime/invocation/req-1/error", "{body}");
    assert!(body.contains("findings") && body.contains("FilterLogEvents"), "{body}");
    let efficiency = rt.block_on(async {
        let c = clients(&url).await;
        read(&c.cloudwatch, &ns, &cluster, &CLUSTER_CPU_EFFICIENCY, &[], minute, minute).await
    });
    assert_eq!(
        efficiency.get(&minute),
        Some(&25.0),
        "the cluster figures were published before the invocation failed"
    );
}

#[test]
fn bad_configuration_stops_the_function_with_the_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .env("SLURM_CW_LAMBDA_CONFIG", r#"{"cluster_name": "x", "rulez": []}"#)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("rulez"), "{text}");
}
