//! Admission policies on ConfigMaps and the ConfigMaps they judge, as the ValidatingAdmissionPolicy and
//! MutatingAdmissionPolicy kubectl tests write them (YAML for [`super::demo::KubectlDemo::apply`]).

/// A policy of `kind` (`ValidatingAdmissionPolicy` or `MutatingAdmissionPolicy`) named `name` on the
/// CREATE of ConfigMaps labelled `case: <name>` ([`case_config_map`]), with `failurePolicy` and
/// `matchConditions` (a YAML flow list), then `spec` (the rest of its spec, each line indented two
/// spaces and ended by a newline: `  validations: […]\n`); then its binding (`{kind}Binding`, the same
/// name) with `binding` appended to the binding's flow-mapping spec (`", validationActions: [Deny]"`,
/// or `""`). Each document ends with `---`, so that policies concatenate into one file.
pub fn policy_on_case(
    kind: &str,
    name: &str,
    failure_policy: &str,
    conditions: &str,
    spec: &str,
    binding: &str,
) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: {name}}}
spec:
  failurePolicy: {failure_policy}
  matchConstraints:
    objectSelector: {{matchLabels: {{case: {name}}}}}
    resourceRules:
    - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}
  matchConditions: {conditions}
{spec}---
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}Binding
metadata: {{name: {name}}}
spec: {{policyName: {name}{binding}}}
---
"
    )
}

/// A ConfigMap `name` labelled `case: <name>` (so [`policy_on_case`]'s policy of that name judges it)
/// with `keys` data keys `k0`…, each with its own value `v0`….
pub fn case_config_map(name: &str, keys: usize) -> String {
    let data: Vec<String> = (0..keys).map(|i| format!("k{i}: v{i}")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{case: {name}}}}}\ndata: {{{}}}\n",
        data.join(", ")
    )
}

/// A CEL expression comparing every key of a ConfigMap's data with every other: quadratic in the keys,
/// so that over 1,000 keys ([`case_config_map`]) one call is over upstream's per-call cost limit.
pub const EVERY_PAIR: &str =
    "object.data.all(k, object.data.all(j, k == j || object.data[k] != object.data[j]))";

/// Three `matchConditions` (a YAML flow list for [`policy_on_case`]), `pairs-a`, `pairs-b` and
/// `pairs-c`, each [`EVERY_PAIR`]: over 1,000 keys together they spend the conditions' cost budget.
pub fn every_pair_conditions() -> String {
    let condition = format!("{{name: pairs, expression: \"{EVERY_PAIR}\"}}");
    format!(
        "[{}]",
        ["a", "b", "c"]
            .map(|name| condition.replace("pairs", &format!("pairs-{name}")))
            .join(", ")
    )
}
