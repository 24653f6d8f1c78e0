//! How a failed AWS request is handled, for any SDK operation: retried after a backoff
//! (throttling, 5xx, timeouts, connection errors), split (the request itself is invalid), or
//! kept for later (credentials, permissions, a missing resource: retrying now will not help).

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response as HttpResponse;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The request itself is bad (an item the service refuses): split it.
    Invalid(String),
    /// Throttling, 5xx, timeouts, connection errors: retry after a backoff.
    Transient(String),
    /// Credentials, permissions, configuration: retrying now will not help; keep the data.
    Persistent(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Failure::Invalid(m) | Failure::Transient(m) | Failure::Persistent(m) => m,
        }
    }
}

/// Error codes that mean "slow down", across AWS services.
fn throttled(code: &str) -> bool {
    code.starts_with("Throttling")
        || matches!(code, "RequestLimitExceeded" | "TooManyRequestsException" | "ServiceUnavailableException")
}

/// Error codes that mean "this request's content is wrong".
fn invalid(code: &str) -> bool {
    code.starts_with("InvalidParameter")
        || code.starts_with("MissingParameter")
        || code.starts_with("MissingRequiredParameter")
}

/// Classifies the error of operation `op` (named in the message).
pub fn classify<E>(op: &str, err: &SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or("");
            let msg = format!("{op}: HTTP {status} {code}: {}", se.err().message().unwrap_or("no message"));
            if status == 429 || status >= 500 || throttled(code) {
                Failure::Transient(msg)
            } else if status == 413 || invalid(code) {
                Failure::Invalid(msg)
            } else {
                Failure::Persistent(msg)
            }
        }
        SdkError::TimeoutError(_) => Failure::Transient(format!("{op}: timed out")),
        SdkError::DispatchFailure(_) => {
            Failure::Transient(format!("{op}: cannot reach the service: {}", source_chain(err)))
        }
        SdkError::ResponseError(_) => {
            Failure::Transient(format!("{op}: bad response: {}", source_chain(err)))
        }
        other => Failure::Persistent(format!("{op}: {}", source_chain(other))),
    }
}

/// The error code of a service error, if it is one (`ResourceNotFoundException`, say).
pub fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    match err {
        SdkError::ServiceError(se) => se.err().code(),
        _ => None,
    }
}

/// An error and its causes on one line.
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_of_both_services_classify_alike() {
        for c in
            ["Throttling", "ThrottlingException", "TooManyRequestsException", "ServiceUnavailableException"]
        {
            assert!(throttled(c), "{c}");
        }
        for c in ["InvalidParameterValue", "InvalidParameterException", "MissingParameter"] {
            assert!(invalid(c), "{c}");
        }
        assert!(!throttled("AccessDenied") && !invalid("ResourceNotFoundException"));
    }
}
