//! A host without CA certificates (a minimal Debian without ca-certificates): the AWS SDK
//! panics there in a debug build (exit 101, "no valid root certificates parsed"); the shipper
//! says what is missing and exits 1 instead, before it builds any client. The TLS stack
//! (rustls-native-certs, see Cargo.lock) reads SSL_CERT_FILE and SSL_CERT_DIR before the
//! system's places, so an empty directory and a file that holds no certificate stand for a
//! bare host.

use crate::common::shipper;
use std::path::Path;
use std::process::Output;

/// Every way to have no usable certificate: an empty directory, a file with text but no
/// certificate, and a certificate block whose contents are not a certificate.
fn bare_hosts(dir: &Path) -> Vec<Vec<(String, String)>> {
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let text = dir.join("text.pem");
    std::fs::write(&text, "not a certificate\n").unwrap();
    let broken = dir.join("broken.pem");
    std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
    let env = |file: &Path| {
        vec![
            ("SSL_CERT_DIR".to_owned(), empty.display().to_string()),
            ("SSL_CERT_FILE".to_owned(), file.display().to_string()),
        ]
    };
    vec![env(&empty.join("none.pem")), env(&text), env(&broken)]
}

fn run(args: &[&str], tls: &[(String, String)], dir: &Path) -> Output {
    shipper()
        .args(args)
        .envs(tls.iter().map(|(k, v)| (k, v)))
        .env("SLURM_CW_CLUSTER_NAME", "bare")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir)
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.join("hook.sock"))
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap()
}

fn assert_says_what_to_install(what: &str, out: &Output) {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(101), "{what} panicked: {text}");
    assert_eq!(out.status.code(), Some(1), "{what}: {text}");
    assert!(
        text.contains("no CA certificates") && text.contains("apt-get install ca-certificates"),
        "{what}: {text}"
    );
    assert!(!text.contains("panicked"), "{what}: {text}");
}

#[test]
fn check_once_and_report_say_to_install_ca_certificates_instead_of_panicking() {
    let dir = tempfile::tempdir().unwrap();
    for tls in bare_hosts(dir.path()) {
        let check = run(&["--check", "--role", "node"], &tls, dir.path());
        assert_says_what_to_install("--check", &check);
        let stdout = String::from_utf8_lossy(&check.stdout);
        let row =
            stdout.lines().find(|l| l.starts_with("ca certificates")).unwrap_or_else(|| panic!("{stdout}"));
        assert!(row.contains("FAIL") && row.contains("SSL_CERT_FILE="), "{row}");

        assert_says_what_to_install("--once", &run(&["--once", "--role", "node"], &tls, dir.path()));
        assert_says_what_to_install(
            "report",
            &run(&["report", "--cluster", "bare", "123"], &tls, dir.path()),
        );
    }
}

#[test]
fn an_endpoint_without_tls_is_no_exception() {
    // The SDK loads the certificates for its HTTPS connector whatever the endpoint's scheme.
    let dir = tempfile::tempdir().unwrap();
    let tls = &bare_hosts(dir.path())[0];
    let mut once = shipper();
    let out = once
        .args(["--once", "--role", "node"])
        .envs(tls.iter().map(|(k, v)| (k, v)))
        .env("SLURM_CW_CLUSTER_NAME", "bare")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    assert_says_what_to_install("--once to http://", &out);
}
