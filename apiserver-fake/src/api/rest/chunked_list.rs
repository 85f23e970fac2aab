//! A full list read from the store in ranges at one revision and encoded object by object, so that a
//! large list costs about its encoded size rather than a JSON tree per object held until the whole
//! list is encoded (issue 24: one 10,000-Job list took a server on etcd from 30 to 429 MB).
//!
//! Used for plain JSON lists without `limit` on a store that reads at a revision
//! ([`Store::reads_at_revision`], etcd): ranges of [`RANGE`] keys, each read at the first one's
//! revision, are the one consistent snapshot a single read was, and kube-apiserver's etcd3 storage
//! reads a list it must filter in such ranges too (`GetList`). The body is the bytes
//! [`OutputFormat::respond`] would have written (Go's compact JSON, newline-terminated, with its
//! `Content-Length`), held as the chunks they were encoded in; everything is read and encoded before
//! the handler returns, so the request deadline and the Status of a failed read behave as before.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body::{Frame, SizeHint};
use serde_json::Value;

use super::RestRequest;
use super::object::present_list_item;
use super::read::{Selection, list_metadata};
use crate::api::status::Status;

#[cfg(doc)]
use super::negotiation::OutputFormat;
#[cfg(doc)]
use crate::store::Store;

/// Keys read per range: what is held as JSON trees at once (~250 × a few kB).
pub(crate) const RANGE: usize = 250;

/// Reads every object of the request's collection that `selection` matches and answers the plain
/// JSON list of them (see the module docs); `any`: a state at any revision will do
/// ([`Store::list_range_any`], `resourceVersion="0"`).
pub(crate) async fn respond(
    req: &RestRequest<'_>,
    selection: &Selection,
    any: bool,
) -> Result<Response, Status> {
    let storage = req.resource.storage();
    let namespace = req.namespace.as_deref();
    let (api_version, kind, custom) = (
        req.resource.api_version(),
        req.resource.kind.as_str(),
        req.resource.custom,
    );
    let mut body = Chunks::default();
    let mut start: Option<String> = None;
    let mut revision = None;
    let mut first_item = true;
    loop {
        let store = &req.ctx.store;
        let page = match revision {
            None if any => store.list_range_any(&storage, namespace, start.as_deref(), RANGE),
            _ => store.list_range(&storage, namespace, start.as_deref(), RANGE, revision),
        }
        .await?;
        let mut chunk = Vec::new();
        if revision.is_none() {
            // The head, once the snapshot's revision is known: `{"kind":…,"apiVersion":…,"metadata":…,"items":[`.
            chunk.extend_from_slice(b"{\"kind\":");
            encode(&mut chunk, &Value::String(format!("{kind}List")))?;
            chunk.extend_from_slice(b",\"apiVersion\":");
            encode(&mut chunk, &Value::String(api_version.clone()))?;
            chunk.extend_from_slice(b",\"metadata\":");
            encode(&mut chunk, &list_metadata(page.revision, None, None))?;
            chunk.extend_from_slice(b",\"items\":[");
        }
        revision = Some(page.revision);
        let more = page.more && !page.items.is_empty();
        let mut last_key = None;
        for (key, mut object) in page.items {
            req.resource.default_stored(&mut object);
            if selection.matches(&object) {
                if !first_item {
                    chunk.push(b',');
                }
                first_item = false;
                encode(&mut chunk, &present_list_item(object, &api_version, kind, custom))?;
            }
            last_key = Some(key);
        }
        body.push(chunk);
        match (more, last_key) {
            (true, Some(last)) => start = Some(format!("{last}\u{0}")),
            _ => break,
        }
        // Let the request deadline fire, and other requests run, between reads.
        tokio::task::yield_now().await;
    }
    body.push(b"]}\n".to_vec());
    let mut response = Response::new(Body::new(body));
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

fn encode(buffer: &mut Vec<u8>, value: &Value) -> Result<(), Status> {
    serde_json::to_writer(buffer, value)
        .map_err(|err| Status::internal_error(&format!("encoding the list failed: {err}")))
}

/// A response body of encoded chunks with its exact length (so that HTTP/1.1 gets a `Content-Length`
/// as for any other list).
#[derive(Debug, Default)]
struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    fn push(&mut self, mut chunk: Vec<u8>) {
        if !chunk.is_empty() {
            // The encoder grew the chunk by doubling: hold only its bytes until they are sent.
            chunk.shrink_to_fit();
            self.remaining += chunk.len() as u64;
            self.chunks.push_back(Bytes::from(chunk));
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        Poll::Ready(this.chunks.pop_front().map(|chunk| {
            this.remaining -= chunk.len() as u64;
            Ok(Frame::data(chunk))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
