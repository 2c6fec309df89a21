//! The responses every route writes: JSON bodies, and refusals with
//! their status, kind and message (the `Error` schema).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

/// A response of this service.
pub type Reply = Response<Full<Bytes>>;

/// A refusal: its status, kind and message (the `Error` schema).
pub(super) struct Refusal {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Refusal { status, kind, message: message.into() }
    }

    pub(super) fn reply(self) -> Reply {
        let body = serde_json::json!({"error": {"kind": self.kind, "message": self.message}});
        let mut reply = json(self.status, body.to_string().into_bytes());
        if self.status == StatusCode::UNAUTHORIZED {
            reply.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self.status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::REQUEST_TIMEOUT) {
            reply.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
        }
        reply
    }
}

pub(super) fn json(status: StatusCode, body: Vec<u8>) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    reply.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}
