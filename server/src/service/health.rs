//! `/readyz` and `/metrics`: what the service says of itself, its
//! readiness with the guards that decide, and its Prometheus metrics.

use bytes::Bytes;
use guardhost::Guardrail;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::reply::{json, Reply};
use super::Service;

impl Service {
    /// `/readyz`: 503 while draining, and while no guardrail is installed
    /// (every call would be allowed undecided) unless the operator started
    /// the server with `--allow-unguarded`.
    pub(super) fn readiness(&self) -> Reply {
        let current = self.source.current();
        let provider = current.as_deref().map(|guardrail| guardrail.info.name.clone());
        let (status, body) = if self.is_draining() {
            (StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "draining", "provider": provider}))
        } else if provider.is_none() && !self.options.allow_unguarded {
            let message = "no guardrail is installed, so every call would be allowed undecided; fix the \
                           config (`enabled: true` and a `provider:` in its `guardrails:` section), or start \
                           the server with --allow-unguarded to serve without one";
            (
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"status": "unguarded", "provider": provider, "message": message}),
            )
        } else {
            (StatusCode::OK, serde_json::json!({"status": "ready", "provider": provider}))
        };
        let mut body = body;
        // Every guard, in the order they are asked: what decides calls.
        if let (Some(guardrail), Some(fields)) = (current.as_deref(), body.as_object_mut()) {
            fields.insert("entries".into(), entries_of(guardrail));
        }
        // Under --watch: the running config's digest, and how the guardrail
        // is weaker than the one the server started with (a reload without
        // --require-guardrail may weaken it; empty when it did not).
        if let (Some(status), Some(fields)) = (self.source.reload_status(), body.as_object_mut()) {
            fields.insert("config_digest".into(), status.config_digest.into());
            fields.insert("weakened".into(), status.weakened.into());
        }
        json(status, body.to_string().into_bytes())
    }

    /// `/metrics`: the metrics in Prometheus' text format, with the held
    /// calls, the decision log's dropped records and the reload status.
    pub(super) async fn exposition(&self) -> Reply {
        let held = match self.pending.waiting().await {
            Ok(held) => Some(held),
            Err(error) => {
                tracing::warn!("/metrics: cannot count the held calls: {error}");
                None
            }
        };
        let dropped = self
            .source
            .current()
            .and_then(|guardrail| guardrail.middleware.decision_log().map(|log| log.dropped()))
            .unwrap_or(0);
        let mut reply = Response::new(Full::new(Bytes::from(self.metrics.render(
            guardhost_isolation::restarts(),
            dropped,
            self.source.reload_status().as_ref(),
            held,
        ))));
        reply
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
        reply
    }
}

/// Each guard of `guardrail` as `/readyz` lists it: its name, where the
/// config writes it, its provider, kind, mode, `fail_closed`, and its
/// entry's digest as written.
pub fn entries_of(guardrail: &Guardrail) -> serde_json::Value {
    let entries = guardrail.described().map(|entry| {
        let kind = match entry.guard.kind() {
            guardhost::GuardKind::Authorization => "authorization",
            _ => "guardrail",
        };
        serde_json::json!({
            "name": entry.name,
            "at": entry.written.place,
            "provider": entry.provider.name,
            "kind": kind,
            "mode": entry.guard.mode().as_str(),
            "fail_closed": entry.guard.fail_closed(),
            "digest": entry.written.digest,
        })
    });
    serde_json::Value::Array(entries.collect())
}
