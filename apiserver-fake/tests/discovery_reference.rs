//! Compares rendered discovery with the kube-apis reference data: the generated v1.36.2 documents
//! (`v1.36-discovery/`) and the discovery captured from a running v1.36.2 kube-apiserver
//! (`emulation-captures/`, default and all-enabled, emulating 1.33–1.36).
//!
//! This is an optional check against external reference data, which is not part of the repository (the fake's
//! own tables are `catalog/v1.NN.json`, generated from that data by `catalog/generate.py`). Point
//! `KUBE_APIS_DATA` at a directory holding `v1.36.json`, `v1.36-discovery/` and `emulation-captures/`.
//! Without the variable, or when the directory has no `v1.36.json`, the tests pass and print why they
//! skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use apiserver_fake::api::catalog::{FeatureGates, KubeVersion, RuntimeConfig, ServedApis};
use apiserver_fake::api::discovery::aggregated::{self, AggregatedVersion};
use apiserver_fake::api::discovery::legacy;
use serde_json::Value;

fn data_dir() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("KUBE_APIS_DATA").map(PathBuf::from) else {
        println!("skipped: KUBE_APIS_DATA is not set (optional external reference data)");
        return None;
    };
    if dir.join("v1.36.json").exists() {
        Some(dir)
    } else {
        println!(
            "skipped: reference data not found at {} (set KUBE_APIS_DATA)",
            dir.display()
        );
        None
    }
}

fn read(dir: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn read_text(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn servers(minor: u32, all: bool) -> ServedApis {
    let version = KubeVersion::new(1, minor).unwrap();
    let (config, gates) = if all {
        ("api/all=true", "AllAlpha=true,AllBeta=true")
    } else {
        ("", "")
    };
    ServedApis::builtin(
        version,
        &config.parse::<RuntimeConfig>().unwrap(),
        &gates.parse::<FeatureGates>().unwrap(),
    )
    .unwrap()
}

fn to_value<T: serde::Serialize>(document: &T) -> Value {
    serde_json::to_value(document).unwrap()
}

/// Every group/version/resource of an aggregated document, with its full JSON.
fn resources(document: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for item in document["items"].as_array().into_iter().flatten() {
        let group = item["metadata"]["name"].as_str().unwrap_or("");
        for version in item["versions"].as_array().into_iter().flatten() {
            for resource in version["resources"].as_array().into_iter().flatten() {
                let name = format!(
                    "{group}/{}/{}",
                    version["version"].as_str().unwrap_or(""),
                    resource["resource"].as_str().unwrap_or("")
                );
                out.insert(name, resource.clone());
            }
        }
    }
    out
}

fn group_versions(document: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for item in document["items"].as_array().into_iter().flatten() {
        for version in item["versions"].as_array().into_iter().flatten() {
            out.push(format!(
                "{}/{}",
                item["metadata"]["name"].as_str().unwrap_or(""),
                version["version"]
            ));
        }
    }
    out
}

/// Drops `creationTimestamp` from group metadata (the only field that depends on the binary rather
/// than the emulated version: the captures come from a 1.36 binary).
fn without_creation_timestamp(mut document: Value) -> Value {
    for item in document["items"].as_array_mut().into_iter().flatten() {
        if let Some(meta) = item["metadata"].as_object_mut() {
            meta.remove("creationTimestamp");
        }
    }
    document
}

#[test]
fn v136_all_enabled_aggregated_documents_equal_the_generated_and_live_ones() {
    let Some(dir) = data_dir() else { return };
    let apis = servers(36, true);
    let version = KubeVersion::new(1, 36).unwrap();
    let rendered = aggregated::apis_document(&apis, version, AggregatedVersion::V2);
    assert_eq!(
        to_value(&rendered),
        read(&dir, "v1.36-discovery/aggregated_v2.json")
    );
    // The live capture is byte-for-byte the same once pretty-printed: field order included.
    let pretty = serde_json::to_string_pretty(&rendered).unwrap();
    assert_eq!(
        pretty.trim(),
        read_text(&dir, "emulation-captures/v136-all.apis.aggregated.json").trim()
    );
    let core = aggregated::api_document(&apis, version, AggregatedVersion::V2);
    let pretty = serde_json::to_string_pretty(&core).unwrap();
    assert_eq!(
        pretty.trim(),
        read_text(&dir, "emulation-captures/v136-all.api.aggregated.json").trim()
    );
}

#[test]
fn v136_default_aggregated_documents_equal_the_live_ones_byte_for_byte() {
    let Some(dir) = data_dir() else { return };
    let apis = servers(36, false);
    let version = KubeVersion::new(1, 36).unwrap();
    for (document, file) in [
        (
            aggregated::apis_document(&apis, version, AggregatedVersion::V2),
            "v136-default.apis.aggregated.json",
        ),
        (
            aggregated::api_document(&apis, version, AggregatedVersion::V2),
            "v136-default.api.aggregated.json",
        ),
    ] {
        let pretty = serde_json::to_string_pretty(&document).unwrap();
        assert_eq!(
            pretty.trim(),
            read_text(&dir, &format!("emulation-captures/{file}")).trim(),
            "{file}"
        );
    }
}

#[test]
fn v136_all_enabled_legacy_documents_equal_the_generated_ones() {
    let Some(dir) = data_dir() else { return };
    let apis = servers(36, true);
    let served_address =
        read(&dir, "v1.36-discovery/api.json")["serverAddressByClientCIDRs"][0]["serverAddress"]
            .as_str()
            .unwrap()
            .to_string();
    assert_eq!(
        to_value(&legacy::api_versions(&apis, &served_address).unwrap()),
        read(&dir, "v1.36-discovery/api.json")
    );
    assert_eq!(
        to_value(&legacy::api_group_list(&apis)),
        read(&dir, "v1.36-discovery/apis.json")
    );
    assert_eq!(
        to_value(&legacy::api_resource_list(&apis, "", "v1").unwrap()),
        read(&dir, "v1.36-discovery/api__v1.json"),
        "api/v1 (storageVersionHash included)"
    );
    let mut files = 3;
    for group in apis.groups.iter().filter(|g| !g.name.is_empty()) {
        assert_eq!(
            to_value(&legacy::api_group(&apis, &group.name).unwrap()),
            read(&dir, &format!("v1.36-discovery/apis__{}.json", group.name)),
            "{}",
            group.name
        );
        files += 1;
        for version in &group.versions {
            let name = format!("v1.36-discovery/apis__{}__{}.json", group.name, version.version);
            assert_eq!(
                to_value(&legacy::api_resource_list(&apis, &group.name, &version.version).unwrap()),
                read(&dir, &name),
                "{name}"
            );
            files += 1;
        }
    }
    // 61 generated documents: aggregated_v2.json (other test) + 60 compared here.
    assert_eq!(files, 60);
}

/// Captures of a 1.36.2 binary run with `--emulated-version=1.3x`. Default servers must match
/// exactly (apart from `creationTimestamp`, see [`without_creation_timestamp`]). All-enabled servers
/// may differ only by APIs the 1.36 code no longer contains (the tables take those from the release's
/// OpenAPI spec), so this test prints those differences and checks they are only additions on our
/// side.
#[test]
fn emulated_133_to_135_captures_match() {
    let Some(dir) = data_dir() else { return };
    for minor in 33..=35 {
        let version = KubeVersion::new(1, minor).unwrap();
        for all in [false, true] {
            let apis = servers(minor, all);
            let label = if all { "all" } else { "default" };
            for (document, file) in [
                (
                    aggregated::apis_document(&apis, version, AggregatedVersion::V2),
                    format!("v1{minor}-{label}.apis.aggregated.json"),
                ),
                (
                    aggregated::api_document(&apis, version, AggregatedVersion::V2),
                    format!("v1{minor}-{label}.api.aggregated.json"),
                ),
            ] {
                let ours = without_creation_timestamp(to_value(&document));
                let theirs = read(&dir, &format!("emulation-captures/{file}"));
                if !all {
                    assert_eq!(ours, theirs, "{file}");
                    continue;
                }
                let (ours_resources, theirs_resources) = (resources(&ours), resources(&theirs));
                for name in ours_resources
                    .keys()
                    .filter(|name| !theirs_resources.contains_key(*name))
                {
                    println!("{file}: only in the release table (gone from the 1.36 code): {name}");
                }
                // A 1.36 binary does not emulate alpha APIs: it serves its own (e.g. scheduling
                // v1alpha2 when emulating 1.35, where the 1.35 release had v1alpha1).
                let newest = resources(&to_value(&aggregated::apis_document(
                    &servers(36, true),
                    KubeVersion::new(1, 36).unwrap(),
                    AggregatedVersion::V2,
                )));
                let missing: Vec<&String> = theirs_resources
                    .keys()
                    .filter(|name| !ours_resources.contains_key(*name))
                    .inspect(|name| println!("{file}: only in the capture (1.36 alpha code): {name}"))
                    .filter(|name| !(name.contains("alpha") && newest.contains_key(*name)))
                    .collect();
                assert!(
                    missing.is_empty(),
                    "{file}: the capture serves what the table lacks: {missing:#?}"
                );
                for (name, theirs_resource) in &theirs_resources {
                    let Some(ours_resource) = ours_resources.get(name) else {
                        continue;
                    };
                    if ours_resource != theirs_resource {
                        println!("{file}: {name} differs: table {ours_resource} / capture {theirs_resource}");
                        // The 1.36 code gives devicetaintrules a status subresource that 1.33/1.34
                        // releases did not have (their OpenAPI specs lack it): an emulation artefact.
                        assert!(
                            name == "resource.k8s.io/v1alpha3/devicetaintrules" && minor < 35,
                            "{file}: unexpected difference in {name}"
                        );
                    }
                }
                // Relative order of shared group-versions is the same.
                let (all_ours, all_theirs) = (group_versions(&ours), group_versions(&theirs));
                let theirs_gv: Vec<&String> = all_theirs.iter().filter(|gv| all_ours.contains(gv)).collect();
                let ours_gv: Vec<&String> = all_ours.iter().filter(|gv| all_theirs.contains(gv)).collect();
                assert_eq!(ours_gv, theirs_gv, "{file}: group-version order");
            }
        }
    }
}
