//! Cluster IP and node port allocation for Services: what `pkg/registry/core/service/storage`'s
//! `Allocators` (`initIPFamilyFields`, `allocIPs`, `allocateNodePorts`) and `patchAllocatedValues` do.
//!
//! **How uniqueness is kept.** Upstream records every allocation (a bitmap in etcd, or `IPAddress`
//! objects with `MultiCIDRServiceAllocator`). The fake derives it instead from the Services in the
//! store: an IP or node port is taken when a stored Service carries it. That needs no second kind of
//! record to keep in step (deleting a Service frees its IP with no release step, nothing leaks when a
//! create fails after allocating, restarts over the same `--dir` or etcd see the same state), at the
//! cost of listing the Services on every Service create. Scanning and storing must not interleave
//! with another allocation, so both happen under [`lock`], a process-wide lock: correct for every
//! server of this process (they share the lock), not across processes writing one etcd at the same
//! instant (documented limitation).
//!
//! Where upstream picks a random free address from the upper part of the range (the lower part,
//! `calculateRangeOffset`, is kept for static requests), the fake takes the lowest free one there, so
//! tests can predict it: the first Service of the default range `10.96.0.0/12` gets `10.96.1.1`.
//! Only single-stack ranges are served (one CIDR, IPv4 or IPv6).

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::sync::{Mutex, MutexGuard};

use super::{default_missing, str_at};
use crate::api::status::{GroupKind, Status, StatusCause};
use crate::store::{ObjectKey, StorageResource, Store};

/// kube-apiserver's default `--service-node-port-range`.
pub(crate) const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

/// An invalid `--service-cluster-ip-range`.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ServiceCidrError {
    /// Not `address/prefix`, or the prefix is too long for the family.
    #[error("invalid CIDR address: {0}")]
    Invalid(String),
    /// More than one range (dual-stack), which the fake does not serve.
    #[error("--service-cluster-ip-range {0:?}: the fake serves single-stack service ranges only")]
    DualStack(String),
    /// Too small to hold a Service IP.
    #[error(
        "--service-cluster-ip-range {0}: the range must hold at least one address besides the network and broadcast addresses"
    )]
    TooSmall(String),
}

/// `--service-cluster-ip-range`: the range cluster IPs are allocated from (default `10.96.0.0/12`, as
/// kubeadm configures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceCidr {
    network: IpAddr,
    prefix: u8,
}

impl Default for ServiceCidr {
    fn default() -> Self {
        Self {
            network: IpAddr::from([10, 96, 0, 0]),
            prefix: 12,
        }
    }
}

impl fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for ServiceCidr {
    type Err = ServiceCidrError;

    /// Parses `a.b.c.d/n` or an IPv6 CIDR; host bits are cleared (as Go's `net.ParseCIDR` reports the
    /// network).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.contains(',') {
            return Err(ServiceCidrError::DualStack(s.to_owned()));
        }
        let invalid = || ServiceCidrError::Invalid(s.to_owned());
        let (address, prefix) = s.split_once('/').ok_or_else(invalid)?;
        let address: IpAddr = address.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        if u32::from(prefix) > bits(address) {
            return Err(invalid());
        }
        let cidr = Self {
            network: from_u128(address, to_u128(address) & mask(address, prefix)),
            prefix,
        };
        if cidr.allocatable() == 0 {
            return Err(ServiceCidrError::TooSmall(s.to_owned()));
        }
        Ok(cidr)
    }
}

fn bits(ip: IpAddr) -> u32 {
    if ip.is_ipv4() { 32 } else { 128 }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(family_of: IpAddr, value: u128) -> IpAddr {
    match family_of {
        // Only called with values inside an IPv4 range.
        IpAddr::V4(_) => IpAddr::from(u32::try_from(value).unwrap_or(u32::MAX).to_be_bytes()),
        IpAddr::V6(_) => IpAddr::from(value.to_be_bytes()),
    }
}

fn mask(ip: IpAddr, prefix: u8) -> u128 {
    let host_bits = bits(ip) - u32::from(prefix);
    let all = if ip.is_ipv4() {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    all.checked_shl(host_bits).map_or(0, |m| m & all)
}

impl ServiceCidr {
    /// `IPv4` or `IPv6`: the family `spec.ipFamilies` names.
    pub fn family(&self) -> &'static str {
        if self.network.is_ipv4() { "IPv4" } else { "IPv6" }
    }

    /// How many addresses the allocator hands out: the range without its network address (and, for
    /// IPv4, its broadcast address); upstream's bitmap is capped at 2^16 for large IPv6 ranges, here
    /// at 2^64.
    fn allocatable(&self) -> u128 {
        let host_bits = (bits(self.network) - u32::from(self.prefix)).min(64);
        let size = 1u128 << host_bits;
        let reserved = if self.network.is_ipv4() { 2 } else { 1 };
        size.saturating_sub(reserved)
    }

    /// The address of allocator index `index` (index 0 is the first after the network address).
    fn address(&self, index: u128) -> IpAddr {
        from_u128(self.network, to_u128(self.network) + 1 + index)
    }

    /// The allocator index of `ip`, when the allocator may hand it out.
    fn index_of(&self, ip: IpAddr) -> Option<u128> {
        if ip.is_ipv4() != self.network.is_ipv4() {
            return None;
        }
        let offset = to_u128(ip).checked_sub(to_u128(self.network) + 1)?;
        (offset < self.allocatable()).then_some(offset)
    }

    /// The range's first address (network + 1): the `default/kubernetes` Service's cluster IP, as
    /// kube-apiserver's `ServiceIPRange` computes the API server service IP.
    pub fn first_address(&self) -> IpAddr {
        self.address(0)
    }

    /// `calculateRangeOffset`: the size of the lower band dynamic allocation avoids (16..=256).
    fn static_band(&self) -> u128 {
        let size = self.allocatable();
        if size < 16 { 0 } else { (size / 16).clamp(16, 256) }
    }
}

static ALLOCATION: Mutex<()> = Mutex::const_new(());

/// Serializes Service allocation with the store write that records it (see the module docs). Hold
/// the guard from [`allocate`] until the Service is stored.
pub(crate) async fn lock() -> MutexGuard<'static, ()> {
    ALLOCATION.lock().await
}

fn services() -> StorageResource {
    StorageResource::new("", "services")
}

/// What stored Services hold.
#[derive(Debug, Default)]
struct Taken {
    ips: HashSet<IpAddr>,
    node_ports: HashSet<i64>,
}

impl Taken {
    fn from_services(items: &[Value]) -> Self {
        let mut taken = Self::default();
        for service in items {
            let ips = service
                .pointer("/spec/clusterIPs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .chain(service.pointer("/spec/clusterIP"));
            taken.ips.extend(
                ips.filter_map(Value::as_str)
                    .filter_map(|ip| ip.parse::<IpAddr>().ok()),
            );
            let ports = service.pointer("/spec/ports").and_then(Value::as_array);
            taken.node_ports.extend(
                ports
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("nodePort").and_then(Value::as_i64)),
            );
        }
        taken
    }
}

fn invalid(kind: &GroupKind, name: &str, field: &str, value: &str, detail: &str) -> Status {
    let cause = StatusCause {
        reason: "FieldValueInvalid".to_owned(),
        message: format!("Invalid value: {value}: {detail}"),
        field: field.to_owned(),
    };
    Status::invalid(kind, name, vec![cause])
}

/// The allocations of the stored Services, except the one at `except` (an update's own).
async fn taken(store: &dyn Store, except: Option<&ObjectKey>) -> Result<Taken, Status> {
    let (mut items, _) = store.list(&services(), None).await?;
    if let Some(key) = except {
        items.retain(|item| {
            let meta = |field: &str| {
                item.pointer(&format!("/metadata/{field}"))
                    .and_then(Value::as_str)
            };
            meta("name") != Some(key.name.as_str()) || meta("namespace") != key.namespace.as_deref()
        });
    }
    Ok(Taken::from_services(&items))
}

/// Whether a Service of `service_type` gets node ports (`NodePort`, and `LoadBalancer` unless
/// `allocateLoadBalancerNodePorts` is false).
fn wants_node_ports(spec: &Map<String, Value>) -> bool {
    match str_at(spec, "type") {
        "NodePort" => true,
        "LoadBalancer" => spec.get("allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false),
        _ => false,
    }
}

/// The lowest free address, upper band first (see the module docs).
fn free_address(cidr: &ServiceCidr, taken: &Taken) -> Result<IpAddr, Status> {
    let free = |index: &u128| !taken.ips.contains(&cidr.address(*index));
    let band = cidr.static_band();
    (band..cidr.allocatable())
        .find(free)
        .or_else(|| (0..band).find(free))
        .map(|index| cidr.address(index))
        .ok_or_else(|| {
            Status::internal_error(&format!("failed to allocate a serviceIP: range is full ({cidr})"))
        })
}

fn set_cluster_ip(spec: &mut Map<String, Value>, ip: &str) {
    spec.insert("clusterIP".to_owned(), json!(ip));
    spec.insert("clusterIPs".to_owned(), json!([ip]));
}

/// Allocates what a new Service needs (upstream's `Allocators.allocateCreate`): the IP family fields,
/// a cluster IP (or validates the requested one: in range and free, else 422 as upstream), and node
/// ports for `NodePort` and `LoadBalancer` Services. `service` is the defaulted object; `name` names it
/// in errors. Call under [`lock`].
pub(crate) async fn allocate(
    store: &dyn Store,
    cidr: &ServiceCidr,
    service: &mut Map<String, Value>,
    name: &str,
) -> Result<(), Status> {
    let kind = GroupKind::new("", "Service");
    let taken = taken(store, None).await?;
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if str_at(spec, "type") == "ExternalName" {
        return Ok(());
    }
    init_ip_family_fields(&kind, name, cidr, spec)?;
    match requested_cluster_ip(spec).as_deref() {
        Some("None") => set_cluster_ip(spec, "None"),
        Some(text) => {
            let quoted = format!("[]string{{{text:?}}}");
            let ip: IpAddr = text.parse().map_err(|_| {
                invalid(
                    &kind,
                    name,
                    "spec.clusterIPs[0]",
                    &format!("{text:?}"),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )
            })?;
            if cidr.index_of(ip).is_none() {
                return Err(invalid(
                    &kind,
                    name,
                    "spec.clusterIPs",
                    &quoted,
                    &format!(
                        "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. \
                         The range of valid IPs is {cidr}"
                    ),
                ));
            }
            if taken.ips.contains(&ip) {
                return Err(invalid(
                    &kind,
                    name,
                    "spec.clusterIPs",
                    &quoted,
                    &format!("failed to allocate IP {ip}: provided IP is already allocated"),
                ));
            }
            set_cluster_ip(spec, &ip.to_string());
        }
        None => set_cluster_ip(spec, &free_address(cidr, &taken)?.to_string()),
    }
    if wants_node_ports(spec) {
        allocate_node_ports(&kind, name, spec, taken.node_ports)?;
    }
    Ok(())
}

/// On update (`Allocators.allocateUpdate`), after [`patch_allocated_values`]: what the updated Service
/// needs and does not have yet, typically after a type change (`ExternalName` to `ClusterIP`: IP
/// family fields and a cluster IP; `ClusterIP` to `NodePort`: node ports). Values the Service already
/// holds are not re-validated (upstream's immutability checks are validation, which the fake does not
/// do); newly requested node ports are. `key` is the Service's own, whose allocations do not count as
/// taken. Call under [`lock`].
pub(crate) async fn allocate_missing(
    store: &dyn Store,
    cidr: &ServiceCidr,
    service: &mut Map<String, Value>,
    key: &ObjectKey,
) -> Result<(), Status> {
    let kind = GroupKind::new("", "Service");
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if str_at(spec, "type") == "ExternalName" {
        return Ok(());
    }
    let needs_ip = requested_cluster_ip(spec).is_none();
    let needs_ports = wants_node_ports(spec)
        && spec.get("ports").and_then(Value::as_array).is_some_and(|ports| {
            ports
                .iter()
                .any(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0)
        });
    if !needs_ip && !needs_ports {
        return Ok(());
    }
    let taken = taken(store, Some(key)).await?;
    if needs_ip {
        init_ip_family_fields(&kind, &key.name, cidr, spec)?;
        set_cluster_ip(spec, &free_address(cidr, &taken)?.to_string());
    }
    if wants_node_ports(spec) {
        allocate_node_ports(&kind, &key.name, spec, taken.node_ports)?;
    }
    Ok(())
}

/// The cluster IP the client asked for (`clusterIP`, else the first of `clusterIPs`).
fn requested_cluster_ip(spec: &Map<String, Value>) -> Option<String> {
    let single = str_at(spec, "clusterIP");
    if !single.is_empty() {
        return Some(single.to_owned());
    }
    spec.get("clusterIPs")
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .map(str::to_owned)
}

/// `initIPFamilyFields` for a single-stack cluster: `ipFamilyPolicy` defaults to `SingleStack`, except
/// for headless Services without a selector (`RequireDualStack`); `ipFamilies` defaults to the
/// range's family, both families for a headless Service requiring dual stack. Asking for another
/// family, or for `RequireDualStack` on a Service with a cluster IP, is upstream's 422.
fn init_ip_family_fields(
    kind: &GroupKind,
    name: &str,
    cidr: &ServiceCidr,
    spec: &mut Map<String, Value>,
) -> Result<(), Status> {
    let headless = requested_cluster_ip(spec).as_deref() == Some("None");
    let has_selector = spec
        .get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    let default_policy = if headless && !has_selector {
        "RequireDualStack"
    } else {
        "SingleStack"
    };
    default_missing(spec, "ipFamilyPolicy", json!(default_policy));
    let policy = str_at(spec, "ipFamilyPolicy").to_owned();
    if policy == "RequireDualStack" && !headless {
        return Err(invalid(
            kind,
            name,
            "spec.ipFamilyPolicy",
            "\"RequireDualStack\"",
            "this cluster is not configured for dual-stack services",
        ));
    }
    let requested: Vec<String> = spec
        .get("ipFamilies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    if !headless
        && let Some((index, family)) = requested
            .iter()
            .enumerate()
            .find(|(_, family)| family.as_str() != cidr.family())
    {
        return Err(invalid(
            kind,
            name,
            &format!("spec.ipFamilies[{index}]"),
            &format!("{family:?}"),
            "not configured on this cluster",
        ));
    }
    if requested.is_empty() {
        let other = if cidr.family() == "IPv4" { "IPv6" } else { "IPv4" };
        let families = if headless && policy == "RequireDualStack" {
            json!([cidr.family(), other])
        } else {
            json!([cidr.family()])
        };
        spec.insert("ipFamilies".to_owned(), families);
    }
    Ok(())
}

/// `allocateNodePorts`: every port without a `nodePort` gets the lowest free one of
/// [`NODE_PORT_RANGE`]; a requested one must be in the range and free (422 as upstream).
fn allocate_node_ports(
    kind: &GroupKind,
    name: &str,
    spec: &mut Map<String, Value>,
    mut taken: HashSet<i64>,
) -> Result<(), Status> {
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let range = format!("{}-{}", NODE_PORT_RANGE.start(), NODE_PORT_RANGE.end());
    for (index, port) in ports.iter_mut().enumerate() {
        let Some(port) = port.as_object_mut() else {
            continue;
        };
        let field = format!("spec.ports[{index}].nodePort");
        match port.get("nodePort").and_then(Value::as_i64).filter(|p| *p != 0) {
            Some(requested) => {
                if !NODE_PORT_RANGE.contains(&requested) {
                    return Err(invalid(
                        kind,
                        name,
                        &field,
                        &requested.to_string(),
                        &format!(
                            "provided port is not in the valid range. The range of valid ports is {range}"
                        ),
                    ));
                }
                if taken.contains(&requested) {
                    return Err(invalid(
                        kind,
                        name,
                        &field,
                        &requested.to_string(),
                        "provided port is already allocated",
                    ));
                }
                taken.insert(requested);
            }
            None => {
                let free = NODE_PORT_RANGE
                    .clone()
                    .find(|p| !taken.contains(p))
                    .ok_or_else(|| {
                        Status::internal_error(&format!(
                            "failed to allocate a nodePort: range is full ({range})"
                        ))
                    })?;
                port.insert("nodePort".to_owned(), json!(free));
                taken.insert(free);
            }
        }
    }
    Ok(())
}

/// `patchAllocatedValues`: an update whose body omits what was allocated keeps it (cluster IPs and IP
/// family fields while the Service keeps needing a cluster IP, node ports by port and protocol while
/// it keeps needing node ports). New needs are met by [`allocate_missing`].
pub(crate) fn patch_allocated_values(current: &Map<String, Value>, next: &mut Map<String, Value>) {
    let (Some(old), Some(new)) = (
        current.get("spec").and_then(Value::as_object),
        next.get_mut("spec").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    let type_of = |spec: &Map<String, Value>| match str_at(spec, "type") {
        "" => "ClusterIP".to_owned(),
        other => other.to_owned(),
    };
    let (old_type, new_type) = (type_of(old), type_of(new));
    if old_type != "ExternalName" && new_type != "ExternalName" {
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let empty = new.get(key).is_none_or(|v| {
                v.is_null() || v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty)
            });
            if empty && let Some(value) = old.get(key) {
                new.insert(key.to_owned(), value.clone());
            }
        }
    }
    let node_ports = |t: &str| t == "NodePort" || t == "LoadBalancer";
    if node_ports(&old_type) && node_ports(&new_type) {
        let old_ports: Vec<&Value> = old
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        let protocol = |p: &Value| {
            p.get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_owned()
        };
        if let Some(ports) = new.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut() {
                if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let found = old_ports
                    .iter()
                    .find(|old| old.get("port") == port.get("port") && protocol(old) == protocol(port));
                if let Some(node_port) = found.and_then(|old| old.get("nodePort"))
                    && let Some(map) = port.as_object_mut()
                {
                    map.insert("nodePort".to_owned(), node_port.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn parses_ranges() {
        let default: ServiceCidr = "10.96.0.0/12".parse().unwrap();
        assert_eq!(default, ServiceCidr::default());
        assert_eq!(
            "10.96.5.7/12".parse::<ServiceCidr>().unwrap().to_string(),
            "10.96.0.0/12"
        );
        assert_eq!(
            "fd00:10:96::/112".parse::<ServiceCidr>().unwrap().family(),
            "IPv6"
        );
        assert!(matches!(
            "10.0.0.0".parse::<ServiceCidr>(),
            Err(ServiceCidrError::Invalid(_))
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<ServiceCidr>(),
            Err(ServiceCidrError::Invalid(_))
        ));
        assert!(matches!(
            "10.0.0.0/16,fd00::/108".parse::<ServiceCidr>(),
            Err(ServiceCidrError::DualStack(_))
        ));
        assert!(matches!(
            "10.0.0.0/31".parse::<ServiceCidr>(),
            Err(ServiceCidrError::TooSmall(_))
        ));
    }

    #[test]
    fn bands_and_addresses() {
        let cidr = ServiceCidr::default();
        assert_eq!(cidr.allocatable(), (1 << 20) - 2);
        assert_eq!(cidr.static_band(), 256);
        assert_eq!(cidr.address(0).to_string(), "10.96.0.1");
        assert_eq!(cidr.address(256).to_string(), "10.96.1.1");
        assert_eq!(cidr.index_of("10.96.0.0".parse().unwrap()), None);
        assert_eq!(cidr.index_of("10.111.255.255".parse().unwrap()), None);
        assert_eq!(
            cidr.index_of("10.111.255.254".parse().unwrap()),
            Some((1 << 20) - 3)
        );
        let small: ServiceCidr = "10.0.0.0/28".parse().unwrap();
        assert_eq!(small.static_band(), 0);
    }

    async fn create(store: &Arc<MemoryStore>, name: &str, spec: Value) -> Result<Value, Status> {
        let mut service = json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec});
        let map = service.as_object_mut().unwrap();
        super::super::core::set_defaults_service(map);
        allocate(store.as_ref(), &ServiceCidr::default(), map, name).await?;
        store
            .create(&services(), &ObjectKey::namespaced("default", name), service)
            .await
            .map_err(Status::from)
    }

    #[tokio::test]
    async fn allocates_unique_ips_and_validates_requests() {
        let store = Arc::new(MemoryStore::new());
        let a = create(
            &store,
            "a",
            json!({"selector": {"app": "a"}, "ports": [{"port": 80}]}),
        )
        .await
        .unwrap();
        assert_eq!(a["spec"]["clusterIP"], json!("10.96.1.1"));
        assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.1.1"]));
        assert_eq!(a["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(a["spec"]["ipFamilyPolicy"], json!("SingleStack"));
        let b = create(&store, "b", json!({"ports": [{"port": 80}]}))
            .await
            .unwrap();
        assert_eq!(b["spec"]["clusterIP"], json!("10.96.1.2"));
        let dns = create(&store, "dns", json!({"clusterIP": "10.96.0.10"}))
            .await
            .unwrap();
        assert_eq!(dns["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        let taken = create(&store, "dup", json!({"clusterIP": "10.96.0.10"}))
            .await
            .unwrap_err();
        assert_eq!(taken.code, 422);
        assert_eq!(
            taken.message,
            "Service \"dup\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: \
             failed to allocate IP 10.96.0.10: provided IP is already allocated"
        );
        let outside = create(&store, "out", json!({"clusterIP": "10.0.0.1"}))
            .await
            .unwrap_err();
        assert_eq!(
            outside.message,
            "Service \"out\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.0.0.1\"}: \
             failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. \
             The range of valid IPs is 10.96.0.0/12"
        );
        let dual = create(&store, "dual", json!({"ipFamilyPolicy": "RequireDualStack"}))
            .await
            .unwrap_err();
        assert_eq!(dual.code, 422);
    }

    #[tokio::test]
    async fn headless_external_name_and_node_ports() {
        let store = Arc::new(MemoryStore::new());
        let headless = create(
            &store,
            "h",
            json!({"clusterIP": "None", "selector": {"app": "a"}}),
        )
        .await
        .unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(headless["spec"]["ipFamilyPolicy"], json!("SingleStack"));
        let selectorless = create(&store, "hs", json!({"clusterIP": "None"})).await.unwrap();
        assert_eq!(selectorless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
        assert_eq!(selectorless["spec"]["ipFamilyPolicy"], json!("RequireDualStack"));
        let external = create(
            &store,
            "e",
            json!({"type": "ExternalName", "externalName": "example.com"}),
        )
        .await
        .unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
        let node_port = create(
            &store,
            "np",
            json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 443, "nodePort": 30000}]}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            node_port.message,
            "Service \"np\" is invalid: spec.ports[1].nodePort: Invalid value: 30000: provided port is already allocated"
        );
        let node_port = create(
            &store,
            "np",
            json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]}),
        )
        .await
        .unwrap();
        assert_eq!(node_port["spec"]["ports"][0]["nodePort"], json!(30000));
        assert_eq!(node_port["spec"]["ports"][1]["nodePort"], json!(30443));
        assert_eq!(node_port["spec"]["externalTrafficPolicy"], json!("Cluster"));
        let low = create(
            &store,
            "low",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}),
        )
        .await
        .unwrap_err();
        assert!(
            low.message.ends_with("The range of valid ports is 30000-32767"),
            "{}",
            low.message
        );
    }

    #[tokio::test]
    async fn updates_allocate_what_a_new_type_needs() {
        let store = Arc::new(MemoryStore::new());
        let stored = create(&store, "a", json!({"type": "NodePort", "ports": [{"port": 80}]}))
            .await
            .unwrap();
        assert_eq!(stored["spec"]["ports"][0]["nodePort"], json!(30000));
        let key = ObjectKey::namespaced("default", "a");
        // Its own node port is not taken from itself; a second port gets the next one.
        let mut next = stored.clone();
        next["spec"]["ports"] = json!([{"port": 80, "nodePort": 30000}, {"port": 81}]);
        allocate_missing(
            store.as_ref(),
            &ServiceCidr::default(),
            next.as_object_mut().unwrap(),
            &key,
        )
        .await
        .unwrap();
        assert_eq!(next["spec"]["ports"][1]["nodePort"], json!(30001));
        // ExternalName to ClusterIP: families and a cluster IP.
        let external = create(
            &store,
            "e",
            json!({"type": "ExternalName", "externalName": "x.example"}),
        )
        .await
        .unwrap();
        let mut next = external.clone();
        next["spec"] = json!({"type": "ClusterIP", "ports": [{"port": 80}]});
        let key = ObjectKey::namespaced("default", "e");
        allocate_missing(
            store.as_ref(),
            &ServiceCidr::default(),
            next.as_object_mut().unwrap(),
            &key,
        )
        .await
        .unwrap();
        assert_eq!(next["spec"]["clusterIPs"], json!(["10.96.1.2"]));
        assert_eq!(next["spec"]["ipFamilies"], json!(["IPv4"]));
    }

    #[test]
    fn updates_keep_allocations() {
        let current = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001}]}});
        let mut next = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}});
        patch_allocated_values(current.as_object().unwrap(), next.as_object_mut().unwrap());
        assert_eq!(
            next,
            json!({"spec": {"type": "NodePort", "clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "ports": [{"port": 80, "nodePort": 30001}, {"port": 81}]}})
        );
    }
}
