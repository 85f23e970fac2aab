//! `MvpBody`: the response body of the filter: the inner service's body, a peer's streamed
//! body, or a small body the filter wrote itself. Never buffered.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use pin_project_lite::pin_project;

/// The error type of [`MvpBody`] (and of request bodies sent to peers).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project! {
    /// Response body of [`crate::Mvp`]: streams whichever body produced the response.
    pub struct MvpBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Peer { #[pin] body: Incoming },
        Full { #[pin] body: Full<Bytes> },
    }
}

impl<B> MvpBody<B> {
    /// Wraps a body of the inner (local) service.
    pub fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    pub(crate) fn peer(body: Incoming) -> Self {
        Self {
            kind: Kind::Peer { body },
        }
    }

    pub(crate) fn full(body: Full<Bytes>) -> Self {
        Self {
            kind: Kind::Full { body },
        }
    }
}

/// An uninhabited body type: `MvpBody<NoInnerBody>` is a response produced by the filter
/// itself (a peer's body or an error), never by an inner service.
#[derive(Debug)]
pub enum NoInnerBody {}

impl Body for NoInnerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match *self {}
    }
}

impl MvpBody<NoInnerBody> {
    /// Re-types a body that cannot hold an inner body.
    pub fn cast<B>(self) -> MvpBody<B> {
        match self.kind {
            Kind::Inner { body } => match body {},
            Kind::Peer { body } => MvpBody::peer(body),
            Kind::Full { body } => MvpBody::full(body),
        }
    }
}

impl<B> std::fmt::Debug for MvpBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Inner { .. } => "Inner",
            Kind::Peer { .. } => "Peer",
            Kind::Full { .. } => "Full",
        };
        f.debug_struct("MvpBody").field("kind", &kind).finish()
    }
}

impl<B> Body for MvpBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx).map(|f| f.map(|r| r.map_err(Into::into))),
            KindProj::Peer { body } => body.poll_frame(cx).map(|f| f.map(|r| r.map_err(Into::into))),
            KindProj::Full { body } => body.poll_frame(cx).map(|f| f.map(|r| r.map_err(|e| match e {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Peer { body } => body.is_end_stream(),
            Kind::Full { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Peer { body } => body.size_hint(),
            Kind::Full { body } => body.size_hint(),
        }
    }
}
