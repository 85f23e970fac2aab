//! What a real kube-apiserver 1.36.2 wrote to etcd, against the fake's storage encoding: decoding each
//! stored value and applying the scheme defaults (which upstream's storage codec applies on every
//! decode) gives the object the real server served (shown there without `managedFields`, as kubectl
//! does), and encoding the decoded object gives the stored bytes back, byte for byte (Go's field order,
//! zeros, map order, the `runtime.Unknown` envelope).
//!
//! The recording is not part of the repository: the tests look for `upstream-etcd-1.36/` under
//! `shared/data/` in an ancestor directory of the crate (or at `KUBE_MVP_UPSTREAM_ETCD_DATA`), and say
//! they are skipped when it is absent.

use std::path::PathBuf;

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::rest::ResourceInfo;
use apiserver_fake::api::rest::defaults::set_defaults;
use apiserver_fake::protobuf::{decode_object, encode_object};
use data_encoding::BASE64;
use serde_json::Value;

struct Recorded {
    key: String,
    encoding: String,
    value: Vec<u8>,
    served: Option<Value>,
}

fn recording() -> Option<Vec<Recorded>> {
    let dir = std::env::var_os("KUBE_MVP_UPSTREAM_ETCD_DATA")
        .map(PathBuf::from)
        .or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .map(|a| a.join("shared/data/upstream-etcd-1.36"))
                .find(|d| d.is_dir())
        });
    let Some(dir) = dir else {
        eprintln!(
            "skipped: no recording of kube-apiserver's etcd values (shared/data/upstream-etcd-1.36 in an \
             ancestor directory, or KUBE_MVP_UPSTREAM_ETCD_DATA)"
        );
        return None;
    };
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let values = read("etcd-values.json");
    let served = read("objects-as-served.json");
    let kvs = values["kvs"].as_array().expect("kvs");
    Some(
        kvs.iter()
            .map(|kv| {
                let key = kv["key"].as_str().expect("key").to_owned();
                let value = BASE64
                    .decode(kv["value_base64"].as_str().expect("value").as_bytes())
                    .expect("base64");
                // The server's own lease and peer endpoint record were not served.
                let mut served = served.get(&key).cloned();
                // What etcd stores has no resourceVersion: the key's revision is the version.
                if let Some(Value::Object(metadata)) = served.as_mut().and_then(|s| s.get_mut("metadata")) {
                    metadata.remove("resourceVersion");
                }
                Recorded {
                    key,
                    encoding: kv["encoding"].as_str().unwrap_or_default().to_owned(),
                    value,
                    served,
                }
            })
            .collect(),
    )
}

fn group_of(object: &Value) -> &str {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The resource of a recorded object, from its key (`/registry/<resource>/...`, with upstream's
/// exceptions: `services/specs`, `minions`, `ingress`).
fn resource_of(r: &Recorded, object: &Value) -> ResourceInfo {
    let mut parts = r.key.trim_start_matches("/registry/").split('/');
    let resource = match parts.next().unwrap_or_default() {
        "minions" => "nodes",
        "ingress" => "ingresses",
        other => other,
    };
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    ResourceInfo {
        group: group_of(object).to_owned(),
        version: api_version.rsplit('/').next().unwrap_or_default().to_owned(),
        resource: resource.to_owned(),
        kind: object["kind"].as_str().unwrap_or_default().to_owned(),
        namespaced: object.pointer("/metadata/namespace").is_some(),
        verbs: Vec::new(),
        subresources: Vec::new(),
        custom: false,
        printer_columns: Vec::new(),
        schema: None,
        storage_schema: None,
    }
}

#[test]
fn stored_protobuf_decodes_to_the_served_object() {
    let Some(recorded) = recording() else { return };
    let version = KubeVersion::new(1, 36).expect("1.36");
    let mut checked = 0;
    let mut failures = Vec::new();
    for r in recorded.iter().filter(|r| r.encoding == "protobuf") {
        let Some(served) = &r.served else { continue };
        let mut decoded = match decode_object(&r.value) {
            Ok(decoded) => decoded,
            Err(e) => {
                failures.push(format!("{}: {e}", r.key));
                continue;
            }
        };
        if let Some(Value::Object(metadata)) = decoded.get_mut("metadata") {
            metadata.remove("managedFields");
        }
        set_defaults(&resource_of(r, &decoded), version, &mut decoded);
        let mut served = served.clone();
        // An object is stored in its group's storage version (MutatingAdmissionPolicy: v1beta1) and
        // served in the version asked for.
        if group_of(&served) == group_of(&decoded) {
            served["apiVersion"] = decoded["apiVersion"].clone();
        }
        if decoded != served {
            failures.push(format!("{}: decoded {decoded}\n  served {served}", r.key));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 20, "only {checked} protobuf values");
}

#[test]
fn decoded_objects_encode_to_the_stored_bytes() {
    let Some(recorded) = recording() else { return };
    let mut failures = Vec::new();
    for r in recorded.iter().filter(|r| r.encoding == "protobuf") {
        let decoded = match decode_object(&r.value) {
            Ok(decoded) => decoded,
            Err(e) => {
                failures.push(format!("{}: {e}", r.key));
                continue;
            }
        };
        match encode_object(&decoded) {
            Ok(bytes) if bytes == r.value => {}
            Ok(bytes) => {
                let at = bytes
                    .iter()
                    .zip(&r.value)
                    .position(|(a, b)| a != b)
                    .unwrap_or(bytes.len().min(r.value.len()));
                failures.push(format!(
                    "{}: {} bytes, stored {}; first difference at {at}: ours {:02x?}, stored {:02x?}",
                    r.key,
                    bytes.len(),
                    r.value.len(),
                    &bytes[at.saturating_sub(8)..(at + 8).min(bytes.len())],
                    &r.value[at.saturating_sub(8)..(at + 8).min(r.value.len())],
                ));
            }
            Err(e) => failures.push(format!("{}: {e}", r.key)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fakes find a real server as a peer: its identity lease and its peer endpoint record (a v1
/// Endpoints under `/registry/peerserverleases/`) decode into what the fakes' own readers expect.
#[test]
fn a_real_servers_lease_and_peer_endpoint_record_are_readable() {
    let Some(recorded) = recording() else { return };
    let record = recorded
        .iter()
        .find(|r| r.key.starts_with("/registry/peerserverleases/"))
        .expect("a peer endpoint record");
    let decoded = decode_object(&record.value).expect("the record decodes");
    let server_id = record.key.trim_start_matches("/registry/peerserverleases/");
    assert_eq!(decoded["metadata"]["labels"]["apiserverIdentity"], server_id);
    assert_eq!(
        apiserver_fake::controllers::peer_endpoint::record_address(&decoded).as_deref(),
        Some("127.0.0.3:6443")
    );
    let lease = recorded
        .iter()
        .find(|r| r.key == format!("/registry/leases/kube-system/{server_id}"))
        .expect("the server's identity lease");
    let lease = decode_object(&lease.value).expect("the lease decodes");
    assert_eq!(
        lease["metadata"]["labels"]["apiserver.kubernetes.io/identity"],
        "kube-apiserver"
    );
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h.starts_with(server_id))
    );
    // And the other way: the record a fake writes is upstream's shape, so it encodes whole.
    let ours = apiserver_fake::controllers::peer_endpoint::endpoint_record(
        server_id,
        "127.0.0.9:6443".parse().unwrap(),
    );
    let bytes = encode_object(&ours).expect("a fake's record encodes");
    assert_eq!(decode_object(&bytes).unwrap(), ours);
}
