//! The report in a 60-column terminal (tmux): its sparklines fit as rendered.

use super::*;

/// `tmux ARGS` on the test's own server, with only `env` in its environment.
fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("tmux")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERM", "xterm-256color")
        .args(["-u", "-L", socket, "-f", "/dev/null"])
        .args(args)
        .output()
        .expect("run tmux")
}

/// The "Over time" block of a report's text, line ends trimmed (tmux trims them).
fn over_time(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Over time"))
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim_end().to_owned())
        .collect()
}

#[ignore = "needs LocalStack and tmux: scripts/test.sh runs it"]
#[tokio::test]
async fn in_a_60_column_terminal_the_sparklines_fit_as_rendered() {
    let Some(url) = localstack() else {
        return;
    };
    if std::process::Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmux is not installed and CI=true requires it"
        );
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-tmux").await;
    let job = "99999998";
    let mut recs = crate::report_render::records("two-nodes-gpus.jsonl");
    for rec in &mut recs {
        rec[r::JOB_ID.name] = json!(job);
    }
    put_all(&logs, &group, &recs).await;
    for _ in 0..40 {
        if json_report(&url, &group, job)["records"] == json!(recs.len()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The report as a user at a 60-column terminal runs it.
    let mut cmd = shipper();
    cmd.envs(shipper_env(&url, "SlurmTest/report"))
        .env("SLURM_CW_LOGS__GROUP", &group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest");
    let env: Vec<String> =
        cmd.get_envs().filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?))).collect();
    let socket = format!("slurm-cw-report-{}", std::process::id());
    let program = env!("CARGO_BIN_EXE_slurm-cw-shipper");
    let mut args: Vec<&str> = vec!["new-session", "-d", "-s", "report", "-x", "60", "-y", "60"];
    for e in &env {
        args.extend(["-e", e.as_str()]);
    }
    args.extend([program, "report", job]);
    // The pane stays after the report exits, to be read.
    let started = tmux(&socket, &["new-session", "-d", "-s", "keep", "-x", "60", "-y", "10", "sleep", "60"]);
    assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
    let set = tmux(&socket, &["set-option", "-g", "remain-on-exit", "on"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let out = tmux(&socket, &args);
    assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
    let mut dead = false;
    for _ in 0..120 {
        let d = tmux(&socket, &["display-message", "-p", "-t", "report", "#{pane_dead}"]);
        if String::from_utf8_lossy(&d.stdout).trim() == "1" {
            dead = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let screen =
        String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p", "-J", "-t", "report"]).stdout)
            .into_owned();
    let _ = tmux(&socket, &["kill-server"]);
    assert!(dead, "the report did not finish in 30 s:\n{screen}");
    eprintln!("{screen}");
    let mut want = slurm_cw_shipper::report::model::combine(job, &recs);
    want.advice = slurm_cw_shipper::report::model::advise(&want);
    let want = slurm_cw_shipper::report::render::text_width(&want, false, 60);
    let (got, want) = (over_time(&screen), over_time(&want));
    assert!(got.len() >= 9, "a header and 8 series:\n{screen}");
    assert_eq!(got, want, "tmux shows what the report renders at 60 columns");
    for line in &got {
        assert!(line.chars().count() <= 60, "{line:?}");
    }
}
