//! [`FeatureGates`]: kube-apiserver's `--feature-gates`, for the gates that change what a server serves.
//!
//! Only gates this fake acts on are known: the ones that register or hide storage in the tables, the
//! ones of the Mixed Version Proxy and its inputs, plus the `AllAlpha` / `AllBeta` switches. Any other
//! name is rejected with kube-apiserver's own message, so a flag line that works here also works there.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::{CatalogError, KubeVersion};

/// Maturity of a feature gate at one minor (component-base `featuregate.PreRelease`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Alpha: off by default, switched by `AllAlpha`.
    Alpha,
    /// Beta: switched by `AllBeta`.
    Beta,
    /// Generally available.
    Ga,
    /// Deprecated.
    Deprecated,
}

/// One entry of a gate's versioned spec: from `since` on, the gate has this stage and default.
#[derive(Clone, Copy, Debug)]
struct Spec {
    since: u32,
    stage: Stage,
    default: bool,
    locked: bool,
}

const fn spec(since: u32, stage: Stage, default: bool) -> Spec {
    Spec {
        since,
        stage,
        default,
        locked: false,
    }
}

const fn locked(since: u32, stage: Stage, default: bool) -> Spec {
    Spec {
        since,
        stage,
        default,
        locked: true,
    }
}

/// Versioned specs of the known gates (minor numbers of Kubernetes 1.x), as in upstream's
/// `defaultVersionedKubernetesFeatureGates`. A gate is unknown before its first entry.
const GATES: &[(&str, &[Spec])] = &[
    (
        "APIServerIdentity",
        &[spec(20, Stage::Alpha, false), spec(26, Stage::Beta, true)],
    ),
    (
        // Hides aggregated discovery `apidiscovery.k8s.io/v2beta1` (removed type) from 1.33.
        "AggregatedDiscoveryRemoveBetaType",
        &[
            spec(33, Stage::Deprecated, true),
            locked(35, Stage::Deprecated, true),
        ],
    ),
    (
        // Ratcheting of custom resources' schema and CEL validation on updates (KEP-4008).
        "CRDValidationRatcheting",
        &[
            spec(28, Stage::Alpha, false),
            spec(30, Stage::Beta, true),
            locked(33, Stage::Ga, true),
        ],
    ),
    (
        "ClusterTrustBundle",
        &[spec(27, Stage::Alpha, false), spec(33, Stage::Beta, false)],
    ),
    ("GenericWorkload", &[spec(35, Stage::Alpha, false)]),
    (
        "InPlacePodVerticalScaling",
        &[
            spec(27, Stage::Alpha, false),
            spec(33, Stage::Beta, true),
            locked(35, Stage::Ga, true),
        ],
    ),
    (
        "MutatingAdmissionPolicy",
        &[
            spec(32, Stage::Alpha, false),
            spec(34, Stage::Beta, false),
            spec(36, Stage::Ga, true),
        ],
    ),
    (
        "PodCertificateRequest",
        &[spec(34, Stage::Alpha, false), spec(35, Stage::Beta, false)],
    ),
    ("StorageVersionAPI", &[spec(20, Stage::Alpha, false)]),
    (
        "StorageVersionMigrator",
        &[spec(30, Stage::Alpha, false), spec(35, Stage::Beta, false)],
    ),
    (
        "UnknownVersionInteroperabilityProxy",
        &[spec(28, Stage::Alpha, false), spec(36, Stage::Beta, true)],
    ),
];

/// `AllAlpha=true|false` sets every alpha gate that is not set explicitly.
pub const ALL_ALPHA: &str = "AllAlpha";
/// `AllBeta=true|false` sets every beta gate that is not set explicitly.
pub const ALL_BETA: &str = "AllBeta";

fn specs(name: &str) -> Option<&'static [Spec]> {
    GATES
        .iter()
        .find(|(gate, _)| *gate == name)
        .map(|(_, specs)| *specs)
}

fn spec_at(name: &str, version: KubeVersion) -> Option<Spec> {
    specs(name)?
        .iter()
        .rev()
        .find(|spec| spec.since <= version.minor)
        .copied()
}

/// Parsed `--feature-gates`: the explicit settings, resolved against a minor's defaults on use.
///
/// `Default` is "no flag": every gate at its default for the minor asked about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    explicit: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// Sets one gate, as a `Name=value` pair of the flag would; rejects unknown names.
    pub fn set(&mut self, name: &str, enabled: bool) -> Result<(), CatalogError> {
        if name != ALL_ALPHA && name != ALL_BETA && specs(name).is_none() {
            return Err(CatalogError::UnrecognizedFeatureGate {
                name: name.to_string(),
            });
        }
        self.explicit.insert(name.to_string(), enabled);
        Ok(())
    }

    /// The explicit settings, sorted by name.
    pub fn explicit(&self) -> impl Iterator<Item = (&str, bool)> {
        self.explicit.iter().map(|(name, value)| (name.as_str(), *value))
    }

    /// Checks the settings against a real `version` binary: gates it does not know yet are
    /// unrecognized, and gates locked to their default cannot be changed (upstream messages).
    pub fn validate(&self, version: KubeVersion) -> Result<(), CatalogError> {
        for (name, value) in &self.explicit {
            if name == ALL_ALPHA || name == ALL_BETA {
                continue;
            }
            let Some(spec) = spec_at(name, version) else {
                return Err(CatalogError::UnrecognizedFeatureGate { name: name.clone() });
            };
            if spec.locked && spec.default != *value {
                return Err(CatalogError::LockedFeatureGate {
                    name: name.clone(),
                    value: *value,
                    locked_to: spec.default,
                });
            }
        }
        Ok(())
    }

    /// Whether gate `name` is on in a `version` server: the explicit setting, else `AllAlpha` /
    /// `AllBeta` for a gate at that stage, else the gate's default. Unknown gates (or gates that do
    /// not exist yet in `version`) are off.
    pub fn enabled(&self, name: &str, version: KubeVersion) -> bool {
        let Some(spec) = spec_at(name, version) else {
            return false;
        };
        if let Some(value) = self.explicit.get(name) {
            return *value;
        }
        let switch = match spec.stage {
            Stage::Alpha => self.explicit.get(ALL_ALPHA),
            Stage::Beta => self.explicit.get(ALL_BETA),
            Stage::Ga | Stage::Deprecated => None,
        };
        switch.copied().unwrap_or(spec.default)
    }

    /// Stage of gate `name` at `version` (`None`: unknown there).
    pub fn stage(name: &str, version: KubeVersion) -> Option<Stage> {
        spec_at(name, version).map(|spec| spec.stage)
    }

    /// Default of gate `name` at `version` (`None`: unknown there).
    pub fn default_value(name: &str, version: KubeVersion) -> Option<bool> {
        spec_at(name, version).map(|spec| spec.default)
    }
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for FeatureGates {
    type Err = CatalogError;

    /// Parses `A=true,B=false` like component-base's `featureGate.Set`: empty items are skipped,
    /// names and values are trimmed, values use Go's boolean spellings (`1`, `t`, `TRUE`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        for item in s.split(',') {
            if item.is_empty() {
                continue;
            }
            let mut pair = item.splitn(2, '=');
            let name = pair.next().unwrap_or_default().trim();
            let Some(raw) = pair.next() else {
                return Err(CatalogError::MissingFeatureGateValue {
                    name: name.to_string(),
                });
            };
            let value = raw.trim();
            let enabled = parse_go_bool(value).ok_or_else(|| CatalogError::InvalidFeatureGateValue {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            gates.set(name, enabled)?;
        }
        Ok(gates)
    }
}

impl fmt::Display for FeatureGates {
    /// The flag value that parses back to the same settings (`A=true,B=false`, sorted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.explicit.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&pairs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion::new(1, minor).unwrap()
    }

    #[test]
    fn defaults_follow_the_minor() {
        let gates = FeatureGates::default();
        assert!(!gates.enabled("UnknownVersionInteroperabilityProxy", v(35)));
        assert!(gates.enabled("UnknownVersionInteroperabilityProxy", v(36)));
        assert!(!gates.enabled("StorageVersionAPI", v(36)));
        assert!(gates.enabled("APIServerIdentity", v(28)));
        assert!(!gates.enabled("InPlacePodVerticalScaling", v(32)));
        assert!(gates.enabled("InPlacePodVerticalScaling", v(33)));
        assert!(!gates.enabled("MutatingAdmissionPolicy", v(35)));
        assert!(gates.enabled("MutatingAdmissionPolicy", v(36)));
        assert!(!gates.enabled("NoSuchGate", v(36)));
    }

    #[test]
    fn explicit_settings_beat_all_alpha_and_all_beta() {
        let gates: FeatureGates = "AllAlpha=true, AllBeta=true,ClusterTrustBundle=false"
            .parse()
            .unwrap();
        assert!(gates.enabled("GenericWorkload", v(36)), "alpha via AllAlpha");
        assert!(gates.enabled("StorageVersionMigrator", v(36)), "beta via AllBeta");
        assert!(!gates.enabled("ClusterTrustBundle", v(36)), "explicit wins");
        assert!(gates.enabled("StorageVersionAPI", v(36)));
        let off: FeatureGates = "AllBeta=false".parse().unwrap();
        assert!(!off.enabled("UnknownVersionInteroperabilityProxy", v(36)));
    }

    #[test]
    fn parse_errors_use_upstream_messages() {
        let err = "Bogus=true".parse::<FeatureGates>().unwrap_err();
        assert_eq!(err.to_string(), "unrecognized feature gate: Bogus");
        let err = "StorageVersionAPI=yes".parse::<FeatureGates>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid value of StorageVersionAPI=yes, err: strconv.ParseBool: parsing "yes": invalid syntax"#
        );
        let err = "StorageVersionAPI".parse::<FeatureGates>().unwrap_err();
        assert_eq!(err.to_string(), "missing bool value for StorageVersionAPI");
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::default());
        let parsed: FeatureGates = "StorageVersionAPI=1,APIServerIdentity=F".parse().unwrap();
        assert_eq!(
            parsed.to_string(),
            "APIServerIdentity=false,StorageVersionAPI=true"
        );
    }

    #[test]
    fn validate_knows_what_each_minor_knows() {
        let gates: FeatureGates = "GenericWorkload=true".parse().unwrap();
        assert!(gates.validate(v(35)).is_ok());
        assert_eq!(
            gates.validate(v(34)).unwrap_err().to_string(),
            "unrecognized feature gate: GenericWorkload"
        );
        let gates: FeatureGates = "InPlacePodVerticalScaling=false".parse().unwrap();
        assert!(gates.validate(v(34)).is_ok());
        assert_eq!(
            gates.validate(v(35)).unwrap_err().to_string(),
            "cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true"
        );
    }
}
