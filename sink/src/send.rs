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

/// Items refused alone, with none accepted before them in the send, past which the rest is
/// kept for later rather than split further: the request as a whole is refused (a host clock
/// hours ahead, so every timestamp is), and splitting 1,000 items down to one would cost 1,999
/// requests each flush.
pub const REFUSED_ALONE_MAX: usize = 16;

/// Sends `chunks` (each within the service's limits) to `label`.
pub async fn send_all<T, R: Requests<T>>(sender: &mut R, label: &str, mut chunks: Vec<Vec<T>>) -> Outcome<T> {
    let mut outcome = Outcome::default();
    // A stack of chunks still to send; halves of a rejected chunk go back on it.
    chunks.reverse();
    let mut refused_alone = 0;
    while let Some(chunk) = chunks.pop() {
        if outcome.sent == 0 && refused_alone >= REFUSED_ALONE_MAX {
            tracing::warn!(
                service = R::SERVICE,
                refused = refused_alone,
                "every item tried alone was refused: the rest is kept for later, not split further"
            );
            outcome.persistent = true;
            keep_all(&mut outcome, chunk, chunks);
            break;
        }
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
                refused_alone += 1;
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
                keep_all(&mut outcome, chunk, chunks);
                break;
            }
        }
    }
    outcome
}

/// `chunk` and every chunk still to send, undelivered (kept, in order, for later).
fn keep_all<T>(outcome: &mut Outcome<T>, chunk: Vec<T>, mut chunks: Vec<Vec<T>>) {
    outcome.undelivered.extend(chunk);
    while let Some(rest) = chunks.pop() {
        outcome.undelivered.extend(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service that refuses every request as invalid, or only those holding item `bad`.
    struct Refusing {
        bad: Option<u32>,
    }

    impl Requests<u32> for Refusing {
        const SERVICE: &'static str = "test";

        fn size(_: &u32) -> usize {
            1
        }

        async fn request(
            &mut self,
            _: &str,
            chunk: &[u32],
            outcome: &mut Outcome<u32>,
        ) -> Result<Vec<usize>, Failure> {
            outcome.requests += 1;
            match self.bad {
                Some(b) if !chunk.contains(&b) => Ok(Vec::new()),
                _ => Err(Failure::Invalid("InvalidParameterValue".into())),
            }
        }
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_request_refused_whole_is_not_split_down_to_every_item() {
        let items: Vec<u32> = (0..1000).collect();
        let out = run(send_all(&mut Refusing { bad: None }, "x", vec![items]));
        // Down to the first 16 alone (10 levels of halves to reach one), then kept.
        assert_eq!(out.rejected.len(), REFUSED_ALONE_MAX);
        assert_eq!(out.undelivered.len(), 1000 - REFUSED_ALONE_MAX);
        assert!(out.persistent);
        assert!(out.requests < 64, "{} requests, where splitting all the way took 1,999", out.requests);
        // One bad item among good ones: split down to it alone, the rest sent.
        let items: Vec<u32> = (0..1000).collect();
        let out = run(send_all(&mut Refusing { bad: Some(500) }, "x", vec![items]));
        assert_eq!((out.sent, out.rejected.clone(), out.undelivered.len()), (999, vec![500], 0));
    }
}
