//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`), as `k8s.io/apimachinery/pkg/labels`
//! and `pkg/fields` parse and match them.
//!
//! Label selectors support `=`, `==`, `!=`, `in (..)`, `notin (..)`, `key` (exists), `!key` (does not
//! exist), `>` and `<` (integer comparison). Field selectors support `=`, `==` and `!=` on
//! `metadata.name`, `metadata.namespace` and the few extra fields upstream registers for some built-in
//! resources (e.g. `status.phase` on pods); other fields are rejected with upstream's message.

use serde_json::Value;

use crate::api::status::Status;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    /// `key=v`, `key==v`, `key in (v1,v2)`.
    In(String, Vec<String>),
    /// `key!=v`, `key notin (v1,v2)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key>n`.
    GreaterThan(String, i64),
    /// `key<n`.
    LessThan(String, i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Splits at top-level commas (commas inside `( )` belong to a set).
fn split_requirements(selector: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| "found ')', expected: ',' or 'end of string'".to_owned())?
            }
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("found 'end of string', expected: ')'".to_owned());
    }
    parts.push(&selector[start..]);
    Ok(parts)
}

fn parse_key(key: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() || !key.chars().all(is_key_char) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.to_owned())
}

fn parse_value(value: &str) -> Result<String, String> {
    let value = value.trim();
    if !value.chars().all(is_value_char) {
        return Err(format!("invalid label value: {value:?}"));
    }
    Ok(value.to_owned())
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("found '{rest}', expected: '('"))?;
    inner.split(',').map(parse_value).collect()
}

fn parse_requirement(text: &str) -> Result<LabelRequirement, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("found 'end of string', expected: identifier".to_owned());
    }
    if let Some(key) = text.strip_prefix('!') {
        return Ok(LabelRequirement::DoesNotExist(parse_key(key)?));
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = text.split_once(op) {
            let (key, value) = (parse_key(key)?, parse_value(value)?);
            return Ok(if neg {
                LabelRequirement::NotIn(key, vec![value])
            } else {
                LabelRequirement::In(key, vec![value])
            });
        }
    }
    for op in ['>', '<'] {
        if let Some((key, value)) = text.split_once(op) {
            let key = parse_key(key)?;
            let n: i64 = value.trim().parse().map_err(|_| {
                format!(
                    "for 'Gt', 'Lt' operators, the value must be an integer: {:?}",
                    value.trim()
                )
            })?;
            return Ok(if op == '>' {
                LabelRequirement::GreaterThan(key, n)
            } else {
                LabelRequirement::LessThan(key, n)
            });
        }
    }
    let mut words = text.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    match words.next().map(str::trim_start) {
        None => Ok(LabelRequirement::Exists(parse_key(key)?)),
        Some(rest) => {
            if let Some(set) = rest.strip_prefix("notin") {
                Ok(LabelRequirement::NotIn(parse_key(key)?, parse_set(set)?))
            } else if let Some(set) = rest.strip_prefix("in") {
                Ok(LabelRequirement::In(parse_key(key)?, parse_set(set)?))
            } else {
                Err(format!("found '{rest}', expected: in, notin, =, ==, !=, gt, lt"))
            }
        }
    }
}

impl LabelSelector {
    /// Parses a selector; errors are 400 BadRequest Status as upstream's list handler returns them.
    pub fn parse(selector: &str) -> Result<Self, Status> {
        if selector.trim().is_empty() {
            return Ok(Self::default());
        }
        let parse = || -> Result<Vec<LabelRequirement>, String> {
            split_requirements(selector)?
                .into_iter()
                .map(parse_requirement)
                .collect()
        };
        parse()
            .map(|requirements| Self { requirements })
            .map_err(|e| Status::bad_request(format!("unable to parse requirement: {e}")))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`) as
    /// `metav1.LabelSelectorAsSelector` converts it; `{}` selects everything. Errors are upstream's texts.
    pub fn from_label_selector(selector: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("invalid label value for {key:?}"))?;
                requirements.push(LabelRequirement::In(key.clone(), vec![value.to_owned()]));
            }
        }
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            requirements.push(match operator {
                "In" => LabelRequirement::In(key, values),
                "NotIn" => LabelRequirement::NotIn(key, values),
                "Exists" => LabelRequirement::Exists(key),
                "DoesNotExist" => LabelRequirement::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            });
        }
        Ok(Self { requirements })
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels").and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements.iter().all(|requirement| match requirement {
            LabelRequirement::In(key, values) => label(key).is_some_and(|v| values.iter().any(|x| x == v)),
            LabelRequirement::NotIn(key, values) => label(key).is_none_or(|v| values.iter().all(|x| x != v)),
            LabelRequirement::Exists(key) => label(key).is_some(),
            LabelRequirement::DoesNotExist(key) => label(key).is_none(),
            LabelRequirement::GreaterThan(key, n) => label(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelRequirement::LessThan(key, n) => label(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }
}

/// Extra field selectors upstream registers per built-in resource (`GetAttrs`/field label conversion).
fn extra_fields(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") | ("events.k8s.io", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["spec.signerName"],
        _ => &[],
    }
}

/// One field requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    field: String,
    value: String,
    equal: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a selector for `group`/`resource`; unknown fields and syntax errors are 400 BadRequest.
    pub fn parse(selector: &str, group: &str, resource: &str) -> Result<Self, Status> {
        let mut requirements = Vec::new();
        if selector.trim().is_empty() {
            return Ok(Self::default());
        }
        for term in selector.split(',') {
            let term = term.trim();
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(Status::bad_request(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace")
                && !extra_fields(group, resource).contains(&field)
            {
                return Err(Status::bad_request(format!(
                    "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )));
            }
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                value: value.trim().to_owned(),
                equal,
            });
        }
        Ok(Self { requirements })
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The name a `metadata.name=` requirement pins (lets a list/watch narrow to one object).
    pub fn name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.equal && r.field == "metadata.name")
            .map(|r| r.value.as_str())
    }

    /// Whether `object` satisfies every requirement, on the values `selectable_value` gives.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (selectable_value(object, &r.field) == r.value) == r.equal)
    }
}

/// The value of a selectable field as upstream's `ToSelectableFields` functions put it in the field set:
/// from the Go object, so a field the JSON leaves out has its Go zero value (`spec.unschedulable` of a
/// Node created without it is `"false"`, `status.replicas` of a new ReplicaSet `"0"`), booleans and
/// numbers are printed as text (`strconv.FormatBool`, `strconv.Itoa`), and a few fields are read from
/// elsewhere: a Job's `status.successful` is `status.succeeded`, an Event's `source` is
/// `source.component` or else `reportingComponent`, a Pod's `status.podIP` is `status.podIPs[0]`.
fn selectable_value(object: &Value, field: &str) -> String {
    let text = |pointer: &str| match object.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let or_zero = |value: String, zero: &str| if value.is_empty() { zero.to_owned() } else { value };
    match field {
        // Go bools (`strconv.FormatBool`).
        "spec.unschedulable" | "spec.hostNetwork" => or_zero(text(&pointer_of(field)), "false"),
        // Go int32s (`strconv.Itoa`).
        "status.replicas" => or_zero(text("/status/replicas"), "0"),
        "status.successful" => or_zero(text("/status/succeeded"), "0"),
        "source" => or_zero(text("/source/component"), &text("/reportingComponent")),
        "status.podIP" => or_zero(text("/status/podIP"), &text("/status/podIPs/0/ip")),
        _ => text(&pointer_of(field)),
    }
}

fn pointer_of(field: &str) -> String {
    format!("/{}", field.replace('.', "/"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_equality_and_inequality() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        assert!(LabelSelector::parse("app=web").unwrap().matches(&o));
        assert!(LabelSelector::parse("app==web,tier=front").unwrap().matches(&o));
        assert!(!LabelSelector::parse("app=db").unwrap().matches(&o));
        assert!(LabelSelector::parse("app!=db").unwrap().matches(&o));
        assert!(LabelSelector::parse("missing!=x").unwrap().matches(&o));
        assert!(!LabelSelector::parse("app!=web").unwrap().matches(&o));
    }

    #[test]
    fn label_sets_and_existence() {
        let o = obj(json!({"env": "prod", "n": "5"}));
        assert!(LabelSelector::parse("env in (dev, prod)").unwrap().matches(&o));
        assert!(!LabelSelector::parse("env notin (dev,prod)").unwrap().matches(&o));
        assert!(LabelSelector::parse("other notin (dev)").unwrap().matches(&o));
        assert!(!LabelSelector::parse("other in (dev)").unwrap().matches(&o));
        assert!(LabelSelector::parse("env").unwrap().matches(&o));
        assert!(LabelSelector::parse("!other").unwrap().matches(&o));
        assert!(!LabelSelector::parse("!env").unwrap().matches(&o));
        assert!(LabelSelector::parse("n>3,n<6").unwrap().matches(&o));
        assert!(!LabelSelector::parse("n>5").unwrap().matches(&o));
        assert!(LabelSelector::parse("env in (prod),!gone,n").unwrap().matches(&o));
        assert!(LabelSelector::parse("").unwrap().matches(&json!({})));
    }

    #[test]
    fn label_selector_errors_are_bad_requests() {
        for bad in ["env in (a", "a=b=c", "env foo (a)", "n>x", ",", "a b"] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
            assert!(
                err.message.starts_with("unable to parse requirement"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn field_selectors_on_metadata_and_known_fields() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}, "status": {"phase": "Running"}});
        assert!(
            FieldSelector::parse("metadata.name=a", "", "pods")
                .unwrap()
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("metadata.namespace==ns,metadata.name!=b", "", "pods")
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a", "", "pods")
                .unwrap()
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("status.phase=Running", "", "pods")
                .unwrap()
                .matches(&o)
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=a", "", "pods")
                .unwrap()
                .name(),
            Some("a")
        );
        let err = FieldSelector::parse("spec.foo=x", "example.com", "widgets").unwrap_err();
        assert_eq!(
            err.message,
            "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            FieldSelector::parse("nonsense", "", "pods").unwrap_err().code,
            400
        );
    }

    #[test]
    fn fields_a_body_leaves_out_select_on_their_go_zero_values() {
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        let select = |selector: &str, group: &str, resource: &str, object: &Value| {
            FieldSelector::parse(selector, group, resource)
                .unwrap()
                .matches(object)
        };
        assert!(select("spec.unschedulable==false", "", "nodes", &node));
        assert!(!select("spec.unschedulable=true", "", "nodes", &node));
        let cordoned = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert!(select("spec.unschedulable=true", "", "nodes", &cordoned));
        assert!(select("spec.hostNetwork=false", "", "pods", &json!({"spec": {}})));
        assert!(select(
            "status.replicas=0",
            "apps",
            "replicasets",
            &json!({"status": {}})
        ));
        let job = json!({"status": {"succeeded": 2}});
        assert!(select("status.successful=2", "batch", "jobs", &job));
        assert!(select("status.successful=0", "batch", "jobs", &json!({})));
        let event = json!({"reportingComponent": "kubelet", "source": {}});
        assert!(select("source=kubelet", "", "events", &event));
        let pod = json!({"status": {"podIPs": [{"ip": "10.0.0.1"}]}});
        assert!(select("status.podIP=10.0.0.1", "", "pods", &pod));
    }
}
