//! The Cedar provider on the example policy set (`examples/cedar`) and on
//! policies written for each case: reasons, ids, errors at construction
//! with their file, line and column, evaluation errors as provider errors,
//! and the library through the conformance kit (a real `dlopen`).

use std::path::{Path, PathBuf};

use guardhost_abi::{Decision, Provider, Request};
use guardhost_cedar::{Cedar, Config, Derive, Paths};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cedar").join(name)
}

fn example_config() -> Config {
    Config {
        policies: Paths::One(example("policies")),
        schema: Some(example("deerflow.cedarschema")),
        entities: Some(example("entities.json")),
        derive: vec![Derive::Command, Derive::Url, Derive::Path],
        framework: None,
    }
}

fn reasons(decision: &Decision) -> Vec<(String, String)> {
    decision.reasons.iter().map(|r| (r.code.to_string(), r.message.to_string())).collect()
}

fn policies(dir: &Path, files: &[(&str, &str)]) -> Config {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    Config {
        policies: Paths::One(dir.to_owned()),
        schema: None,
        entities: None,
        derive: Vec::new(),
        framework: None,
    }
}

#[test]
fn the_determining_policies_are_the_reasons_and_the_first_is_the_policy_id() {
    let cedar = Cedar::new(example_config()).unwrap();
    let sudo = Request::for_tool("bash").with_tool_input_json(r#"{"command": "sudo reboot"}"#);
    let decision = cedar.evaluate(&sudo).unwrap();
    assert!(!decision.allow);
    assert_eq!(
        reasons(&decision),
        [
            ("cedar.forbid".to_owned(), "only the listed programs run".to_owned()),
            ("cedar.forbid".to_owned(), "sudo, su, shutdown and reboot are never run".to_owned()),
            // `reboot` has no grammar: what it runs cannot be said.
            (
                "cedar.forbid".to_owned(),
                "every program runs with options its grammar knows (what it runs can be said)".to_owned()
            )
        ]
    );
    assert_eq!(decision.policy_id.as_ref().map(|p| p.as_str()).into_option(), Some("listed-programs"));

    let read =
        Request::for_tool("read_file").with_tool_input_json(r#"{"path": "/mnt/user-data/workspace/a"}"#);
    let decision = cedar.evaluate(&read).unwrap();
    assert!(decision.allow);
    assert_eq!(
        reasons(&decision),
        [("cedar.permit".to_owned(), "reading inside /mnt/user-data and /mnt/skills".to_owned())]
    );

    let nothing = cedar.evaluate(&Request::for_tool("update_agent")).unwrap();
    assert!(!nothing.allow && nothing.policy_id.is_none());
    assert_eq!(reasons(&nothing)[0].0, "cedar.no_permit");
    assert_eq!(reasons(&nothing)[0].1, "no policy permits tool 'update_agent' for this caller");
}

#[test]
fn ids_come_from_the_id_annotation_else_the_file_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let config = policies(
        dir.path(),
        &[("a.cedar", "permit(principal, action, resource == Tool::\"x\");\n@id(\"named\") forbid(principal, action, resource == Tool::\"y\");")],
    );
    let cedar = Cedar::new(config).unwrap();
    assert_eq!(cedar.policy_ids(), ["a.cedar#1", "named"]);
    let decision = cedar.evaluate(&Request::for_tool("y")).unwrap();
    assert_eq!(reasons(&decision), [("cedar.forbid".to_owned(), "forbidden by policy named".to_owned())]);
    assert_eq!(cedar.evaluate(&Request::for_tool("x")).unwrap().policy_id.unwrap().as_str(), "a.cedar#1");
}

#[test]
fn every_problem_is_found_at_construction_with_its_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let error = |files: &[(&str, &str)], schema: Option<&str>| {
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let mut config = policies(sub.path(), files);
        if let Some(schema) = schema {
            let path = sub.path().join("s.cedarschema");
            std::fs::write(&path, schema).unwrap();
            config.schema = Some(path);
        }
        Cedar::new(config).unwrap_err().message.to_string()
    };
    let syntax = error(&[("p.cedar", "permit(principal, action, resource)\n  when { context.x == };")], None);
    assert!(syntax.contains("p.cedar:2:23: unexpected token `}`"), "{syntax}");
    let schema = "entity Tool; entity User; action \"call\" appliesTo { principal: [User], resource: [Tool], context: { tool: String } };";
    let unknown = error(
        &[("p.cedar", "permit(principal, action, resource)\nwhen { context.tol == \"x\" };")],
        Some(schema),
    );
    assert!(unknown.contains("p.cedar:2:8:") && unknown.contains("`tol`"), "{unknown}");
    let bad_type =
        error(&[("p.cedar", "permit(principal, action, resource == Tol::\"bash\");")], Some(schema));
    assert!(
        bad_type.contains("p.cedar:1:39:") && bad_type.contains("unrecognized entity type `Tol`"),
        "{bad_type}"
    );
    let bad_schema =
        error(&[("p.cedar", "permit(principal, action, resource);")], Some("entity User in [Nope];"));
    assert!(bad_schema.contains("s.cedarschema:1:") && bad_schema.contains("Nope"), "{bad_schema}");
    let twice = error(
        &[
            ("a.cedar", "@id(\"p\") permit(principal, action, resource);"),
            ("b.cedar", "@id(\"p\") forbid(principal, action, resource);"),
        ],
        None,
    );
    assert!(twice.contains("policy id `p` is also used in"), "{twice}");
    let template = error(&[("t.cedar", "permit(principal == ?principal, action, resource);")], None);
    assert!(template.contains("holds a template"), "{template}");
    let empty = tempfile::tempdir().unwrap();
    let none = Cedar::new(Config {
        policies: Paths::One(empty.path().to_owned()),
        schema: None,
        entities: None,
        derive: Vec::new(),
        framework: None,
    });
    assert!(none.unwrap_err().message.contains("holds no `.cedar` file"));
    let missing = Cedar::new(Config {
        policies: Paths::Many(vec![dir.path().join("nope.cedar")]),
        schema: None,
        entities: None,
        derive: Vec::new(),
        framework: None,
    });
    assert!(missing.unwrap_err().message.contains("neither a file nor a folder"));
}

#[test]
fn a_policy_that_cannot_be_evaluated_is_a_provider_error_never_an_allow() {
    let dir = tempfile::tempdir().unwrap();
    let cedar = Cedar::new(policies(
        dir.path(),
        &[("p.cedar", "permit(principal, action, resource);\nforbid(principal, action, resource) when { context.args.path like \"/etc/*\" };")],
    ))
    .unwrap();
    // No `path` argument: the forbid cannot be evaluated, and the permit alone
    // would allow.
    let error = cedar.evaluate(&Request::for_tool("bash")).unwrap_err();
    assert!(error.message.contains("could not be evaluated for tool 'bash'"), "{}", error.message);
    assert!(error.message.contains("p.cedar#2"), "{}", error.message);
    let explained = cedar.explain(&Request::for_tool("bash")).unwrap();
    assert_eq!(explained.errors.len(), 1);
    assert_eq!(explained.errors[0].0, "p.cedar#2");
}

#[test]
fn arguments_cedar_cannot_hold_are_given_as_text_or_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let cedar = Cedar::new(policies(
        dir.path(),
        &[("p.cedar", "permit(principal, action, resource) when { context.args.ratio == \"0.5\" && !(context.args has gone) && context.args.n == 3 };")],
    ))
    .unwrap();
    let request = Request::for_tool("t").with_tool_input_json(r#"{"ratio": 0.5, "gone": null, "n": 3}"#);
    assert!(cedar.evaluate(&request).unwrap().allow);
}

#[test]
fn the_attribution_is_in_the_principal_and_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let cedar = Cedar::new(policies(
        dir.path(),
        &[("p.cedar", "permit(principal == User::\"alice\", action == Action::\"call\", resource == Tool::\"t\") when { context.user_role == \"admin\" && context.tool == \"t\" && !context.is_subagent };\npermit(principal == Agent::\"anonymous\", action, resource == Tool::\"open\");")],
    ))
    .unwrap();
    let mut request = Request::for_tool("t");
    request.user_id = abi_stable::std_types::ROption::RSome("alice".into());
    request.user_role = abi_stable::std_types::ROption::RSome("admin".into());
    assert!(cedar.evaluate(&request).unwrap().allow);
    request.user_role = abi_stable::std_types::ROption::RSome("user".into());
    assert!(!cedar.evaluate(&request).unwrap().allow);
    assert!(
        cedar.evaluate(&Request::for_tool("open")).unwrap().allow,
        "no user, no passport: Agent::\"anonymous\""
    );
}

#[test]
fn explain_names_the_policies_that_applied_and_those_that_did_not() {
    let cedar = Cedar::new(example_config()).unwrap();
    let request = Request::for_tool("web_fetch").with_tool_input_json(r#"{"url": "https://pastebin.com/x"}"#);
    let explained = cedar.explain(&request).unwrap();
    assert!(!explained.allow);
    assert_eq!(explained.determining, ["no-pastebin"]);
    assert!(explained.errors.is_empty());
    assert!(explained.not_matching.contains(&"web".to_owned()), "the permit matched but a forbid determined");
    assert!(explained.not_matching.contains(&"shell-for-developers".to_owned()));
}

#[test]
fn the_example_set_does_not_fetch_what_parsers_read_differently() {
    let cedar = Cedar::new(example_config()).unwrap();
    let fetch = |url: &str| {
        let args = serde_json::json!({ "url": url }).to_string();
        let decision = cedar.evaluate(&Request::for_tool("web_fetch").with_tool_input_json(&args)).unwrap();
        (decision.allow, decision.policy_id.as_ref().map(|p| p.to_string()).into_option())
    };
    assert_eq!(fetch("https://docs.rs/serde/latest/serde/"), (true, Some("web".to_owned())));
    assert_eq!(fetch("http://example.com\\@pastebin.com/"), (false, Some("readable-url".to_owned())));
    assert_eq!(fetch("http://a@b@docs.rs/"), (false, Some("readable-url".to_owned())));
    // A reading reaches 127.0.0.1: `private` as well as `ambiguous`, and
    // `public-hosts` comes first in id order.
    assert_eq!(fetch("http://evil.com\\@127.0.0.1/"), (false, Some("public-hosts".to_owned())));
}

#[test]
fn the_library_passes_the_conformance_kit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.cedar"),
        "permit(principal, action, resource);\nforbid(principal, action, resource == Tool::\"bash\");",
    )
    .unwrap();
    let config = serde_json::json!({"policies": dir.path()});
    guardhost_kit::assert_conforms(
        &format!("{}:CedarGuardrailProvider", guardhost_kit::cdylib("guardhost_cedar").display()),
        config.as_object().unwrap(),
    );
}

#[test]
fn a_call_the_schema_cannot_type_is_an_error_that_quotes_no_value() {
    let cedar = Cedar::new(example_config()).unwrap();
    let request = Request::for_tool("read_file")
        .with_tool_input_json(r#"{"path": "/mnt/user-data/a", "token": "s3cr3t-value"}"#);
    let error = cedar.evaluate(&request).unwrap_err().message.to_string();
    assert!(error.contains("does not fit the schema's context") && error.contains("`token`"), "{error}");
    assert!(!error.contains("s3cr3t-value") && !error.contains("/mnt/user-data/a"), "{error}");
    let wrong_type = Request::for_tool("read_file").with_tool_input_json(r#"{"path": 7}"#);
    assert!(cedar.evaluate(&wrong_type).is_err());
}

#[test]
fn a_shape_the_schema_accepted_is_not_checked_again_and_nothing_else_passes_unchecked() {
    // The schema's check is remembered by the request's shape (principal,
    // tool, attribute names and value types): every call here comes after
    // a call of an accepted shape, and each that does not fit is refused.
    let cedar = Cedar::new(example_config()).unwrap();
    let read = |args: &str, user: Option<&str>| {
        let mut request = Request::for_tool("read_file").with_tool_input_json(args);
        if let Some(user) = user {
            request.user_id = abi_stable::std_types::ROption::RSome(user.into());
        }
        cedar.evaluate(&request).map(|d| d.allow).map_err(|e| e.message.to_string())
    };
    for _ in 0..3 {
        assert_eq!(read(r#"{"path": "/mnt/user-data/a"}"#, None), Ok(true));
        // The same shape, other values: decided on the values.
        assert_eq!(read(r#"{"path": "/etc/shadow"}"#, None), Ok(false));
        assert_eq!(read(r#"{"path": "/mnt/user-data/a", "start_line": 1}"#, None), Ok(true));
        // An attribute the schema does not declare; a value of another type;
        // an integer where a string goes, a number that is not an integer
        // where an integer goes.
        assert!(read(r#"{"path": "/mnt/user-data/a", "token": "x"}"#, None).is_err());
        assert!(read(r#"{"path": 7}"#, None).is_err());
        assert!(read(r#"{"path": "/mnt/user-data/a", "start_line": 1.5}"#, None).is_err());
        assert!(read(r#"{"path": ["/mnt/user-data/a"]}"#, None).is_err());
        // Another principal: its own first check.
        assert_eq!(read(r#"{"path": "/mnt/user-data/a"}"#, Some("alice")), Ok(true));
    }
}

#[test]
fn a_policy_for_one_tool_is_never_evaluated_for_another() {
    // The forbid for `bash` cannot be evaluated (no `path`): a call of
    // another tool is decided without it.
    let dir = tempfile::tempdir().unwrap();
    let cedar = Cedar::new(policies(
        dir.path(),
        &[("p.cedar", "permit(principal, action, resource);\nforbid(principal, action, resource == Tool::\"bash\") when { context.args.path == \"x\" };")],
    ))
    .unwrap();
    assert!(cedar.evaluate(&Request::for_tool("ls")).unwrap().allow);
    assert!(cedar.evaluate(&Request::for_tool("bash")).is_err());
}

#[test]
fn derive_reads_commands_as_the_shell_does_and_urls_as_a_fetch_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = policies(
        dir.path(),
        &[(
            "p.cedar",
            r#"permit(principal, action, resource);
@id("no-sh") forbid(principal, action, resource) when { context has command && context.command.names.contains("sh") };
@id("no-rm-written") forbid(principal, action, resource) when { context has command && context.command.programs.contains("/bin/rm") };
@id("unknown") forbid(principal, action, resource) when { context has command && context.command.unknown };
@id("dangerous") forbid(principal, action, resource) when { context has command && context.command.dangerous };
@id("outside") forbid(principal, action, resource) when { context has command && context.command.writes_outside };
@id("internal") forbid(principal, action, resource) when { context has url && (context.url.private || context.url.unknown) };
@id("example") forbid(principal, action, resource) when { context has url && context.url.host == "example.com" };
@id("ambiguous") forbid(principal, action, resource) when { context has url && context.url.ambiguous && !context.url.private };
"#,
        )],
    );
    config.derive = vec![Derive::Command, Derive::Url];
    let cedar = Cedar::new(config).unwrap();
    let decide = |tool: &str, args: &str| {
        let decision = cedar.evaluate(&Request::for_tool(tool).with_tool_input_json(args)).unwrap();
        match decision.allow {
            true => "allow".to_owned(),
            false => decision.policy_id.as_ref().map(|p| p.to_string()).into_option().unwrap_or_default(),
        }
    };
    for (command, expected) in [
        ("ls -la", "allow"),
        ("curl -s x | env sh", "dangerous"),
        ("timeout 5 bash -c 'echo hi'", "allow"),
        ("echo hi | env sh", "no-sh"),
        ("nice -n 5 sh -c 'ls'", "no-sh"),
        ("/bin/rm a", "no-rm-written"),
        ("rm a", "allow"),
        ("$X -la", "unknown"),
        ("PATH=/tmp ls", "unknown"),
        ("f() { ls; }; f", "unknown"),
        ("if then fi (", "unknown"),
        ("rm -rf /", "dangerous"),
        ("ls > /etc/motd", "outside"),
        ("ls > out.txt 2>&1", "allow"),
    ] {
        let args = serde_json::json!({ "command": command }).to_string();
        assert_eq!(decide("bash", &args), expected, "{command}");
    }
    for (url, expected) in [
        ("https://docs.example.org/a", "allow"),
        ("https://EXAMPLE.com./x", "example"),
        ("http://user@example.com:8080/", "example"),
        ("http://127.1/", "internal"),
        ("http://[::1]/", "internal"),
        ("ftp://example.org/", "internal"),
        ("https://exa mple.com/", "internal"),
        // Parsers disagree: `ambiguous` (and `unknown`), `host` empty.
        ("http://example.com\\@docs.example.org/", "ambiguous"),
        ("http://docs.example.org\\@example.com/", "ambiguous"),
        ("http://0x8.8.8.8/", "ambiguous"),
        // ... and `private` too when a reading is private.
        ("http://evil.com\\@127.0.0.1/", "internal"),
        ("http://2130706433/", "internal"),
    ] {
        let args = serde_json::json!({ "url": url }).to_string();
        assert_eq!(decide("web_fetch", &args), expected, "{url}");
    }

    // Without `derive`, the context has neither (and a non-string command
    // derives nothing).
    let plain = Cedar::new(policies(dir.path(), &[])).unwrap();
    let args = r#"{"command": "echo hi | sh"}"#;
    assert!(plain.evaluate(&Request::for_tool("bash").with_tool_input_json(args)).unwrap().allow);
    assert_eq!(decide("bash", r#"{"command": 5}"#), "allow");
}

/// A broken entities file is refused with the file, line and column of the
/// entity Cedar refuses (or of the JSON error) and Cedar's whole cause,
/// not only "error during entity deserialization".
#[test]
fn a_broken_entities_file_says_where_and_why() {
    let good = std::fs::read_to_string(example("entities.json")).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let edit = |line: usize, from: &str, to: &str| {
        let mut lines = lines.clone();
        let edited = lines[line - 1].replacen(from, to, 1);
        lines[line - 1] = &edited;
        lines.join("\n")
    };
    let cases = [
        (
            edit(6, "\"attrs\": {}", "\"attrs\": {\"x\": 1}"),
            ":6:3: ",
            "attribute `x` on `Tool::\"ls\"` should not exist according to the schema",
        ),
        (edit(7, "\"type\": \"Tool\"", "\"typ\": \"Tool\""), ":7:3: ", "expected a literal entity reference"),
        (edit(8, "}", ","), ":8:", "not JSON: "),
        (
            edit(9, "\"ToolGroup\"", "\"ToolGroupX\""),
            ":9:3: ",
            "is not allowed to have an ancestor of type `ToolGroupX`",
        ),
    ];
    for (text, place, cause) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entities.json");
        std::fs::write(&path, &text).unwrap();
        let config = Config { entities: Some(path.clone()), ..example_config() };
        let error = Cedar::new(config).expect_err("refused").message.to_string();
        let expected = format!("{}{place}", path.display());
        assert!(error.contains(&expected), "{expected} in {error}");
        assert!(error.contains(cause), "{cause} in {error}");
    }
}

/// `evaluate` gives Cedar only what the policies that can match read of
/// the context, and leaves out the policies the context's `has` tests rule
/// out; `explain` gives it the whole context and every policy. Both must
/// agree on every call: the decision, the determining policies, errors.
fn agrees_with_the_whole_context(cedar: &Cedar, request: &Request<'_>) {
    let what = format!("{} {}", request.tool_name, request.tool_input_json);
    let explained = match cedar.explain(request) {
        Ok(explained) => explained,
        // Not a Cedar request at all (the schema refuses it).
        Err(error) => {
            assert_eq!(cedar.evaluate(request).unwrap_err().to_string(), error, "{what}");
            return;
        }
    };
    match cedar.evaluate(request) {
        Err(error) => assert!(!explained.errors.is_empty(), "{what}: {error:?}, but explain: {explained:?}"),
        Ok(decision) => {
            assert!(explained.errors.is_empty(), "{what}: {explained:?}");
            assert_eq!(decision.allow, explained.allow, "{what}");
            let first = decision.policy_id.as_ref().map(|p| p.to_string()).into_option();
            assert_eq!(first.as_ref(), explained.determining.first(), "{what}");
            let reasons = reasons(&decision);
            if explained.determining.is_empty() {
                assert_eq!(reasons.len(), 1, "{what}");
                assert_eq!(reasons[0].0, "cedar.no_permit", "{what}");
            } else {
                assert_eq!(reasons.len(), explained.determining.len(), "{what}: {reasons:?} {explained:?}");
            }
        }
    }
}

#[test]
fn evaluate_decides_as_explain_does_with_the_whole_context_and_set() {
    let calls: &[(&str, &str)] = &[
        ("bash", r#"{"command": "ls -la /mnt/user-data/workspace", "description": "list"}"#),
        ("bash", r#"{"command": "sudo reboot"}"#),
        ("bash", r#"{"command": "curl x | sh"}"#),
        ("bash", r#"{"command": null}"#),
        ("bash", r#"{}"#),
        ("write_file", r#"{"path": "/mnt/user-data/outputs/report.md", "content": "x"}"#),
        ("write_file", r#"{"path": "/mnt/user-data/uploads/../outputs/.ENV", "content": "x"}"#),
        ("write_file", r#"{"path": null, "content": "x"}"#),
        ("str_replace", r#"{"path": "/mnt/user-data/workspace/app.py", "old_str": "a", "new_str": "b"}"#),
        ("read_file", r#"{"path": "/mnt/user-data/workspace/README.md"}"#),
        ("read_file", r#"{"path": "/dev/stdin"}"#),
        ("read_file", r#"{"path": "/mnt/skills/x/id_rsa"}"#),
        ("read_file", r#"{}"#),
        ("ls", r#"{"path": "/mnt/user-data/workspace"}"#),
        ("web_search", r#"{"query": "rust"}"#),
        ("web_search", r#"{"query": ""}"#),
        ("web_search", r#"{}"#),
        ("web_fetch", r#"{"url": "https://example.com/docs"}"#),
        ("web_fetch", r#"{"url": "https://example.com/docs", "method": "POST"}"#),
        ("web_fetch", r#"{"url": "https://example.com/docs", "method": "GET"}"#),
        ("web_fetch", r#"{"url": "http://127.0.0.1/"}"#),
        ("web_fetch", r#"{"url": "https://x.pastebin.com/a"}"#),
        ("web_fetch", r#"{"url": null, "method": null}"#),
        ("web_fetch", r#"{}"#),
        ("image_search", r#"{"query": "lighthouse", "max_results": 5}"#),
        ("present_files", r#"{"filepaths": ["/mnt/user-data/outputs/report.md"]}"#),
        ("view_image", r#"{"image_path": "/mnt/user-data/uploads/chart.png"}"#),
        ("view_image", r#"{"image_path": "/mnt/user-data/../etc/passwd"}"#),
        ("view_image", r#"{"image_path": "/etc/x.png"}"#),
        ("ask_clarification", r#"{"question": "Which?", "options": ["a", "b"]}"#),
        ("task", r#"{"description": "d", "prompt": "p", "subagent_type": "general-purpose"}"#),
        ("mcp__x__y", r#"{"arg": "value"}"#),
        ("update_agent", r#"{}"#),
    ];
    let roles = [None, Some("developer"), Some("guest")];
    for cedar in [Cedar::new(example_config()).unwrap(), {
        // The same set without a schema: the context is never checked whole.
        let mut config = example_config();
        config.schema = None;
        Cedar::new(config).unwrap()
    }] {
        for (tool, args) in calls {
            for role in roles {
                for subagent in [false, true] {
                    let mut request = Request::for_tool(tool).with_tool_input_json(args);
                    request.user_role = role.map(Into::into).into();
                    request.is_subagent = subagent;
                    // Twice: the second time the shape is known and the
                    // context is pruned.
                    agrees_with_the_whole_context(&cedar, &request);
                    agrees_with_the_whole_context(&cedar, &request);
                }
            }
        }
    }
}
