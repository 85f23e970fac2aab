//! Custom resources of a CRD with several versions: objects are written at the CRD's storage version
//! and served at the version a request names, converted by `spec.conversion` as upstream's
//! `apiextensions-apiserver/pkg/apiserver/conversion` does (docs/decisions.md §22):
//!
//! * `strategy: None` (upstream's `nopConverter`): only `apiVersion` is rewritten;
//! * `strategy: Webhook` (upstream's `webhookConverter`): a `ConversionReview` (`v1`, or `v1beta1` when
//!   it comes first in `conversionReviewVersions`) is posted over HTTPS to `clientConfig` (a `url` or a
//!   `service`, resolved and trusted as admission webhooks are: [`super::admission::webhook`]), and
//!   the answer is checked with upstream's texts (`conversion webhook for <group/version>, Kind=<Kind>
//!   failed: ...`, `returned 2 objects, expected 1`, `returned invalid object: must have the same
//!   name: ...`, ...); the converted object keeps the original's metadata but for its labels and
//!   annotations (`restoreObjectMeta`).
//!
//! The conversion sits at the store boundary ([`ConvertingStore`]), where upstream's codecs convert
//! (encoding to etcd, decoding from it): everything a handler reads (get, list, watch events, the
//! objects writes answer with, delete's last state) comes out at the request's version, and everything
//! it writes goes in at the storage version. An object already at the target version is not sent to
//! the webhook (upstream's `getObjectsToConvert`), so a request at the storage version calls no webhook
//! unless objects were stored at another version before the storage version changed.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::admission::matching::WebhookClientConfig;
use super::admission::webhook::{self, CallError, ServiceAddresses};
use crate::store::{
    Object, ObjectKey, Preconditions, RangePage, StorageResource, Store, StoreError, StoreResult, WatchStream,
};

/// How long a conversion webhook may take: upstream's webhook client manager gives conversion
/// webhooks client-go's 30 s request timeout (sent as `?timeout=30s`), as they have no
/// `timeoutSeconds`.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// How a CRD converts between its versions (`spec.conversion`).
#[derive(Debug, Clone)]
enum Strategy {
    /// `None`: `apiVersion` alone changes.
    None,
    /// `Webhook`: the webhook converts; `review_version` is the `ConversionReview` version sent (`None`:
    /// the CRD lists no version the server speaks).
    Webhook {
        client_config: WebhookClientConfig,
        review_version: Option<&'static str>,
    },
}

/// Converts the objects of one CRD between its versions.
pub(crate) struct Converter {
    group: String,
    kind: String,
    strategy: Strategy,
    /// Where Services behind webhooks are looked up.
    store: Arc<dyn Store>,
    addresses: Arc<ServiceAddresses>,
}

impl std::fmt::Debug for Converter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Converter")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

/// The storage version of a CRD (`spec.versions[].storage: true`).
pub(crate) fn storage_version(definition: &Value) -> Option<&str> {
    definition
        .pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
}

impl Converter {
    /// The converter of a CRD: `None` for a CRD of one version (nothing to convert).
    pub(crate) fn for_crd(
        definition: &Value,
        store: Arc<dyn Store>,
        addresses: Arc<ServiceAddresses>,
    ) -> Option<Self> {
        let versions = definition.pointer("/spec/versions").and_then(Value::as_array)?;
        if versions.len() < 2 {
            return None;
        }
        let group = definition.pointer("/spec/group")?.as_str()?.to_owned();
        let kind = definition.pointer("/spec/names/kind")?.as_str()?.to_owned();
        let conversion = definition.pointer("/spec/conversion");
        let strategy = match conversion.and_then(|c| c.get("strategy")).and_then(Value::as_str) {
            Some("Webhook") => {
                let webhook = conversion.and_then(|c| c.get("webhook"));
                let client_config = webhook
                    .and_then(|w| w.get("clientConfig"))
                    .cloned()
                    .and_then(|c| serde_json::from_value(c).ok())
                    .unwrap_or_default();
                let review_version = webhook
                    .and_then(|w| w.get("conversionReviewVersions"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .find_map(|v| match v {
                        "v1" => Some("v1"),
                        "v1beta1" => Some("v1beta1"),
                        _ => None,
                    });
                Strategy::Webhook {
                    client_config,
                    review_version,
                }
            }
            _ => Strategy::None,
        };
        Some(Self {
            group,
            kind,
            strategy,
            store,
            addresses,
        })
    }

    /// `object` at `version` of the CRD's group; the error is upstream's text.
    pub(crate) async fn convert(&self, object: Value, version: &str) -> Result<Value, String> {
        let desired = format!("{}/{}", self.group, version);
        let current = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if current == desired {
            return Ok(object);
        }
        match &self.strategy {
            Strategy::None => Ok(with_api_version(object, &desired)),
            Strategy::Webhook {
                client_config,
                review_version,
            } => {
                // Go's `GroupVersionKind.String()` of the object sent.
                let gvk = format!("{current}, Kind={}", self.kind);
                let review_version = review_version.ok_or("no supported conversion review versions")?;
                self.call_webhook(client_config, review_version, object, &desired)
                    .await
                    .map_err(|failure| failure.text(&gvk))
            }
        }
    }

    async fn call_webhook(
        &self,
        client_config: &WebhookClientConfig,
        review_version: &'static str,
        object: Value,
        desired: &str,
    ) -> Result<Value, Failure> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [object]},
        });
        let body = serde_json::to_vec(&review).map_err(|e| Failure::Failed(e.to_string()))?;
        let answer = webhook::post_to(
            client_config,
            WEBHOOK_TIMEOUT,
            body,
            self.store.as_ref(),
            &self.addresses,
        )
        .await
        .map_err(|e| {
            Failure::Failed(match e {
                CallError::Post { url, detail } => format!("Post {url:?}: {detail}"),
                CallError::Client(text) | CallError::Response(text) => text,
            })
        })?;
        let response: Value = serde_json::from_slice(&answer)
            .map_err(|e| Failure::Failed(format!("couldn't get version/kind; json parse error: {e}")))?;
        let converted = converted_objects(&response, review_version, &uid).map_err(Failure::Failed)?;
        if converted.len() != 1 {
            return Err(Failure::Count(converted.len()));
        }
        let mut converted = converted.into_iter().next().unwrap_or_default();
        let received = converted
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if received != desired {
            return Err(Failure::Invalid(format!(
                "returned invalid object at index 0: invalid groupVersion (expected {desired}, received {received})"
            )));
        }
        let kind = converted.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind != self.kind {
            return Err(Failure::Invalid(format!(
                "returned invalid object at index 0: invalid kind (expected {}, received {kind})",
                self.kind
            )));
        }
        for (field, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
            let pointer = format!("/metadata/{field}");
            let before = object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or_default();
            let after = converted
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or_default();
            if before != after {
                return Err(Failure::Invalid(format!(
                    "returned invalid object: must have the same {label}: {before} != {after}"
                )));
            }
        }
        restore_object_meta(&object, &mut converted)
            .map_err(|e| Failure::Invalid(format!("returned invalid metadata: {e}")))?;
        Ok(converted)
    }
}

/// Why a webhook conversion failed, before the object's group/version/kind is put in front.
enum Failure {
    /// `conversion webhook for <gvk> failed: <text>`.
    Failed(String),
    /// `conversion webhook for <gvk> returned <n> objects, expected 1`.
    Count(usize),
    /// `conversion webhook for <gvk> <text>` (an invalid converted object).
    Invalid(String),
}

impl Failure {
    fn text(self, gvk: &str) -> String {
        match self {
            Failure::Failed(text) => format!("conversion webhook for {gvk} failed: {text}"),
            Failure::Count(count) => {
                format!("conversion webhook for {gvk} returned {count} objects, expected 1")
            }
            Failure::Invalid(text) => format!("conversion webhook for {gvk} {text}"),
        }
    }
}

/// `getConvertedObjectsFromResponse`: the converted objects of a successful answer.
fn converted_objects(response: &Value, review_version: &str, uid: &str) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let api_version = response
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = response.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {group}/{version}, Kind={kind}"
            ));
        }
    }
    let Some(answer) = response.get("response").filter(|r| !r.is_null()) else {
        return Err("no response provided".to_owned());
    };
    if review_version == "v1" {
        let got = answer.get("uid").and_then(Value::as_str).unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let status = answer
        .pointer("/result/status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = answer
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_owned()
        });
    }
    Ok(answer
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// `restoreObjectMeta`: the original's metadata with the converted object's labels and annotations.
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".to_owned()),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut metadata = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(map)) => {
                if let Some((key, value)) = map.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{key}] must be a string, but is {} in converted object",
                        go_type(value)
                    ));
                }
                metadata.insert(field.to_owned(), Value::Object(map.clone()));
            }
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        }
    }
    if let Some(map) = converted.as_object_mut() {
        map.insert("metadata".to_owned(), Value::Object(metadata));
    }
    Ok(())
}

/// The Go type `encoding/json` decodes `value` into, as `%T` prints it.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn with_api_version(mut object: Value, api_version: &str) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".to_owned(), Value::String(api_version.to_owned()));
    }
    object
}

/// A [`Store`] that writes one custom resource at its storage version and reads it at a served
/// version, converting with a [`Converter`]; every other resource passes through.
pub(crate) struct ConvertingStore {
    inner: Arc<dyn Store>,
    resource: StorageResource,
    converter: Arc<Converter>,
    storage_version: String,
    served_version: String,
    storage_schema: Option<Arc<Value>>,
}

impl ConvertingStore {
    /// Wraps `inner` for `resource`, stored at `storage_version` (whose `openAPIV3Schema` is
    /// `storage_schema`) and served at `served_version`. Objects read get the storage version's
    /// defaults before they are converted, as upstream's storage decoder defaults them; the handlers
    /// apply the served version's after.
    pub(crate) fn new(
        inner: Arc<dyn Store>,
        resource: StorageResource,
        converter: Converter,
        versions: (&str, &str),
        storage_schema: Option<Arc<Value>>,
    ) -> Self {
        let (storage_version, served_version) = versions;
        Self {
            inner,
            resource,
            converter: Arc::new(converter),
            storage_version: storage_version.to_owned(),
            served_version: served_version.to_owned(),
            storage_schema,
        }
    }

    async fn to_storage(&self, object: Object) -> StoreResult<Object> {
        self.converter
            .convert(object, &self.storage_version)
            .await
            .map_err(|message| StoreError::Conversion { message, write: true })
    }

    async fn to_served(&self, object: Object) -> StoreResult<Object> {
        convert_read(
            &self.converter,
            self.storage_schema.as_deref(),
            object,
            &self.served_version,
        )
        .await
    }

    async fn all_to_served(&self, objects: Vec<Object>) -> StoreResult<Vec<Object>> {
        let mut out = Vec::with_capacity(objects.len());
        for object in objects {
            out.push(self.to_served(object).await?);
        }
        Ok(out)
    }

    fn ours(&self, resource: &StorageResource) -> bool {
        *resource == self.resource
    }
}

async fn convert_read(
    converter: &Converter,
    storage_schema: Option<&Value>,
    mut object: Object,
    version: &str,
) -> StoreResult<Object> {
    if let Some(schema) = storage_schema {
        super::structural::defaulting::apply(schema, &mut object);
    }
    converter
        .convert(object, version)
        .await
        .map_err(|message| StoreError::Conversion {
            message,
            write: false,
        })
}

impl Store for ConvertingStore {
    fn create<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        if !self.ours(resource) {
            return self.inner.create(resource, key, object);
        }
        Box::pin(async move {
            let stored = self.to_storage(object).await?;
            let created = self.inner.create(resource, key, stored).await?;
            self.to_served(created).await
        })
    }

    fn get<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        if !self.ours(resource) {
            return self.inner.get(resource, key);
        }
        Box::pin(async move {
            let object = self.inner.get(resource, key).await?;
            self.to_served(object).await
        })
    }

    fn update<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
        expected_revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        if !self.ours(resource) {
            return self.inner.update(resource, key, object, expected_revision);
        }
        Box::pin(async move {
            let stored = self.to_storage(object).await?;
            let written = self
                .inner
                .update(resource, key, stored, expected_revision)
                .await?;
            self.to_served(written).await
        })
    }

    fn delete<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        if !self.ours(resource) {
            return self.inner.delete(resource, key, preconditions);
        }
        Box::pin(async move {
            let deleted = self.inner.delete(resource, key, preconditions).await?;
            self.to_served(deleted).await
        })
    }

    fn list<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        if !self.ours(resource) {
            return self.inner.list(resource, namespace);
        }
        Box::pin(async move {
            let (items, revision) = self.inner.list(resource, namespace).await?;
            Ok((self.all_to_served(items).await?, revision))
        })
    }

    fn list_at<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        revision: u64,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        if !self.ours(resource) {
            return self.inner.list_at(resource, namespace, revision);
        }
        Box::pin(async move {
            let (items, revision) = self.inner.list_at(resource, namespace, revision).await?;
            Ok((self.all_to_served(items).await?, revision))
        })
    }

    fn list_range<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
        revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        if !self.ours(resource) {
            return self.inner.list_range(resource, namespace, start, limit, revision);
        }
        Box::pin(async move {
            let mut page = self
                .inner
                .list_range(resource, namespace, start, limit, revision)
                .await?;
            let mut items = Vec::with_capacity(page.items.len());
            for (key, object) in page.items {
                items.push((key, self.to_served(object).await?));
            }
            page.items = items;
            Ok(page)
        })
    }

    fn reads_at_revision(&self) -> bool {
        self.inner.reads_at_revision()
    }

    fn watch<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        from: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<WatchStream>> {
        if !self.ours(resource) {
            return self.inner.watch(resource, namespace, from);
        }
        Box::pin(async move {
            let events = self.inner.watch(resource, namespace, from).await?;
            let converter = self.converter.clone();
            let version = self.served_version.clone();
            let schema = self.storage_schema.clone();
            let converted = events.then(move |event| {
                let (converter, version, schema) = (converter.clone(), version.clone(), schema.clone());
                async move {
                    let mut event = event?;
                    let schema = schema.as_deref();
                    event.object = convert_read(&converter, schema, event.object, &version).await?;
                    if let Some(prev) = event.prev_object.take() {
                        event.prev_object = Some(convert_read(&converter, schema, prev, &version).await?);
                    }
                    Ok(event)
                }
            });
            Ok(converted.boxed())
        })
    }

    fn current_revision(&self) -> BoxFuture<'_, StoreResult<u64>> {
        self.inner.current_revision()
    }

    fn put_internal<'a>(
        &'a self,
        key: &'a str,
        value: Value,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.inner.put_internal(key, value, ttl)
    }

    fn get_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        self.inner.get_internal(key)
    }

    fn list_internal<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<(String, Value)>>> {
        self.inner.list_internal(prefix)
    }

    fn delete_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.delete_internal(key)
    }

    fn check_health(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.inner.check_health()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converter(conversion: Value) -> Converter {
        let crd = json!({"spec": {"group": "stable.example.com", "names": {"kind": "CronTab"},
            "versions": [{"name": "v1", "storage": true}, {"name": "v2", "storage": false}],
            "conversion": conversion}});
        Converter::for_crd(
            &crd,
            Arc::new(crate::store::MemoryStore::new()),
            Arc::new(ServiceAddresses::default()),
        )
        .expect("two versions")
    }

    #[tokio::test]
    async fn none_strategy_rewrites_only_the_api_version() {
        let c = converter(json!({"strategy": "None"}));
        let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "spec": {"a": 1}});
        let out = c.convert(object, "v2").await.expect("converted");
        assert_eq!(
            out,
            json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab", "spec": {"a": 1}})
        );
    }

    #[tokio::test]
    async fn an_unreachable_webhook_fails_with_upstreams_text() {
        let c = converter(
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/convert"}}}),
        );
        let object =
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "a"}});
        let err = c
            .convert(object.clone(), "v2")
            .await
            .expect_err("no webhook there");
        assert!(
            err.starts_with(
                "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://127.0.0.1:1/convert?timeout=30s\": "
            ),
            "{err}"
        );
        // Already at the target version: no call at all.
        assert_eq!(c.convert(object.clone(), "v1").await, Ok(object));
    }

    #[test]
    fn responses_are_checked_as_upstream() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{}]}});
        assert_eq!(converted_objects(&ok, "v1", "u"), Ok(vec![json!({})]));
        assert_eq!(
            converted_objects(&ok, "v1", "other"),
            Err("expected response.uid=\"other\", got \"u\"".to_owned())
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "no way"}}});
        assert_eq!(converted_objects(&failed, "v1", "u"), Err("no way".to_owned()));
        let wrong = json!({"apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            converted_objects(&wrong, "v1", "u"),
            Err(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, Kind=Status"
                    .to_owned()
            )
        );
        // v1beta1 checks neither kind nor uid.
        assert_eq!(converted_objects(&ok, "v1beta1", "x"), Ok(vec![json!({})]));
    }

    #[test]
    fn restored_metadata_keeps_the_originals_but_labels_and_annotations() {
        let original = json!({"metadata": {"name": "a", "uid": "1", "labels": {"x": "1"}}});
        let mut converted =
            json!({"metadata": {"name": "a", "resourceVersion": "9", "annotations": {"y": "2"}}});
        restore_object_meta(&original, &mut converted).expect("valid");
        assert_eq!(
            converted,
            json!({"metadata": {"name": "a", "uid": "1", "annotations": {"y": "2"}}})
        );
        let mut missing = json!({"spec": {}});
        assert_eq!(
            restore_object_meta(&original, &mut missing),
            Err("missing metadata in converted object".to_owned())
        );
    }
}
