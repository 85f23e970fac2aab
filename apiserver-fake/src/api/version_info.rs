//! `/version`: kube-apiserver's `version.Info`, for the fake's binary and emulated versions.

use serde_json::{Map, Value, json};

use crate::api::catalog::KubeVersion;

/// The `/version` document of a fake whose binary is `binary` and which emulates `emulated`.
///
/// From 1.33 kube-apiserver also reports its emulation and minimum compatibility versions (the
/// compatibility version is one minor below the emulated one); older servers do not.
pub(crate) fn version_info(binary: KubeVersion, emulated: KubeVersion) -> Value {
    let mut info = Map::new();
    info.insert("major".into(), json!(binary.major.to_string()));
    info.insert("minor".into(), json!(binary.minor.to_string()));
    if binary.minor >= 33 {
        info.insert("emulationMajor".into(), json!(emulated.major.to_string()));
        info.insert("emulationMinor".into(), json!(emulated.minor.to_string()));
        info.insert("minCompatibilityMajor".into(), json!(emulated.major.to_string()));
        info.insert(
            "minCompatibilityMinor".into(),
            json!(emulated.minor.saturating_sub(1).to_string()),
        );
    }
    info.insert(
        "gitVersion".into(),
        json!(format!("v{}.{}.0", binary.major, binary.minor)),
    );
    info.insert(
        "gitCommit".into(),
        json!("0000000000000000000000000000000000000000"),
    );
    info.insert("gitTreeState".into(), json!("clean"));
    info.insert("buildDate".into(), json!("1970-01-01T00:00:00Z"));
    info.insert("goVersion".into(), json!("apiserver-fake (Rust)"));
    info.insert("compiler".into(), json!("rustc"));
    info.insert(
        "platform".into(),
        json!(format!(
            "{}/{}",
            std::env::consts::OS,
            go_arch(std::env::consts::ARCH)
        )),
    );
    Value::Object(info)
}

fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulation_fields_only_from_1_33() {
        let v = |minor| KubeVersion { major: 1, minor };
        let info = version_info(v(36), v(35));
        assert_eq!(info["minor"], "36");
        assert_eq!(info["emulationMinor"], "35");
        assert_eq!(info["minCompatibilityMinor"], "34");
        assert_eq!(info["gitVersion"], "v1.36.0");
        let old = version_info(v(30), v(30));
        assert!(old.get("emulationMinor").is_none());
    }
}
