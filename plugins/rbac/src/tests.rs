//! DeerFlow's own RBAC tests (`tests/test_rbac_authorization_provider.py`),
//! restated: the same configs, requests and expected outcomes or messages.

use serde_json::{json, Value};

use super::*;

fn rbac(roles: Value) -> Rbac {
    Rbac::compile(&roles).unwrap()
}

fn allows(rbac: &Rbac, role: &str, resource: &str, target: &str) -> bool {
    rbac.authorize(Some(role), resource, target).unwrap().allow
}

fn tool(rbac: &Rbac, target: &str) -> bool {
    allows(rbac, "user", "tool", target)
}

fn compile_error(roles: Value) -> String {
    Rbac::compile(&roles).unwrap_err()
}

#[test]
fn allow_semantics() {
    let wildcard = rbac(json!({"user": {"tools": {"allow": "*"}}}));
    assert!(tool(&wildcard, "bash") && tool(&wildcard, "write_file"));
    assert!(tool(&rbac(json!({"user": {"tools": {"allow": true}}})), "bash"));
    let none = rbac(json!({"user": {"tools": {"allow": false}}}));
    assert!(!tool(&none, "bash") && !tool(&none, "web_search"));
    let listed = rbac(json!({"user": {"tools": {"allow": ["web_search", "read_file"]}}}));
    assert!(tool(&listed, "web_search") && tool(&listed, "read_file") && !tool(&listed, "bash"));
    assert!(!tool(&rbac(json!({"user": {"tools": {"allow": []}}})), "bash"));
    // A missing `allow` allows all; deny still applies.
    let deny_only = rbac(json!({"user": {"tools": {"deny": ["bash"]}}}));
    assert!(!tool(&deny_only, "bash") && tool(&deny_only, "web_search"));
}

#[test]
fn deny_always_wins() {
    let over_wildcard = rbac(json!({"user": {"tools": {"allow": "*", "deny": ["bash"]}}}));
    assert!(!tool(&over_wildcard, "bash") && tool(&over_wildcard, "web_search"));
    let over_list = rbac(json!({"user": {"tools": {"allow": ["bash", "web_search"], "deny": ["bash"]}}}));
    assert!(!tool(&over_list, "bash") && tool(&over_list, "web_search"));
    assert!(!tool(&rbac(json!({"user": {"tools": {"allow": true, "deny": ["bash"]}}})), "bash"));
}

#[test]
fn request_aliases_are_refused_as_config_keys() {
    for (alias, key) in [
        ("tool", "tools"),
        ("model", "models"),
        ("skill", "skills"),
        ("mcp_server", "mcp_servers"),
        ("route", "routes"),
    ] {
        let error = compile_error(json!({"user": {alias: {"allow": []}}}));
        assert!(
            error.contains(&format!("resource key '{alias}'")) && error.contains(&format!("use '{key}'")),
            "{error}"
        );
    }
    let both = compile_error(json!({"user": {"tools": {"allow": "*"}, "tool": {"allow": []}}}));
    assert!(both.contains("resource key 'tool'") && both.contains("use 'tools'"), "{both}");
}

#[test]
fn resources_map_to_their_config_keys() {
    assert!(!allows(&rbac(json!({"user": {"sandbox": {"allow": []}}})), "user", "sandbox", "default"));
    let tools = rbac(json!({"user": {"tools": {"allow": ["web_search"]}}}));
    assert!(allows(&tools, "user", "tool", "web_search") && !allows(&tools, "user", "tool", "bash"));
    assert!(allows(&rbac(json!({"user": {"models": {"allow": ["gpt-4o"]}}})), "user", "model", "gpt-4o"));
    let custom = rbac(json!({"user": {"custom_resource": {"allow": ["item1"]}}}));
    assert!(allows(&custom, "user", "custom_resource", "item1"));
    // No policy for a resource: unrestricted.
    let decided = tools.authorize(Some("user"), "model", "any").unwrap();
    assert_eq!(
        (decided.allow, decided.code, decided.policy_id),
        (true, "authz.no_policy", "rbac:unrestricted")
    );
    assert_eq!(decided.message, "no policy configured");
}

#[test]
fn roles_must_be_known_and_present() {
    let two = rbac(json!({"admin": {"tools": {"allow": "*"}}, "user": {"tools": {"allow": []}}}));
    assert!(allows(&two, "admin", "tool", "bash") && !allows(&two, "user", "tool", "bash"));
    let admin = rbac(json!({"admin": {"tools": {"allow": "*"}}}));
    assert_eq!(
        admin.authorize(Some("editor"), "tool", "bash").unwrap_err(),
        "Unknown role 'editor'; known roles: ['admin']"
    );
    for role in [None, Some("")] {
        assert_eq!(
            admin.authorize(role, "tool", "bash").unwrap_err(),
            "Principal has no role; cannot evaluate RBAC policy"
        );
    }
}

#[test]
fn decisions_carry_deerflow_codes_and_messages() {
    let user = rbac(json!({"user": {"tools": {"allow": "*", "deny": ["update_agent"]}}}));
    let denied = user.authorize(Some("user"), "tool", "update_agent").unwrap();
    assert_eq!(denied.code, "authz.denied");
    assert_eq!(denied.message, "role 'user' is denied 'update_agent' on resource 'tool'");
    assert_eq!(denied.policy_id, "rbac:deny");
    let allowed = user.authorize(Some("user"), "tool", "bash").unwrap();
    assert_eq!(
        (allowed.code, allowed.message.as_str(), allowed.policy_id),
        ("authz.allowed", "", "rbac:allow")
    );
}

#[test]
fn filter_resources() {
    let listed = rbac(json!({"user": {"tools": {"allow": ["web_search", "bash", "read_file"]}}}));
    let candidates = ["bash", "web_search", "write_file", "read_file"];
    assert_eq!(
        listed.filter(Some("user"), "tool", &candidates).unwrap(),
        ["bash", "web_search", "read_file"]
    );
    let all = rbac(json!({"user": {"tools": {"allow": "*"}}}));
    assert_eq!(all.filter(Some("user"), "tool", &["a", "b"]).unwrap(), ["a", "b"]);
    assert_eq!(all.filter(Some("user"), "tool", &["a", "a", "b"]).unwrap(), ["a", "a", "b"]);
    assert_eq!(rbac(json!({"admin": {}})).filter(Some("admin"), "tool", &["a", "b"]).unwrap(), ["a", "b"]);
    // The same answers as asking one by one.
    let deny_bash = rbac(json!({"user": {"tools": {"allow": "*", "deny": ["bash"]}}}));
    let candidates = ["bash", "web_search", "read_file", "write_file"];
    let per_item: Vec<&str> = candidates.iter().copied().filter(|c| tool(&deny_bash, c)).collect();
    assert_eq!(deny_bash.filter(Some("user"), "tool", &candidates).unwrap(), per_item);
}

#[test]
fn filter_resources_raises_what_authorize_raises() {
    let all = rbac(json!({"user": {"tools": {"allow": "*"}}}));
    for role in [None, Some("")] {
        assert!(all.filter(role, "tool", &["bash"]).unwrap_err().contains("no role"));
    }
    assert!(all.filter(Some("editor"), "tool", &["bash"]).unwrap_err().contains("Unknown role"));
    let empty = rbac(json!({"user": {}}));
    assert_eq!(
        empty.filter(Some("user"), "", &["bash"]).unwrap_err(),
        "resource_type must be a non-empty string, got ''"
    );
    for roles in [
        json!({"user": {}}),
        json!({"user": {"tools": {"allow": "*"}}}),
        json!({"user": {"tools": {"allow": ["bash"]}}}),
    ] {
        let error = rbac(roles).filter(Some("user"), "tool", &["bash", ""]).unwrap_err();
        assert_eq!(error, "candidates[1] must be a non-empty string, got ''");
    }
}

#[test]
fn malformed_requests_fail_before_any_decision() {
    for roles in [
        json!({"user": {}}),
        json!({"user": {"tools": {"allow": "*"}}}),
        json!({"user": {"tools": {"allow": ["bash"]}}}),
    ] {
        let error = rbac(roles).authorize(Some("user"), "tool", "").unwrap_err();
        assert_eq!(error, "target must be a non-empty string, got ''");
    }
    let error =
        rbac(json!({"user": {"tools": {"allow": "*"}}})).authorize(Some("user"), "", "bash").unwrap_err();
    assert_eq!(error, "resource must be a non-empty string, got ''");
}

#[test]
fn bad_configs_fail_at_construction() {
    let cases: [(Value, &str); 16] = [
        (json!(["not", "a", "dict"]), "roles must be a dict, got list"),
        (json!({"user": "not a dict"}), "role 'user' config must be a dict, got str"),
        (json!({"user": {"tools": "not a dict"}}), "role 'user' resource 'tools' must be a dict, got str"),
        (json!({"user": {"tools": {"allow": 42}}}), "allow must be '*', bool, or list of strings, got int"),
        (
            json!({"user": {"tools": {"allow": "not_wildcard"}}}),
            "allow string must be '*', got 'not_wildcard'",
        ),
        (
            json!({"user": {"tools": {"allow": ["ok", 42]}}}),
            "allow list contains non-string or empty item 42",
        ),
        (
            json!({"user": {"tools": {"deny": ["ok", null]}}}),
            "deny list contains non-string or empty item None",
        ),
        (
            json!({"user": {"tools": {"allow": ["ok", ""]}}}),
            "allow list contains non-string or empty item ''",
        ),
        (json!({"user": {"tools": {"deny": 42}}}), "deny must be a list of strings, got int"),
        (json!({"": {"tools": {"allow": "*"}}}), "role name must be a non-empty string, got ''"),
        (json!({"user": {"": {"allow": "*"}}}), "role 'user' has invalid resource key ''"),
        (json!({"user": {"tools": {"allow": null}}}), "allow must not be null"),
        (json!({"user": {"tools": {"allow": "*", "deny": null}}}), "deny must not be null"),
        (
            json!({"user": {"tools": {"alow": ["web_search"]}}}),
            "unknown policy keys ['alow']; supported: ['allow', 'deny']",
        ),
        (json!({"user": {"tools": {"allow": "*", "permt": ["extra"]}}}), "unknown policy keys ['permt']"),
        (json!({"user": {"tools": {"1": "bad", "other": "bad"}}}), "unknown policy keys ['1', 'other']"),
    ];
    for (roles, expected) in cases {
        let error = compile_error(roles.clone());
        assert!(error.contains(expected), "{roles}: {error:?} lacks {expected:?}");
    }
}

#[test]
fn the_provider_needs_its_roles_key() {
    let error = RbacAuthorizationProvider::new(RbacConfig { roles: None }).unwrap_err();
    assert_eq!(error.message.as_str(), "missing required provider config key 'roles'");
    assert_eq!(RbacAuthorizationProvider::accepted_keys(), ["roles"]);
}

#[test]
fn the_config_is_compiled_once() {
    // Changing the config value afterwards changes nothing.
    let mut roles = json!({"user": {"tools": {"allow": ["bash"]}}});
    let compiled = rbac(roles.clone());
    roles["user"]["tools"]["allow"] = json!(["web_search"]);
    roles["admin"] = json!({"tools": {"allow": "*"}});
    assert!(tool(&compiled, "bash") && !tool(&compiled, "web_search"));
    assert!(compiled.authorize(Some("admin"), "tool", "bash").unwrap_err().contains("Unknown role"));
}

#[test]
fn validate_role_names_the_field() {
    let user = rbac(json!({"user": {}, "admin": {}}));
    assert!(user.validate_role("user", "authorization.default_role").is_ok());
    assert_eq!(
        user.validate_role("guest", "authorization.default_role").unwrap_err(),
        "authorization.default_role 'guest' is not defined; known roles: ['admin', 'user']"
    );
}

#[test]
fn the_provider_decides_tool_calls_by_the_request_role() {
    let provider = RbacAuthorizationProvider::new(RbacConfig {
        roles: Some(json!({"guest": {"tools": {"allow": ["web_search"]}}})),
    })
    .unwrap();
    let mut request = Request::for_tool("bash");
    request.user_role = guardhost_abi::reexports::abi_stable::std_types::ROption::RSome("guest".into());
    let denied = provider.evaluate(&request).unwrap();
    assert!(!denied.allow);
    assert_eq!(denied.reasons[0].code.as_str(), "authz.denied");
    assert_eq!(denied.policy_id.as_ref().map(|p| p.as_str()).into_option(), Some("rbac:deny"));
    let no_role = provider.evaluate(&Request::for_tool("bash")).unwrap_err();
    assert_eq!(no_role.message.as_str(), "Principal has no role; cannot evaluate RBAC policy");
}
