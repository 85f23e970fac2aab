//! Peer discovery receipts: which peers (and which run of each, by identity lease holder) a server's
//! proxy has asked for their discovery. Not upstream: kube-apiserver has no way to tell that its
//! peers know it, so for a moment after a server becomes ready at a new version, its peers still
//! answer 404 for the resources only it serves, the very false 404 the proxy exists to prevent.
//! Each server running the proxy publishes its receipt in the store's internal keyspace (beside the
//! peer endpoint records, unreachable through the API), and a starting server's `/readyz` waits until
//! every reachable peer that publishes receipts lists its current run. In Discovery mode a receipt
//! names the peers whose discovery the proxy has fetched; in StorageVersion mode, which fetches nothing,
//! the peers whose address it holds (`server::mvp::feeds`' `run_address_receipts`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Key prefix of the receipts in the internal keyspace; the server ID follows.
pub(crate) const PREFIX: &str = mvp_core::feeders::RECEIPT_PREFIX;

/// Peer ID → `holderIdentity` of the identity lease it had when it was asked.
pub(crate) type Receipt = mvp_core::feeders::Receipt;

/// The receipt in a stored record (`None` when it is not one).
pub(crate) fn from_record(record: &Value) -> Option<Receipt> {
    mvp_core::feeders::receipt_from_record(record)
}

/// Writes this server's receipt whenever it changes, and again every `refresh` so that it lives as
/// long as the server (`ttl`, like the peer endpoint record); removed when `cancel` fires. mvp-core's
/// [`mvp_core::feeders::run_receipt_publisher`] over this server's store.
pub(crate) async fn run_publisher(
    store: Arc<dyn Store>,
    server_id: String,
    receipts: watch::Receiver<Option<Receipt>>,
    ttl: Duration,
    refresh: Duration,
    cancel: CancellationToken,
) {
    let cluster = Arc::new(crate::controllers::cluster_api::StoreCluster(store));
    mvp_core::feeders::run_receipt_publisher(
        cluster,
        server_id,
        receipts,
        ttl,
        refresh,
        cancel.cancelled_owned(),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_receipt_round_trips_through_its_record() {
        let receipt = Receipt::from([("apiserver-a".to_owned(), "apiserver-a_1234".to_owned())]);
        assert_eq!(
            from_record(&mvp_core::feeders::receipt_record(&receipt)),
            Some(receipt)
        );
        assert_eq!(from_record(&json!({"subsets": []})), None);
    }
}
