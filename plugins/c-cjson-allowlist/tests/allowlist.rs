//! The cJSON example loaded as guardhost loads it: the decisions of the
//! built-in allowlist, what cJSON cannot read denied or refused, and the
//! conformance kit. Without cJSON on the build machine the library exports
//! nothing, and the test says it was skipped.

use guardhost_test_support::{load, object, try_load};
use serde_json::{json, Value};

const SYMBOL: &str = "CJsonAllowlistProvider";

/// The `use:` of the library's descriptor, or `None` (and a notice) when
/// the build found no cJSON.
fn use_of_library() -> Option<String> {
    if !c_cjson_allowlist::BUILT_WITH_CJSON {
        assert!(
            !cfg!(target_os = "linux") || std::env::var_os("GUARDHOST_REQUIRE_CJSON").is_none(),
            "GUARDHOST_REQUIRE_CJSON is set, but the build found no cJSON (`pkg-config --libs libcjson`)"
        );
        eprintln!(
            "skipped: the build found no cJSON (`pkg-config --libs libcjson` failed, or \
             GUARDHOST_NO_CJSON was set; on Debian, `apt install libcjson-dev` and build again), so the \
             library exports no {SYMBOL}"
        );
        return None;
    }
    Some(format!("{}:{SYMBOL}", guardhost_kit::cdylib("c_cjson_allowlist").display()))
}

/// A request as the host writes it for a C provider, with `tool_input` as given.
fn request(tool: &str, input: Value) -> guardhost::GuardrailRequest {
    serde_json::from_value(json!({
        "tool_name": tool, "tool_input": input, "agent_id": null, "thread_id": null,
        "is_subagent": false, "timestamp": "2026-12-05T00:00:00Z", "user_id": null, "user_role": null,
        "oauth_provider": null, "oauth_id": null, "run_id": null, "tool_call_id": "call-1",
        "channel_user_id": null, "is_internal": false, "authz_attributes": {}
    }))
    .expect("a request as guardhost.h describes it")
}

#[test]
fn it_decides_as_the_built_in_allowlist_does() {
    let Some(use_) = use_of_library() else { return };
    let config = json!({"allowed_tools": ["ls", "bash", " read_file", "write_file"], "denied_tools": ["bash", " write_file "]});
    let c = load(&use_, object(config.clone()));
    assert_eq!(c.info.name, "c-cjson-allowlist");
    assert_eq!(c.info.accepted_keys, ["allowed_tools", "denied_tools"]);
    let rust = load("builtin:AllowlistProvider", object(config));
    for tool in
        ["ls", "bash", "write_file", " read_file", "read_file", "", "lş", "a\"b\\c", "unlisted", "a\u{7}b"]
    {
        let from_c = c.provider.evaluate(&request(tool, json!({"path": "/tmp"}))).unwrap();
        let from_rust = rust.provider.evaluate(&request(tool, json!({"path": "/tmp"}))).unwrap();
        assert_eq!(
            (from_c.allow, &from_c.reasons[0].code),
            (from_rust.allow, &from_rust.reasons[0].code),
            "{tool:?}"
        );
        if tool != "a\u{7}b" {
            assert_eq!(from_c.reasons, from_rust.reasons, "{tool:?}");
        }
    }
}

#[test]
fn what_cjson_cannot_hold_is_denied_or_refused() {
    let Some(use_) = use_of_library() else { return };
    let c = load(&use_, object(json!({"allowed_tools": ["bash"]})));
    // cJSON would read "bash\u0000x" as "bash": denied, whatever the lists say.
    for (tool, input) in [("bash\u{0}x", json!({})), ("bash", json!({"command": "ls\u{0}; rm -rf /"}))] {
        let decision = c.provider.evaluate(&request(tool, input)).unwrap();
        assert!(!decision.allow, "{tool:?}");
        assert_eq!(decision.reasons[0].code, "cjson.unreadable");
    }
    // A backslash before `u0000` is text, not a NUL.
    let decision = c.provider.evaluate(&request("bash", json!({"command": "printf '\\u0000'"}))).unwrap();
    assert!(decision.allow, "{decision:?}");
    // The config: a NUL, a wrong type; the errors name the key, never the
    // value.
    let error = try_load(&use_, object(json!({"denied_tools": ["ba\u{0}sh"]}))).unwrap_err().to_string();
    assert!(error.ends_with("the config holds a NUL character (\\u0000); no tool name has one"), "{error}");
    assert!(!error.contains("ba"), "{error}");
    let error = try_load(&use_, object(json!({"denied_tools": ["bash", 3]}))).unwrap_err().to_string();
    assert!(error.ends_with("`denied_tools[1]` must be a string (a tool name)"), "{error}");
    let error = try_load(&use_, object(json!({"denied_tools": "secret-value"}))).unwrap_err().to_string();
    assert!(
        error.ends_with("`denied_tools` must be a list of tool names or null") && !error.contains("secret"),
        "{error}"
    );
}

#[test]
fn the_library_passes_the_conformance_kit() {
    let Some(use_) = use_of_library() else { return };
    for config in
        [json!({}), json!({"denied_tools": ["bash"]}), json!({"allowed_tools": ["ls", "read_file"]})]
    {
        let Value::Object(config) = config else { unreachable!() };
        guardhost_kit::assert_conforms(&use_, &config);
    }
}
