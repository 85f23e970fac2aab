//! A work queue with client-go's semantics (`k8s.io/client-go/util/workqueue`): a key queued several
//! times is handed out once; a key re-added while a worker holds it is handed out again only after the
//! worker is [`done`](WorkQueue::done) with it (so two workers never hold the same key); failures back
//! off per key, exponentially ([`WorkQueue::add_rate_limited`]), until [`forget`](WorkQueue::forget).
//!
//! The controllers' queues use upstream's default rate limiter, `ItemExponentialFailureRateLimiter`
//! from 5 ms to 1000 s ([`Backoff::default`]); the namespace controller's caps at 60 s, as upstream's
//! `nsControllerRateLimiter` does. The `workqueue_*` metrics carry upstream's names and the queue's
//! name as the `name` label.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Per-key exponential backoff of failures: `base · 2^failures`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// client-go's `DefaultTypedItemBasedRateLimiter`: 5 ms to 1000 s.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
        }
    }
}

impl Backoff {
    /// The delay after `failures` earlier failures of a key.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.checked_pow(failures.min(31)).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// The `workqueue_*` metrics of client-go's Prometheus provider (the subset the fake keeps).
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    adds: IntCounterVec,
    depth: IntGaugeVec,
    retries: IntCounterVec,
}

impl QueueMetrics {
    /// Creates the metrics and registers them in `registry` (once per registry: every queue shares
    /// them through the [`crate::ControllerContext`], told apart by the `name` label).
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            adds: shared(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "workqueue_adds_total",
                        "Total number of adds handled by workqueue",
                    ),
                    &["name"],
                )?,
            )?,
            depth: shared(
                registry,
                IntGaugeVec::new(
                    Opts::new("workqueue_depth", "Current depth of workqueue"),
                    &["name"],
                )?,
            )?,
            retries: shared(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "workqueue_retries_total",
                        "Total number of retries handled by workqueue",
                    ),
                    &["name"],
                )?,
            )?,
        })
    }
}

fn shared<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> Result<M, prometheus::Error> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

#[derive(Debug)]
struct State<K> {
    queue: VecDeque<K>,
    /// Keys waiting in `queue` or to be re-queued when their worker is done.
    dirty: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// A deduplicating, rate-limited work queue of keys (see the module documentation). Cloning shares it.
#[derive(Debug)]
pub struct WorkQueue<K> {
    name: String,
    backoff: Backoff,
    state: Arc<Mutex<State<K>>>,
    ready: Arc<Notify>,
    metrics: Option<QueueMetrics>,
    cancel: CancellationToken,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            backoff: self.backoff,
            state: self.state.clone(),
            ready: self.ready.clone(),
            metrics: self.metrics.clone(),
            cancel: self.cancel.clone(),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// A queue named `name` (the `name` label of its metrics) backing off failures by `backoff`.
    pub fn new(name: &str, backoff: Backoff, metrics: Option<QueueMetrics>) -> Self {
        Self {
            name: name.to_owned(),
            backoff,
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shut_down: false,
            })),
            ready: Arc::new(Notify::new()),
            metrics,
            cancel: CancellationToken::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A worker that panicked while holding the lock left consistent sets behind (every update
        // is a single insert or remove), so keep going.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `key` now (a no-op when it is already waiting).
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.shut_down || !state.dirty.insert(key.clone()) {
            return;
        }
        if let Some(metrics) = &self.metrics {
            metrics.adds.with_label_values(&[&self.name]).inc();
        }
        if !state.processing.contains(&key) {
            state.queue.push_back(key);
            if let Some(metrics) = &self.metrics {
                metrics
                    .depth
                    .with_label_values(&[&self.name])
                    .set(state.queue.len() as i64);
            }
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => queue.add(key),
                () = queue.cancel.cancelled() => {}
            }
        });
    }

    /// Queues `key` after its backoff, which doubles with each call until [`WorkQueue::forget`].
    pub fn add_rate_limited(&self, key: K) {
        let delay = {
            let mut state = self.lock();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            let delay = self.backoff.delay(*failures);
            *failures = failures.saturating_add(1);
            delay
        };
        if let Some(metrics) = &self.metrics {
            metrics.retries.with_label_values(&[&self.name]).inc();
        }
        self.add_after(key, delay);
    }

    /// Clears the failure count of `key` (its next failure backs off from the start).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times `key` failed since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// The next key to work on, which the caller holds until [`WorkQueue::done`]; `None` once the
    /// queue is shut down.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.lock();
                if state.shut_down {
                    return None;
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    if let Some(metrics) = &self.metrics {
                        metrics
                            .depth
                            .with_label_values(&[&self.name])
                            .set(state.queue.len() as i64);
                    }
                    if !state.queue.is_empty() {
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Releases `key`; it is queued again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        if state.dirty.contains(key) && !state.shut_down {
            state.queue.push_back(key.clone());
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Stops handing out keys: every waiting and later [`WorkQueue::get`] returns `None`, and delayed
    /// adds are dropped.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.cancel.cancel();
        self.ready.notify_waiters();
    }

    /// How many keys wait (not counting those workers hold).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_is_handed_out_once_and_again_after_done_when_re_added() {
        let queue = WorkQueue::new("test", Backoff::default(), None);
        queue.add("a");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.get().await, Some("a"));
        queue.add("a");
        assert_eq!(queue.get().await, Some("b"));
        assert!(queue.is_empty(), "a is held: not handed out twice");
        queue.done(&"a");
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        queue.shut_down();
        assert_eq!(queue.get().await, None);
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let backoff = Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(60),
        };
        assert_eq!(backoff.delay(0), Duration::from_millis(5));
        assert_eq!(backoff.delay(3), Duration::from_millis(40));
        assert_eq!(backoff.delay(40), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_wait_their_backoff() {
        let queue = WorkQueue::new("test", Backoff::default(), None);
        queue.add_rate_limited("a");
        queue.add_rate_limited("a");
        assert_eq!(queue.failures(&"a"), 2);
        let started = tokio::time::Instant::now();
        assert_eq!(queue.get().await, Some("a"));
        assert!(started.elapsed() >= Duration::from_millis(5));
        queue.forget(&"a");
        assert_eq!(queue.failures(&"a"), 0);
    }
}
