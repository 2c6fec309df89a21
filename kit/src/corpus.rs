//! The requests every provider is asked about: each DeerFlow tool with
//! everyday arguments, then the edges: every argument of every DeerFlow tool
//! in every bad shape ([`bad_shapes`]: missing, null, a number, a list, an
//! object, empty, white space, `..` escapes, absolute and relative paths,
//! 1 MiB, unicode, control characters), odd names (empty, unicode,
//! invisible, control characters), huge, deep and oddly typed arguments, and
//! every attribution field set and unset.

use serde_json::{json, Map, Value};

use guardhost::{GuardrailRequest, ToolCallRequest};

/// One request of the corpus.
#[derive(Debug, Clone)]
pub struct Probe {
    /// A short name for reports, e.g. `tool:bash` or `args:1mb`.
    pub name: String,
    /// The request.
    pub request: GuardrailRequest,
    /// Whether it is an everyday call (used for latency, memory and thread
    /// checks); the edge cases are evaluated only a few times.
    pub everyday: bool,
}

/// Nesting depth of the deeply nested arguments: deep, yet within what
/// `serde_json` parses by default (128), so a provider that parses its
/// arguments can answer.
pub const NESTING_DEPTH: usize = 100;

/// Size of the large argument.
pub const LARGE_ARGUMENT_BYTES: usize = 1 << 20;

/// DeerFlow's tools, each with arguments of the shape DeerFlow sends.
fn deerflow_tools() -> Vec<(&'static str, Value)> {
    vec![
        ("bash", json!({"command": "ls -la /mnt/user-data/workspace", "description": "list the workspace"})),
        (
            "write_file",
            json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n", "description": "write"}),
        ),
        (
            "str_replace",
            json!({"path": "/mnt/user-data/workspace/app.py", "old_str": "a = 1", "new_str": "a = 2", "description": "edit"}),
        ),
        ("read_file", json!({"path": "/mnt/user-data/workspace/README.md", "description": "read"})),
        ("ls", json!({"path": "/mnt/user-data/workspace", "description": "list"})),
        ("web_search", json!({"query": "rust abi_stable prefix types"})),
        ("web_fetch", json!({"url": "https://example.com/docs"})),
        ("image_search", json!({"query": "lighthouse at dusk", "max_results": 5})),
        ("present_files", json!({"filepaths": ["/mnt/user-data/outputs/report.md"]})),
        ("view_image", json!({"image_path": "/mnt/user-data/uploads/chart.png"})),
        (
            "ask_clarification",
            json!({"question": "Which branch?", "clarification_type": "missing_info", "options": ["main", "dev"]}),
        ),
        (
            "task",
            json!({"description": "research", "prompt": "Summarise the docs", "subagent_type": "general-purpose"}),
        ),
        ("mcp__x__y", json!({"arg": "value"})),
    ]
}

/// DeerFlow's tools as tool calls with everyday arguments, an id and a
/// thread: the mix `guardhost bench` sends.
pub fn everyday_tool_calls() -> Vec<ToolCallRequest> {
    deerflow_tools()
        .into_iter()
        .enumerate()
        .map(|(i, (tool, args))| {
            ToolCallRequest::new(tool, object(args))
                .with_id(format!("call-{i}"))
                .with_context(object(json!({"thread_id": "thread-bench", "user_role": "member"})))
        })
        .collect()
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A request with typical attribution: a thread, a call id, a timestamp.
fn request(tool: &str, args: Value, timestamp: &str) -> GuardrailRequest {
    GuardrailRequest {
        tool_name: tool.to_owned(),
        tool_input: object(args),
        agent_id: None,
        thread_id: Some("thread-conformance".into()),
        is_subagent: false,
        timestamp: timestamp.to_owned(),
        user_id: None,
        user_role: None,
        oauth_provider: None,
        oauth_id: None,
        run_id: None,
        tool_call_id: Some("call-conformance".into()),
        channel_user_id: None,
        is_internal: false,
        authz_attributes: Map::new(),
    }
}

/// The bad shapes every argument of every DeerFlow tool is sent in, by
/// name; `None` leaves the argument out.
pub fn bad_shapes() -> Vec<(&'static str, Option<Value>)> {
    vec![
        ("missing", None),
        ("null", Some(Value::Null)),
        ("number", Some(json!(42))),
        ("list", Some(json!(["a", 1, null]))),
        ("object", Some(json!({"nested": "value"}))),
        ("empty", Some(json!(""))),
        ("whitespace", Some(json!(" \t\n "))),
        ("dotdot", Some(json!("../../../../etc/passwd"))),
        ("absolute", Some(json!("/etc/shadow"))),
        ("relative", Some(json!("relative/path.txt"))),
        ("1mb", Some(json!("x".repeat(LARGE_ARGUMENT_BYTES)))),
        ("unicode", Some(json!("数据/файл/🔧\u{202e}txt.exe"))),
        ("control", Some(json!("a\u{0}b\u{1b}[31m\r\n\u{7f}"))),
    ]
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("bottom"), |inner, _| json!({ "a": inner }))
}

/// The whole corpus. The timestamp is fixed at creation, so evaluating a
/// probe twice sends the same request twice.
pub fn corpus() -> Vec<Probe> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
    let probe = |name: &str, request: GuardrailRequest, everyday: bool| Probe {
        name: name.to_owned(),
        request,
        everyday,
    };
    let mut probes: Vec<Probe> = deerflow_tools()
        .into_iter()
        .map(|(tool, args)| probe(&format!("tool:{tool}"), request(tool, args, &now), true))
        .collect();

    let shapes = bad_shapes();
    for (tool, args) in deerflow_tools() {
        for argument in object(args.clone()).keys() {
            for (shape, value) in &shapes {
                let mut changed = object(args.clone());
                match value {
                    Some(value) => changed.insert(argument.clone(), value.clone()),
                    None => changed.remove(argument),
                };
                let name = format!("shape:{tool}.{argument}={shape}");
                probes.push(probe(&name, request(tool, Value::Object(changed), &now), false));
            }
        }
    }

    let bash = |args: Value| request("bash", args, &now);
    for (name, tool) in [
        ("name:empty", String::new()),
        ("name:unicode", "工具_écrire_🔧".to_owned()),
        ("name:zero-width", "ba\u{200b}sh".to_owned()),
        ("name:right-to-left", "\u{202e}hsab".to_owned()),
        ("name:control-characters", "bash\u{0}\n\t".to_owned()),
        ("name:4kb", "t".repeat(4096)),
        ("name:mcp-server-underscore", "github_create_issue".to_owned()),
    ] {
        probes.push(probe(name, request(&tool, json!({"arg": "value"}), &now), false));
    }
    probes.push(probe(
        "args:unicode",
        request(
            "write_file",
            json!({"path": "/tmp/数据/файл.txt", "content": "Grüße, 世界 🌍 \u{202e}dlrow"}),
            &now,
        ),
        false,
    ));
    probes.push(probe(
        "args:1mb",
        request(
            "write_file",
            json!({"path": "/tmp/big.txt", "content": "x".repeat(LARGE_ARGUMENT_BYTES)}),
            &now,
        ),
        false,
    ));
    probes.push(probe("args:nested", bash(json!({ "command": nested(NESTING_DEPTH) })), false));
    probes.push(probe(
        "args:odd-types",
        bash(json!({
            "command": null, "float": 1.5e300, "max": u64::MAX, "min": i64::MIN,
            "list": [1, "two", null, true, {"k": []}], "empty": {}
        })),
        false,
    ));
    let many: Map<String, Value> = (0..1000).map(|i| (format!("key{i}"), json!(i))).collect();
    probes.push(probe("args:1000-keys", bash(Value::Object(many)), false));
    probes.push(probe("args:none", bash(json!({})), false));

    let mut all = bash(json!({"command": "echo hi"}));
    all.agent_id = Some("/etc/guardhost/passport.json".into());
    all.thread_id = Some("thread-1".into());
    all.is_subagent = true;
    all.user_id = Some("user-1".into());
    all.user_role = Some("admin".into());
    all.oauth_provider = Some("github".into());
    all.oauth_id = Some("gh-123".into());
    all.run_id = Some("run-1".into());
    all.tool_call_id = Some("call-1".into());
    all.channel_user_id = Some("slack:U123".into());
    all.is_internal = true;
    all.authz_attributes = object(json!({"scopes": ["repo", "read:org"], "tenant": {"id": 7}}));
    let mut unicode = all.clone();
    unicode.user_id = Some("ユーザー🙂".into());
    unicode.channel_user_id = Some("\u{0}\u{202e}".into());
    unicode.authz_attributes = object(json!({"rôle": "管理者"}));
    let mut none = bash(json!({"command": "echo hi"}));
    none.thread_id = None;
    none.tool_call_id = None;
    probes.push(probe("attribution:all", all, false));
    probes.push(probe("attribution:unicode", unicode, false));
    probes.push(probe("attribution:none", none, false));
    probes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_covers_every_deerflow_tool_and_has_unique_names() {
        let probes = corpus();
        for tool in [
            "bash",
            "write_file",
            "str_replace",
            "read_file",
            "ls",
            "web_search",
            "web_fetch",
            "image_search",
            "present_files",
            "view_image",
            "ask_clarification",
            "task",
            "mcp__x__y",
        ] {
            assert!(probes.iter().any(|p| p.request.tool_name == tool && p.everyday), "{tool}");
        }
        // Every argument of every tool in every bad shape.
        for shape in [
            "missing",
            "null",
            "number",
            "list",
            "object",
            "empty",
            "whitespace",
            "dotdot",
            "absolute",
            "relative",
            "1mb",
            "unicode",
            "control",
        ] {
            let name = format!("shape:ls.path={shape}");
            let probe = probes.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(probe.request.tool_name, "ls");
            assert_eq!(probe.request.tool_input.contains_key("path"), shape != "missing", "{name}");
        }
        assert!(probes.iter().any(|p| p.name == "shape:present_files.filepaths=dotdot"));
        assert!(probes.iter().any(|p| p.name == "shape:task.subagent_type=control"));
        let mut names: Vec<_> = probes.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), probes.len());
    }

    #[test]
    fn the_nested_argument_parses_with_serde_json_defaults() {
        let text = serde_json::to_string(&json!({ "command": nested(NESTING_DEPTH) })).unwrap();
        serde_json::from_str::<Value>(&text).unwrap();
    }
}
