//! `ResponseFuture`: the future of [`crate::Mvp`]. The local path polls the inner future
//! in place (no allocation); only proxied requests are boxed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use crate::body::{MvpBody, NoInnerBody};

type ProxyFuture = Pin<Box<dyn Future<Output = Response<MvpBody<NoInnerBody>>> + Send>>;

pin_project! {
    /// Response future of [`crate::Mvp`].
    pub struct ResponseFuture<F, B> {
        #[pin]
        state: State<F, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        Inner { #[pin] future: F },
        Ready { response: Option<Response<MvpBody<B>>> },
        Proxy { future: ProxyFuture },
    }
}

impl<F, B> ResponseFuture<F, B> {
    pub(crate) fn inner(future: F) -> Self {
        Self {
            state: State::Inner { future },
        }
    }

    pub(crate) fn ready(response: Response<MvpBody<B>>) -> Self {
        Self {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    pub(crate) fn proxy(future: ProxyFuture) -> Self {
        Self {
            state: State::Proxy { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<MvpBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Inner { future } => future.poll(cx).map(|r| r.map(|resp| resp.map(MvpBody::inner))),
            StateProj::Ready { response } => {
                #[allow(clippy::expect_used)]
                let response = response.take().expect("ResponseFuture polled after completion");
                Poll::Ready(Ok(response))
            }
            StateProj::Proxy { future } => future.as_mut().poll(cx).map(|resp| Ok(resp.map(MvpBody::cast))),
        }
    }
}
