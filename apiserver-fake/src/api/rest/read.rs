//! `get` and `list` (with selectors, `limit`/`continue`, and the Table / PartialObjectMetadata
//! transforms).

use axum::response::Response;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::chunked_list;
use super::list_options::{self, ReadPath};
use super::negotiation::OutputFormat;
use super::negotiation::Transform;
use super::object::present_list_item;
use super::pagination::ContinueToken;
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
pub(crate) struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
    name: Option<String>,
}

impl Selection {
    /// Parses `labelSelector`/`fieldSelector` and the name a watch path pins.
    pub(crate) fn from_request(req: &RestRequest<'_>) -> Result<Self, Status> {
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
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.name.is_none()
    }

    /// Whether `object` is selected.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.name
            .as_deref()
            .is_none_or(|n| object::meta_str(object, "name") == n)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }
}

/// `metadata` of a list: `resourceVersion`, then `continue` and `remainingItemCount` when chunked.
pub(crate) fn list_metadata(revision: u64, next: Option<String>, remaining: Option<u64>) -> Value {
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
pub(crate) fn render_list(req: &RestRequest<'_>, metadata: Value, items: Vec<Value>) -> Value {
    ListRenderer::new(req).render(metadata, items)
}

/// A 200 with [`render_list`]'s list, rendered and encoded where the request deadline can interrupt
/// it when the list is large.
pub(crate) async fn respond_list(
    req: &RestRequest<'_>,
    metadata: Value,
    items: Vec<Value>,
) -> Result<Response, Status> {
    ListRenderer::new(req).respond(metadata, items).await
}

/// What rendering and encoding a list needs, owned, so that the CPU-bound part of a large list can run
/// on a blocking thread the request's deadline does not wait for.
struct ListRenderer {
    api_version: String,
    kind: String,
    custom: bool,
    /// Reads are defaulted by the storage version's schema ([`super::ResourceInfo::default_stored`]).
    resource: super::ResourceInfo,
    include: IncludeObject,
    convertor: TableConvertor,
    format: OutputFormat,
}

impl ListRenderer {
    fn new(req: &RestRequest<'_>) -> Self {
        Self {
            api_version: req.resource.api_version(),
            kind: req.resource.kind.clone(),
            custom: req.resource.custom,
            resource: req.resource.clone(),
            include: IncludeObject::parse(req.query.get("includeObject")),
            convertor: TableConvertor::for_resource(&req.resource, req.ctx.binary_version),
            format: req.format,
        }
    }

    fn render(&self, metadata: Value, items: Vec<Value>) -> Value {
        let items: Vec<Value> = items
            .into_iter()
            .map(|mut o| {
                self.resource.default_stored(&mut o);
                present_list_item(o, &self.api_version, &self.kind, self.custom)
            })
            .collect();
        match self.format.transform {
            Transform::Table => table(
                metadata,
                &items,
                self.include,
                &self.convertor,
                time::OffsetDateTime::now_utc(),
            ),
            Transform::PartialObjectMetadata => partial_object_metadata_list(metadata, &items),
            Transform::None => json!({
                "kind": format!("{}List", self.kind),
                "apiVersion": self.api_version,
                "metadata": metadata,
                "items": items,
            }),
        }
    }

    /// Renders and encodes `items`: inline when few, else on a blocking thread, so that the request
    /// deadline (a `tokio::time::timeout` around the handler) can answer 504 while it runs.
    async fn respond(self, metadata: Value, items: Vec<Value>) -> Result<Response, Status> {
        if items.len() < BLOCKING_RENDER_ITEMS {
            let format = self.format;
            return Ok(format.respond(StatusCode::OK, &self.render(metadata, items)));
        }
        tokio::task::spawn_blocking(move || {
            let format = self.format;
            format.respond(StatusCode::OK, &self.render(metadata, items))
        })
        .await
        .map_err(|err| Status::internal_error(&format!("rendering the list failed: {err}")))
    }
}

/// Lists of at least this many items are rendered and encoded on a blocking thread.
const BLOCKING_RENDER_ITEMS: usize = 500;

/// The largest range a list reads from the store at once while it fills a page that a selector thins
/// out (upstream's etcd3 `maxLimit`).
const MAX_RANGE_LIMIT: usize = 10_000;

/// Renders one object in the negotiated format.
pub(crate) fn render_object(req: &RestRequest<'_>, object: Value) -> Value {
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
pub(crate) async fn get(req: &RestRequest<'_>) -> Result<Response, Status> {
    if let Some(requested) = list_options::resource_version(&req.query, ReadPath::WatchCache)? {
        super::freshness::wait_until_fresh(req.ctx.store.as_ref(), requested).await?;
    }
    let object = req.ctx.store.get(&req.resource.storage(), &req.key()).await?;
    Ok(req.respond(StatusCode::OK, &render_object(req, object)))
}

/// Upstream's answer to a continue token whose revision etcd has compacted (`inconsistentContinue`).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can \
     start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder \
     of the results. Continuing with the provided token results in an inconsistent list - objects that were created, \
     modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Upstream's answer to `resourceVersionMatch=Exact` at a revision etcd has compacted (etcd3's `expired`).
const LIST_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";

/// What a list's `resourceVersion=N` asks of the store: a state at N or later (waiting for the store
/// to reach N, as [`super::freshness`]); with `resourceVersionMatch=Exact`, the state at N itself,
/// which a store that keeps old revisions (etcd) reads at N (`Some(N)`) and one that keeps none (the
/// in-memory store) has only while N is its current revision (else 410, as a compacted revision).
async fn pinned_revision(req: &RestRequest<'_>, requested: u64) -> Result<Option<u64>, Status> {
    let current = super::freshness::wait_until_fresh(req.ctx.store.as_ref(), requested).await?;
    if req.query.get("resourceVersionMatch") != Some("Exact") {
        return Ok(None);
    }
    if req.ctx.store.reads_at_revision() {
        Ok(Some(requested))
    } else if requested < current {
        Err(Status::resource_expired(LIST_TOO_OLD))
    } else {
        Ok(None)
    }
}

/// `GET` on a collection.
pub(crate) async fn list(req: &RestRequest<'_>) -> Result<Response, Status> {
    let selection = Selection::from_request(req)?;
    let limit = list_options::int64(&req.query, "limit")?.unwrap_or(0);
    list_options::int64(&req.query, "timeoutSeconds")?;
    list_options::validate(&req.query, false)?;
    let requested = list_options::resource_version(&req.query, ReadPath::List)?;
    // `resourceVersion="0"`: any state will do (the watch cache's, without catching up).
    let any = req.query.get("resourceVersion") == Some("0");
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
    let pinned = match requested {
        Some(requested) => pinned_revision(req, requested).await?,
        None => None,
    };
    if limit == 0
        && token.is_none()
        && pinned.is_none()
        && req.format == OutputFormat::JSON
        && req.ctx.store.reads_at_revision()
    {
        return chunked_list::respond(req, &selection, any).await;
    }
    let storage = req.resource.storage();
    let namespace = req.namespace.as_deref();
    let unfiltered = selection.is_empty();
    // Upstream's etcd3 `GetList`: read `limit` keys from the start key at the list's revision and keep
    // reading (doubling the range, up to `maxLimit`) until `limit` objects matched or the range ends. A
    // list without `limit` is one read of everything (one snapshot, also in the in-memory store).
    let paging = limit > 0;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut range_limit = if paging { limit.min(MAX_RANGE_LIMIT) } else { 0 };
    let mut start = token.as_ref().map(|t| t.start_key.clone());
    let mut revision = token.as_ref().and_then(ContinueToken::revision).or(pinned);
    let mut items = Vec::new();
    let mut last_key = None;
    let (has_more, count) = loop {
        let store = &req.ctx.store;
        let page = match revision {
            None if any => store.list_range_any(&storage, namespace, start.as_deref(), range_limit),
            _ => store.list_range(&storage, namespace, start.as_deref(), range_limit, revision),
        }
        .await
        .map_err(|err| match err {
            StoreError::Expired { .. } if token.is_some() => Status {
                list_continue: token.as_ref().map(|t| t.at_current_revision().encode()),
                ..Status::resource_expired(INCONSISTENT_CONTINUE)
            },
            StoreError::Expired { .. } if pinned.is_some() => Status::resource_expired(LIST_TOO_OLD),
            other => Status::from(other),
        })?;
        revision = Some(page.revision);
        let mut has_more = page.more;
        let fetched = page.items.len();
        for (key, object) in page.items {
            if paging && items.len() >= limit {
                has_more = true;
                break;
            }
            if selection.matches(&object) {
                items.push(object);
            }
            last_key = Some(key);
        }
        if fetched == 0 || !has_more || !paging || items.len() >= limit {
            break (has_more && fetched > 0, page.count);
        }
        start = last_key.as_ref().map(|key| format!("{key}\u{0}"));
        range_limit = (range_limit * 2).min(MAX_RANGE_LIMIT);
        // Let the request deadline fire, and other requests run, between reads.
        tokio::task::yield_now().await;
    };
    let revision = revision.unwrap_or_default();
    let (next, remaining) = match (has_more && paging, last_key) {
        (true, Some(last)) => (
            Some(ContinueToken::after(&last, revision).encode()),
            // etcd's count covers the range from the last read's start key; upstream reports it minus
            // the limit, and only when no selector thinned the page.
            unfiltered.then(|| count.saturating_sub(limit as u64)),
        ),
        _ => (None, None),
    };
    let metadata = list_metadata(revision, next, remaining);
    respond_list(req, metadata, items).await
}
