//! How both sinks send a batch: in as many requests as the service's limits need, in order; a
//! request refused as invalid is split in halves until only the bad item is left out, and the
//! first request that fails otherwise keeps it and everything after it for later (they would meet
//! the same wall).

use crate::failure::Failure;
use crate::outcome::Outcome;

/// One destination's requests.
#[allow(async_fn_in_trait)]
pub trait Requests<T> {
    /// Sends one request, retrying what is worth retrying (counted in `outcome`). Ok holds the
    /// indices of items the service accepted the request with but refused one by one.
    async fn request(
        &mut self,
        label: &str,
        chunk: &[T],
        outcome: &mut Outcome<T>,
    ) -> Result<Vec<usize>, Failure>;
    /// What one item adds to a request, for the bytes sent.
    fn size(item: &T) -> usize;
    /// The service, in log lines.
    const SERVICE: &'static str;
}

/// Sends `chunks` (each within the service's limits) to `label`.
pub async fn send_all<T, R: Requests<T>>(sender: &mut R, label: &str, mut chunks: Vec<Vec<T>>) -> Outcome<T> {
    let mut outcome = Outcome::default();
    // A stack of chunks still to send; halves of a rejected chunk go back on it.
    chunks.reverse();
    while let Some(chunk) = chunks.pop() {
        match sender.request(label, &chunk, &mut outcome).await {
            Ok(refused) => {
                outcome.bytes += chunk.iter().map(R::size).sum::<usize>() as u64;
                outcome.sent += chunk.len() - refused.len();
                let mut refused = refused.into_iter().peekable();
                for (i, item) in chunk.into_iter().enumerate() {
                    if refused.peek() == Some(&i) {
                        refused.next();
                        outcome.rejected.push(item);
                    }
                }
            }
            Err(Failure::Invalid(msg)) if chunk.len() == 1 => {
                tracing::warn!(service = R::SERVICE, error = %msg, "the service rejected an item that passed the checks; dropped");
                outcome.last_error = Some(msg);
                outcome.rejected.extend(chunk);
            }
            Err(Failure::Invalid(msg)) => {
                tracing::debug!(items = chunk.len(), error = %msg, "request rejected as invalid; splitting it");
                let mut first = chunk;
                let second = first.split_off(first.len() / 2);
                chunks.push(second);
                chunks.push(first);
            }
            Err(failure @ (Failure::Transient(_) | Failure::Persistent(_))) => {
                outcome.persistent = matches!(failure, Failure::Persistent(_));
                outcome.last_error = Some(failure.message().to_owned());
                outcome.undelivered.extend(chunk);
                while let Some(rest) = chunks.pop() {
                    outcome.undelivered.extend(rest);
                }
            }
        }
    }
    outcome
}
