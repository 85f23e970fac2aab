//! Carrying out a proxy decision: send the request to the chosen peer and relay its answer.
//!
//! The peer's response (any status, headers minus hop-by-hop, streamed body) is relayed
//! unchanged; a transport failure becomes Go's plain-text 503 (docs/mvp-behaviour.md §4). Both count in
//! `apiserver_rerouted_request_total`.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;

use crate::body::{BoxError, MvpBody, NoInnerBody};
use crate::forward::{prepare_request, remove_hop_by_hop_headers};
use crate::gvr::GroupVersionResource;
use crate::metrics::MvpMetrics;
use crate::status::http_error;
use crate::transport::PeerTransport;
use crate::user::UserInfo;

/// The peer endpoint (`host:port`) a request was proxied to, in the extensions of every response of a
/// proxied request (the peer's relayed answer or the 503 of a transport failure), so access logs
/// around the [`MvpLayer`](crate::MvpLayer) can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedTo(pub String);

/// Proxies `req` to the peer at `endpoint` (`host:port`) on behalf of `user`.
///
/// Never fails: transport errors are turned into the upstream 503 plain-text response.
/// `gvr` labels the rerouted metric (`None` for discovery fetches).
pub(crate) async fn proxy_to_peer<B>(
    transport: &PeerTransport,
    metrics: Option<&MvpMetrics>,
    req: Request<B>,
    endpoint: &str,
    user: &UserInfo,
    gvr: Option<&GroupVersionResource>,
) -> Response<MvpBody<NoInnerBody>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut response = send_to_peer(transport, metrics, req, endpoint, user, gvr).await;
    response.extensions_mut().insert(ProxiedTo(endpoint.to_owned()));
    response
}

async fn send_to_peer<B>(
    transport: &PeerTransport,
    metrics: Option<&MvpMetrics>,
    req: Request<B>,
    endpoint: &str,
    user: &UserInfo,
    gvr: Option<&GroupVersionResource>,
) -> Response<MvpBody<NoInnerBody>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = req.into_parts();
    let sent = match prepare_request(&mut parts, endpoint, user) {
        Ok(()) => {
            transport
                .send(Request::from_parts(
                    parts,
                    body.map_err(Into::into).boxed_unsync(),
                ))
                .await
        }
        Err(err) => {
            tracing::error!(error = %err, "Error while proxying request to destination apiserver");
            return unavailable(metrics, gvr, &err.to_string());
        }
    };
    match sent {
        Ok(resp) => {
            if let Some(m) = metrics {
                m.inc_rerouted(resp.status().as_u16(), gvr);
            }
            let (mut parts, body) = resp.into_parts();
            remove_hop_by_hop_headers(&mut parts.headers);
            Response::from_parts(parts, MvpBody::peer(body))
        }
        Err(err) => {
            tracing::error!(error = %err, endpoint, "Error while proxying request to destination apiserver");
            unavailable(metrics, gvr, &err.to_string())
        }
    }
}

fn unavailable(
    metrics: Option<&MvpMetrics>,
    gvr: Option<&GroupVersionResource>,
    text: &str,
) -> Response<MvpBody<NoInnerBody>> {
    if let Some(m) = metrics {
        m.inc_rerouted(StatusCode::SERVICE_UNAVAILABLE.as_u16(), gvr);
    }
    http_error(StatusCode::SERVICE_UNAVAILABLE, text).map(MvpBody::full)
}
