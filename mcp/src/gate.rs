//! The guard points: what the configured guardrail makes of a
//! `tools/call`, a `resources/read` or a `prompts/get`, and which listed
//! tools a client is shown.
//!
//! The request a provider sees:
//! - `tools/call`: the tool's name and its `arguments`;
//! - `resources/read`: the tool name `resources/read`, arguments `{uri}`;
//! - `prompts/get`: the tool name `prompts/get`, arguments `{name,
//!   arguments}`;
//!
//! each with the JSON-RPC id as the tool call's id, and in the context's
//! `authz_attributes`: `mcp_server` (the server's name), `mcp_method` and,
//! when the client said who it is at `initialize`, `mcp_client` (its
//! `clientInfo.name`).

use std::collections::HashSet;
use std::sync::Arc;

use guardhost::aevaluate_call;
use guardhost::{denied_message, Guard, GuardKind};
use guardhost::{
    Approval, Ask, CallView, Guardrail, Mode, Timestamp, ToolCallError, ToolCallRequest, OUTCOME_KEY,
};
use serde_json::{json, Map, Value};

use crate::metrics::Metrics;
use crate::pending::Pending;

/// What the guardrail made of a call.
#[derive(Debug)]
pub enum Ruling {
    /// It may run; with the arguments a guard rewrote it to, if one did.
    Allow {
        /// The rewritten arguments.
        rewritten: Option<Map<String, Value>>,
        /// `allow`, `rewrite`, `approved`, ... as the decision log names it.
        outcome: &'static str,
        /// The chain entry that decided, when the guardrail names one.
        entry: Option<String>,
    },
    /// It may not: the text the client's model reads, and the first code.
    Deny {
        /// DeerFlow's denial text.
        text: String,
        /// The deciding reason's code.
        code: String,
        /// The chain entry that decided, when the guardrail names one.
        entry: Option<String>,
    },
    /// A guard holds it until a human approves it.
    Ask(Box<Ask>),
}

/// The guardrail of one proxy, and the names the requests carry.
#[derive(Debug, Clone)]
pub struct Gate {
    guardrail: Option<Guardrail>,
    server: String,
    metrics: Arc<Metrics>,
    /// Where calls wait for an approver over HTTP (`--listen` only).
    pending: Option<Arc<Pending>>,
}

/// The guarded methods and the tool names a policy sees for them.
pub fn subject(method: &str, params: &Value) -> Option<(String, Map<String, Value>)> {
    match method {
        "tools/call" => {
            let name = params.get("name")?.as_str()?.to_owned();
            let arguments = match params.get("arguments") {
                Some(Value::Object(arguments)) => arguments.clone(),
                _ => Map::new(),
            };
            Some((name, arguments))
        }
        "resources/read" => {
            let uri = params.get("uri")?.clone();
            Some(("resources/read".to_owned(), Map::from_iter([("uri".to_owned(), uri)])))
        }
        "prompts/get" => {
            let mut arguments = Map::new();
            arguments.insert("name".into(), params.get("name")?.clone());
            arguments.insert("arguments".into(), params.get("arguments").cloned().unwrap_or(json!({})));
            Some(("prompts/get".to_owned(), arguments))
        }
        _ => None,
    }
}

impl Gate {
    /// A gate over `guardrail` (none: every call passes, as the config says).
    pub fn new(guardrail: Option<Guardrail>, server: impl Into<String>) -> Gate {
        Gate { guardrail, server: server.into(), metrics: Arc::default(), pending: None }
    }

    /// The same gate, holding the asks it cannot put to a client in
    /// `pending` (for `--listen`'s `/v1/pending`).
    pub fn with_pending(mut self, pending: Arc<Pending>) -> Gate {
        self.pending = Some(pending);
        self
    }

    /// Where asks wait for an approver, when there is such a place.
    pub fn pending(&self) -> Option<&Arc<Pending>> {
        self.pending.as_ref()
    }

    /// The counters every gate made from this one shares.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The same guardrail for the server `name`.
    pub fn for_server(&self, name: &str) -> Gate {
        Gate { server: name.to_owned(), ..self.clone() }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool call a guarded request is, as the providers see it.
    pub fn call(
        &self,
        method: &str,
        tool: String,
        arguments: Map<String, Value>,
        id: &str,
        client: Option<&str>,
    ) -> ToolCallRequest {
        let mut attributes = Map::new();
        attributes.insert("mcp_server".into(), Value::from(self.server.as_str()));
        attributes.insert("mcp_method".into(), Value::from(method));
        if let Some(client) = client {
            attributes.insert("mcp_client".into(), Value::from(client));
        }
        let context = Map::from_iter([("authz_attributes".to_owned(), Value::Object(attributes))]);
        ToolCallRequest::new(tool, arguments).with_id(id).with_context(context)
    }

    /// Decides `call`.
    pub async fn decide(&self, call: &ToolCallRequest) -> Result<Ruling, ToolCallError> {
        let Some(guardrail) = &self.guardrail else {
            return Ok(Ruling::Allow { rewritten: None, outcome: "allow", entry: None });
        };
        let verdict = guardrail.middleware.acheck(call).await?;
        let entry = verdict.decision.metadata.get("decided_by").and_then(Value::as_str).map(str::to_owned);
        if verdict.allowed() {
            let rewritten =
                guardhost::rewritten_args(&verdict.decision).map(|_| verdict.request.tool_input.clone());
            let outcome = guardhost::step_outcome(&verdict.decision, verdict.provider_error);
            return Ok(Ruling::Allow { rewritten, outcome, entry });
        }
        if let Some(ask) = Ask::of(&verdict.decision) {
            return Ok(Ruling::Ask(Box::new(ask)));
        }
        let code = verdict
            .decision
            .reasons
            .first()
            .map(|r| r.code.to_string())
            .unwrap_or_else(|| "oap.denied".into());
        Ok(Ruling::Deny { text: denied_message(&call.tool_call, &verdict.decision).content, code, entry })
    }

    /// `call` with the approval of `ask` (by `approver`) in its context,
    /// to be decided again.
    pub fn approved(call: &ToolCallRequest, ask: &Ask, approver: Option<&str>) -> ToolCallRequest {
        let approval = Approval {
            approved: true,
            entry: ask.entry.clone(),
            digest: ask.digest.clone(),
            deadline: ask.deadline,
            approved_by: approver.map(str::to_owned),
        };
        let mut call = call.clone();
        let context = call.context.get_or_insert_with(Map::new);
        context.insert("approval".into(), serde_json::to_value(approval).expect("an approval serialises"));
        call
    }

    /// The listed tools a client is not shown: a name the host refuses,
    /// a tool the `authorization:` section does not let the client use, or
    /// one that a guard which never reads the arguments denies (that guard
    /// denies it for every call). Asked once per list.
    pub async fn hidden(&self, names: &[&str], client: Option<&str>) -> HashSet<String> {
        let Some(guardrail) = &self.guardrail else {
            return HashSet::new();
        };
        let probe = |name: &str| self.call("tools/call", name.to_owned(), Map::new(), "tools/list", client);
        let context = probe("").context;
        let shown: HashSet<String> = match guardrail.filter_tools(context.as_ref(), names) {
            Ok(shown) => shown.into_iter().collect(),
            Err(error) => {
                tracing::warn!(server = %self.server, "the tool filter failed ({error}): every tool is listed, and each call decided");
                names.iter().map(|n| (*n).to_owned()).collect()
            }
        };
        let mut hidden: HashSet<String> =
            names.iter().filter(|n| !shown.contains(**n)).map(|n| (*n).to_owned()).collect();
        // Enforcing guards that decide on the tool's name (and context)
        // alone, asked as the tool filter asks: the provider directly, with
        // no arguments, nothing audited or logged (no call was made).
        let blind: Vec<&Guard> = guardrail
            .middleware
            .guards()
            .iter()
            .filter(|guard| {
                guard.kind() != GuardKind::Authorization
                    && guard.mode() == Mode::Enforce
                    && !guard.provider().reads_tool_input()
            })
            .collect();
        let now = Timestamp::now();
        let empty = Map::new();
        for name in names.iter().copied().filter(|n| !hidden.contains(*n)).collect::<Vec<_>>() {
            let call = probe(name);
            for guard in blind.iter().filter(|guard| guard.selects(name)) {
                let Ok(view) = CallView::new(&call, &empty, guard.passport(), now.as_str()) else { continue };
                match aevaluate_call(guard.provider().as_ref(), &view).await {
                    // An ask or a rewrite (under the outcome key) is no denial.
                    Ok(decision) if !decision.allow && !decision.metadata.contains_key(OUTCOME_KEY) => {
                        hidden.insert(name.to_owned());
                        break;
                    }
                    _ => {}
                }
            }
        }
        hidden
    }
}
