//! The schema table's layout: which fields a Kubernetes protobuf message has and how each becomes JSON.
//!
//! The rows themselves live in the generated `messages` module (`protobuf/messages.rs`, written by
//! `scripts/gen_protobuf_table.py`); this module defines what a row means and finds messages by their
//! proto name (`k8s.io.api.core.v1.Pod`).

use super::messages::MESSAGES;

/// One protobuf message type of the Kubernetes API.
#[derive(Debug)]
pub(super) struct Message {
    /// Fully qualified proto name, e.g. `k8s.io.api.batch.v1.JobSpec`.
    pub(super) name: &'static str,
    /// Set for the Go types with a JSON form of their own (`Time`, `Quantity`, ...).
    pub(super) special: Option<Special>,
    /// Fields in Go struct order, which is the order of keys in the JSON object.
    pub(super) fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub(super) struct Field {
    /// The protobuf field number.
    pub(super) number: u32,
    /// The JSON key (empty for [`Label::Inline`]).
    pub(super) json: &'static str,
    /// The value type (the map value's type for [`Label::Map`]).
    pub(super) ty: Type,
    /// Single, repeated, map or inline.
    pub(super) label: Label,
    /// Whether a zero scalar that is on the wire shows up in JSON.
    pub(super) zero: Zero,
}

/// The protobuf value types the Kubernetes API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
    /// `string` (JSON string).
    String,
    /// `bool`.
    Bool,
    /// `int32` (varint, truncated to 32 bits as Go does).
    Int32,
    /// `int64`.
    Int64,
    /// `double` (fixed 64 bits).
    Double,
    /// `bytes` (base64 in JSON, as Go's `[]byte`).
    Bytes,
    /// An embedded message, by proto name.
    Message(&'static str),
}

/// How a field repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Label {
    /// At most one value (the last one on the wire wins; messages merge).
    Single,
    /// A JSON array.
    Repeated,
    /// `map<string, ty>`: repeated entries `{1: key, 2: value}`, a JSON object with sorted keys.
    Map,
    /// A Go embedded struct (`json:",inline"`): its fields are merged into the parent object.
    Inline,
}

/// What Go's JSON encoder does with a scalar field's zero value (`""`, `0`, `false`, empty bytes).
///
/// Go's generated marshallers always write non-pointer scalars, so "on the wire" does not mean "set";
/// the Go struct's JSON tags decide what `kube-apiserver` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Zero {
    /// `omitempty` on a non-pointer value: a zero is dropped.
    Omit,
    /// A pointer (`*int32`, `*bool`, ...) or a field without `omitempty`: a zero is kept.
    Keep,
}

/// Go types whose JSON form is not an object of their proto fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Special {
    /// `metav1.Time`: RFC 3339 seconds, `null` for the zero time.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, `null` for the zero time.
    MicroTime,
    /// `metav1.Duration`: Go's `time.Duration` string (`1h0m0s`).
    Duration,
    /// `metav1.FieldsV1`: the raw JSON it carries.
    FieldsV1,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`: the raw JSON it carries.
    RawExtension,
    /// A Go `[]string` wrapped in a message (`ExtraValue`, `Verbs`): a JSON array.
    StringList,
    /// apiextensions `JSON`: the raw JSON it carries.
    Json,
    /// `JSONSchemaPropsOrArray`: the schema, or the array of schemas.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool`: the schema, or the boolean.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray`: the schema, or the array of strings.
    SchemaOrStringArray,
}

/// Non-pointer message fields whose Go JSON tag has `omitzero`: always on the wire (possibly empty),
/// left out of JSON when zero. kube-apiserver 1.35 tagged `ObjectMeta.creationTimestamp` so, which is
/// why a pod template's metadata no longer shows `creationTimestamp: null`.
const OMIT_ZERO: &[(&str, &str)] = &[(
    "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "creationTimestamp",
)];

/// Whether `field` of `message` is one of the [`OMIT_ZERO`] fields.
pub(super) fn omits_zero(message: &Message, field: &Field) -> bool {
    OMIT_ZERO.contains(&(message.name, field.json))
}

/// The message with this proto name, if the table has it.
pub(super) fn message(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .and_then(|i| MESSAGES.get(i))
}

impl Message {
    /// The field with this number.
    pub(super) fn field(&self, number: u32) -> Option<(usize, &'static Field)> {
        self.fields.iter().enumerate().find(|(_, f)| f.number == number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_every_reference_resolves() {
        assert!(MESSAGES.len() > 1000);
        for pair in MESSAGES.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} >= {}",
                pair[0].name,
                pair[1].name
            );
        }
        for m in MESSAGES {
            let mut numbers = std::collections::HashSet::new();
            for f in m.fields {
                assert!(
                    numbers.insert(f.number),
                    "{}: duplicate field {}",
                    m.name,
                    f.number
                );
                assert_eq!(
                    f.json.is_empty(),
                    f.label == Label::Inline,
                    "{}.{}",
                    m.name,
                    f.json
                );
                if let Type::Message(inner) = f.ty {
                    assert!(message(inner).is_some(), "{}.{} -> {inner}", m.name, f.json);
                }
            }
        }
    }

    #[test]
    fn json_names_follow_kubernetes_not_snake_case() {
        let names = |m: &str| -> Vec<&str> { message(m).unwrap().fields.iter().map(|f| f.json).collect() };
        assert!(names("k8s.io.api.core.v1.PodStatus").contains(&"podIP"));
        assert!(names("k8s.io.api.rbac.v1.PolicyRule").contains(&"nonResourceURLs"));
        assert!(names("k8s.io.api.core.v1.ServiceSpec").contains(&"clusterIPs"));
        assert!(names("k8s.io.api.core.v1.Secret").contains(&"type"));
        assert!(names("k8s.io.api.core.v1.VolumeSource").contains(&"downwardAPI"));
        let props = names("k8s.io.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps");
        assert!(props.contains(&"$ref") && props.contains(&"x-kubernetes-preserve-unknown-fields"));
        // Go's embedded structs are inline in JSON.
        let volume = message("k8s.io.api.core.v1.Volume").unwrap();
        assert_eq!(volume.field(2).unwrap().1.label, Label::Inline);
    }

    #[test]
    fn pointer_and_required_scalars_keep_their_zero() {
        let zero = |m: &str, json: &str| {
            message(m)
                .unwrap()
                .fields
                .iter()
                .find(|f| f.json == json)
                .unwrap()
                .zero
        };
        assert_eq!(zero("k8s.io.api.apps.v1.DeploymentSpec", "replicas"), Zero::Keep);
        assert_eq!(
            zero("k8s.io.api.core.v1.PodSpec", "automountServiceAccountToken"),
            Zero::Keep
        );
        assert_eq!(
            zero("k8s.io.api.core.v1.ContainerPort", "containerPort"),
            Zero::Keep
        );
        assert_eq!(zero("k8s.io.api.core.v1.Container", "name"), Zero::Keep);
        assert_eq!(
            zero("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "namespace"),
            Zero::Omit
        );
        assert_eq!(
            zero("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "generation"),
            Zero::Omit
        );
        assert_eq!(zero("k8s.io.api.core.v1.Container", "tty"), Zero::Omit);
    }
}
