//! Object name rules (`ValidateObjectMeta`'s `ValidateNameFunc` per resource): most built-in resources
//! take DNS-1123 subdomains, namespaces DNS-1123 labels, services DNS-1035 labels, and RBAC objects any
//! path segment. Violations are upstream's `metadata.name: Invalid value: …` (and `metadata.generateName`
//! for a prefix that could not make a valid name) causes.

use crate::api::status::StatusCause;

/// The naming rule of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// `NameIsDNSSubdomain`: lower-case alphanumerics, `-` and `.`, at most 253 characters.
    Dns1123Subdomain,
    /// `NameIsDNSLabel`: lower-case alphanumerics and `-`, at most 63 characters.
    Dns1123Label,
    /// `NameIsDNS1035Label`: as a DNS-1123 label, starting with a letter.
    Dns1035Label,
    /// `ValidatePathSegmentName` only (RBAC roles and bindings).
    PathSegment,
}

impl NameRule {
    /// The rule kube-apiserver applies to `group`/`resource` names.
    pub(crate) fn of(group: &str, resource: &str) -> NameRule {
        match (group, resource) {
            ("", "namespaces") => NameRule::Dns1123Label,
            ("", "services") => NameRule::Dns1035Label,
            ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            _ => NameRule::Dns1123Subdomain,
        }
    }

    /// The messages `name` violates this rule with (empty: valid).
    pub(crate) fn violations(self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            NameRule::PathSegment => return out,
            NameRule::Dns1123Subdomain => {
                if name.len() > 253 {
                    out.push("must be no more than 253 characters".to_owned());
                }
                let valid = name.split('.').all(is_dns1123_label_text);
                if !valid {
                    out.push(
                        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
                         and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
                         validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                            .to_owned(),
                    );
                }
            }
            NameRule::Dns1123Label => {
                if name.len() > 63 {
                    out.push("must be no more than 63 characters".to_owned());
                }
                if !is_dns1123_label_text(name) {
                    out.push(
                        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
                         must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used \
                         for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                            .to_owned(),
                    );
                }
            }
            NameRule::Dns1035Label => {
                if name.len() > 63 {
                    out.push("must be no more than 63 characters".to_owned());
                }
                let starts_with_letter = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
                if !starts_with_letter || !is_dns1123_label_text(name) {
                    out.push(
                        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
                         alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
                         regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                            .to_owned(),
                    );
                }
            }
        }
        out
    }

    /// The causes for an object's `name` (or, when it has none, its `generateName` prefix, validated as
    /// upstream does: without the trailing `-`, since a random suffix follows).
    pub(crate) fn causes(self, name: &str, generate_name: &str) -> Vec<StatusCause> {
        let (field, value, checked) = if name.is_empty() {
            (
                "metadata.generateName",
                generate_name,
                generate_name.trim_end_matches('-'),
            )
        } else {
            ("metadata.name", name, name)
        };
        if checked.is_empty() {
            return Vec::new();
        }
        self.violations(checked)
            .into_iter()
            .map(|detail| StatusCause::field_invalid(field, value, &detail))
            .collect()
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (length not checked).
fn is_dns1123_label_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_per_resource() {
        assert_eq!(NameRule::of("", "namespaces"), NameRule::Dns1123Label);
        assert_eq!(NameRule::of("", "services"), NameRule::Dns1035Label);
        assert_eq!(NameRule::of("batch", "jobs"), NameRule::Dns1123Subdomain);
        assert_eq!(
            NameRule::of("rbac.authorization.k8s.io", "clusterroles"),
            NameRule::PathSegment
        );
    }

    #[test]
    fn subdomains_labels_and_1035_labels() {
        let subdomain = NameRule::Dns1123Subdomain;
        assert!(subdomain.violations("my-app.v1").is_empty());
        assert_eq!(subdomain.violations("Bad_Name").len(), 1);
        assert_eq!(subdomain.violations("a..b").len(), 1);
        assert_eq!(subdomain.violations(&"a".repeat(254)).len(), 1);
        assert!(NameRule::Dns1123Label.violations("123-abc").is_empty());
        assert_eq!(NameRule::Dns1123Label.violations("a.b").len(), 1);
        assert!(NameRule::Dns1035Label.violations("web-1").is_empty());
        assert_eq!(NameRule::Dns1035Label.violations("1web").len(), 1);
        assert!(
            NameRule::PathSegment
                .violations("system:aggregate-to-edit")
                .is_empty()
        );
    }

    #[test]
    fn causes_name_the_field_and_value() {
        let causes = NameRule::Dns1123Subdomain.causes("Bad_Name", "");
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.name");
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
        // generateName is checked without its trailing dash.
        assert!(NameRule::Dns1123Subdomain.causes("", "pi-").is_empty());
        let causes = NameRule::Dns1123Subdomain.causes("", "Pi-");
        assert_eq!(causes[0].field, "metadata.generateName");
    }
}
