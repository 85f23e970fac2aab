//! Accept negotiation of the discovery endpoints (upstream `negotiation.NegotiateMediaTypeOptions`
//! with `DiscoveryEndpointRestrictions`, then the legacy handlers' default restrictions).

use super::aggregated::AggregatedVersion;

/// Serialization of a discovery response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MediaKind {
    /// `application/json`.
    Json,
    /// `application/yaml` (keys sorted, as sigs.k8s.io/yaml writes them).
    Yaml,
}

impl MediaKind {
    /// The bare media type.
    pub(crate) fn media_type(self) -> &'static str {
        match self {
            MediaKind::Json => "application/json",
            MediaKind::Yaml => "application/yaml",
        }
    }
}

/// What a request negotiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Negotiated {
    /// An unaggregated document (`APIVersions`, `APIGroupList`, ...).
    Legacy(MediaKind),
    /// An `APIGroupDiscoveryList`.
    Aggregated {
        /// `v2` or `v2beta1`.
        version: AggregatedVersion,
        /// JSON or YAML.
        media: MediaKind,
        /// The `profile` parameter (`nopeer` asks for the local document only, KEP-4020 beta).
        profile: Option<String>,
    },
}

/// Media types kube-apiserver's discovery serializers offer, as its 406 message lists them.
pub(crate) const ACCEPTED_MEDIA_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

struct Clause<'a> {
    media_type: String,
    params: Vec<(String, &'a str)>,
    quality: f32,
    specificity: u8,
}

fn parse_clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|raw| {
            let mut parts = raw.split(';');
            let media_type = parts.next()?.trim().to_ascii_lowercase();
            if media_type.is_empty() {
                return None;
            }
            let mut quality = 1.0_f32;
            let mut params = Vec::new();
            for param in parts {
                let Some((key, value)) = param.split_once('=') else {
                    continue;
                };
                let key = key.trim().to_ascii_lowercase();
                let value = value.trim().trim_matches('"');
                if key == "q" {
                    quality = value.parse().unwrap_or(0.0);
                } else {
                    params.push((key, value));
                }
            }
            let specificity = match media_type.as_str() {
                "*/*" => 0,
                t if t.ends_with("/*") => 1,
                _ => 2,
            };
            Some(Clause {
                media_type,
                params,
                quality,
                specificity,
            })
        })
        .filter(|clause| clause.quality > 0.0)
        .collect();
    // goautoneg order: quality first, then the more specific range.
    clauses.sort_by(|a, b| {
        b.quality
            .partial_cmp(&a.quality)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(b.specificity.cmp(&a.specificity))
    });
    clauses
}

/// Negotiates an `Accept` header; `aggregated_served` says which aggregated versions this server
/// offers. `None` means nothing acceptable: answer 406 with [`ACCEPTED_MEDIA_TYPES`].
///
/// A clause naming `g`/`v`/`as` is acceptable only for a served `apidiscovery.k8s.io`
/// `APIGroupDiscoveryList` version; other parameters (`profile`, `pretty`, ...) are ignored as
/// upstream ignores unrecognized ones, and `stream` rules a clause out. Protobuf clauses are skipped:
/// this fake only writes JSON and YAML (a real server would answer protobuf).
pub(crate) fn negotiate(
    accept: Option<&str>,
    aggregated_served: impl Fn(AggregatedVersion) -> bool,
) -> Option<Negotiated> {
    let accept = accept.map(str::trim).unwrap_or_default();
    if accept.is_empty() {
        return Some(Negotiated::Legacy(MediaKind::Json));
    }
    for clause in parse_clauses(accept) {
        let media = match clause.media_type.as_str() {
            "application/json" | "application/*" | "*/*" => MediaKind::Json,
            "application/yaml" => MediaKind::Yaml,
            _ => continue,
        };
        let param = |name: &str| clause.params.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
        if param("stream").is_some_and(|s| !s.is_empty()) {
            continue;
        }
        let (group, version, kind) = (param("g"), param("v"), param("as"));
        if group.is_none() && version.is_none() && kind.is_none() {
            return Some(Negotiated::Legacy(media));
        }
        if group != Some("apidiscovery.k8s.io") || kind != Some("APIGroupDiscoveryList") {
            continue;
        }
        let version = match version {
            Some("v2") => AggregatedVersion::V2,
            Some("v2beta1") => AggregatedVersion::V2beta1,
            _ => continue,
        };
        if !aggregated_served(version) {
            continue;
        }
        return Some(Negotiated::Aggregated {
            version,
            media,
            profile: param("profile").map(str::to_string),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_only(version: AggregatedVersion) -> bool {
        version == AggregatedVersion::V2
    }

    #[test]
    fn plain_and_missing_accept_are_legacy_json() {
        assert_eq!(
            negotiate(None, v2_only),
            Some(Negotiated::Legacy(MediaKind::Json))
        );
        assert_eq!(
            negotiate(Some("*/*"), v2_only),
            Some(Negotiated::Legacy(MediaKind::Json))
        );
        assert_eq!(
            negotiate(Some("application/yaml"), v2_only),
            Some(Negotiated::Legacy(MediaKind::Yaml))
        );
    }

    #[test]
    fn client_go_aggregated_accept_picks_v2() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                      application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(Some(accept), v2_only),
            Some(Negotiated::Aggregated {
                version: AggregatedVersion::V2,
                media: MediaKind::Json,
                profile: None
            })
        );
    }

    #[test]
    fn unserved_v2beta1_falls_through_to_the_next_clause() {
        let accept =
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(Some(accept), v2_only),
            Some(Negotiated::Legacy(MediaKind::Json))
        );
        assert_eq!(
            negotiate(Some(accept), |_| true),
            Some(Negotiated::Aggregated {
                version: AggregatedVersion::V2beta1,
                media: MediaKind::Json,
                profile: None
            })
        );
    }

    #[test]
    fn profile_is_kept_and_quality_orders_clauses() {
        let accept = "application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer";
        assert_eq!(
            negotiate(Some(accept), v2_only),
            Some(Negotiated::Aggregated {
                version: AggregatedVersion::V2,
                media: MediaKind::Json,
                profile: Some("nopeer".to_string())
            })
        );
    }

    #[test]
    fn protobuf_only_or_foreign_conversions_are_not_acceptable() {
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), v2_only),
            None
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1;g=meta.k8s.io"), v2_only),
            None
        );
        assert_eq!(negotiate(Some("text/html"), v2_only), None);
        assert_eq!(negotiate(Some("application/json;q=0"), v2_only), None);
    }
}
