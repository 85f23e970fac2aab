//! The proxy's view of its peers' addresses: the peer endpoint records of the store's internal
//! keyspace (docs/mvp-behaviour.md §2.4), as upstream's `getPeerAddress` reads them, with each peer's
//! discovery receipt ([`crate::controllers::peer_receipts`]) beside them. Upstream reads etcd on every
//! proxied request; here a snapshot refreshed every [`ENDPOINT_REFRESH`] keeps the hot path free of
//! I/O, and subscribers learn when the set of addresses changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use mvp_core::PeerEndpoints;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controllers::{peer_endpoint, peer_receipts};
use crate::store::Store;

/// How often the cached peer addresses are re-read from the internal keyspace. Upstream reads etcd on
/// every proxied request; a short-lived snapshot keeps the hot path free of I/O.
pub(crate) const ENDPOINT_REFRESH: Duration = Duration::from_millis(100);

/// Peer addresses from the store's internal keyspace, cached and refreshed in the background.
/// Subscribers learn when the set of addresses changes (a peer became reachable or went away).
#[derive(Debug)]
pub(crate) struct StorePeerEndpoints {
    addresses: watch::Sender<Arc<HashMap<String, String>>>,
    /// Each peer's discovery receipt (see [`crate::controllers::peer_receipts`]).
    receipts: ArcSwap<HashMap<String, peer_receipts::Receipt>>,
}

impl Default for StorePeerEndpoints {
    fn default() -> Self {
        Self {
            addresses: watch::Sender::new(Arc::default()),
            receipts: ArcSwap::default(),
        }
    }
}

impl StorePeerEndpoints {
    /// Re-reads the peer addresses and receipts from `store` now.
    pub(super) async fn refresh(&self, store: &dyn Store) {
        let Ok(records) = store.list_internal(peer_endpoint::PREFIX).await else {
            return;
        };
        let addresses: HashMap<String, String> = records
            .iter()
            .filter_map(|(key, record)| {
                let id = key.strip_prefix(peer_endpoint::PREFIX)?;
                Some((id.to_owned(), peer_endpoint::record_address(record)?))
            })
            .collect();
        self.addresses.send_if_modified(|current| {
            let changed = **current != addresses;
            if changed {
                *current = Arc::new(addresses);
            }
            changed
        });
        if let Ok(records) = store.list_internal(peer_receipts::PREFIX).await {
            let receipts = records
                .iter()
                .filter_map(|(key, record)| {
                    let id = key.strip_prefix(peer_receipts::PREFIX)?;
                    Some((id.to_owned(), peer_receipts::from_record(record)?))
                })
                .collect();
            self.receipts.store(Arc::new(receipts));
        }
    }

    /// Whether every reachable peer that publishes discovery receipts has asked this server's run
    /// (`own_id` holding its lease as `holder`) for its discovery.
    pub(super) fn peers_know(&self, own_id: &str, holder: &str) -> bool {
        let receipts = self.receipts.load();
        receipts.iter().all(|(peer, receipt)| {
            peer == own_id || !self.is_reachable(peer) || receipt.get(own_id).is_some_and(|h| h == holder)
        })
    }

    /// Refreshes the view every [`ENDPOINT_REFRESH`] until `cancel`.
    pub(super) async fn run(self: Arc<Self>, store: Arc<dyn Store>, cancel: CancellationToken) {
        loop {
            self.refresh(store.as_ref()).await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(ENDPOINT_REFRESH) => {}
            }
        }
    }

    /// Notified whenever the known addresses change.
    pub(super) fn subscribe(&self) -> watch::Receiver<Arc<HashMap<String, String>>> {
        self.addresses.subscribe()
    }

    /// Whether the view includes `own_id`'s own record: then it was read after that record was
    /// written, so it holds every peer record written before it. A view older than the own record
    /// would take peers that published theirs just before for unreachable.
    pub(super) fn sees(&self, own_id: &str) -> bool {
        self.addresses.borrow().contains_key(own_id)
    }
}

impl PeerEndpoints for StorePeerEndpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.addresses.borrow().get(server_id).cloned()
    }
}
