//! APort's passports decide as APort does: its own test passports (when
//! `GUARDHOST_OAP_DATA` names APort's data, see `tests/common/mod.rs`),
//! passports in their shapes written here, and one from its generator.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common;
use crate::setup::{code, decide, own_passport, with_passport};

#[test]
fn aports_test_passports_decide_what_their_names_say() {
    let cases: &[(&str, &str, Value, &str)] = &[
        // A passport that may only read, under /tmp/ and a project folder.
        ("passport.file-read-unit.json", "read_file", json!({"path": "/tmp/notes.txt"}), "allow"),
        ("passport.file-read-unit.json", "read_file", json!({"path": "/etc/passwd"}), "oap.path_not_allowed"),
        (
            "passport.file-read-unit.json",
            "read_file",
            json!({"path": "/tmp/x/.ssh/id_ed25519"}),
            "oap.blocked_pattern",
        ),
        (
            "passport.file-read-unit.json",
            "read_file",
            json!({"path": "/tmp/app/.env"}),
            "oap.blocked_pattern",
        ),
        (
            "passport.file-read-unit.json",
            "read_file",
            json!({"path": "/tmp/a/credentials.json"}),
            "oap.blocked_pattern",
        ),
        ("passport.file-read-unit.json", "read_file", json!({}), "oap.missing_file_path"),
        (
            "passport.file-read-unit.json",
            "write_file",
            json!({"path": "/tmp/a.txt", "content": "x"}),
            "oap.unknown_capability",
        ),
        ("passport.file-read-unit.json", "bash", json!({"command": "ls"}), "oap.unknown_capability"),
        // A passport that may only write text files under /tmp/ and a project folder.
        (
            "passport.file-write-unit.json",
            "write_file",
            json!({"path": "/tmp/out.md", "content": "# hi"}),
            "allow",
        ),
        (
            "passport.file-write-unit.json",
            "write_file",
            json!({"path": "/tmp/run.sh", "content": "ls"}),
            "oap.extension_not_allowed",
        ),
        (
            "passport.file-write-unit.json",
            "write_file",
            json!({"path": "/etc/hosts.txt", "content": "x"}),
            "oap.path_not_allowed",
        ),
        (
            "passport.file-write-unit.json",
            "str_replace",
            json!({"path": "/tmp/a.json", "old_str": "a", "new_str": "b"}),
            "allow",
        ),
        (
            "passport.file-write-unit.json",
            "read_file",
            json!({"path": "/tmp/a.txt"}),
            "oap.unknown_capability",
        ),
        // Merges limited to one repository; no shell.
        ("passport.repo-restricted.json", "bash", json!({"command": "ls"}), "oap.unknown_capability"),
        // Its merge limits need the pack's policy.json (policies_dir): unchecked, they deny.
        ("passport.repo-restricted.json", "git.merge", json!({"repo": "aporthq/only"}), "oap.misconfigured"),
        // Any command, 300 s at most, so a timeout is required.
        ("passport.surgical-unit.json", "bash", json!({"command": "ls -la", "timeout": 30}), "allow"),
        ("passport.surgical-unit.json", "bash", json!({"command": "ls -la"}), "oap.missing_required_context"),
        (
            "passport.surgical-unit.json",
            "bash",
            json!({"command": "make", "timeout": 900}),
            "oap.timeout_exceeded",
        ),
        (
            "passport.surgical-unit.json",
            "bash",
            json!({"command": "rm -rf /", "timeout": 5}),
            "oap.dangerous_operation",
        ),
        (
            "passport.surgical-unit.json",
            "bash",
            json!({"command": "make && make test", "timeout": 5}),
            "allow",
        ),
        // An allowlist of commands, with `rm -rf` and `sudo` blocked.
        ("tests_fixtures_passport.oap-v1.json", "bash", json!({"command": "git status"}), "allow"),
        (
            "tests_fixtures_passport.oap-v1.json",
            "bash",
            json!({"command": "curl https://x"}),
            "oap.command_not_allowed",
        ),
        (
            "tests_fixtures_passport.oap-v1.json",
            "bash",
            json!({"command": "git pull && npm i"}),
            "oap.command_chain_unsupported",
        ),
        (
            "tests_fixtures_passport.oap-v1.json",
            "bash",
            json!({"command": "bash -c 'sudo id'"}),
            "oap.blocked_pattern",
        ),
        ("tests_fixtures_passport.oap-v1.json", "bash", json!({"command": "mkdir -p a b"}), "allow"),
        (
            "tests_fixtures_passport.oap-v1.json",
            "bash",
            json!({"command": "ls `rm -rf /`"}),
            "oap.command_injection_detected",
        ),
        (
            "tests_fixtures_passport.oap-v1.json",
            "read_file",
            json!({"path": "/tmp/a"}),
            "oap.unknown_capability",
        ),
        // The local template: commands with a 300 s limit; messaging.
        (
            "local-overrides_templates_passport.local.json",
            "bash",
            json!({"command": "npm test", "timeout": 60}),
            "allow",
        ),
        (
            "local-overrides_templates_passport.local.json",
            "bash",
            json!({"command": "sudo npm test", "timeout": 60}),
            "oap.command_not_allowed",
        ),
        (
            "local-overrides_templates_passport.local.json",
            "bash",
            json!({"command": "git rm -rf src", "timeout": 60}),
            "oap.blocked_pattern",
        ),
    ];
    let Some(data) = common::root("aports_test_passports_decide_what_their_names_say") else { return };
    for (passport, tool, args, expected) in cases {
        let p = with_passport(&common::path(&data, &format!("aport-test-passports/{passport}")));
        assert_eq!(&code(&*p, tool, args.clone()), expected, "{passport}: {tool} {args}");
    }
}

/// The shapes of APort's unit-test passports (read-only, write-only, any
/// command with a time limit, a command allowlist), written here, so a
/// fresh clone checks what the data-driven test above checks.
#[test]
fn passports_in_the_shapes_of_aports_decide_as_aport_does() {
    let dir = tempfile::tempdir().unwrap();
    let read = own_passport(
        dir.path(),
        "read-only",
        &["data.file.read"],
        json!({"data.file.read": {"allowed_paths": ["/tmp/", "/srv/project/"],
               "blocked_patterns": ["**/.ssh/**", "**/.env", "**/id_rsa*", "**/credentials.json"]}}),
    );
    let write = own_passport(
        dir.path(),
        "write-only",
        &["data.file.write"],
        json!({"data.file.write": {"allowed_paths": ["/tmp/", "/srv/project/"],
               "blocked_paths": ["/etc/", "/bin/"], "allowed_extensions": [".txt", ".md", ".json"]}}),
    );
    let timed = own_passport(
        dir.path(),
        "timed",
        &["system.command.execute"],
        json!({"system.command.execute": {"allowed_commands": ["*"], "max_execution_time": 300,
               "blocked_patterns": []}}),
    );
    let listed = own_passport(
        dir.path(),
        "listed",
        &["system.command.execute"],
        json!({"system.command.execute": {"allowed_commands": ["mkdir", "ls", "git", "npm"],
               "blocked_patterns": ["rm -rf", "sudo"]}}),
    );
    let cases: &[(&Path, &str, Value, &str)] = &[
        (&read, "read_file", json!({"path": "/tmp/notes.txt"}), "allow"),
        (&read, "read_file", json!({"path": "/etc/passwd"}), "oap.path_not_allowed"),
        (&read, "read_file", json!({"path": "/tmp/x/.ssh/id_ed25519"}), "oap.blocked_pattern"),
        (&read, "read_file", json!({"path": "/tmp/app/.env"}), "oap.blocked_pattern"),
        (&read, "read_file", json!({"path": "/tmp/a/credentials.json"}), "oap.blocked_pattern"),
        (&read, "read_file", json!({}), "oap.missing_file_path"),
        (&read, "write_file", json!({"path": "/tmp/a.txt", "content": "x"}), "oap.unknown_capability"),
        (&read, "bash", json!({"command": "ls"}), "oap.unknown_capability"),
        (&write, "write_file", json!({"path": "/tmp/out.md", "content": "# hi"}), "allow"),
        (&write, "write_file", json!({"path": "/tmp/run.sh", "content": "ls"}), "oap.extension_not_allowed"),
        (&write, "write_file", json!({"path": "/etc/hosts.txt", "content": "x"}), "oap.path_not_allowed"),
        (&write, "str_replace", json!({"path": "/tmp/a.json", "old_str": "a", "new_str": "b"}), "allow"),
        (&write, "read_file", json!({"path": "/tmp/a.txt"}), "oap.unknown_capability"),
        (&timed, "bash", json!({"command": "ls -la", "timeout": 30}), "allow"),
        (&timed, "bash", json!({"command": "ls -la"}), "oap.missing_required_context"),
        (&timed, "bash", json!({"command": "make", "timeout": 900}), "oap.timeout_exceeded"),
        (&timed, "bash", json!({"command": "rm -rf /", "timeout": 5}), "oap.dangerous_operation"),
        (&timed, "bash", json!({"command": "make && make test", "timeout": 5}), "allow"),
        (&listed, "bash", json!({"command": "git status"}), "allow"),
        (&listed, "bash", json!({"command": "curl https://x"}), "oap.command_not_allowed"),
        (&listed, "bash", json!({"command": "git pull && npm i"}), "oap.command_chain_unsupported"),
        (&listed, "bash", json!({"command": "mkdir -p a b"}), "allow"),
        (&listed, "bash", json!({"command": "ls `rm -rf /`"}), "oap.command_injection_detected"),
        (&listed, "bash", json!({"command": "git rm -rf src"}), "oap.blocked_pattern"),
        (&listed, "bash", json!({"command": "sudo npm test"}), "oap.command_not_allowed"),
        (&listed, "read_file", json!({"path": "/tmp/a"}), "oap.unknown_capability"),
    ];
    for (passport, tool, args, expected) in cases {
        let p = with_passport(passport);
        assert_eq!(&code(&*p, tool, args.clone()), expected, "{}: {tool} {args}", passport.display());
    }
}

/// A passport in the shape APort's generator writes for DeerFlow (`aport
/// setup --framework deerflow`, non-interactive): messaging limits as flat
/// numbers and lists at the top of `limits`, `max_requests_per_min` for
/// fetches, an empty object for sessions. Written here, not copied.
fn generated_passport(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut passport = json!({
        "passport_id": "5d0f3a52-gen", "agent_id": "5d0f3a52-gen", "kind": "template", "spec_version": "oap/1.0",
        "owner_id": "dev@example.com", "owner_type": "user", "assurance_level": "L0", "status": "active",
        "capabilities": [{"id": "repo.pr.create"}, {"id": "repo.merge"}, {"id": "system.command.execute"},
                         {"id": "messaging.send"}, {"id": "data.file.read"}, {"id": "data.file.write"},
                         {"id": "web.fetch"}, {"id": "agent.session.create"}, {"id": "mcp.tool.execute"}],
        "limits": {
            "code.repository.merge": {"max_prs_per_day": 10, "max_merges_per_day": 5, "max_pr_size_kb": 500,
                                      "allowed_repos": ["*"], "allowed_base_branches": ["*"], "require_review": false},
            "system.command.execute": {"allowed_commands": ["*"],
                                       "blocked_patterns": ["rm -rf", "sudo", "chmod 777", "dd if=", "mkfs"]},
            "msgs_per_min": 5, "msgs_per_day": 100, "allowed_recipients": ["*"], "approval_required": false,
            "data.file.read": {"allowed_paths": ["*"], "max_file_size_mb": 100},
            "data.file.write": {"allowed_paths": ["*"], "max_file_size_mb": 50},
            "web.fetch": {"allowed_domains": ["*"], "blocked_domains": [], "max_requests_per_min": 60},
            "agent.session.create": {},
            "mcp.tool.execute": {"allowed_servers": ["*"]}
        },
        "regions": ["US", "CA"],
        "metadata": {"name": "DeerFlow Agent", "description": "DeerFlow LangGraph agent", "version": "1.0.0",
                     "created_by": "aport-create-passport.sh"},
        "never_expires": true, "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
        "version": "1.0.0"
    });
    edit(&mut passport);
    let path = dir.join("passport.json");
    std::fs::write(&path, serde_json::to_string_pretty(&passport).unwrap()).unwrap();
    path
}

#[test]
fn a_passport_from_aports_generator_loads_and_decides_as_aport_does() {
    let dir = tempfile::tempdir().unwrap();
    let p = with_passport(&generated_passport(dir.path(), |_| {}));
    let cases: &[(&str, Value, &str)] = &[
        ("bash", json!({"command": "ls -la /mnt/user-data"}), "allow"),
        ("bash", json!({"command": "make && make test | tee log"}), "allow"),
        ("bash", json!({"command": "git rm -rf build"}), "oap.blocked_pattern"),
        ("bash", json!({"command": "sudo ls"}), "oap.blocked_pattern"),
        ("bash", json!({"command": "mkfs.ext4 /dev/sda1"}), "oap.dangerous_operation"),
        ("read_file", json!({"path": "/srv/anything.txt"}), "allow"),
        ("read_file", json!({"path": "/home/u/.ssh/id_rsa"}), "oap.blocked_pattern"),
        ("write_file", json!({"path": "/srv/out.md", "content": "# r"}), "allow"),
        ("web_fetch", json!({"url": "https://docs.rs/serde"}), "allow"),
        ("web_fetch", json!({"url": "http://10.0.0.1/"}), "oap.private_network_destination"),
        ("mcp__github__create_issue", json!({"title": "x"}), "allow"),
        ("task", json!({"description": "d", "prompt": "p"}), "allow"),
        ("ask_clarification", json!({"question": "which?"}), "allow"),
        ("slack_post_message", json!({"to": "#general", "text": "hi"}), "allow"),
    ];
    for (tool, args, expected) in cases {
        assert_eq!(&code(&*p, tool, args.clone()), expected, "{tool} {args}");
    }
    let d = decide(&*p, "bash", json!({"command": "git rm -rf build"}));
    assert_eq!(d.reasons[0].message, "Command contains blocked pattern: rm -rf");

    // The flat keys are the messaging limits: a recipient list is enforced,
    // and so is msgs_per_min.
    let dir = tempfile::tempdir().unwrap();
    let p = with_passport(&generated_passport(dir.path(), |p| {
        p["limits"]["allowed_recipients"] = json!(["#ops"]);
        p["limits"]["msgs_per_min"] = json!(2);
    }));
    let d = decide(&*p, "slack_post_message", json!({"to": "#general", "text": "hi"}));
    assert_eq!(
        (d.reasons[0].code.as_ref(), d.reasons[0].message.as_ref()),
        ("oap.recipient_not_allowed", "Recipient '#general' is not in allowed list")
    );
    assert_eq!(d.policy_id.as_deref(), Some("messaging.message.send.v1"));
    assert_eq!(code(&*p, "slack_post_message", json!({"to": "#ops"})), "allow");
    assert_eq!(code(&*p, "slack_post_message", json!({"to": "#ops"})), "allow");
    assert_eq!(code(&*p, "slack_post_message", json!({"to": "#ops"})), "oap.rate_limit_exceeded");

    // The generator's fetch limit is max_requests_per_min.
    let dir = tempfile::tempdir().unwrap();
    let p = with_passport(&generated_passport(dir.path(), |p| {
        p["limits"]["web.fetch"]["max_requests_per_min"] = json!(1);
    }));
    assert_eq!(code(&*p, "web_fetch", json!({"url": "https://docs.rs/"})), "allow");
    assert_eq!(code(&*p, "web_fetch", json!({"url": "https://docs.rs/"})), "oap.rate_limit_exceeded");

    // `messaging.message.send` satisfies the pack's `messaging.send`, as in APort.
    let dir = tempfile::tempdir().unwrap();
    let p = with_passport(&generated_passport(dir.path(), |p| {
        p["capabilities"] = json!([{"id": "messaging.message.send"}]);
    }));
    assert_eq!(code(&*p, "slack_post_message", json!({"to": "#ops"})), "allow");
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.unknown_capability");
}
