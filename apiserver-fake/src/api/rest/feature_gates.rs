//! Which feature gates of the registries' strategies and built-in validation are on at which minor:
//! the gates whose default changed between the minors the fake serves and that decide what a
//! kube-apiserver keeps of a written object (`dropDisabledFields`) or how it validates it.
//!
//! The defaults are upstream's versioned specs (`pkg/features/kube_features.go`,
//! `defaultVersionedKubernetesFeatureGates`): a gate is on from the minor its default became `true`
//! (its beta or GA release) and off before. They are read at the **emulated** version, as a
//! kube-apiserver started with `--emulated-version` resolves its feature gates (compatibility
//! versions, KEP-4330): a 1.32 binary emulating 1.30 drops a Job's `successPolicy` as 1.30 does.
//! `--feature-gates` does not reach these gates (the fake rejects their names there, as it does every
//! gate it does not act on in [`crate::api::catalog::FeatureGates`]), so each is at its default.

use crate::api::catalog::KubeVersion;

/// A gate of a strategy or of validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Init containers with `restartPolicy: Always` (sidecars): alpha 1.28, beta (on) 1.29, GA 1.33.
    SidecarContainers,
    /// A Job's `podReplacementPolicy`: alpha 1.28, beta (on) 1.29, GA 1.34.
    JobPodReplacementPolicy,
    /// A Job's `backoffLimitPerIndex` and `maxFailedIndexes`, and the `FailIndex` action of its pod
    /// failure policy: alpha 1.28, beta (on) 1.29, GA 1.33.
    JobBackoffLimitPerIndex,
    /// A Job's `successPolicy`: alpha 1.30, beta (on) 1.31, GA 1.33.
    JobSuccessPolicy,
    /// A Job's `managedBy`: alpha 1.30, beta (on) 1.32, GA 1.35.
    JobManagedBy,
    /// A Service's `trafficDistribution`: alpha 1.30, beta (on) 1.31, GA 1.33.
    ServiceTrafficDistribution,
    /// The `sleep` handler of a container's `lifecycle` hooks: alpha 1.29, beta (on) 1.30, GA 1.34.
    PodLifecycleSleepAction,
    /// A container's `resizePolicy`: alpha 1.27, beta (on) 1.33, GA 1.35.
    InPlacePodVerticalScaling,
    /// Environment variable names of any printable ASCII but `=`: alpha 1.30, beta (on) 1.32, GA 1.34.
    RelaxedEnvironmentVariableValidation,
    /// A StatefulSet's `updateStrategy.rollingUpdate.maxUnavailable`: alpha since 1.24, off through
    /// 1.36 (a real kube-apiserver 1.36.2 stores a StatefulSet without it: tests/upstream_storage.rs).
    MaxUnavailableStatefulSet,
}

impl Gate {
    /// The minor from which the gate is on by default; `None`: off in every minor served.
    fn default_on_since(self) -> Option<u32> {
        match self {
            Self::SidecarContainers | Self::JobPodReplacementPolicy | Self::JobBackoffLimitPerIndex => {
                Some(29)
            }
            Self::PodLifecycleSleepAction => Some(30),
            Self::JobSuccessPolicy | Self::ServiceTrafficDistribution => Some(31),
            Self::JobManagedBy | Self::RelaxedEnvironmentVariableValidation => Some(32),
            Self::InPlacePodVerticalScaling => Some(33),
            Self::MaxUnavailableStatefulSet => None,
        }
    }

    /// Whether the gate is on in a server emulating `version`.
    pub(crate) fn enabled(self, version: KubeVersion) -> bool {
        self.default_on_since()
            .is_some_and(|since| version.minor >= since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion { major: 1, minor }
    }

    #[test]
    fn gates_turn_on_at_their_beta_minor() {
        assert!(!Gate::SidecarContainers.enabled(v(28)));
        assert!(Gate::SidecarContainers.enabled(v(29)));
        assert!(!Gate::JobSuccessPolicy.enabled(v(30)));
        assert!(Gate::JobSuccessPolicy.enabled(v(31)));
        assert!(!Gate::JobManagedBy.enabled(v(31)));
        assert!(Gate::JobManagedBy.enabled(v(32)));
        assert!(!Gate::InPlacePodVerticalScaling.enabled(v(32)));
        assert!(Gate::InPlacePodVerticalScaling.enabled(v(36)));
        assert!(!Gate::MaxUnavailableStatefulSet.enabled(v(36)));
    }

    #[test]
    fn the_catalog_agrees_on_the_gates_both_know() {
        for minor in 28..=36 {
            assert_eq!(
                Gate::InPlacePodVerticalScaling.enabled(v(minor)),
                crate::api::catalog::FeatureGates::default_value("InPlacePodVerticalScaling", v(minor))
                    .unwrap_or(false),
                "1.{minor}"
            );
        }
    }
}
