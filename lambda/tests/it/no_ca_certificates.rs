//! The Lambda on a runtime without CA certificates: the AWS SDK would panic building its
//! clients (debug builds); the function says what is missing and exits 1 instead. The TLS
//! stack (rustls-native-certs) reads SSL_CERT_FILE and SSL_CERT_DIR first.

use std::process::Command;

#[test]
fn bootstrap_without_ca_certificates_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .env("SSL_CERT_DIR", dir.path())
        .env("SSL_CERT_FILE", dir.path().join("none.pem"))
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("SLURM_CW_LAMBDA_CONFIG", r#"{"cluster_name": "x"}"#)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("no CA certificates") && text.contains("ca-certificates"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}
