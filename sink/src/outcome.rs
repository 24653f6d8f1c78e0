//! What one send to any destination achieved, the same for metrics and for log records, so that
//! delivery counts and keeps items without knowing where they went.

#[derive(Debug)]
pub struct Outcome<T> {
    pub sent: usize,
    /// The service refused these even alone: dropped for good.
    pub rejected: Vec<T>,
    /// Not delivered after every retry (network down, throttled, credentials): to keep and
    /// send again later.
    pub undelivered: Vec<T>,
    pub requests: u64,
    pub retries: u64,
    /// Estimated uncompressed bytes of the requests the service accepted.
    pub bytes: u64,
    pub last_error: Option<String>,
    /// The service refused the undelivered items for good (permissions, a missing resource):
    /// sending the same request again will not help, though newer data may go through.
    pub persistent: bool,
    /// The sink cannot work any more (standard output closed): the daemon stops.
    pub fatal: Option<String>,
}

impl<T> Default for Outcome<T> {
    fn default() -> Self {
        Outcome {
            sent: 0,
            rejected: Vec::new(),
            undelivered: Vec::new(),
            requests: 0,
            retries: 0,
            bytes: 0,
            last_error: None,
            persistent: false,
            fatal: None,
        }
    }
}

impl<T> Outcome<T> {
    /// The same outcome over other items (each sent item's source, say).
    pub fn map<U>(self, f: impl Fn(T) -> U) -> Outcome<U> {
        Outcome {
            sent: self.sent,
            rejected: self.rejected.into_iter().map(&f).collect(),
            undelivered: self.undelivered.into_iter().map(&f).collect(),
            requests: self.requests,
            retries: self.retries,
            bytes: self.bytes,
            last_error: self.last_error,
            persistent: self.persistent,
            fatal: self.fatal,
        }
    }
}
