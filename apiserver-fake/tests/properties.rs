//! Property tests (proptest) of the decoders that take a client's bytes, where a coverage-guided fuzzer
//! cannot run on a stable toolchain: label and field selectors, Kubernetes protobuf, YAML, JSON patch,
//! merge patch and strategic merge patch, CEL expressions (compiled, evaluated, and run as CRD rules). Each takes any input without panicking, and the selector
//! parser agrees with a model on well-formed selectors.
//!
//! `PROPTEST_CASES` sets the number of cases (256 by default; CI runs the default, a long run is
//! `PROPTEST_CASES=100000 cargo test -p apiserver-fake --test properties`). A failing case is saved
//! under `tests/properties.proptest-regressions` and replayed first on every later run.

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::openapi::definitions::Definitions;
use apiserver_fake::api::rest::patch::{PatchSchema, PatchType, apply};
use apiserver_fake::api::rest::selector::{FieldSelector, LabelSelector};
use apiserver_fake::api::rest::structural::validation_rules;
use apiserver_fake::api::status::StatusReason;
use apiserver_fake::cel;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z$]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z$]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Failing cases are kept beside this file and replayed first.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Any selector text is parsed or refused with a 400, never a panic.
    #[test]
    fn any_selector_is_parsed_or_refused(text in "[ -~]{0,40}") {
        if let Err(status) = LabelSelector::parse(&text) {
            prop_assert_eq!(status.code, 400);
        }
        if let Err(status) = FieldSelector::parse(&text, "", "pods") {
            prop_assert_eq!(status.code, 400);
        }
    }

    /// A conjunction of `k=v` / `k!=v` requirements selects exactly the objects a model of it selects.
    #[test]
    fn equality_selectors_agree_with_a_model(
        requirements in proptest::collection::vec(("[a-c]", any::<bool>(), "[xy]"), 1..4),
        labels in proptest::collection::btree_map("[a-c]", "[xy]", 0..3),
    ) {
        let text: Vec<String> = requirements
            .iter()
            .map(|(k, equal, v)| format!("{k}{}{v}", if *equal { "=" } else { "!=" }))
            .collect();
        let selector = LabelSelector::parse(&text.join(",")).unwrap();
        let object = json!({"metadata": {"labels": labels}});
        let model = requirements.iter().all(|(k, equal, v)| {
            let has = labels.get(k) == Some(v);
            if *equal { has } else { !has }
        });
        prop_assert_eq!(selector.matches(&object), model);
    }

    /// Any bytes as a Kubernetes protobuf body are decoded or refused, never a panic.
    #[test]
    fn any_protobuf_body_is_decoded_or_refused(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut framed = b"k8s\0".to_vec();
        framed.extend_from_slice(&body);
        let _ = apiserver_fake::protobuf::decode_object(&framed);
        let _ = apiserver_fake::protobuf::decode_object(&body);
    }

    /// Any bytes as a YAML body are decoded or refused, never a panic.
    #[test]
    fn any_yaml_body_is_decoded_or_refused(body in "[ -~\n\t]{0,200}") {
        let _ = apiserver_fake::api::yaml::decode(body.as_bytes());
    }

    /// Any patch of any type on any object (of a built-in kind, or a custom one without a schema) is
    /// applied or refused with a 4xx, or for a strategic merge the reasonless 500 upstream answers
    /// strategic merge errors that are not Statuses with; never a panic.
    #[test]
    fn any_patch_is_applied_or_refused(
        original in json_value(),
        patch in json_value(),
        kind in 0..3u8,
        built_in in any::<bool>(),
    ) {
        let patch_type = match kind {
            0 => PatchType::Json,
            1 => PatchType::Merge,
            _ => PatchType::StrategicMerge,
        };
        let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
        let schema = if built_in {
            PatchSchema::of_kind(definitions, "", "v1", "Pod")
        } else {
            PatchSchema::unknown(definitions)
        };
        let body = serde_json::to_vec(&patch).unwrap();
        if let Err(status) = apply(patch_type, &original, &body, schema) {
            let merge_error = patch_type == PatchType::StrategicMerge
                && status.code == 500
                && status.reason == StatusReason::Unknown;
            prop_assert!((400..500).contains(&status.code) || merge_error, "{status:?}");
        }
    }

    /// Any expression made of CEL's tokens compiles or is a compile error; compiled, it evaluates to a
    /// value or an error against any JSON `self`, and as an `x-kubernetes-validations` rule on it (with
    /// `oldSelf`) yields causes: never a panic.
    #[test]
    fn any_cel_expression_is_compiled_and_evaluated_or_refused(
        tokens in proptest::collection::vec(prop_oneof![
            Just("self"), Just("oldSelf"), Just("."), Just("a"), Just("size"), Just("("), Just(")"),
            Just("["), Just("]"), Just("{"), Just("}"), Just(","), Just(":"), Just("?"), Just("+"),
            Just("-"), Just("*"), Just("/"), Just("%"), Just("=="), Just("<"), Just("!"), Just("&&"),
            Just("||"), Just("in"), Just("1"), Just("0"), Just("2.5"), Just("'x'"), Just("null"),
            Just("true"), Just("all(x, x"), Just("map(x, x"), Just("exists_one(x, x"), Just("has("),
            Just("matches('["), Just("sum()"), Just("min()"), Just("isSorted()"), Just("split('')"),
            Just("lowerAscii()"), Just("substring(1)"), Just("int("), Just("string("), Just("x"),
        ], 0..24),
        this in json_value(),
    ) {
        let source = tokens.join(" ");
        if let Ok(expression) = cel::compile(&source, &["self", "oldSelf"]) {
            let value = cel::value::to_cel(&this);
            let _ = cel::evaluate(&expression, &[("self", value.clone()), ("oldSelf", value)]);
        }
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [{"rule": source, "messageExpression": source}]});
        let object = json!({"metadata": {"name": "x"}, "spec": this});
        for cause in validation_rules::validate(&schema, &object, Some(&object), true).causes {
            prop_assert!(cause.reason.starts_with("FieldValue"), "{cause:?}");
        }
    }
}
