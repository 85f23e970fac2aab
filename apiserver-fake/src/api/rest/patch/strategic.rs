//! Strategic merge patch, the server half of upstream's
//! `k8s.io/apimachinery/pkg/util/strategicpatch` (`StrategicMergeMapPatch` with `MergeParallelList` and
//! `IgnoreUnmatchedNulls`), driven by the kind's schema ([`PatchSchema`]) as upstream is by the Go
//! struct tags.
//!
//! Each function names the upstream function it follows; the order of merged lists (new elements before
//! the server's own, `$setElementOrder` first) is upstream's `normalizeElementOrder` /
//! `mergeSortedSlice`, including its quirks.

use serde_json::{Map, Value};

use super::schema::{Field, PatchSchema};
use crate::api::status::{Status, StatusCause, StatusReason};

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// Go's name of the type a JSON list decodes to, for upstream's `ErrBadArgType` messages.
const GO_LIST: &str = "[]interface {}";
/// Go's name of the type a JSON object decodes to.
const GO_MAP: &str = "map[string]interface {}";

/// Why a strategic merge patch does not apply (upstream's `mergepatch` errors and the `fmt.Errorf`s of
/// `patch.go`, with their messages).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    /// `mergepatch.ErrBadPatchFormatForPrimitiveList`.
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    /// `mergepatch.ErrBadPatchFormatForRetainKeys`.
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    /// `mergepatch.ErrBadPatchFormatForSetElementOrderList`.
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    /// `mergepatch.ErrNoListOfLists`.
    #[error("lists of lists are not supported")]
    NoListOfLists,
    /// `mergepatch.ErrNoMergeKey`.
    #[error("map: {map} does not contain declared merge key: {merge_key}")]
    NoMergeKey { map: String, merge_key: String },
    /// `mergepatch.ErrBadArgType`.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        expected: &'static str,
        actual: &'static str,
    },
    /// `mergepatch.ErrBadPatchType`: a `$patch` other than `replace` or `delete` (or `merge` in a list).
    #[error("unknown patch type: {directive} in map: {map}")]
    BadPatchType { directive: String, map: String },
    /// `$patch: merge` in a list.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A merging list of objects whose field declares no merge key.
    #[error("cannot merge lists without merge key for type struct")]
    NoDeclaredMergeKey,
    /// A list mixing element types.
    #[error("list element types are not identical: {0}")]
    MixedElementTypes(String),
    /// `$setElementOrder` over lists that are both empty.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// A list element that is not an object where objects are merged.
    #[error("value for key {0} is not a map.")]
    ElementNotMap(usize),
    /// The patch list's order contradicts its `$setElementOrder` list.
    #[error("the order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}")]
    OrderMismatch { patch: String, order: String },
    /// A patch strategy combination upstream does not know.
    #[error("unexpected patch strategy: {0}")]
    UnexpectedPatchStrategy(String),
}

impl From<MergeError> for Status {
    /// Upstream's `interpretStrategicMergePatchError`: malformed directives are 400, lists of lists 422,
    /// anything else the 500 of an error that is not a Status.
    fn from(err: MergeError) -> Status {
        match err {
            MergeError::BadPatchFormatForPrimitiveList
            | MergeError::BadPatchFormatForRetainKeys
            | MergeError::BadPatchFormatForSetElementOrderList => Status::bad_request(err.to_string()),
            MergeError::NoListOfLists => {
                let mut status = Status::unprocessable_patch();
                if let Some(details) = status.details.as_mut() {
                    details.causes.push(StatusCause {
                        reason: "UnexpectedServerResponse".to_owned(),
                        message: err.to_string(),
                        ..StatusCause::default()
                    });
                }
                status
            }
            _ => Status::failure(500, StatusReason::Unknown, err.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, MergeError>;

/// Applies `patch` to `original` (upstream's `StrategicMergeMapPatch`).
pub(super) fn strategic_merge(
    original: &Value,
    patch: &Map<String, Value>,
    schema: PatchSchema,
) -> Result<Value> {
    let original = original.as_object().cloned().unwrap_or_default();
    merge_map(original, patch.clone(), schema).map(Value::Object)
}

/// Merges the fields of `patch` into `original` (upstream's `mergeMap`).
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: PatchSchema,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER).cloned() {
        return handle_directive_in_merge_map(&directive, patch);
    }
    apply_retain_keys_directive(&mut original, &mut patch)?;
    merge_patch_into_original(&mut original, &mut patch, schema)?;
    for (key, patch_value) in patch {
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (extract_key(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?, true)
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.shift_remove(&key);
            continue;
        }
        let merged = match (original.get_mut(&key), patch_value) {
            (None, _) if is_delete_list => continue,
            (None, patch_value) => take_patch_value(patch_value),
            (Some(Value::Object(current)), Value::Object(patch_map)) => {
                let field = schema.field(&key);
                let (_, strategy) = extract_retain_keys_patch_strategy(&field)?;
                // upstream's mergeMapHandler
                if strategy == REPLACE_DIRECTIVE {
                    Some(Value::Object(patch_map))
                } else {
                    let current = std::mem::take(current);
                    Some(Value::Object(merge_map(current, patch_map, field.schema)?))
                }
            }
            (Some(Value::Array(current)), Value::Array(patch_list)) => {
                let field = schema.field(&key);
                let current = std::mem::take(current);
                Some(Value::Array(merge_slice_handler(
                    current,
                    patch_list,
                    &field,
                    is_delete_list,
                )?))
            }
            (Some(current), patch_value) if go_kind(current) == go_kind(&patch_value) => {
                // Scalars of the same type: the patch's value.
                Some(patch_value)
            }
            (Some(_), _) if is_delete_list => continue,
            (Some(_), patch_value) => take_patch_value(patch_value),
        };
        match merged {
            Some(value) => {
                original.insert(key, value);
            }
            None => {
                original.shift_remove(&key);
            }
        }
    }
    Ok(original)
}

/// A patch value taken as is where the original has nothing to merge it with: without its nulls
/// (`discardNullValuesFromPatch`) and directives (`removeDirectives`); `None` when it is itself a
/// directive.
fn take_patch_value(mut value: Value) -> Option<Value> {
    discard_null_values(&mut value);
    remove_directives(value)
}

/// Upstream's `discardNullValuesFromPatch`: drops null object members, at any depth.
fn discard_null_values(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_null_values);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_null_values),
        _ => {}
    }
}

/// Upstream's `removeDirectives`: objects carrying `$patch` go, at any depth.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// Upstream's `handleDirectiveInMergeMap`: `$patch: replace` takes the patch, `$patch: delete` leaves an
/// empty object.
fn handle_directive_in_merge_map(
    directive: &Value,
    mut patch: Map<String, Value>,
) -> Result<Map<String, Value>> {
    match directive.as_str() {
        Some(REPLACE_DIRECTIVE) => {
            patch.shift_remove(DIRECTIVE_MARKER);
            Ok(patch)
        }
        Some(DELETE_DIRECTIVE) => Ok(Map::new()),
        _ => Err(MergeError::BadPatchType {
            directive: go_format(directive),
            map: go_format_map(&patch),
        }),
    }
}

/// Upstream's `extractKey`: the field a `$directive/<field>` key names.
fn extract_key(key: &str, prefix: &str) -> Result<String> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field.to_owned()),
        _ if prefix == SET_ELEMENT_ORDER_PREFIX => Err(MergeError::BadPatchFormatForSetElementOrderList),
        _ => Err(MergeError::BadPatchFormatForPrimitiveList),
    }
}

/// Upstream's `extractRetainKeysPatchStrategy`: whether the field's strategies include `retainKeys`, and
/// the other one (`merge`, `replace` or none). `retainKeys` itself only guides clients building
/// `$retainKeys`; the server honours the directive wherever a patch carries it.
fn extract_retain_keys_patch_strategy(field: &Field) -> Result<(bool, &'static str)> {
    let strategies = field.patch_strategies();
    match strategies.as_slice() {
        [] => Ok((false, "")),
        [RETAIN_KEYS_STRATEGY] => Ok((true, "")),
        [single] => Ok((false, single)),
        [RETAIN_KEYS_STRATEGY, other] | [other, RETAIN_KEYS_STRATEGY] => Ok((true, other)),
        _ => Err(MergeError::UnexpectedPatchStrategy(format!(
            "[{}]",
            strategies.join(" ")
        ))),
    }
}

/// Upstream's `applyRetainKeysDirective`: every field the patch sets must be listed, and the original
/// keeps only the listed fields.
fn apply_retain_keys_directive(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retained) = retain else {
        return Err(MergeError::BadPatchFormatForRetainKeys);
    };
    let listed = |key: &str| retained.iter().any(|r| r.as_str() == Some(key));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !listed(key) {
            return Err(MergeError::BadPatchFormatForRetainKeys);
        }
    }
    original.retain(|key, _| listed(key));
    Ok(())
}

/// Upstream's `mergePatchIntoOriginal`: each `$setElementOrder/<field>` merges its list (when the patch
/// has one) and orders the result: `$setElementOrder` first, then the patch's order, then the server's.
fn merge_patch_into_original(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: PatchSchema,
) -> Result<()> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for directive in directives {
        let Some(order) = patch.shift_remove(&directive) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(MergeError::BadArgType {
                expected: GO_LIST,
                actual: go_type_name(&order),
            });
        };
        let key = extract_key(&directive, SET_ELEMENT_ORDER_PREFIX)?;
        let list_at = |map: &Map<String, Value>| match map.get(&key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.clone())),
            Some(other) => Err(MergeError::BadArgType {
                expected: GO_LIST,
                actual: go_type_name(other),
            }),
        };
        let original_list = list_at(original)?;
        let patch_list = list_at(patch)?;
        let field = schema.field(&key);
        let merge_key = field.patch_merge_key();
        validate_patch_with_set_order_list(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let merged = match (&original_list, &patch_list) {
            (Some(current), None) => current.clone(),
            (None, Some(added)) => added.iter().cloned().filter_map(remove_directives).collect(),
            (Some(current), Some(changes)) => {
                merge_slice_handler(current.clone(), changes.clone(), &field, false)?
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives_by_present_in_list(merged, &order)
        } else {
            partition_maps_by_present_in_list(merged, &order, merge_key)?
        };
        let server_order = original_list.unwrap_or_default();
        let kind = slice_element_kind(&[&server_order, patch_list.as_deref().unwrap_or_default()])?;
        let ordered =
            normalize_element_order(patch_items, server_only, &order, &server_order, merge_key, kind)?;
        original.insert(key.clone(), Value::Array(ordered));
        patch.shift_remove(&key);
    }
    Ok(())
}

/// Upstream's `validatePatchWithSetOrderList`: the patch list's elements appear in the `$setElementOrder`
/// list, in its relative order (deletions aside).
fn validate_patch_with_set_order_list(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete = if merge_key.is_empty() {
        patch_list.to_vec()
    } else {
        extract_to_delete_items(patch_list.to_vec())?.0
    };
    let (mut patch_index, mut order_index) = (0, 0);
    while patch_index < non_delete.len() && order_index < order.len() {
        if non_delete[patch_index].get(DIRECTIVE_MARKER).is_some() {
            patch_index += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[patch_index], &order[order_index], merge_key)? {
            patch_index += 1;
        }
        order_index += 1;
    }
    if patch_index < non_delete.len() && order_index >= order.len() {
        return Err(MergeError::OrderMismatch {
            patch: go_format_list(patch_list),
            order: go_format_list(order),
        });
    }
    Ok(())
}

/// Upstream's `mergeKeyValueEqual`.
fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(go_equal(Some(left), Some(right)));
    }
    let key_of = |value: &Value| -> Result<Value> {
        let map = as_map(value)?;
        map.get(merge_key)
            .cloned()
            .ok_or_else(|| no_merge_key(map, merge_key))
    };
    Ok(go_equal(Some(&key_of(left)?), Some(&key_of(right)?)))
}

/// Upstream's `mergeSliceHandler`: lists whose field has the `merge` strategy merge, any other list is
/// replaced by the patch's.
fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: &Field,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    let (_, strategy) = extract_retain_keys_patch_strategy(field)?;
    if strategy == MERGE_DIRECTIVE {
        merge_slice(
            original,
            patch,
            field.schema.items(),
            field.patch_merge_key(),
            is_delete_list,
        )
    } else {
        Ok(patch)
    }
}

/// Go's dynamic type of a decoded JSON value (apimachinery's JSON decoding gives whole numbers as
/// `int64`), as far as the merge compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoKind {
    Nil,
    Bool,
    Int64,
    Float64,
    String,
    Slice,
    Map,
}

fn go_kind(value: &Value) -> GoKind {
    match value {
        Value::Null => GoKind::Nil,
        Value::Bool(_) => GoKind::Bool,
        Value::Number(n) if n.is_i64() || n.is_u64() => GoKind::Int64,
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => GoKind::Int64,
        Value::Number(_) => GoKind::Float64,
        Value::String(_) => GoKind::String,
        Value::Array(_) => GoKind::Slice,
        Value::Object(_) => GoKind::Map,
    }
}

/// Upstream's `sliceElementType`: the one element type of the lists.
fn slice_element_kind(lists: &[&[Value]]) -> Result<GoKind> {
    let mut kind = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let current = go_kind(item);
        match kind {
            None if current == GoKind::Slice => return Err(MergeError::NoListOfLists),
            None => kind = Some(current),
            Some(previous) if previous != current => {
                let rendered: Vec<String> = lists.iter().map(|l| go_format_list(l)).collect();
                return Err(MergeError::MixedElementTypes(format!("[{}]", rendered.join(" "))));
            }
            Some(_) => {}
        }
    }
    kind.ok_or(MergeError::NoElements)
}

/// Upstream's `mergeSlice`: lists of scalars merge as sets (or lose the `$deleteFromPrimitiveList`
/// values), lists of objects merge element by element on `merge_key`.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    element: PatchSchema,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = slice_element_kind(&[&original, &patch])?;
    let (merged, original, patch) = if kind != GoKind::Map {
        if is_delete_list {
            return Ok(delete_from_slice(original, &patch));
        }
        let both = original.iter().chain(&patch).cloned().collect();
        (deduplicate_scalars(both), original, patch)
    } else {
        if merge_key.is_empty() {
            return Err(MergeError::NoDeclaredMergeKey);
        }
        let (original, patch) = merge_slice_with_special_elements(original, patch, merge_key)?;
        let merged = merge_slice_without_special_elements(original.clone(), &patch, merge_key, element)?;
        (merged, original, patch)
    };
    let (patch_items, server_only) = if merge_key.is_empty() {
        partition_primitives_by_present_in_list(merged, &patch)
    } else {
        partition_maps_by_present_in_list(merged, &patch, merge_key)?
    };
    normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)
}

/// Upstream's `mergeSliceWithSpecialElements`: `$patch: delete` elements remove their match,
/// `$patch: replace` makes the patch's other elements the list.
fn merge_slice_with_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let map = as_map(&item)?;
        let Some(directive) = map.get(DIRECTIVE_MARKER) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(value) = map.get(merge_key) else {
                    return Err(no_merge_key(map, merge_key));
                };
                original.retain(|o| !o.get(merge_key).is_some_and(|v| go_equal(Some(v), Some(value))));
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => return Err(MergeError::MergeDirectiveInList),
            _ => {
                return Err(MergeError::BadPatchType {
                    directive: go_format(directive),
                    map: go_format_map(map),
                });
            }
        }
    }
    if replace {
        return Ok((plain, Vec::new()));
    }
    Ok((original, plain))
}

/// Upstream's `mergeSliceWithoutSpecialElements`: an element matching an original one by merge key
/// merges into it, any other is appended.
fn merge_slice_without_special_elements(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    element: PatchSchema,
) -> Result<Vec<Value>> {
    for item in patch {
        let map = as_map(item)?;
        let Some(value) = map.get(merge_key) else {
            return Err(no_merge_key(map, merge_key));
        };
        match find_map_in_slice_based_on_key_value(&original, merge_key, value)? {
            Some(index) => {
                let current = match std::mem::take(&mut original[index]) {
                    Value::Object(current) => current,
                    _ => Map::new(),
                };
                original[index] = Value::Object(merge_map(current, map.clone(), element)?);
            }
            None => original.push(item.clone()),
        }
    }
    Ok(original)
}

/// Upstream's `findMapInSliceBasedOnKeyValue`.
fn find_map_in_slice_based_on_key_value(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>> {
    for (index, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(MergeError::ElementNotMap(index));
        };
        if map.get(key).is_some_and(|v| go_equal(Some(v), Some(value))) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Upstream's `deleteFromSlice`.
fn delete_from_slice(current: Vec<Value>, delete: &[Value]) -> Vec<Value> {
    current
        .into_iter()
        .filter(|item| !delete.iter().any(|d| go_equal(Some(d), Some(item))))
        .collect()
}

/// Upstream's `deduplicateScalars`, including where it moves the last element.
fn deduplicate_scalars(mut items: Vec<Value>) -> Vec<Value> {
    let mut length = items.len().saturating_sub(1);
    let mut i = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if go_equal(Some(&items[i]), Some(&items[j])) {
                items[j] = items[length].clone();
                items.truncate(length);
                length -= 1;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    items
}

/// Upstream's `partitionPrimitivesByPresentInList`.
fn partition_primitives_by_present_in_list(items: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    items
        .into_iter()
        .partition(|item| by.iter().any(|b| go_equal(Some(b), Some(item))))
}

/// Upstream's `partitionMapsByPresentInList`.
fn partition_maps_by_present_in_list(
    items: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut present, mut absent) = (Vec::new(), Vec::new());
    for item in items {
        let map = as_map(&item)?;
        let Some(value) = map.get(merge_key) else {
            return Err(no_merge_key(map, merge_key));
        };
        if find_map_in_slice_based_on_key_value(by, merge_key, value)?.is_some() {
            present.push(item);
        } else {
            absent.push(item);
        }
    }
    Ok((present, absent))
}

/// Upstream's `extractToDeleteItems`: the elements without and with `$patch: delete`.
fn extract_to_delete_items(items: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut keep, mut delete) = (Vec::new(), Vec::new());
    for item in items {
        let directive = as_map(&item)?.get(DIRECTIVE_MARKER);
        if directive.and_then(Value::as_str) == Some(DELETE_DIRECTIVE) {
            delete.push(item);
        } else {
            keep.push(item);
        }
    }
    Ok((keep, delete))
}

/// Upstream's `normalizeElementOrder`: the patch's elements in `patch_order`, the server's own in
/// `server_order`, interleaved by `mergeSortedSlice`.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    Ok(merge_sorted_slice(
        server_only,
        patch,
        server_order,
        merge_key,
        kind,
    ))
}

/// Upstream's `normalizeSliceOrder`: a stable sort by position in `order` (Go's `sort.SliceStable`,
/// an insertion sort at these sizes, with upstream's comparator that calls an element not in `order`
/// smaller), deletions last.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Result<Vec<Value>> {
    let (mut to_sort, deletions) = if kind == GoKind::Map {
        for item in to_sort.iter().chain(order) {
            let map = as_map(item)?;
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        extract_to_delete_items(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let less =
        |a: &Value, b: &Value| match (index(order, a, merge_key, kind), index(order, b, merge_key, kind)) {
            (Some(i), Some(j)) => i < j,
            _ => true,
        };
    for i in 1..to_sort.len() {
        let mut j = i;
        while j > 0 && less(&to_sort[j], &to_sort[j - 1]) {
            to_sort.swap(j, j - 1);
            j -= 1;
        }
    }
    to_sort.extend(deletions);
    Ok(to_sort)
}

/// Upstream's `mergeSortedSlice`: `left` (the server's elements) and `right` (the patch's) keep their
/// relative orders; a server element comes first only when both are in `server_order` and it is
/// earlier there, so new elements precede the server's remaining ones.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Vec<Value> {
    let mut merged = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index(server_order, l, merge_key, kind), index(server_order, r, merge_key, kind)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        merged.extend(next);
    }
    merged
}

/// Upstream's `index`: where `value` is in `list` (by merge key for objects).
fn index(list: &[Value], value: &Value, merge_key: &str, kind: GoKind) -> Option<usize> {
    if kind == GoKind::Map {
        let key = value.get(merge_key);
        list.iter().position(|item| go_equal(item.get(merge_key), key))
    } else {
        list.iter().position(|item| go_equal(Some(item), Some(value)))
    }
}

/// Go's `==` on decoded JSON scalars (`nil` for absent), numbers by value.
fn go_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None | Some(Value::Null), None | Some(Value::Null)) => true,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn as_map(value: &Value) -> Result<&Map<String, Value>> {
    value.as_object().ok_or(MergeError::BadArgType {
        expected: GO_MAP,
        actual: go_type_name(value),
    })
}

fn no_merge_key(map: &Map<String, Value>, merge_key: &str) -> MergeError {
    MergeError::NoMergeKey {
        map: go_format_map(map),
        merge_key: merge_key.to_owned(),
    }
}

/// Go's `reflect.TypeOf` of a decoded JSON value, as `%s` prints it.
fn go_type_name(value: &Value) -> &'static str {
    match go_kind(value) {
        GoKind::Nil => "%!s(<nil>)",
        GoKind::Bool => "bool",
        GoKind::Int64 => "int64",
        GoKind::Float64 => "float64",
        GoKind::String => "string",
        GoKind::Slice => GO_LIST,
        GoKind::Map => GO_MAP,
    }
}

/// Go's `%v` of a decoded JSON value (`map[k:v]` with sorted keys, `[a b]`, `<nil>`).
fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) => go_format_list(items),
        Value::Object(map) => go_format_map(map),
        other => other.to_string(),
    }
}

fn go_format_list(items: &[Value]) -> String {
    let rendered: Vec<String> = items.iter().map(go_format).collect();
    format!("[{}]", rendered.join(" "))
}

fn go_format_map(map: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let rendered: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| format!("{k}:{}", go_format(v)))
        .collect();
    format!("map[{}]", rendered.join(" "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::openapi::definitions::Definitions;

    fn schema(group: &str, kind: &str) -> PatchSchema {
        let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
        let schema = PatchSchema::of_kind(definitions, group, "v1", kind);
        assert!(schema.is_known(), "{kind} has a definition");
        schema
    }

    fn patch(schema: PatchSchema, original: &Value, patch: Value) -> Result<Value> {
        let Value::Object(patch) = patch else {
            panic!("patches are objects");
        };
        strategic_merge(original, &patch, schema)
    }

    fn deployment(pod_spec: Value) -> Value {
        json!({
            "metadata": {"name": "d", "labels": {"app": "d", "tier": "web"}, "finalizers": ["a"]},
            "spec": {
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"spec": pod_spec}
            }
        })
    }

    fn pod_spec() -> Value {
        json!({
            "containers": [{
                "name": "app",
                "image": "app:1",
                "args": ["--a", "--b"],
                "command": ["/app"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
            }],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "c"}}],
            "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
            "nodeSelector": {"disk": "ssd"}
        })
    }

    fn template(patched: &Value) -> &Value {
        &patched["spec"]["template"]["spec"]
    }

    #[test]
    fn lists_with_the_merge_strategy_merge_by_their_merge_key() {
        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({"spec": {"template": {"spec": {
                "containers": [{
                    "name": "app",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                    "ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 443}]
                }],
                "volumes": [{"name": "conf", "configMap": {"name": "c2"}}]
            }}}}),
        )
        .unwrap();
        let container = &template(&patched)["containers"][0];
        assert_eq!(container["image"], "app:1");
        // env by name: B changes, C is new; the server's A stays before B, where it was
        // (mergeSortedSlice).
        assert_eq!(
            container["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "two"}, {"name": "C", "value": "3"}])
        );
        // ports by containerPort (the patch merge key; protocol is not part of it).
        assert_eq!(
            container["ports"],
            json!([{"containerPort": 80, "protocol": "TCP", "name": "web"}, {"containerPort": 443}])
        );
        assert_eq!(
            template(&patched)["volumes"],
            json!([{"name": "data", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "c2"}}])
        );
    }

    #[test]
    fn lists_without_the_merge_strategy_are_replaced() {
        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({"spec": {"template": {"spec": {
                "tolerations": [{"key": "c", "operator": "Exists"}],
                "containers": [{"name": "app", "args": ["--c"], "command": ["/other"]}]
            }}}}),
        )
        .unwrap();
        assert_eq!(
            template(&patched)["tolerations"],
            json!([{"key": "c", "operator": "Exists"}])
        );
        let container = &template(&patched)["containers"][0];
        assert_eq!(container["args"], json!(["--c"]));
        assert_eq!(container["command"], json!(["/other"]));
    }

    #[test]
    fn metadata_finalizers_merge_as_a_set_and_owner_references_by_uid() {
        let pod = json!({"metadata": {
            "finalizers": ["a", "b"],
            "ownerReferences": [{"uid": "1", "name": "x", "kind": "ReplicaSet"}]
        }});
        let patched = patch(
            schema("", "Pod"),
            &pod,
            json!({"metadata": {
                "finalizers": ["b", "c"],
                "$deleteFromPrimitiveList/finalizers": ["a"],
                "ownerReferences": [{"uid": "1", "controller": true}, {"uid": "2", "name": "y"}]
            }}),
        )
        .unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(
            patched["metadata"]["ownerReferences"],
            json!([
                {"uid": "1", "name": "x", "kind": "ReplicaSet", "controller": true},
                {"uid": "2", "name": "y"}
            ])
        );
    }

    #[test]
    fn maps_merge_key_by_key_and_null_deletes() {
        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({
                "metadata": {"labels": {"tier": null, "track": "stable"}},
                "spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}
            }),
        )
        .unwrap();
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"app": "d", "track": "stable"})
        );
        // nodeSelector is atomic for server-side apply only; a strategic merge merges its keys.
        assert_eq!(
            template(&patched)["nodeSelector"],
            json!({"disk": "ssd", "zone": "a"})
        );
    }

    #[test]
    fn replace_strategy_and_patch_replace_directive() {
        let pdb = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}, "minAvailable": 1}});
        let patched = patch(
            schema("policy", "PodDisruptionBudget"),
            &pdb,
            json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        )
        .unwrap();
        assert_eq!(patched["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));

        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({"spec": {"template": {"spec": {
                "containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}],
                "volumes": [{"name": "data", "$patch": "delete"}]
            }}}}),
        )
        .unwrap();
        assert_eq!(
            template(&patched)["containers"],
            json!([{"name": "only", "image": "o"}])
        );
        assert_eq!(
            template(&patched)["volumes"],
            json!([{"name": "conf", "configMap": {"name": "c"}}])
        );
    }

    #[test]
    fn retain_keys_clears_the_fields_not_listed() {
        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({"spec": {
                "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
                "template": {"spec": {"volumes": [
                    {"name": "data", "$retainKeys": ["configMap", "name"], "configMap": {"name": "d"}}
                ]}}
            }}),
        )
        .unwrap();
        assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(
            template(&patched)["volumes"][0],
            json!({"name": "data", "configMap": {"name": "d"}})
        );
        let err = patch(
            schema("apps", "Deployment"),
            &deployment(pod_spec()),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}}),
        )
        .unwrap_err();
        assert_eq!(err, MergeError::BadPatchFormatForRetainKeys);
        assert_eq!(Status::from(err).code, 400);
    }

    #[test]
    fn set_element_order_orders_the_merged_list() {
        let mut spec = pod_spec();
        spec["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "side", "image": "side:1"}));
        let patched = patch(
            schema("apps", "Deployment"),
            &deployment(spec),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "app:2"}]
            }}}}),
        )
        .unwrap();
        let names: Vec<&Value> = template(&patched)["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["name"])
            .collect();
        assert_eq!(names, [&json!("side"), &json!("app")]);
        assert_eq!(template(&patched)["containers"][1]["image"], "app:2");
        assert!(template(&patched).get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn directives_added_with_new_fields_are_removed() {
        let patched = patch(
            schema("apps", "Deployment"),
            &json!({"metadata": {"name": "d"}}),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "a", "resources": null},
                {"name": "gone", "$patch": "delete"}
            ]}}}}),
        )
        .unwrap();
        assert_eq!(
            template(&patched)["containers"],
            json!([{"name": "app", "image": "a"}])
        );
    }

    #[test]
    fn upstream_errors() {
        let original = deployment(pod_spec());
        let deployment_schema = schema("apps", "Deployment");
        let err = patch(
            deployment_schema,
            &original,
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "map: map[image:x] does not contain declared merge key: name"
        );
        let status = Status::from(err);
        assert_eq!((status.code, status.reason), (500, StatusReason::Unknown));

        let err = patch(
            deployment_schema,
            &original,
            json!({"metadata": {"finalizers": [1]}}),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "list element types are not identical: [[a] [1]]");
        let err = patch(
            deployment_schema,
            &json!({"metadata": {"finalizers": []}}),
            json!({"metadata": {"finalizers": [["nested"]]}}),
        )
        .unwrap_err();
        assert_eq!(err, MergeError::NoListOfLists);
        assert_eq!(Status::from(err).code, 422);

        let err = patch(
            deployment_schema,
            &original,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}}}),
        )
        .unwrap_err();
        assert_eq!(err, MergeError::MergeDirectiveInList);

        let err = patch(
            deployment_schema,
            &original,
            json!({"metadata": {"$patch": "nope"}}),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: nope in map: map[$patch:nope]"
        );

        let err = patch(
            deployment_schema,
            &original,
            json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
        )
        .unwrap_err();
        assert_eq!(Status::from(err).code, 400);
    }
}
