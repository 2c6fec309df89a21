//! What a decision says: the pack an allowed call passed, and APort's own
//! texts for every denial both produce.

use std::path::Path;

use serde_json::{json, Value};

use crate::setup::{decide, own_passport, passport_with, with_passport};

#[test]
fn an_allowed_call_names_its_pack_and_a_denied_one_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let p = with_passport(&passport_with(dir.path(), |p| {
        p["limits"]["system.command.execute"] =
            json!({"allowed_commands": ["mkdir", "ls", "git"], "blocked_patterns": ["rm -rf", "sudo"]});
    }));
    let allowed = decide(&*p, "bash", json!({"command": "ls"}));
    assert!(allowed.allow);
    assert_eq!(allowed.reasons[0].code, "oap.allowed");
    assert_eq!(allowed.reasons[0].message, "All policy checks passed");
    assert_eq!(allowed.policy_id.as_deref(), Some("system.command.execute.v1"));
    let denied = decide(&*p, "bash", json!({"command": "curl https://x"}));
    assert_eq!(denied.policy_id.as_deref(), Some("system.command.execute.v1"));
    assert!(denied.reasons[0].message == "Command 'curl https://x' is not in allowed list", "{denied:?}");
}

/// APort's denial texts (from its local evaluator, `aport-guardrail-bash.sh`
/// and `lib/validation.sh` of aport-agent-guardrails 1.0.36), for every
/// code both produce: each case is a call that must be denied with exactly
/// that text. DeerFlow's documentation quotes these.
#[test]
fn denials_carry_aports_own_texts() {
    let dir = tempfile::tempdir().unwrap();
    let strict = own_passport(
        dir.path(),
        "strict",
        &["system.command.execute", "data.file.read", "data.file.write", "web.fetch", "mcp.tool.execute"],
        json!({
            "system.command.execute": {"allowed_commands": ["ls", "git"], "blocked_patterns": ["rm -rf"],
                                       "max_execution_time": 60},
            "data.file.read": {"allowed_paths": ["/tmp/"], "blocked_patterns": ["**/*.bak"], "max_file_size_mb": 1},
            "data.file.write": {"allowed_paths": ["/tmp/"], "blocked_paths": ["/tmp/locked/"],
                                "allowed_extensions": [".md"], "max_file_size_mb": 1},
            "web.fetch": {"blocked_domains": ["pastebin.com"], "allowed_domains": ["docs.rs", "pastebin.com"],
                          "allowed_methods": ["GET"]},
            "mcp.tool.execute": {"allowed_servers": ["github"], "allowed_tools": ["create_issue"], "max_timeout": 30}
        }),
    );
    let any = own_passport(
        dir.path(),
        "any",
        &["system.command.execute"],
        json!({"system.command.execute": {"allowed_commands": ["*"]}}),
    );
    let big = "x".repeat(2 << 20);
    let table: &[(&Path, &str, Value, &str, &str)] = &[
        (&strict, "bad tool", json!({}), "oap.invalid_tool_name", "Tool name contains invalid characters or format"),
        (&strict, "bash", json!({"command": "ls", "note": "x".repeat(101 << 10)}), "oap.context_too_large",
         "Context JSON exceeds maximum size"),
        (&strict, "frobnicate", json!({}), "oap.unknown_capability", "Tool 'frobnicate' is not mapped to a policy pack"),
        (&strict, "task", json!({}), "oap.unknown_capability",
         "Passport does not have required capability 'agent.session.create' for policy 'agent.session.create.v1'"),
        (&strict, "bash", json!({"command": "ls"}), "oap.missing_required_context",
         "Command timeout evidence is required when max_execution_time is configured"),
        (&strict, "bash", json!({"command": "ls", "timeout": 61}), "oap.timeout_exceeded",
         "Command timeout exceeds max_execution_time"),
        (&strict, "bash", json!({"command": "ls `id`", "timeout": 1}), "oap.command_injection_detected",
         "Command contains potentially dangerous characters"),
        (&strict, "bash", json!({"command": "ls; id", "timeout": 1}), "oap.command_chain_unsupported",
         "Command contains shell control operators that cannot be safely authorized against a local command allowlist"),
        (&strict, "bash", json!({"command": "curl x", "timeout": 1}), "oap.command_not_allowed",
         "Command 'curl x' is not in allowed list"),
        (&strict, "bash", json!({"command": "git rm -rf x", "timeout": 1}), "oap.blocked_pattern",
         "Command contains blocked pattern: rm -rf"),
        (&any, "bash", json!({"command": "rm -rf /"}), "oap.dangerous_operation",
         "Destructive file operation: rm -rf / or rm -rf /*"),
        (&any, "bash", json!({"command": "dd if=/dev/sda of=x"}), "oap.dangerous_operation",
         "Dangerous disk operation: dd if=/dev/"),
        (&any, "bash", json!({"command": "mkfs.ext4 /dev/sda"}), "oap.dangerous_operation", "Filesystem creation: mkfs"),
        (&any, "bash", json!({"command": "curl x | sh"}), "oap.dangerous_operation",
         "Download-and-execute pattern detected"),
        (&any, "bash", json!({"command": ":(){ :|:& };:"}), "oap.dangerous_operation", "Fork bomb detected"),
        (&strict, "read_file", json!({}), "oap.missing_file_path", "File read context must include file_path"),
        (&strict, "write_file", json!({"content": "x"}), "oap.missing_file_path",
         "File write context must include file_path"),
        (&strict, "read_file", json!({"path": "/"}), "oap.metadata_enumeration_unsupported",
         "Directory reads cannot be safely authorized by the local file-read policy"),
        (&strict, "read_file", json!({"path": "/tmp/.env"}), "oap.blocked_pattern",
         "File path matches default sensitive read pattern"),
        (&strict, "read_file", json!({"path": "/etc/hosts"}), "oap.path_not_allowed",
         "File path '/etc/hosts' is not in allowed list"),
        (&strict, "read_file", json!({"path": "/tmp/a.bak"}), "oap.blocked_pattern",
         "File path matches blocked pattern: **/*.bak"),
        (&strict, "write_file", json!({"path": "/tmp/a.md", "content": big}), "oap.file_too_large",
         "File write content exceeds max_file_size"),
        (&strict, "write_file", json!({"path": "/tmp/locked/a.md", "content": "x"}), "oap.path_blocked",
         "Writing to system directory is not allowed: /tmp/locked/"),
        (&strict, "write_file", json!({"path": "/tmp/a.sh", "content": "x"}), "oap.extension_not_allowed",
         "File extension .sh is not allowed"),
        (&strict, "web_fetch", json!({}), "oap.missing_required_context",
         "Web fetch context must include url or domain for local enforcement"),
        (&strict, "web_fetch", json!({"url": "ftp://docs.rs/"}), "oap.invalid_url", "URL must be an absolute http(s) URL"),
        (&strict, "web_fetch", json!({"url": "http://127.0.0.1/"}), "oap.private_network_destination",
         "Private network destination '127.0.0.1' is blocked"),
        (&strict, "web_fetch", json!({"url": "https://pastebin.com/x"}), "oap.domain_blocked",
         "Domain 'pastebin.com' is blocked"),
        (&strict, "web_fetch", json!({"url": "https://example.org/"}), "oap.domain_not_allowed",
         "Domain 'example.org' is not in allowed list"),
        (&strict, "web_fetch", json!({"url": "https://docs.rs/", "method": "POST"}), "oap.method_not_allowed",
         "HTTP method 'POST' is not in allowed list"),
        (&strict, "mcp__slack__post", json!({}), "oap.mcp_server_not_allowed", "MCP server 'slack' is not in allowed list"),
        (&strict, "mcp__github__delete_repo", json!({}), "oap.mcp_tool_not_allowed",
         "MCP tool 'delete_repo' is not in allowed list"),
        (&strict, "mcp__github__create_issue", json!({"timeout": 31}), "oap.timeout_exceeded",
         "MCP timeout exceeds max_timeout"),
    ];
    for (passport, tool, args, code, message) in table {
        let d = decide(&*with_passport(passport), tool, args.clone());
        assert!(!d.allow, "{tool} {args} was allowed");
        assert_eq!((d.reasons[0].code.as_ref(), d.reasons[0].message.as_ref()), (*code, *message), "{tool}");
    }
    // The passport's own failures.
    let missing = dir.path().join("gone.json");
    std::fs::copy(&any, &missing).unwrap();
    let p = with_passport(&missing);
    std::fs::remove_file(&missing).unwrap();
    let d = decide(&*p, "bash", json!({"command": "ls"}));
    assert_eq!(
        d.reasons[0].message,
        format!("Passport file not found at {}. Create one with aport-create-passport.sh", missing.display())
    );
    let revoked = passport_with(dir.path(), |p| p["status"] = json!("revoked"));
    let d = decide(&*with_passport(&revoked), "bash", json!({"command": "ls"}));
    assert_eq!(d.reasons[0].message, "Passport status is 'revoked', not 'active'. Agent suspended.");
    let old_spec = passport_with(dir.path(), |p| p["spec_version"] = json!("oap/0.9"));
    let d = decide(&*with_passport(&old_spec), "bash", json!({"command": "ls"}));
    assert_eq!(
        (d.reasons[0].code.as_ref(), d.reasons[0].message.as_ref()),
        ("oap.passport_version_mismatch", "Passport spec version is 'oap/0.9', expected 'oap/1.0'")
    );
}
