//! The `default/kubernetes` Service and its endpoints, as kube-apiserver's bootstrap controller
//! (`pkg/controlplane/controller/kubernetesservice`) and lease endpoint reconciler publish them: clients
//! and in-cluster tooling find the API server through it.
//!
//! * Service `kubernetes` in `default`: labels `component: apiserver`, `provider: kubernetes`; type
//!   `ClusterIP` with the first address of `--service-cluster-ip-range` (so `10.96.0.1` by default, which
//!   the allocator then counts as taken); one port `https` 443/TCP whose `targetPort` is the secure port.
//! * Endpoints and EndpointSlice `kubernetes` in `default`: every server's public address (with its
//!   secure port), added by each server as it starts. Servers that share a port share one subset, as
//!   upstream's reconciler writes it.
//!
//! Deviation: upstream's reconciler removes an address when its server's lease lapses; here an address
//! stays until the objects are deleted (a server that starts again re-adds its own).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::rest::defaults::service_ip::ServiceCidr;
use crate::store::{ObjectKey, StorageResource, Store, StoreError};

/// Namespace and name of the Service, its Endpoints and its EndpointSlice.
pub const NAMESPACE: &str = "default";
/// See [`NAMESPACE`].
pub const NAME: &str = "kubernetes";

/// The Service as the bootstrap controller creates it.
pub fn service(cidr: &ServiceCidr, secure_port: u16) -> Value {
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

/// Creates the Service when missing and adds `address` (this server's public address and secure port)
/// to the Endpoints and EndpointSlice, retrying conflicts with other servers doing the same.
pub async fn ensure(store: &dyn Store, cidr: &ServiceCidr, address: SocketAddr) -> Result<(), StoreError> {
    let key = ObjectKey::namespaced(NAMESPACE, NAME);
    let services = StorageResource::new("", "services");
    match store.create(&services, &key, service(cidr, address.port())).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let endpoints_resource = StorageResource::new("", "endpoints");
    let slices = StorageResource::new("discovery.k8s.io", "endpointslices");
    for attempt in 0.. {
        let current = match store.get(&endpoints_resource, &key).await {
            Ok(current) => Some(current),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let base = current.clone().unwrap_or_else(|| {
            json!({"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": NAME, "namespace": NAMESPACE,
                                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}})
        });
        let Some(next) = with_endpoint(base, address) else {
            break;
        };
        let written = match current {
            Some(_) => store.update(&endpoints_resource, &key, next.clone(), None).await,
            None => store.create(&endpoints_resource, &key, next.clone()).await,
        };
        match written {
            Ok(_) => {
                let slice = slice_of(&next, cidr.family());
                match store.create(&slices, &key, slice.clone()).await {
                    Err(StoreError::AlreadyExists { .. }) => {
                        store.update(&slices, &key, slice, None).await?;
                    }
                    other => {
                        other?;
                    }
                }
                break;
            }
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) if attempt < 20 => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
