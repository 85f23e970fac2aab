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

/// [`eventually`] for synchronous tests and probes (a `#[test]` running kubectl, a file another process
/// writes): calls `probe` every `interval` on this thread until it returns `Some`, or fails with
/// [`Error::Timeout`] once `timeout` has passed; the probe runs once more after the deadline.
pub fn eventually_blocking<T>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                seconds: timeout.as_secs(),
            });
        }
        std::thread::sleep(interval); // poll interval
    }
}

/// How often [`until_steady`] probes.
pub const STEADY_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Calls `probe` every [`STEADY_POLL_INTERVAL`] until it has succeeded `in_a_row` times in a row, and
/// returns the failures (the `Err` values) seen before that: how a test waits for a cluster to settle
/// after a fault, and then judges what clients got meanwhile. Fails with [`Error::NotSteady`], naming
/// `what` and listing the failures, once `timeout` has passed without such a run.
pub async fn until_steady<E, F, Fut>(
    what: &str,
    in_a_row: usize,
    timeout: Duration,
    mut probe: F,
) -> Result<Vec<E>>
where
    E: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut failures = Vec::new();
    let mut successes = 0;
    while successes < in_a_row {
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotSteady {
                what: what.to_owned(),
                seconds: timeout.as_secs(),
                failures: format!("{failures:?}"),
            });
        }
        match probe().await {
            Ok(()) => successes += 1,
            Err(failure) => {
                successes = 0;
                failures.push(failure);
            }
        }
        tokio::time::sleep(STEADY_POLL_INTERVAL).await; // poll interval
    }
    Ok(failures)
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

    #[test]
    fn eventually_blocking_polls_on_this_thread() {
        let mut calls = 0;
        let value = eventually_blocking(
            "third call",
            Duration::from_secs(5),
            Duration::from_millis(1),
            || {
                calls += 1;
                (calls >= 3).then_some(calls)
            },
        )
        .unwrap();
        assert_eq!(value, 3);
        let err = eventually_blocking("never", Duration::ZERO, Duration::from_millis(1), || None::<()>)
            .unwrap_err();
        assert_eq!(err.to_string(), "timed out after 0s waiting for never");
    }

    #[tokio::test]
    async fn until_steady_returns_the_failures_before_a_run_of_successes() {
        let mut calls = 0;
        let failures = until_steady("a run of three", 3, Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { if n == 2 || n == 4 { Err(n) } else { Ok(()) } }
        })
        .await
        .unwrap();
        assert_eq!(failures, [2, 4]);
        assert_eq!(calls, 7);
        let err = until_steady("never", 1, Duration::from_millis(60), || async {
            Err::<(), _>("down")
        })
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("not steady within 0s: never; failures: [\"down\""),
            "{err}"
        );
    }
}
