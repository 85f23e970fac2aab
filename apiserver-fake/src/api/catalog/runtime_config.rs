//! [`RuntimeConfig`]: kube-apiserver's `--runtime-config`, which turns group-versions and resources on
//! and off.
//!
//! Parsing follows `cliflag.ConfigurationMap` and kube-apiserver's option completion; applying
//! follows `resourceconfig.MergeAPIResourceConfigs` (k8s.io/apiserver/pkg/server/resourceconfig), with
//! upstream's error messages.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::CatalogError;
use super::feature_gates::parse_go_bool;

/// `api/all`, `api/ga`, `api/beta`, `api/alpha`: keys that address many versions at once, applied in
/// this order before any `group/version` key (upstream `groupVersionMatchersOrder`).
pub const VERSION_MATCHERS: [&str; 4] = ["api/all", "api/ga", "api/beta", "api/alpha"];

/// Which versions a matcher key addresses (`v[0-9]+`, `v[0-9]+beta[0-9]+`, `v[0-9]+alpha[0-9]+`).
pub(crate) fn matcher_matches(matcher: &str, version: &str) -> bool {
    if matcher == "api/all" {
        return true;
    }
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = &rest[digits..];
    let level = |prefix: &str| {
        tail.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match matcher {
        "api/ga" => tail.is_empty(),
        "api/beta" => level("beta"),
        "api/alpha" => level("alpha"),
        _ => false,
    }
}

/// One `group/version[/resource]` key of the flag, after the core-group rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfigKey {
    /// API group (`""` for core).
    pub group: String,
    /// Version, as written (may name a version the server does not have: checked on apply).
    pub version: String,
    /// Resource for `group/version/resource` keys.
    pub resource: Option<String>,
}

/// Parsed `--runtime-config`.
///
/// `Default` is "no flag": the minor's default enablement. Keys keep kube-apiserver's rewrites: `v1`,
/// `v1/...`, `api/v1` and `api/v1/...` all become the core key `/v1` (the value of a `v1/<resource>`
/// key therefore switches all of core v1, as upstream's option completion does), and `api/legacy` is
/// dropped. A key without `=` has the value `""`, which means `true` for `group/version` keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Raw key → raw value, as `cliflag.ConfigurationMap` keeps them (a later duplicate wins).
    entries: BTreeMap<String, String>,
}

impl RuntimeConfig {
    /// The raw entries after the core-group rewrite, sorted by key.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether the flag was absent or empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The group/version/resource keys (everything but the matchers), parsed, with their raw values.
    pub fn keys(&self) -> impl Iterator<Item = (RuntimeConfigKey, &str)> {
        self.entries
            .iter()
            .filter(|(key, _)| !VERSION_MATCHERS.contains(&key.as_str()))
            .filter_map(|(key, value)| {
                let tokens: Vec<&str> = key.split('/').collect();
                match tokens.as_slice() {
                    [group, version] => Some((
                        RuntimeConfigKey {
                            group: group.to_string(),
                            version: version.to_string(),
                            resource: None,
                        },
                        value.as_str(),
                    )),
                    [group, version, resource] => Some((
                        RuntimeConfigKey {
                            group: group.to_string(),
                            version: version.to_string(),
                            resource: Some(resource.to_string()),
                        },
                        value.as_str(),
                    )),
                    _ => None,
                }
            })
    }

    /// The value of matcher `key` (`api/all`, ...), if set.
    pub(crate) fn matcher(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// The enablement a `group/version[/resource]` value asks for (`""` is `true`), or upstream's error.
    pub(crate) fn parse_value(key: &str, value: &str) -> Result<bool, CatalogError> {
        if value.is_empty() {
            return Ok(true);
        }
        parse_go_bool(value).ok_or_else(|| CatalogError::InvalidRuntimeConfigValue {
            key: key.to_string(),
            value: value.to_string(),
        })
    }

    /// The raw key of a parsed key (for error messages).
    pub(crate) fn raw_key(key: &RuntimeConfigKey) -> String {
        match &key.resource {
            Some(resource) => format!("{}/{}/{}", key.group, key.version, resource),
            None => format!("{}/{}", key.group, key.version),
        }
    }
}

impl FromStr for RuntimeConfig {
    type Err = CatalogError;

    /// Parses the flag and runs the checks that need no API registry: upstream's "invalid key with
    /// only api/all=false" and "runtime-config invalid key" (keys must have 2 or 3 `/`-separated
    /// parts). Unknown groups and versions are reported by `ServedApis::builtin`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut entries = BTreeMap::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let mut pair = item.splitn(2, '=');
            let key = pair.next().unwrap_or_default().trim().to_string();
            let value = pair.next().map(str::trim).unwrap_or_default().to_string();
            entries.insert(key, value);
        }
        // kube-apiserver option completion: core-group spellings become "/v1"; api/legacy is ignored.
        let mut rewritten = BTreeMap::new();
        for (key, value) in entries {
            if key == "v1" || key.starts_with("v1/") || key == "api/v1" || key.starts_with("api/v1/") {
                rewritten.insert("/v1".to_string(), value);
            } else if key != "api/legacy" {
                rewritten.insert(key, value);
            }
        }
        if rewritten.len() == 1 && rewritten.get("api/all").is_some_and(|v| v == "false") {
            return Err(CatalogError::OnlyApiAllFalse);
        }
        for key in rewritten.keys() {
            if VERSION_MATCHERS.contains(&key.as_str()) {
                continue;
            }
            let parts = key.split('/').count();
            if parts != 2 && parts != 3 {
                return Err(CatalogError::InvalidRuntimeConfigKey { key: key.clone() });
            }
        }
        Ok(RuntimeConfig { entries: rewritten })
    }
}

impl fmt::Display for RuntimeConfig {
    /// A flag value that parses back to the same settings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&pairs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_configuration_map() {
        let config: RuntimeConfig = " batch/v1=false, apps/v1 ,api/all=true,,".parse().unwrap();
        let entries: Vec<(&str, &str)> = config.entries().collect();
        assert_eq!(
            entries,
            vec![("api/all", "true"), ("apps/v1", ""), ("batch/v1", "false")]
        );
        let later_wins: RuntimeConfig = "batch/v1=false,batch/v1=true".parse().unwrap();
        assert_eq!(
            later_wins.entries().collect::<Vec<_>>(),
            vec![("batch/v1", "true")]
        );
    }

    #[test]
    fn core_group_spellings_become_slash_v1() {
        for input in ["v1=false", "api/v1=false", "v1/pods=false", "api/v1/pods=false"] {
            let config: RuntimeConfig = input.parse().unwrap();
            assert_eq!(
                config.entries().collect::<Vec<_>>(),
                vec![("/v1", "false")],
                "{input}"
            );
        }
        let legacy: RuntimeConfig = "api/legacy=false,batch/v1=true".parse().unwrap();
        assert_eq!(legacy.entries().collect::<Vec<_>>(), vec![("batch/v1", "true")]);
    }

    #[test]
    fn rejects_what_upstream_rejects_before_looking_at_the_registry() {
        assert_eq!(
            "api/all=false".parse::<RuntimeConfig>().unwrap_err().to_string(),
            "invalid key with only api/all=false"
        );
        assert!("api/all=false,batch/v1=true".parse::<RuntimeConfig>().is_ok());
        assert_eq!(
            "batch=true".parse::<RuntimeConfig>().unwrap_err().to_string(),
            "runtime-config invalid key batch"
        );
        assert_eq!(
            "a/b/c/d=true".parse::<RuntimeConfig>().unwrap_err().to_string(),
            "runtime-config invalid key a/b/c/d"
        );
    }

    #[test]
    fn version_matchers_follow_upstream_patterns() {
        assert!(matcher_matches("api/ga", "v1"));
        assert!(matcher_matches("api/ga", "v22"));
        assert!(!matcher_matches("api/ga", "v1beta1"));
        assert!(matcher_matches("api/beta", "v1beta3"));
        assert!(!matcher_matches("api/beta", "v1beta"));
        assert!(matcher_matches("api/alpha", "v1alpha1"));
        assert!(!matcher_matches("api/alpha", "v1beta1"));
        assert!(matcher_matches("api/all", "anything"));
        assert!(!matcher_matches("api/ga", "1"));
    }

    #[test]
    fn values_use_go_booleans() {
        assert!(RuntimeConfig::parse_value("batch/v1", "").unwrap());
        assert!(!RuntimeConfig::parse_value("batch/v1", "0").unwrap());
        assert_eq!(
            RuntimeConfig::parse_value("batch/v1", "nope")
                .unwrap_err()
                .to_string(),
            r#"invalid value of batch/v1: nope, err: strconv.ParseBool: parsing "nope": invalid syntax"#
        );
    }
}
