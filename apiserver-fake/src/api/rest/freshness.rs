//! The `resourceVersion` a read asks for (`NotOlderThan`, the meaning of a non-zero version without a
//! match): the store must have reached it. Upstream's cacher waits for it (`waitUntilFreshAndBlock`,
//! 3 s) and then answers 504 `Timeout: Too large resource version: N, current: M`; a read is never
//! served from a state older than what the client has already seen.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::{Store, StoreError};

/// How long a read waits for the store to reach the version it asked for.
pub(crate) const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store's revision is at least `requested` and returns it, or fails with
/// [`StoreError::TooLargeResourceVersion`] after [`FRESHNESS_WAIT`].
pub(crate) async fn wait_until_fresh(store: &dyn Store, requested: u64) -> Result<u64, StoreError> {
    let deadline = Instant::now() + FRESHNESS_WAIT;
    loop {
        let current = store.current_revision().await?;
        if current >= requested {
            return Ok(current);
        }
        if Instant::now() >= deadline {
            return Err(StoreError::TooLargeResourceVersion { requested, current });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
