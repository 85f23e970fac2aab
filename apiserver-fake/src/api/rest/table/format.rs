//! Reading objects and the formatting helpers printers.go shares between kinds: label sets and
//! selectors, container names/images (`layoutContainerCells`), access modes, load-balancer
//! addresses, `+ N more...` lists.
//!
//! Objects are JSON as stored. Where upstream prints a field after API defaulting the fake does not
//! do (a Deployment's `replicas`, a Service's `type`), the printers pass the default in, so a table
//! shows what upstream would for the same request.

use serde_json::Value;

/// The value at `path` (object keys), if any.
pub(crate) fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |current, key| current.get(key))
}

/// The string at `path`, `""` when absent or not a string.
pub(crate) fn text<'a>(object: &'a Value, path: &[&str]) -> &'a str {
    at(object, path).and_then(Value::as_str).unwrap_or_default()
}

/// The string at `path` when present and not empty.
pub(crate) fn non_empty<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    Some(text(object, path)).filter(|s| !s.is_empty())
}

/// The integer at `path`, if any.
pub(crate) fn integer(object: &Value, path: &[&str]) -> Option<i64> {
    at(object, path).and_then(Value::as_i64)
}

/// The integer at `path`, 0 when absent (Go's zero value).
pub(crate) fn count(object: &Value, path: &[&str]) -> i64 {
    integer(object, path).unwrap_or(0)
}

/// The boolean at `path`, if any.
pub(crate) fn boolean(object: &Value, path: &[&str]) -> Option<bool> {
    at(object, path).and_then(Value::as_bool)
}

/// The array at `path`, empty when absent.
pub(crate) fn list<'a>(object: &'a Value, path: &[&str]) -> &'a [Value] {
    at(object, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The number of entries of the map at `path` (0 when absent).
pub(crate) fn map_len(object: &Value, path: &[&str]) -> usize {
    at(object, path)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

/// `metadata.name`.
pub(crate) fn name(object: &Value) -> &str {
    text(object, &["metadata", "name"])
}

/// `metadata.creationTimestamp`.
pub(crate) fn created(object: &Value) -> Option<&str> {
    at(object, &["metadata", "creationTimestamp"]).and_then(Value::as_str)
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(object: &Value) -> bool {
    at(object, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null())
}

/// The annotation `key`.
pub(crate) fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    at(object, &["metadata", "annotations", key]).and_then(Value::as_str)
}

/// The `status` of the condition of `type` in `status.conditions`.
pub(crate) fn condition_status<'a>(object: &'a Value, condition_type: &str) -> Option<&'a str> {
    condition(object, condition_type).map(|c| text(c, &["status"]))
}

/// The condition of `type` in `status.conditions`.
pub(crate) fn condition<'a>(object: &'a Value, condition_type: &str) -> Option<&'a Value> {
    list(object, &["status", "conditions"])
        .iter()
        .find(|c| text(c, &["type"]) == condition_type)
}

/// Whether the condition of `type` is `True` (printers.go's `hasJobCondition` and friends).
pub(crate) fn condition_true(object: &Value, condition_type: &str) -> bool {
    condition_status(object, condition_type) == Some("True")
}

/// A scalar as Go's `%v`/`String()` prints it: strings as is, numbers as written (quantities and
/// int-or-strings arrive as either); `None` for anything else.
pub(crate) fn scalar(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A `resource.Quantity` as printed (`Quantity.String()`): as stored, `0` when absent. The fake does
/// not canonicalise quantities (`1000m` stays `1000m`, upstream prints `1`).
pub(crate) fn quantity(value: Option<&Value>) -> String {
    scalar(value).unwrap_or_else(|| "0".to_owned())
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, comma-separated; `<none>` when empty.
pub(crate) fn format_labels(labels: Option<&Value>) -> String {
    let Some(labels) = labels.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_owned();
    };
    let mut pairs: Vec<(&String, String)> = labels
        .iter()
        .map(|(k, v)| (k, scalar(Some(v)).unwrap_or_default()))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A `metav1.LabelSelector` as `labels.Selector.String()` prints it: requirements sorted by key
/// (`k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`), comma-separated; `""` for none or everything;
/// `None` when the selector is not valid (unknown operator, `In` without values).
pub(crate) fn label_selector(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Some(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = scalar(Some(value)).unwrap_or_default();
            requirements.push((key.clone(), format!("{key}={value}")));
        }
    }
    for expression in list(selector, &["matchExpressions"]) {
        let key = text(expression, &["key"]);
        let mut values: Vec<String> = list(expression, &["values"])
            .iter()
            .filter_map(|v| scalar(Some(v)))
            .collect();
        values.sort();
        let requirement = match text(expression, &["operator"]) {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_owned(), requirement));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: [`label_selector`], `<none>` when empty, `<error>` when invalid.
pub(crate) fn format_label_selector(selector: Option<&Value>) -> String {
    match label_selector(selector) {
        Some(s) if s.is_empty() => "<none>".to_owned(),
        Some(s) => s,
        None => "<error>".to_owned(),
    }
}

/// `layoutContainerCells`: the containers' names and images, each comma-separated.
pub(crate) fn container_cells(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec.map_or(&[][..], |spec| list(spec, &["containers"]));
    let names: Vec<&str> = containers.iter().map(|c| text(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// `helper.GetAccessModesAsString`: `RWO,ROX,RWX,RWOP` in that order, whatever the object's order.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `loadBalancerStatusStringer` (wide, as the server prints): each ingress point's IP, or hostname
/// without one, deduplicated and sorted, comma-separated.
pub(crate) fn load_balancer_addresses(load_balancer: Option<&Value>) -> String {
    let ingress = load_balancer.map_or(&[][..], |lb| list(lb, &["ingress"]));
    let mut addresses: Vec<&str> = ingress
        .iter()
        .filter_map(|i| non_empty(i, &["ip"]).or_else(|| non_empty(i, &["hostname"])))
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    addresses.join(",")
}

/// printers.go's `"%s + %d more..."` tail: the shown items, then how many of `total` were left out.
pub(crate) fn with_more(shown: &[String], total: usize) -> String {
    let joined = shown.join(",");
    if total > shown.len() {
        format!("{joined} + {} more...", total - shown.len())
    } else {
        joined
    }
}

/// `printBoolPtr`: `True`/`False`, `<unset>` when absent.
pub(crate) fn bool_ptr(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_and_selectors_print_like_apimachinery() {
        assert_eq!(format_labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(None), "<none>");
        let selector = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"}]});
        assert_eq!(
            format_label_selector(Some(&selector)),
            "app=web,!canary,env notin (dev),tier in (back,front),zone"
        );
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(format_label_selector(None), "<none>");
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "Near"}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
    }

    #[test]
    fn containers_access_modes_and_addresses() {
        let spec =
            json!({"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx:1"}]});
        assert_eq!(
            container_cells(Some(&spec)),
            ("a,b".to_owned(), "busybox,nginx:1".to_owned())
        );
        assert_eq!(
            access_modes(&[
                json!("ReadWriteMany"),
                json!("ReadWriteOnce"),
                json!("ReadWriteOnce")
            ]),
            "RWO,RWX"
        );
        let lb = json!({"ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]});
        assert_eq!(load_balancer_addresses(Some(&lb)), "10.0.0.1,10.0.0.2,lb.example");
        assert_eq!(with_more(&["a".to_owned(), "b".to_owned()], 5), "a,b + 3 more...");
    }
}
