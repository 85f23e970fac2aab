//! `get` and `list` (with selectors, `limit`/`continue`, and the Table / PartialObjectMetadata
//! transforms).

use axum::response::Response;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::list_options::{self, ReadPath};
use super::negotiation::Transform;
use super::object::present_list_item;
use super::pagination::{ContinueToken, paginate};
use super::selector::{FieldSelector, LabelSelector};
use super::table::{
    IncludeObject, TableConvertor, partial_object_metadata, partial_object_metadata_list, table,
    table_for_object,
};
use super::{RestRequest, object};
use crate::api::status::Status;
use crate::store::StoreError;

/// The label/field/name filter of a list, watch or deletecollection.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
    name: Option<String>,
}

impl Selection {
    /// Parses `labelSelector`/`fieldSelector` and the name a watch path pins.
    pub fn from_request(req: &RestRequest<'_>) -> Result<Self, Status> {
        let labels = LabelSelector::parse(req.query.get("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(
            req.query.get("fieldSelector").unwrap_or_default(),
            &req.resource.group,
            &req.resource.resource,
        )?;
        let name = Some(req.info.name.clone()).filter(|n| !n.is_empty());
        Ok(Self { labels, fields, name })
    }

    /// Whether nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.name.is_none()
    }

    /// Whether `object` is selected.
    pub fn matches(&self, object: &Value) -> bool {
        self.name
            .as_deref()
            .is_none_or(|n| object::meta_str(object, "name") == n)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }
}

/// `metadata` of a list: `resourceVersion`, then `continue` and `remainingItemCount` when chunked.
pub fn list_metadata(revision: u64, next: Option<String>, remaining: Option<u64>) -> Value {
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".to_owned(), json!(revision.to_string()));
    if let Some(next) = next {
        metadata.insert("continue".to_owned(), json!(next));
    }
    if let Some(remaining) = remaining {
        metadata.insert("remainingItemCount".to_owned(), json!(remaining));
    }
    Value::Object(metadata)
}

/// Renders a list in the negotiated format: `<Kind>List` (items without TypeMeta for built-ins),
/// `Table`, or `PartialObjectMetadataList`.
pub fn render_list(req: &RestRequest<'_>, metadata: Value, items: Vec<Value>) -> Value {
    let api_version = req.resource.api_version();
    let kind = &req.resource.kind;
    let items: Vec<Value> = items
        .into_iter()
        .map(|o| present_list_item(o, &api_version, kind, req.resource.custom))
        .collect();
    match req.format.transform {
        Transform::Table => table(
            metadata,
            &items,
            IncludeObject::parse(req.query.get("includeObject")),
            &TableConvertor::for_resource(&req.resource, req.ctx.binary_version),
            time::OffsetDateTime::now_utc(),
        ),
        Transform::PartialObjectMetadata => partial_object_metadata_list(metadata, &items),
        Transform::None => json!({
            "kind": format!("{kind}List"),
            "apiVersion": api_version,
            "metadata": metadata,
            "items": items,
        }),
    }
}

/// Renders one object in the negotiated format.
pub fn render_object(req: &RestRequest<'_>, object: Value) -> Value {
    let object = req.present(object);
    match req.format.transform {
        Transform::Table => table_for_object(
            &object,
            IncludeObject::parse(req.query.get("includeObject")),
            &TableConvertor::for_resource(&req.resource, req.ctx.binary_version),
            time::OffsetDateTime::now_utc(),
        ),
        Transform::PartialObjectMetadata => partial_object_metadata(&object),
        Transform::None => object,
    }
}

/// `GET .../<name>` (and `.../<name>/status`, which returns the whole object as upstream).
pub async fn get(req: &RestRequest<'_>) -> Result<Response, Status> {
    list_options::resource_version(&req.query, ReadPath::WatchCache)?;
    let object = req.ctx.store.get(&req.resource.storage(), &req.key()).await?;
    Ok(req.respond(StatusCode::OK, &render_object(req, object)))
}

/// Upstream's answer to a continue token whose revision etcd has compacted (`inconsistentContinue`).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can \
     start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder \
     of the results. Continuing with the provided token results in an inconsistent list - objects that were created, \
     modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// `GET` on a collection.
pub async fn list(req: &RestRequest<'_>) -> Result<Response, Status> {
    let selection = Selection::from_request(req)?;
    let limit = list_options::int64(&req.query, "limit")?.unwrap_or(0);
    list_options::int64(&req.query, "timeoutSeconds")?;
    list_options::validate(&req.query, false)?;
    list_options::resource_version(&req.query, ReadPath::List)?;
    let limit = u64::try_from(limit).unwrap_or(0);
    let token = match req.query.get("continue").filter(|c| !c.is_empty()) {
        Some(raw) => {
            if req.query.get("resourceVersion").is_some_and(|rv| !rv.is_empty()) {
                return Err(Status::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            Some(ContinueToken::decode(raw)?)
        }
        None => None,
    };
    let storage = req.resource.storage();
    let (items, revision) = match &token {
        None => req.ctx.store.list(&storage, req.namespace.as_deref()).await?,
        // Later pages read the snapshot the first one was read at, as upstream's etcd3 store does.
        Some(token) => req
            .ctx
            .store
            .list_at(&storage, req.namespace.as_deref(), token.resource_version)
            .await
            .map_err(|err| match err {
                StoreError::Expired { .. } => Status::resource_expired(INCONSISTENT_CONTINUE),
                other => Status::from(other),
            })?,
    };
    let total = items.len();
    let items: Vec<Value> = items.into_iter().filter(|o| selection.matches(o)).collect();
    let unfiltered = items.len() == total && selection.is_empty();
    let page = paginate(items, token.as_ref(), limit, revision, unfiltered);
    let revision = token.as_ref().map_or(revision, |t| t.resource_version);
    let metadata = list_metadata(revision, page.next, page.remaining);
    Ok(req.respond(StatusCode::OK, &render_list(req, metadata, page.items)))
}
