//! The allowlist behaviour tests of the contract, on the provider itself.

use super::*;
use guardhost_abi::Reason;

fn provider(allowed: Option<&[&str]>, denied: Option<&[&str]>) -> AllowlistProvider {
    let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    AllowlistProvider::new(AllowlistConfig {
        allowed_tools: allowed.map(list),
        denied_tools: denied.map(list),
        ..AllowlistConfig::default()
    })
    .unwrap()
}

fn decide(provider: &AllowlistProvider, tool: &str) -> Decision {
    provider.evaluate(&Request::for_tool(tool)).unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

#[test]
fn no_lists_allows_all() {
    let p = provider(None, None);
    for tool in ["bash", "write_file", "", "mcp__x__y"] {
        let d = decide(&p, tool);
        assert!(d.allow, "{tool}");
        assert_eq!(d.reasons.as_slice(), &[Reason::new("oap.allowed", "")]);
    }
}

#[test]
fn denied_list_blocks() {
    let d = decide(&provider(None, Some(&["bash", "write_file"])), "bash");
    assert!(!d.allow);
    assert_eq!(d.reasons.as_slice(), &[Reason::new("oap.tool_not_allowed", "tool 'bash' is denied")]);
}

#[test]
fn denied_list_allows_others() {
    assert!(decide(&provider(None, Some(&["bash"])), "web_search").allow);
}

#[test]
fn allowed_list_blocks_unlisted() {
    let d = decide(&provider(Some(&["web_search"]), None), "bash");
    assert!(!d.allow);
    assert_eq!(d.reasons.as_slice(), &[Reason::new("oap.tool_not_allowed", "tool 'bash' not in allowlist")]);
}

#[test]
fn allowed_list_allows_listed() {
    assert!(decide(&provider(Some(&["web_search", "read_file"]), None), "read_file").allow);
}

#[test]
fn empty_allowed_list_blocks_every_tool() {
    let p = provider(Some(&[]), None);
    for tool in ["bash", "read_file", ""] {
        assert!(!decide(&p, tool).allow, "{tool}");
    }
}

#[test]
fn tool_in_both_lists_is_denied() {
    let d = decide(&provider(Some(&["bash"]), Some(&["bash"])), "bash");
    assert!(!d.allow);
    assert_eq!(d.reasons[0].message.as_str(), "tool 'bash' is denied");
}

#[test]
fn async_equals_sync() {
    let p = provider(Some(&["bash", "ls"]), Some(&["bash"]));
    for tool in ["bash", "ls", "write_file"] {
        let sync = decide(&p, tool);
        let asynchronous = block_on(p.aevaluate(Request::for_tool(tool))).unwrap();
        assert_eq!(sync, asynchronous, "{tool}");
    }
}

#[test]
fn accepted_keys_come_from_the_config_type() {
    assert_eq!(
        AllowlistProvider::accepted_keys(),
        ["allowed_tools", "denied_tools", "allowed_patterns", "denied_patterns"]
    );
    // The exported descriptor (the static of the same name) says so too.
    assert!(!AllowlistProvider.factory.accepts_extra_keys());
    assert_eq!(AllowlistProvider.factory.name().as_str(), "allowlist");
}

#[test]
fn look_alike_names_do_not_pass_a_denied_list() {
    let p = provider(None, Some(&["bash"]));
    // Invisible or control characters: refused whatever the lists say.
    for tool in [
        "bash\u{0}",
        "bash\u{200B}",
        "ba\u{200D}sh",
        "\u{FEFF}bash",
        "bash\u{202E}",
        "bash\u{2066}",
        "bash\u{00AD}",
        "bash\u{0085}",
        "bash\u{00A0}",
        "bash\u{3000}",
        "bash\u{2028}",
        "bash\u{E0062}",
        "bash\u{FE0F}",
        "bash\n",
        "bash\t",
        "bash\u{7F}",
    ] {
        let d = decide(&p, tool);
        assert!(!d.allow, "{tool:?}");
        assert_eq!(d.reasons[0].code.as_str(), "oap.invalid_tool_name", "{tool:?}");
        let bad = tool.chars().find(|&c| invisible(c)).unwrap();
        let message = d.reasons[0].message.as_str();
        assert!(message.contains(&format!("U+{:04X}", u32::from(bad))), "{message}");
        assert!(message.chars().all(|c| !invisible(c)), "the message shows the name escaped: {message:?}");
    }
    // ASCII whitespace around the name: matched as the name.
    for tool in ["bash ", " bash", "  bash  "] {
        let d = decide(&p, tool);
        assert!(!d.allow, "{tool:?}");
        assert_eq!(d.reasons[0].code.as_str(), "oap.tool_not_allowed", "{tool:?}");
    }
    // Listed names are trimmed too.
    assert!(!decide(&provider(None, Some(&[" bash "])), "bash").allow);
}

#[test]
fn invisible_characters_are_refused_even_by_an_allowed_list_or_no_list() {
    for p in [provider(Some(&["ls\u{200B}"]), None), provider(None, None)] {
        let d = decide(&p, "ls\u{200B}");
        assert!(!d.allow);
        assert_eq!(d.reasons[0].code.as_str(), "oap.invalid_tool_name");
    }
    // A padded name is not in an allowed list (exact, as DeerFlow).
    assert!(!decide(&provider(Some(&["ls"]), None), "ls ").allow);
}

#[test]
fn ordinary_names_keep_deerflows_exact_case_sensitive_matching() {
    let p = provider(None, Some(&["bash"]));
    // Case is not folded, as in DeerFlow.
    for tool in ["Bash", "BASH", "bash_", "bash.v2", "mcp__srv__bash", "run command", "bäsh", "баш", ""] {
        assert!(decide(&p, tool).allow, "{tool:?}");
    }
    assert!(decide(&provider(Some(&["run command"]), None), "run command").allow);
    assert!(!decide(&provider(Some(&["bash"]), None), "Bash").allow);
}

#[test]
fn config_errors_name_the_key_never_the_value() {
    let secret = "GH_SENTINEL_S3cr3t";
    let cases = [
        (
            serde_json::json!({"denied_tools": secret}),
            "`denied_tools`: invalid type: a string, expected a sequence",
        ),
        (
            serde_json::json!({"allowed_tools": ["ls", 7]}),
            "`allowed_tools[1]`: invalid type: a number, expected a string",
        ),
        (
            serde_json::json!({"allowed_tools": [{"k": secret}]}),
            "`allowed_tools[0]`: invalid type: a map, expected a string",
        ),
        (
            serde_json::json!({"denied_tool": [secret]}),
            "unknown field `denied_tool`, expected one of `allowed_tools`, `denied_tools`, `allowed_patterns`, `denied_patterns`",
        ),
    ];
    for (config, expected) in cases {
        let err = guardhost_abi::deserialize_config::<AllowlistConfig>(config.clone()).unwrap_err();
        assert!(err.contains(expected), "{config}: {err}");
        assert!(!err.contains("S3cr3t"), "{config}: {err}");
    }
}

#[test]
fn long_lists_decide_as_short_ones() {
    // Up to 8 names are scanned, more are hashed: both decide alike.
    let many: Vec<String> = (0..20).map(|i| format!("tool_{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    for names in [&many[..3], &many[..8], &many[..9], &many[..]] {
        let denied = provider(None, Some(names));
        let allowed = provider(Some(names), None);
        for name in names {
            assert!(!decide(&denied, name).allow, "{name} in {} denied names", names.len());
            assert!(decide(&allowed, name).allow, "{name} in {} allowed names", names.len());
        }
        assert!(decide(&denied, "other").allow);
        assert!(!decide(&allowed, "other").allow);
        assert!(!decide(&denied, &format!("{} ", names[0])).allow, "trailing blank");
    }
}

fn patterns(allowed: Option<&[&str]>, denied: Option<&[&str]>) -> Result<AllowlistProvider, ProviderError> {
    let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    AllowlistProvider::new(AllowlistConfig {
        allowed_patterns: allowed.map(list),
        denied_patterns: denied.map(list),
        ..AllowlistConfig::default()
    })
}

#[test]
fn patterns_reach_names_with_a_prefix_and_the_exact_lists_keep_their_meaning() {
    // An MCP tool's name carries its server's prefix: an exact rule for
    // `github__delete_repo` does not reach it, a pattern does.
    let exact = provider(None, Some(&["github__delete_repo"]));
    assert!(decide(&exact, "mcp__github__delete_repo").allow, "DeerFlow's exact list is exact");
    let denied = patterns(None, Some(&["*__delete_repo"])).unwrap();
    for name in ["mcp__github__delete_repo", "github__delete_repo", "gitlab__delete_repo ", "x__delete_repo"]
    {
        let decision = decide(&denied, name);
        assert!(!decision.allow, "{name}");
        assert_eq!(decision.reasons[0].code.as_str(), "oap.tool_not_allowed");
        assert_eq!(decision.reasons[0].message.as_str(), format!("tool '{name}' is denied"));
    }
    assert!(decide(&denied, "github__delete_repository").allow);

    // Allowed: the exact names or a pattern; set to [] alone, nothing.
    let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let allowed = AllowlistProvider::new(AllowlistConfig {
        allowed_tools: list(&["read_file"]),
        allowed_patterns: list(&["mcp__github__get_*", "web_?earch"]),
        denied_patterns: list(&["*delete*"]),
        ..AllowlistConfig::default()
    })
    .unwrap();
    for (name, allow) in [
        ("read_file", true),
        ("mcp__github__get_issue", true),
        ("web_search", true),
        ("mcp__github__get_delete_log", false),
        ("mcp__github__create_issue", false),
        ("bash", false),
    ] {
        assert_eq!(decide(&allowed, name).allow, allow, "{name}");
    }
    let none = patterns(Some(&[]), None).unwrap();
    assert!(!decide(&none, "read_file").allow, "an empty allowed_patterns alone allows nothing");
    assert_eq!(decide(&none, "read_file").reasons[0].message.as_str(), "tool 'read_file' not in allowlist");

    let error = patterns(None, Some(&["bash", " "])).unwrap_err();
    assert!(error.message.contains("`denied_patterns` holds an empty pattern"), "{}", error.message);
}
