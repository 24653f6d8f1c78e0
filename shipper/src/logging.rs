//! The log filter: `log.level` (or RUST_LOG) as given, with the AWS SDK's own lines kept to
//! errors unless the filter asks for debug or names the SDK. The SDK warns at each retry of
//! what it looks for (instance metadata for the region, each credential provider): on a host
//! without instance metadata that was eight long WARN lines before `--check`'s table, and the
//! shipper says what failed itself, once, with the SDK's error in it.

/// Where the SDK's crates log (`aws_config::imds::region`, `aws_smithy_runtime::...`): a
/// directive's target matches as a prefix.
const SDK_TARGETS: &str = "aws";

/// The tracing filter for `level`.
pub fn filter(level: &str) -> String {
    let directives: Vec<&str> = level.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
    let names_sdk = directives.iter().any(|d| d.starts_with(SDK_TARGETS));
    let verbose = directives.iter().any(|d| matches!(d.to_ascii_lowercase().as_str(), "debug" | "trace"));
    if names_sdk || verbose || directives.is_empty() {
        level.to_owned()
    } else {
        format!("{level},{SDK_TARGETS}=error")
    }
}

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn the_sdks_warnings_show_only_when_asked_for() {
        assert_eq!(filter("warn"), "warn,aws=error");
        assert_eq!(
            filter("info,slurm_cw_shipper::pipeline=debug"),
            "info,slurm_cw_shipper::pipeline=debug,aws=error"
        );
        assert_eq!(filter("debug"), "debug");
        assert_eq!(filter("warn,aws_config=debug"), "warn,aws_config=debug");
        for f in ["warn", "info,slurm_cw_shipper=debug", "debug", "warn,aws_config=debug"] {
            assert!(tracing_subscriber::EnvFilter::try_new(filter(f)).is_ok(), "{f}");
        }
    }
}
