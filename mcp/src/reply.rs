//! The transport's answers to clients over HTTP ([`crate::listen`]): a
//! body whole or streamed from a session, JSON, event streams, and the
//! HTTP errors with a JSON-RPC body that the SDKs' servers answer.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::message::Message;
use crate::session::Events;

/// The JSON-RPC code of the errors the transport answers itself (a missing
/// session, a refused header), as the SDKs' servers use it.
const TRANSPORT_ERROR: i64 = -32000;

pub(crate) fn event_stream(events: Events) -> Response<Reply> {
    let mut response = Response::new(Reply::Stream(events));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Reply> {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    let mut response = Response::new(Reply::Whole(Some(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An HTTP error with a JSON-RPC error body (`id` null), as the SDKs'
/// servers answer.
pub(crate) fn error(status: StatusCode, text: &str) -> Response<Reply> {
    rpc_error(status, TRANSPORT_ERROR, text)
}

pub(crate) fn rpc_error(status: StatusCode, code: i64, text: &str) -> Response<Reply> {
    let mut body = Message::error(None, code, text).to_line();
    body.push(b'\n');
    let mut response = Response::new(Reply::Whole(Some(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A response's body: whole, or an event stream fed by a session.
pub enum Reply {
    /// One piece (taken when sent).
    Whole(Option<Bytes>),
    /// Events as the session puts them on the stream; the body ends when
    /// the session drops its end.
    Stream(Events),
}

impl Reply {
    /// An empty body.
    pub(crate) fn empty() -> Reply {
        Reply::Whole(None)
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Reply::Stream(events) => {
                events.poll_recv(cx).map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
            }
        }
    }
}

pub(crate) fn ended() -> Response<Reply> {
    error(StatusCode::NOT_FOUND, "Session not found: it ended (its server exited); initialize again")
}
