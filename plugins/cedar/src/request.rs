//! A tool call as a Cedar request: who (principal), `Action::"call"`, the
//! tool (resource), and a context with the arguments and the attribution.

use std::sync::Arc;

use cedar_policy::{
    Context, EntityId, EntityTypeName, EntityUid, PolicySet, Request as CedarRequest, RestrictedExpression,
    Schema,
};
use guardhost_abi::Request;
use guardhost_command::model::Summary;
use guardhost_command::path::Normal;
use guardhost_command::url::Unreadable;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::guard::Facts;
use crate::need::Need;
use crate::policies::Slice;
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
    /// comes (`crate::shape`), by looking the shape up after that (a shape
    /// the schema refused is refused again without building more). With a
    /// `slice`, the context holds what its policies read of it (all of it
    /// when Cedar checks it against the schema), and the policies of the
    /// slice the call can satisfy come with it (`crate::guard`); without,
    /// the context is whole.
    pub fn request(
        &self,
        request: &Request<'_>,
        schema: Option<&Schema>,
        slice: Option<&Slice>,
    ) -> Result<(CedarRequest, Option<Arc<PolicySet>>), String> {
        let (kind, id) = self.principal_of(request);
        let args: Map<String, Value> =
            request.tool_input().map_err(|e| format!("the arguments are not a JSON object: {e}"))?;
        let authz: Map<String, Value> = request
            .authz_attributes()
            .map_err(|e| format!("the authorization attributes are not a JSON object: {e}"))?;
        let need = slice.map_or(&Need::All, |slice| &slice.need);
        // The command is read when a policy reads it, or when the shape
        // must say whether it runs programs.
        let command = match args.get("command") {
            Some(Value::String(command)) if self.command && (schema.is_some() || need.reads("command")) => {
                Some(guardhost_command::model::summary(command))
            }
            _ => None,
        };
        let shape = schema.map(|_| self.shape(request, kind, id, &args, &authz, command.as_ref()));
        let verdict = shape.as_deref().and_then(|shape| self.known.verdict(shape));
        if verdict == Some(false) {
            return Err(not_in_schema(request));
        }
        let check = if verdict.is_some() { None } else { schema };
        let need = if check.is_some() { &Need::All } else { need };
        // Which of the arguments the guards test the call has (`null` is
        // left out of the context).
        let args_held: Vec<bool> = slice.map_or_else(Vec::new, |slice| {
            slice.args_tested.iter().map(|key| args.get(key).is_some_and(|v| !v.is_null())).collect()
        });
        let normal = self
            .path_of(&args)
            .filter(|_| need.reads("path"))
            .map(|path| guardhost_command::path::normalize(path, None));
        // The strings the guards' `like` tests read, where the context
        // built holds them.
        let texts: Vec<(&[String], String)> = slice.map_or_else(Vec::new, |slice| {
            slice
                .likes
                .iter()
                .filter_map(|path| {
                    let text = match path.as_slice() {
                        [first, key] if first == "args" && need.get("args").is_some_and(|n| n.reads(key)) => {
                            args.get(key).and_then(Value::as_str).map(str::to_owned)
                        }
                        [first, key] if first == "path" && need.get("path").is_some_and(|n| n.reads(key)) => {
                            normal.as_ref().and_then(|normal| match key.as_str() {
                                "normal" => Some(normal.path.clone()),
                                "lower" => Some(normal.path.to_lowercase()),
                                _ => None,
                            })
                        }
                        [key] if key == "tool" && need.reads(key) => Some(request.tool_name().to_owned()),
                        [key] if need.reads(key) => attribution(request)
                            .into_iter()
                            .find(|(name, _)| name == key)
                            .and_then(|(_, value)| value.map(str::to_owned)),
                        _ => None,
                    };
                    text.map(|text| (path.as_slice(), text))
                })
                .collect()
        });
        let pairs = context_of(request, self, args, authz, command, normal, need)?;
        // The guards test attributes the policies read, so `need` keeps
        // them: the context built holds one when the call has it.
        let policies = slice.map(|slice| {
            slice.guarded.for_call(&CallFacts { pairs: &pairs, slice, args_held: &args_held, texts: &texts })
        });
        let context = Context::from_pairs(pairs).map_err(|e| e.to_string())?;
        let cedar = CedarRequest::new(
            EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id)),
            self.call.clone(),
            self.tool(request.tool_name()),
            context,
            check,
        );
        if let (Some(shape), None) = (shape, verdict) {
            self.known.insert(shape, cedar.is_ok());
        }
        Ok((cedar.map_err(|_| not_in_schema(request))?, policies))
    }

    /// The request's shape (`crate::shape`): the principal, the tool and
    /// the context's attributes with their types, in the order
    /// [`context_of`] gives them.
    fn shape(
        &self,
        request: &Request<'_>,
        kind: &EntityTypeName,
        id: &str,
        args: &Map<String, Value>,
        authz: &Map<String, Value>,
        command: Option<&Summary>,
    ) -> String {
        let mut out = String::with_capacity(128);
        shape::name(&mut out, if *kind == self.user { "User" } else { "Agent" });
        shape::name(&mut out, id);
        shape::name(&mut out, request.tool_name());
        // The attributes always there.
        out.push_str("{tool s args ");
        shape::record(&mut out, args.iter());
        out.push_str(" is_subagent b is_internal b time s");
        for (key, value) in attribution(request) {
            if value.is_some() {
                out.push(' ');
                shape::name(&mut out, key);
            }
        }
        if !authz.is_empty() {
            out.push_str(" authz ");
            shape::record(&mut out, authz.iter());
        }
        if let Some(summary) = command {
            out.push_str(" command {programs ");
            shape::strings(&mut out, summary.programs.is_empty());
            out.push_str(" names ");
            shape::strings(&mut out, summary.names.is_empty());
            out.push_str(
                " unknown b dangerous b writes_outside b unverified b environment b runtime_code b}",
            );
        }
        if self.path_of(args).is_some() {
            out.push_str(" path {normal s lower s escapes b descriptor b}");
        }
        if self.url_of(args).is_some() {
            out.push_str(" url {host s private b unknown b ambiguous b}");
        }
        out.push('}');
        out
    }

    /// The string `path` (else `image_path`) argument, with `derive: [path]`.
    fn path_of<'a>(&self, args: &'a Map<String, Value>) -> Option<&'a str> {
        match args.get("path").or_else(|| args.get("image_path")) {
            Some(Value::String(path)) if self.path => Some(path),
            _ => None,
        }
    }

    /// The string `url` argument, with `derive: [url]`.
    fn url_of<'a>(&self, args: &'a Map<String, Value>) -> Option<&'a str> {
        match args.get("url") {
            Some(Value::String(url)) if self.url => Some(url),
            _ => None,
        }
    }
}

/// What the context built for a call holds, for the guards
/// ([`crate::guard`]).
struct CallFacts<'a> {
    pairs: &'a [(String, RestrictedExpression)],
    slice: &'a Slice,
    /// Whether the call has each of `slice.args_tested`.
    args_held: &'a [bool],
    /// The strings the guards' `like` tests read, where the context holds
    /// them.
    texts: &'a [(&'a [String], String)],
}

impl Facts for CallFacts<'_> {
    fn present(&self, path: &[String]) -> Option<bool> {
        let held = |key: &str| self.pairs.iter().any(|(name, _)| name == key);
        match path {
            [key] => Some(held(key)),
            [first, key] if first == "args" && held("args") => {
                self.slice.args_tested.iter().position(|k| k == key).map(|at| self.args_held[at])
            }
            _ => None,
        }
    }

    fn text(&self, path: &[String]) -> Option<&str> {
        self.texts.iter().find(|(p, _)| *p == path).map(|(_, text)| text.as_str())
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
/// record or set. Of a record, only the attributes `need` names.
fn cedar_value(value: Value, need: &Need) -> Option<RestrictedExpression> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => RestrictedExpression::new_long(i),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(text) => RestrictedExpression::new_string(text),
        // A policy reads a set whole.
        Value::Array(items) => {
            RestrictedExpression::new_set(items.into_iter().filter_map(|item| cedar_value(item, &Need::All)))
        }
        Value::Object(map) => return cedar_record(map, need).ok(),
    })
}

fn cedar_record(map: Map<String, Value>, need: &Need) -> Result<RestrictedExpression, String> {
    let pairs = map.into_iter().filter_map(|(key, value)| {
        let need = need.get(&key)?;
        cedar_value(value, need).map(|value| (key, value))
    });
    RestrictedExpression::new_record(pairs).map_err(|e| e.to_string())
}

/// The attribution a context carries when the call has it, by name.
fn attribution<'a>(request: &Request<'a>) -> [(&'static str, Option<&'a str>); 9] {
    [
        ("user_id", request.user_id()),
        ("user_role", request.user_role()),
        ("oauth_provider", request.oauth_provider()),
        ("oauth_id", request.oauth_id()),
        ("channel_user_id", request.channel_user_id()),
        ("agent_id", request.agent_id()),
        ("thread_id", request.thread_id()),
        ("run_id", request.run_id()),
        ("tool_call_id", request.tool_call_id()),
    ]
}

/// Adds attribute `name` to `pairs` when `need` reads it.
fn pick(
    pairs: &mut Vec<(String, RestrictedExpression)>,
    need: &Need,
    name: &str,
    value: impl FnOnce() -> RestrictedExpression,
) {
    if need.reads(name) {
        pairs.push((name.to_owned(), value()));
    }
}

/// The context: `tool`, `args`, `is_subagent`, `is_internal`, `time` and,
/// when the call has them, `user_id`, `user_role`, `oauth_provider`,
/// `oauth_id`, `channel_user_id`, `agent_id`, `thread_id`, `run_id`,
/// `tool_call_id`, `authz` (the authorization attributes), and what
/// `derive:` reads of the arguments (`command`, the command's summary when
/// `command` is read; `path`; `url`). Built as Cedar values directly (the
/// schema, when there is one, checks it with the request), with only the
/// attributes `need` names: its attributes, for `Context::from_pairs`.
fn context_of(
    request: &Request<'_>,
    names: &Names,
    args: Map<String, Value>,
    authz: Map<String, Value>,
    command: Option<Summary>,
    normal: Option<Normal>,
    need: &Need,
) -> Result<Vec<(String, RestrictedExpression)>, String> {
    let text = |value: &str| RestrictedExpression::new_string(value.to_owned());
    let mut pairs = Vec::with_capacity(16);
    let url = names.url_of(&args).map(str::to_owned).filter(|_| need.reads("url"));
    pick(&mut pairs, need, "tool", || text(request.tool_name()));
    if let Some(need) = need.get("args") {
        pairs.push(("args".to_owned(), cedar_record(args, need)?));
    }
    pick(&mut pairs, need, "is_subagent", || RestrictedExpression::new_bool(request.is_subagent));
    pick(&mut pairs, need, "is_internal", || RestrictedExpression::new_bool(request.is_internal));
    pick(&mut pairs, need, "time", || text(request.timestamp()));
    for (key, value) in attribution(request) {
        if let Some(value) = value {
            pick(&mut pairs, need, key, || text(value));
        }
    }
    if let (false, Some(need)) = (authz.is_empty(), need.get("authz")) {
        pairs.push(("authz".to_owned(), cedar_record(authz, need)?));
    }
    if let (Some(summary), Some(need)) = (command, need.get("command")) {
        pairs.extend(command_record(summary, need).map(|r| ("command".to_owned(), r)));
    }
    if let (Some(normal), Some(need)) = (normal, need.get("path")) {
        pairs.extend(path_record(normal, need).map(|r| ("path".to_owned(), r)));
    }
    if let (Some(url), Some(need)) = (url, need.get("url")) {
        pairs.extend(url_record(&url, need).map(|r| ("url".to_owned(), r)));
    }
    Ok(pairs)
}

/// `context.command`: what the command runs (`guardhost_command::model::summary`).
fn command_record(summary: Summary, need: &Need) -> Option<RestrictedExpression> {
    let set = |items: Vec<String>| {
        RestrictedExpression::new_set(items.into_iter().map(RestrictedExpression::new_string))
    };
    let bool = RestrictedExpression::new_bool;
    let mut pairs = Vec::with_capacity(8);
    pick(&mut pairs, need, "programs", || set(summary.programs));
    pick(&mut pairs, need, "names", || set(summary.names));
    pick(&mut pairs, need, "unknown", || bool(summary.unknown));
    pick(&mut pairs, need, "dangerous", || bool(summary.dangerous));
    pick(&mut pairs, need, "writes_outside", || bool(summary.writes_outside));
    pick(&mut pairs, need, "unverified", || bool(summary.unverified));
    pick(&mut pairs, need, "environment", || bool(summary.environment));
    pick(&mut pairs, need, "runtime_code", || bool(summary.runtime_code));
    RestrictedExpression::new_record(pairs).ok()
}

/// `context.path`: the path normalised once (`//`, `/./`, `..`,
/// `/proc/self/root`), and in lower case for patterns that must not miss
/// `KEY.PEM`.
fn path_record(normal: Normal, need: &Need) -> Option<RestrictedExpression> {
    let mut pairs = Vec::with_capacity(4);
    pick(&mut pairs, need, "lower", || RestrictedExpression::new_string(normal.path.to_lowercase()));
    pick(&mut pairs, need, "escapes", || RestrictedExpression::new_bool(normal.escapes));
    pick(&mut pairs, need, "descriptor", || RestrictedExpression::new_bool(normal.descriptor));
    pick(&mut pairs, need, "normal", || RestrictedExpression::new_string(normal.path));
    RestrictedExpression::new_record(pairs).ok()
}

/// `context.url`: where the URL goes.
fn url_record(url: &str, need: &Need) -> Option<RestrictedExpression> {
    let reading = guardhost_command::url::read(url);
    // `private`: some reading reaches a private address (for an
    // ambiguous URL, one of the readings parsers disagree on).
    let (host, private) = match &reading {
        Ok(destination) => (destination.host.clone(), destination.private),
        Err(Unreadable::Ambiguous { private, .. }) => (String::new(), private.is_some()),
        Err(Unreadable::Invalid) => (String::new(), false),
    };
    let ambiguous = matches!(reading, Err(Unreadable::Ambiguous { .. }));
    let mut pairs = Vec::with_capacity(4);
    pick(&mut pairs, need, "host", || RestrictedExpression::new_string(host));
    pick(&mut pairs, need, "private", || RestrictedExpression::new_bool(private));
    pick(&mut pairs, need, "unknown", || RestrictedExpression::new_bool(reading.is_err()));
    pick(&mut pairs, need, "ambiguous", || RestrictedExpression::new_bool(ambiguous));
    RestrictedExpression::new_record(pairs).ok()
}
