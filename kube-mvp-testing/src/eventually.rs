//! Polling with deadlines instead of sleeps: tests wait for a condition a client can see, never for a
//! fixed time.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// How often [`eventually`] polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// Calls `probe` every [`POLL_INTERVAL`] until it returns `Some`, or fails with [`Error::Timeout`]
/// naming `what` once `timeout` has passed. `probe` is always called at least once, and once more after
/// the deadline has passed, so a slow probe is never cut short.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await; // poll interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_success_and_times_out_otherwise() {
        let mut calls = 0;
        let value = eventually("third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { (n >= 3).then_some(n) }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
        let mut tries = 0;
        let err = eventually("never", Duration::from_millis(60), || {
            tries += 1;
            async { None::<()> }
        })
        .await
        .unwrap_err();
        assert_eq!(err.to_string(), "timed out after 0s waiting for never");
        assert!(
            tries >= 2,
            "the probe ran before the deadline and after it: {tries}"
        );
    }
}
