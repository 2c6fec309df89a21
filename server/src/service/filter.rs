//! `POST /v1/filter`: the tools a caller may use, asked before the model
//! sees them.

use hyper::StatusCode;

use super::reply::{json, Refusal, Reply};
use super::Service;

impl Service {
    /// `/v1/filter`: the tools of `tools` the caller of `context` may use,
    /// in their order, as the config's `authorization:` provider says
    /// (every tool without one), asked before the model sees the tools;
    /// never a name the host refuses (`guardhost::tool_name`).
    pub(super) async fn filter(&self, body: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Filter {
            tools: Vec<String>,
            #[serde(default)]
            context: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let Ok(Filter { tools, context }) = serde_json::from_slice::<Filter>(body) else {
            return Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_filter",
                "a filter request is {\"tools\": [\"name\", ...], \"context\": {...}} (context optional: the \
                 runtime context of a call, `user_role`, `user_id` ...)",
            )
            .reply();
        };
        let Some(guardrail) = self.source.current() else {
            // Unguarded, every tool may be used but one whose name the
            // host refuses.
            let names: Vec<&str> = tools.iter().map(String::as_str).collect();
            return match guardhost::authorization::usable_names(&names) {
                Ok(tools) => json(
                    StatusCode::OK,
                    serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap_or_default(),
                ),
                Err(error) => Refusal::new(StatusCode::BAD_REQUEST, "bad_filter", error.to_string()).reply(),
            };
        };
        // A provider library may take its time: off the I/O threads.
        let filtered = tokio::task::spawn_blocking(move || {
            let names: Vec<&str> = tools.iter().map(String::as_str).collect();
            guardrail.filter_tools(context.as_ref(), &names).map_err(|e| e.to_string())
        })
        .await;
        match filtered {
            Ok(Ok(tools)) => json(
                StatusCode::OK,
                serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap_or_default(),
            ),
            Ok(Err(message)) => Refusal::new(StatusCode::BAD_REQUEST, "bad_filter", message).reply(),
            Err(error) => Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "filter_failed",
                format!("the filter's thread failed: {error}"),
            )
            .reply(),
        }
    }
}
