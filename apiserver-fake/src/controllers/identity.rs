//! Server identity: the server ID every peer knows this server by, and its identity lease
//! (docs/mvp-behaviour.md §2.2).
//!
//! The ID is derived from the hostname exactly as kube-apiserver derives it, so a fake started with
//! `--hostname test-server-a` has the same ID (and lease name) as an upstream integration-test server.

use data_encoding::BASE32_NOPAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Label that marks a lease as a kube-apiserver identity lease.
pub const IDENTITY_LEASE_LABEL: &str = "apiserver.kubernetes.io/identity";
/// Value of [`IDENTITY_LEASE_LABEL`] for kube-apiserver.
pub const IDENTITY_LEASE_COMPONENT: &str = "kube-apiserver";
/// Label carrying the host name.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Informational annotation with the peer address (never read by the proxy, docs/mvp-behaviour.md §2.2).
pub const PEER_ADVERTISE_ADDRESS_ANNOTATION: &str = "kubernetes.io/peer-advertise-address";
/// Namespace of identity leases.
pub const IDENTITY_LEASE_NAMESPACE: &str = "kube-system";

/// The APIServerID of a kube-apiserver running on `hostname`:
/// `apiserver-` + lowercase unpadded base32 of the first 16 bytes of SHA-256 over the uint16
/// length-prefixed hostname followed by the length-prefixed string `kube-apiserver`.
pub fn server_id(hostname: &str) -> String {
    let mut data = Vec::with_capacity(hostname.len() + 18);
    for part in [hostname.as_bytes(), IDENTITY_LEASE_COMPONENT.as_bytes()] {
        // cryptobyte's AddUint16LengthPrefixed: a hostname is at most 253 bytes, so the length fits.
        let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(&part[..usize::from(len)]);
    }
    let hash = Sha256::digest(&data);
    format!("apiserver-{}", BASE32_NOPAD.encode(&hash[..16]).to_lowercase())
}

/// The identity lease object a server publishes (coordination.k8s.io/v1 Lease), as kube-apiserver's
/// identity lease controller writes it.
pub fn identity_lease(
    server_id: &str,
    holder_identity: &str,
    hostname: &str,
    lease_duration_seconds: u64,
    renew_time: &str,
    peer_advertise_address: Option<&str>,
) -> Value {
    let mut metadata = json!({
        "name": server_id,
        "namespace": IDENTITY_LEASE_NAMESPACE,
        "labels": {
            IDENTITY_LEASE_LABEL: IDENTITY_LEASE_COMPONENT,
            HOSTNAME_LABEL: hostname,
        },
    });
    if let Some(address) = peer_advertise_address {
        metadata["annotations"] = json!({ PEER_ADVERTISE_ADDRESS_ANNOTATION: address });
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder_identity,
            "leaseDurationSeconds": lease_duration_seconds,
            "renewTime": renew_time,
        },
    })
}

/// A Kubernetes MicroTime (RFC 3339 with microseconds, UTC) for lease renew times.
pub fn micro_time(at: time::OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.microsecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_id(hostname: &str) -> String {
        // An independent encoding: RFC 4648 base32 by hand, to check the data-encoding call.
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let mut data = vec![0, u8::try_from(hostname.len()).unwrap()];
        data.extend_from_slice(hostname.as_bytes());
        data.extend_from_slice(&[0, 14]);
        data.extend_from_slice(b"kube-apiserver");
        let hash = Sha256::digest(&data);
        let mut bits = 0u32;
        let mut nbits = 0;
        let mut out = String::new();
        for &b in &hash[..16] {
            bits = (bits << 8) | u32::from(b);
            nbits += 8;
            while nbits >= 5 {
                nbits -= 5;
                out.push(ALPHABET[((bits >> nbits) & 31) as usize] as char);
            }
        }
        if nbits > 0 {
            out.push(ALPHABET[((bits << (5 - nbits)) & 31) as usize] as char);
        }
        format!("apiserver-{out}")
    }

    #[test]
    fn server_id_is_length_prefixed_sha256_base32() {
        for host in [
            "test-server-a",
            "test-server-b",
            "a",
            "control-plane-1.example.com",
        ] {
            let id = server_id(host);
            assert_eq!(id, reference_id(host));
            // 16 bytes = 128 bits = 26 base32 characters.
            assert_eq!(id.len(), "apiserver-".len() + 26);
        }
        assert_ne!(server_id("test-server-a"), server_id("test-server-b"));
    }

    #[test]
    fn identity_lease_carries_labels_holder_and_annotation() {
        let lease = identity_lease(
            "apiserver-x",
            "apiserver-x_1234",
            "host-a",
            3600,
            "t",
            Some("1.2.3.4:6443"),
        );
        assert_eq!(
            lease["metadata"]["labels"][IDENTITY_LEASE_LABEL],
            "kube-apiserver"
        );
        assert_eq!(lease["metadata"]["labels"][HOSTNAME_LABEL], "host-a");
        assert_eq!(
            lease["metadata"]["annotations"][PEER_ADVERTISE_ADDRESS_ANNOTATION],
            "1.2.3.4:6443"
        );
        assert_eq!(lease["spec"]["holderIdentity"], "apiserver-x_1234");
        let without = identity_lease("apiserver-x", "h", "host-a", 10, "t", None);
        assert!(without["metadata"].get("annotations").is_none());
    }

    #[test]
    fn micro_time_has_microseconds_and_z() {
        let at = time::macros::datetime!(2026-11-22 20:55:18.123456 UTC);
        assert_eq!(micro_time(at), "2026-11-22T20:55:18.123456Z");
    }
}
