//! `Snapshot<T>`: shared state read on the hot path through a cheap `Arc` clone and replaced
//! wholesale by background updates (the Rust shape of upstream's `atomic.Value`).

use std::sync::{Arc, PoisonError, RwLock};

/// An atomically replaceable `Arc<T>`.
#[derive(Debug, Default)]
pub(crate) struct Snapshot<T> {
    current: RwLock<Arc<T>>,
}

impl<T> Snapshot<T> {
    /// The current value (one `Arc` clone under a read lock held for nanoseconds).
    pub(crate) fn load(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the value; readers holding the old `Arc` keep it.
    pub(crate) fn store(&self, value: T) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(value);
    }

    /// Replaces the value with `f(current)`, serialised with other writers.
    pub(crate) fn update(&self, f: impl FnOnce(&T) -> T) {
        let mut guard = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let next = f(&guard);
        *guard = Arc::new(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_keep_old_value_after_store() {
        let s = Snapshot::default();
        s.store(1);
        let old = s.load();
        s.store(2);
        s.update(|v| v + 1);
        assert_eq!((*old, *s.load()), (1, 3));
    }
}
