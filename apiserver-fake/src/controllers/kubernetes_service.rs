//! The `default/kubernetes` Service and its endpoints, as kube-apiserver's bootstrap controller
//! (`pkg/controlplane/controller/kubernetesservice`) and lease endpoint reconciler publish them: clients
//! and in-cluster tooling find the API server through it.
//!
//! * Service `kubernetes` in `default`: labels `component: apiserver`, `provider: kubernetes`; type
//!   `ClusterIP` with the first address of `--service-cluster-ip-range` (so `10.96.0.1` by default, which
//!   the allocator then counts as taken); one port `https` 443/TCP whose `targetPort` is the secure port.
//! * Endpoints and EndpointSlice `kubernetes` in `default`: the public address (and secure port) of every
//!   server alive, as upstream's lease endpoint reconciler (`--endpoint-reconciler-type=lease`, the
//!   default; `pkg/controlplane/reconcilers/lease.go`) keeps them: each server refreshes a *master lease*
//!   (`/masterleases/<ip>` in the internal keyspace, an `Endpoints` holding its address, 15 s TTL) every
//!   10 s and rewrites the objects to the addresses of the leases alive when they differ; a server
//!   stopping gracefully removes its lease and its address; a crashed server's address goes once its
//!   lease lapses. Servers that share a port share one subset, as upstream's reconciler writes them.
//!
//! Deviation: a fake's lease also names its port (upstream's names only the IP and assumes every server
//! listens on the same port, which test clusters on ephemeral ports do not); a lease without one (a real
//! kube-apiserver's) is read with the reconciling server's port, as upstream does.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::rest::defaults::service_ip::ServiceCidr;
use crate::store::{ObjectKey, StorageResource, Store, StoreError, resource_version};

/// Namespace and name of the Service, its Endpoints and its EndpointSlice.
pub(crate) const NAMESPACE: &str = "default";
/// See [`NAMESPACE`].
pub(crate) const NAME: &str = "kubernetes";
/// Key prefix of the master leases in the internal keyspace (upstream's `/masterleases/`).
pub(crate) const LEASE_PREFIX: &str = "/masterleases/";
/// Upstream's master lease TTL (`MasterEndpointReconcileTTL`).
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(15);
/// Upstream's reconcile interval (`EndpointInterval`).
pub(crate) const RECONCILE_INTERVAL: Duration = Duration::from_secs(10);

/// The Service as the bootstrap controller creates it.
pub(crate) fn service(cidr: &ServiceCidr, secure_port: u16) -> Value {
    let ip = cidr.first_address().to_string();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "clusterIP": ip,
            "clusterIPs": [ip],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": [cidr.family()],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}],
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    })
}

/// `endpoints` with `address` added (one subset per port, addresses sorted), or `None` when it is there.
fn with_endpoint(mut endpoints: Value, address: SocketAddr) -> Option<Value> {
    let ip = address.ip().to_string();
    let port = address.port();
    let subsets = endpoints
        .as_object_mut()?
        .entry("subsets")
        .or_insert_with(|| json!([]));
    let Value::Array(subsets) = subsets else {
        return None;
    };
    let same_port =
        |subset: &Value| subset.pointer("/ports/0/port").and_then(Value::as_u64) == Some(port.into());
    let subset = match subsets.iter().position(same_port) {
        Some(index) => &mut subsets[index],
        None => {
            subsets.push(
                json!({"addresses": [], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
            );
            subsets.last_mut()?
        }
    };
    let addresses = subset.get_mut("addresses")?.as_array_mut()?;
    if addresses.iter().any(|a| a["ip"] == ip.as_str()) {
        return None;
    }
    addresses.push(json!({"ip": ip}));
    addresses.sort_by(|a, b| a["ip"].as_str().cmp(&b["ip"].as_str()));
    Some(endpoints)
}

/// The EndpointSlice mirroring `endpoints` (what the endpointslice reconciler writes next to them).
fn slice_of(endpoints: &Value, family: &str) -> Value {
    let subsets = endpoints["subsets"].as_array().cloned().unwrap_or_default();
    let endpoints: Vec<Value> = subsets
        .iter()
        .flat_map(|subset| subset["addresses"].as_array().cloned().unwrap_or_default())
        .map(|address| json!({"addresses": [address["ip"]], "conditions": {"ready": true}}))
        .collect();
    let ports = subsets
        .first()
        .map(|subset| subset["ports"].clone())
        .unwrap_or_else(|| json!([]));
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": family,
        "endpoints": endpoints,
        "ports": ports,
    })
}

/// The master lease of the server at `address`: an `Endpoints` named after its IP (see the module docs).
fn master_lease(address: SocketAddr) -> Value {
    let ip = address.ip().to_string();
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": ip},
        "subsets": [{"addresses": [{"ip": ip}],
                     "ports": [{"name": "https", "port": address.port(), "protocol": "TCP"}]}],
    })
}

/// The address a master lease names; `default_port` when it names none (a real kube-apiserver's).
fn lease_address(lease: &Value, default_port: u16) -> Option<SocketAddr> {
    let subset = lease.get("subsets")?.get(0)?;
    let ip: std::net::IpAddr = subset.pointer("/addresses/0/ip")?.as_str()?.parse().ok()?;
    let port = subset
        .pointer("/ports/0/port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(default_port);
    Some(SocketAddr::new(ip, port))
}

/// The subsets of the Endpoints listing exactly `addresses`.
fn subsets_of(addresses: &[SocketAddr]) -> Value {
    let mut endpoints = json!({});
    for address in addresses {
        if let Some(next) = with_endpoint(endpoints.clone(), *address) {
            endpoints = next;
        }
    }
    endpoints.get("subsets").cloned().unwrap_or_else(|| json!([]))
}

/// Creates the Service when missing and adds `address` (this server's public address and secure port)
/// to the Endpoints and EndpointSlice, as the server starts.
pub(crate) async fn ensure(
    store: &dyn Store,
    cidr: &ServiceCidr,
    address: SocketAddr,
) -> Result<(), StoreError> {
    let key = ObjectKey::namespaced(NAMESPACE, NAME);
    let services = StorageResource::new("", "services");
    match store.create(&services, &key, service(cidr, address.port())).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => return Err(e),
    }
    reconcile(store, cidr, address, true).await
}

/// One pass of the lease endpoint reconciler for the server at `address`: its master lease refreshed
/// (`alive`) or removed, then the Endpoints and EndpointSlice rewritten to the addresses of the leases
/// alive when they list others, retrying conflicts with other servers doing the same.
pub(crate) async fn reconcile(
    store: &dyn Store,
    cidr: &ServiceCidr,
    address: SocketAddr,
    alive: bool,
) -> Result<(), StoreError> {
    let lease_key = format!("{LEASE_PREFIX}{}", address.ip());
    if alive {
        store
            .put_internal(&lease_key, master_lease(address), LEASE_TTL)
            .await?;
    } else {
        store.delete_internal(&lease_key).await?;
    }
    let key = ObjectKey::namespaced(NAMESPACE, NAME);
    let endpoints_resource = StorageResource::new("", "endpoints");
    let slices = StorageResource::new("discovery.k8s.io", "endpointslices");
    for attempt in 0.. {
        // The objects are read before the leases and written only if unchanged since (their
        // resourceVersion as precondition), so a server whose view of the leases is older than
        // another's write conflicts and starts over rather than dropping that server's address.
        let current = match store.get(&endpoints_resource, &key).await {
            Ok(current) => Some(current),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let slice_current = match store.get(&slices, &key).await {
            Ok(slice) => Some(slice),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let subsets = subsets_of(&alive_addresses(store, address, alive).await?);
        let mut next = current.clone().unwrap_or_else(|| {
            json!({"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": NAME, "namespace": NAMESPACE,
                                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}})
        });
        next["subsets"] = subsets.clone();
        let slice = slice_of(&next, cidr.family());
        let endpoints_current = current
            .as_ref()
            .map(|c| c.get("subsets").cloned().unwrap_or_else(|| json!([])));
        let slice_matches = slice_current.as_ref().is_some_and(|s| {
            s.get("endpoints") == slice.get("endpoints") && s.get("ports") == slice.get("ports")
        });
        let endpoints_written = if endpoints_current.as_ref() == Some(&subsets) {
            Ok(())
        } else {
            match &current {
                Some(current) => {
                    let revision = resource_version(current);
                    store.update(&endpoints_resource, &key, next, revision).await
                }
                None => store.create(&endpoints_resource, &key, next).await,
            }
            .map(drop)
        };
        let written = match endpoints_written {
            Ok(()) if slice_matches => return Ok(()),
            Ok(()) => match slice_current {
                Some(mut existing) => {
                    let revision = resource_version(&existing);
                    existing["endpoints"] = slice["endpoints"].clone();
                    existing["ports"] = slice["ports"].clone();
                    store.update(&slices, &key, existing, revision).await
                }
                None => store.create(&slices, &key, slice).await,
            }
            .map(drop),
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) if attempt < 20 => {}
            Err(e) => return Err(e),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// The addresses of the master leases alive, this server's included when `alive` and left out when not.
async fn alive_addresses(
    store: &dyn Store,
    address: SocketAddr,
    alive: bool,
) -> Result<Vec<SocketAddr>, StoreError> {
    let mut addresses: Vec<SocketAddr> = store
        .list_internal(LEASE_PREFIX)
        .await?
        .iter()
        .filter_map(|(_, lease)| lease_address(lease, address.port()))
        .filter(|a| alive || a.ip() != address.ip())
        .collect();
    if alive && !addresses.contains(&address) {
        addresses.push(address);
    }
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}

/// Runs [`reconcile`] every `interval` (upstream: [`RECONCILE_INTERVAL`]) until `cancel`.
pub(crate) async fn run_reconciler(
    store: std::sync::Arc<dyn Store>,
    cidr: ServiceCidr,
    address: SocketAddr,
    interval: Duration,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        if let Err(err) = reconcile(store.as_ref(), &cidr, address, true).await {
            tracing::warn!(error = %err, "could not reconcile the default/kubernetes endpoints");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_takes_the_first_address_of_the_range_and_targets_the_secure_port() {
        let cidr: ServiceCidr = "10.96.0.0/12".parse().unwrap();
        let service = service(&cidr, 6443);
        assert_eq!(service["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(
            service["spec"]["ports"],
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}])
        );
        let cidr: ServiceCidr = "fd00::/108".parse().unwrap();
        assert_eq!(service_of(&cidr)["spec"]["clusterIP"], "fd00::1");
        assert_eq!(service_of(&cidr)["spec"]["ipFamilies"], json!(["IPv6"]));
    }

    fn service_of(cidr: &ServiceCidr) -> Value {
        service(cidr, 443)
    }

    #[test]
    fn master_leases_name_their_address_and_a_real_servers_takes_the_readers_port() {
        let lease = master_lease("127.0.0.3:6443".parse().unwrap());
        assert_eq!(lease["metadata"]["name"], "127.0.0.3");
        assert_eq!(
            lease_address(&lease, 443),
            Some("127.0.0.3:6443".parse().unwrap())
        );
        // kube-apiserver's own lease: the IP only.
        let upstream =
            json!({"metadata": {"name": "10.0.0.5"}, "subsets": [{"addresses": [{"ip": "10.0.0.5"}]}]});
        assert_eq!(
            lease_address(&upstream, 6443),
            Some("10.0.0.5:6443".parse().unwrap())
        );
        assert_eq!(lease_address(&json!({}), 6443), None);
        let addresses: Vec<SocketAddr> = vec![
            "127.0.0.1:6443".parse().unwrap(),
            "127.0.0.2:6443".parse().unwrap(),
        ];
        assert_eq!(
            subsets_of(&addresses),
            json!([{"addresses": [{"ip": "127.0.0.1"}, {"ip": "127.0.0.2"}],
                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
        );
        assert_eq!(subsets_of(&[]), json!([]));
    }

    #[test]
    fn endpoints_gather_every_server_once_per_port() {
        let empty = json!({"metadata": {"name": NAME}});
        let one = with_endpoint(empty, "127.0.0.3:6443".parse().unwrap()).unwrap();
        let two = with_endpoint(one, "127.0.0.2:6443".parse().unwrap()).unwrap();
        assert!(with_endpoint(two.clone(), "127.0.0.2:6443".parse().unwrap()).is_none());
        assert_eq!(
            two["subsets"],
            json!([{"addresses": [{"ip": "127.0.0.2"}, {"ip": "127.0.0.3"}],
                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
        );
        let slice = slice_of(&two, "IPv4");
        assert_eq!(slice["addressType"], "IPv4");
        assert_eq!(
            slice["endpoints"][1],
            json!({"addresses": ["127.0.0.3"], "conditions": {"ready": true}})
        );
        let other_port = with_endpoint(two, "127.0.0.4:7443".parse().unwrap()).unwrap();
        assert_eq!(other_port["subsets"][1]["ports"][0]["port"], 7443);
    }
}
