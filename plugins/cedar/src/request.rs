//! A tool call as a Cedar request: who (principal), `Action::"call"`, the
//! tool (resource), and a context with the arguments and the attribution.

use cedar_policy::{Context, EntityId, EntityTypeName, EntityUid, Request as CedarRequest, Schema};
use guardhost_abi::Request;
use serde_json::{Map, Value};

/// The entity types and the action every request uses, parsed once.
#[derive(Debug, Clone)]
pub struct Names {
    user: EntityTypeName,
    agent: EntityTypeName,
    tool: EntityTypeName,
    call: EntityUid,
}

impl Names {
    /// `User`, `Agent`, `Tool` and `Action::"call"`.
    pub fn new() -> Result<Self, String> {
        let name = |text: &str| text.parse::<EntityTypeName>().map_err(|e| format!("`{text}`: {e}"));
        let action = name("Action")?;
        Ok(Names {
            user: name("User")?,
            agent: name("Agent")?,
            tool: name("Tool")?,
            call: EntityUid::from_type_name_and_id(action, EntityId::new("call")),
        })
    }

    /// The principal: `User::"<user_id>"` when the context names a user,
    /// else `Agent::"<agent_id>"` (the configured passport), else
    /// `Agent::"anonymous"`.
    pub fn principal(&self, request: &Request<'_>) -> EntityUid {
        let (kind, id) =
            match (request.user_id().filter(|u| !u.is_empty()), request.agent_id().filter(|a| !a.is_empty()))
            {
                (Some(user), _) => (&self.user, user),
                (None, Some(agent)) => (&self.agent, agent),
                (None, None) => (&self.agent, "anonymous"),
            };
        EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id))
    }

    /// `Tool::"<name>"`.
    pub fn tool(&self, name: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(self.tool.clone(), EntityId::new(name))
    }

    /// The Cedar request for one tool call, typed and checked by `schema`
    /// when there is one.
    pub fn request(&self, request: &Request<'_>, schema: Option<&Schema>) -> Result<CedarRequest, String> {
        let json = context_json(request)?;
        let context = Context::from_json_value(json, schema.map(|s| (s, &self.call)))
            .map_err(|e| format!("the call's context does not fit the schema: {e}"))?;
        CedarRequest::new(
            self.principal(request),
            self.call.clone(),
            self.tool(request.tool_name()),
            context,
            schema,
        )
        .map_err(|e| format!("the call does not fit the schema: {e}"))
    }
}

/// A JSON value as Cedar can hold it: a number that is not an integer
/// becomes its text, `null` is left out (Cedar has neither).
fn cedar_value(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Number(n) if n.as_i64().is_none() => Some(Value::String(n.to_string())),
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(cedar_value).collect())),
        Value::Object(map) => Some(Value::Object(cedar_record(map))),
        other => Some(other),
    }
}

fn cedar_record(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter().filter_map(|(k, v)| cedar_value(v).map(|v| (k, v))).collect()
}

/// The context: `tool`, `args`, `is_subagent`, `is_internal`, `time` and,
/// when the call has them, `user_id`, `user_role`, `oauth_provider`,
/// `oauth_id`, `channel_user_id`, `agent_id`, `thread_id`, `run_id`,
/// `tool_call_id`, `authz` (the authorization attributes).
pub fn context_json(request: &Request<'_>) -> Result<Value, String> {
    let args: Map<String, Value> =
        request.tool_input().map_err(|e| format!("the arguments are not a JSON object: {e}"))?;
    let authz: Map<String, Value> = request
        .authz_attributes()
        .map_err(|e| format!("the authorization attributes are not a JSON object: {e}"))?;
    let mut context = Map::new();
    context.insert("tool".into(), Value::from(request.tool_name()));
    context.insert("args".into(), Value::Object(cedar_record(args)));
    context.insert("is_subagent".into(), Value::from(request.is_subagent));
    context.insert("is_internal".into(), Value::from(request.is_internal));
    context.insert("time".into(), Value::from(request.timestamp()));
    for (key, value) in [
        ("user_id", request.user_id()),
        ("user_role", request.user_role()),
        ("oauth_provider", request.oauth_provider()),
        ("oauth_id", request.oauth_id()),
        ("channel_user_id", request.channel_user_id()),
        ("agent_id", request.agent_id()),
        ("thread_id", request.thread_id()),
        ("run_id", request.run_id()),
        ("tool_call_id", request.tool_call_id()),
    ] {
        if let Some(value) = value {
            context.insert(key.into(), Value::from(value));
        }
    }
    if !authz.is_empty() {
        context.insert("authz".into(), Value::Object(cedar_record(authz)));
    }
    Ok(Value::Object(context))
}
