//! A tool call as a Cedar request: who (principal), `Action::"call"`, the
//! tool (resource), and a context with the arguments and the attribution.

use cedar_policy::{
    Context, EntityId, EntityTypeName, EntityUid, Request as CedarRequest, RestrictedExpression, Schema,
};
use guardhost_abi::Request;
use guardhost_command::url::Unreadable;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::shape::{self, Known};

/// A reading of the arguments the context may carry (`derive:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Derive {
    /// `context.command` from a string `command` argument.
    Command,
    /// `context.url` from a string `url` argument.
    Url,
    /// `context.path` from a string `path` (or `image_path`) argument.
    Path,
}

/// The entity types and the action every request uses, parsed once.
#[derive(Debug)]
pub struct Names {
    user: EntityTypeName,
    agent: EntityTypeName,
    tool: EntityTypeName,
    call: EntityUid,
    /// `derive: [command]`.
    command: bool,
    /// `derive: [url]`.
    url: bool,
    /// `derive: [path]`.
    path: bool,
    /// The request shapes the schema accepted.
    known: Known,
}

impl Names {
    /// `User`, `Agent`, `Tool` and `Action::"call"`, and what the context
    /// derives from the arguments.
    pub fn new(derive: &[Derive]) -> Result<Self, String> {
        let name = |text: &str| text.parse::<EntityTypeName>().map_err(|e| format!("`{text}`: {e}"));
        let action = name("Action")?;
        Ok(Names {
            user: name("User")?,
            agent: name("Agent")?,
            tool: name("Tool")?,
            call: EntityUid::from_type_name_and_id(action, EntityId::new("call")),
            command: derive.contains(&Derive::Command),
            url: derive.contains(&Derive::Url),
            path: derive.contains(&Derive::Path),
            known: Known::default(),
        })
    }

    /// The principal's type and id: `User::"<user_id>"` when the context
    /// names a user, else `Agent::"<agent_id>"` (the configured passport),
    /// else `Agent::"anonymous"`.
    fn principal_of<'r>(&self, request: &'r Request<'_>) -> (&EntityTypeName, &'r str) {
        match (request.user_id().filter(|u| !u.is_empty()), request.agent_id().filter(|a| !a.is_empty())) {
            (Some(user), _) => (&self.user, user),
            (None, Some(agent)) => (&self.agent, agent),
            (None, None) => (&self.agent, "anonymous"),
        }
    }

    /// `Tool::"<name>"`.
    pub fn tool(&self, name: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(self.tool.clone(), EntityId::new(name))
    }

    /// The Cedar request for one tool call, typed and checked by `schema`
    /// when there is one: by Cedar the first time a request of its shape
    /// comes (`crate::shape`), by looking the shape up after that.
    pub fn request(&self, request: &Request<'_>, schema: Option<&Schema>) -> Result<CedarRequest, String> {
        let (kind, id) = self.principal_of(request);
        let mut shape = schema.map(|_| {
            let mut shape = String::with_capacity(128);
            shape::name(&mut shape, if *kind == self.user { "User" } else { "Agent" });
            shape::name(&mut shape, id);
            shape::name(&mut shape, request.tool_name());
            shape
        });
        let context = context_of(request, self, shape.as_mut())?;
        let unchecked = shape.as_deref().is_some_and(|shape| self.known.contains(shape));
        let check = if unchecked { None } else { schema };
        let cedar = CedarRequest::new(
            EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id)),
            self.call.clone(),
            self.tool(request.tool_name()),
            context,
            check,
        )
        .map_err(|_| not_in_schema(request))?;
        if let (Some(shape), false) = (shape, unchecked) {
            self.known.insert(shape);
        }
        Ok(cedar)
    }
}

/// Why a call the schema cannot type is refused, naming its arguments but
/// never their values (Cedar's own message quotes the whole context).
fn not_in_schema(request: &Request<'_>) -> String {
    let names: Vec<String> = request
        .tool_input::<Map<String, Value>>()
        .map(|args| args.keys().map(|k| format!("`{k}`")).collect())
        .unwrap_or_default();
    format!(
        "the call of tool '{}' does not fit the schema's context for Action::\"call\": an argument or attribute it does not declare, or a value of another type (arguments: {})",
        request.tool_name(),
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    )
}

/// A JSON value as a Cedar value: a number that is not an integer becomes
/// its text; `null` (which Cedar has not) is `None`, left out of its
/// record or set.
fn cedar_value(value: Value) -> Option<RestrictedExpression> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => RestrictedExpression::new_long(i),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(text) => RestrictedExpression::new_string(text),
        Value::Array(items) => RestrictedExpression::new_set(items.into_iter().filter_map(cedar_value)),
        Value::Object(map) => return cedar_record(map).ok(),
    })
}

fn cedar_record(map: Map<String, Value>) -> Result<RestrictedExpression, String> {
    let pairs = map.into_iter().filter_map(|(key, value)| cedar_value(value).map(|value| (key, value)));
    RestrictedExpression::new_record(pairs).map_err(|e| e.to_string())
}

/// The context: `tool`, `args`, `is_subagent`, `is_internal`, `time` and,
/// when the call has them, `user_id`, `user_role`, `oauth_provider`,
/// `oauth_id`, `channel_user_id`, `agent_id`, `thread_id`, `run_id`,
/// `tool_call_id`, `authz` (the authorization attributes). Built as Cedar
/// values directly (the schema, when there is one, checks it with the
/// request).
/// With `shape`, writes the context's shape there too (`crate::shape`).
fn context_of(
    request: &Request<'_>,
    names: &Names,
    mut shape: Option<&mut String>,
) -> Result<Context, String> {
    let args: Map<String, Value> =
        request.tool_input().map_err(|e| format!("the arguments are not a JSON object: {e}"))?;
    let mut derived_shape = shape.as_ref().map(|_| String::new());
    let derived = derived(&args, names, derived_shape.as_mut());
    let authz: Map<String, Value> = request
        .authz_attributes()
        .map_err(|e| format!("the authorization attributes are not a JSON object: {e}"))?;
    if let Some(out) = shape.as_deref_mut() {
        // The attributes always there, in the order they are pushed below.
        out.push_str("{tool s args ");
        shape::record(out, args.iter());
        out.push_str(" is_subagent b is_internal b time s");
    }
    let text = |value: &str| RestrictedExpression::new_string(value.to_owned());
    let mut pairs = vec![
        ("tool".to_owned(), text(request.tool_name())),
        ("args".to_owned(), cedar_record(args)?),
        ("is_subagent".to_owned(), RestrictedExpression::new_bool(request.is_subagent)),
        ("is_internal".to_owned(), RestrictedExpression::new_bool(request.is_internal)),
        ("time".to_owned(), text(request.timestamp())),
    ];
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
            if let Some(out) = shape.as_deref_mut() {
                out.push(' ');
                shape::name(out, key);
            }
            pairs.push((key.to_owned(), text(value)));
        }
    }
    if !authz.is_empty() {
        if let Some(out) = shape.as_deref_mut() {
            out.push_str(" authz ");
            shape::record(out, authz.iter());
        }
        pairs.push(("authz".to_owned(), cedar_record(authz)?));
    }
    pairs.extend(derived);
    if let (Some(out), Some(derived)) = (shape, derived_shape) {
        out.push_str(&derived);
        out.push('}');
    }
    Context::from_pairs(pairs).map_err(|e| e.to_string())
}

/// `context.command`, `context.url` and `context.path`, as `derive:`
/// asks, when the arguments have them as strings.
fn derived(
    args: &Map<String, Value>,
    names: &Names,
    mut shape: Option<&mut String>,
) -> Vec<(String, RestrictedExpression)> {
    let mut pairs = Vec::new();
    let set = |items: Vec<String>| {
        RestrictedExpression::new_set(items.into_iter().map(RestrictedExpression::new_string))
    };
    if let (true, Some(Value::String(command))) = (names.command, args.get("command")) {
        let summary = guardhost_command::model::summary(command);
        if let Some(out) = shape.as_deref_mut() {
            out.push_str(" command {programs ");
            shape::strings(out, summary.programs.is_empty());
            out.push_str(" names ");
            shape::strings(out, summary.names.is_empty());
            out.push_str(
                " unknown b dangerous b writes_outside b unverified b environment b runtime_code b}",
            );
        }
        let record = RestrictedExpression::new_record([
            ("programs".to_owned(), set(summary.programs)),
            ("names".to_owned(), set(summary.names)),
            ("unknown".to_owned(), RestrictedExpression::new_bool(summary.unknown)),
            ("dangerous".to_owned(), RestrictedExpression::new_bool(summary.dangerous)),
            ("writes_outside".to_owned(), RestrictedExpression::new_bool(summary.writes_outside)),
            ("unverified".to_owned(), RestrictedExpression::new_bool(summary.unverified)),
            ("environment".to_owned(), RestrictedExpression::new_bool(summary.environment)),
            ("runtime_code".to_owned(), RestrictedExpression::new_bool(summary.runtime_code)),
        ]);
        pairs.extend(record.ok().map(|r| ("command".to_owned(), r)));
    }
    let path = args.get("path").or_else(|| args.get("image_path"));
    if let (true, Some(Value::String(path))) = (names.path, path) {
        // Normalised once (`//`, `/./`, `..`, `/proc/self/root`), and in
        // lower case for patterns that must not miss `KEY.PEM`.
        let normal = guardhost_command::path::normalize(path, None);
        if let Some(out) = shape.as_deref_mut() {
            out.push_str(" path {normal s lower s escapes b descriptor b}");
        }
        let record = RestrictedExpression::new_record([
            ("lower".to_owned(), RestrictedExpression::new_string(normal.path.to_lowercase())),
            ("normal".to_owned(), RestrictedExpression::new_string(normal.path)),
            ("escapes".to_owned(), RestrictedExpression::new_bool(normal.escapes)),
            ("descriptor".to_owned(), RestrictedExpression::new_bool(normal.descriptor)),
        ]);
        pairs.extend(record.ok().map(|r| ("path".to_owned(), r)));
    }
    if let (true, Some(Value::String(url))) = (names.url, args.get("url")) {
        let reading = guardhost_command::url::read(url);
        if let Some(out) = shape {
            out.push_str(" url {host s private b unknown b ambiguous b}");
        }
        // `private`: some reading reaches a private address (for an
        // ambiguous URL, one of the readings parsers disagree on).
        let (host, private) = match &reading {
            Ok(destination) => (destination.host.clone(), destination.private),
            Err(Unreadable::Ambiguous { private, .. }) => (String::new(), private.is_some()),
            Err(Unreadable::Invalid) => (String::new(), false),
        };
        let record = RestrictedExpression::new_record([
            ("host".to_owned(), RestrictedExpression::new_string(host)),
            ("private".to_owned(), RestrictedExpression::new_bool(private)),
            ("unknown".to_owned(), RestrictedExpression::new_bool(reading.is_err())),
            (
                "ambiguous".to_owned(),
                RestrictedExpression::new_bool(matches!(reading, Err(Unreadable::Ambiguous { .. }))),
            ),
        ]);
        pairs.extend(record.ok().map(|r| ("url".to_owned(), r)));
    }
    pairs
}
