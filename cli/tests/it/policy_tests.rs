//! `guardhost test`: the example Cedar policy set's tests (the built-in
//! Cedar provider), a chain of other providers, every report format, a
//! failing case, a bad test file; and `check` on policies that do not
//! validate.

use std::path::{Path, PathBuf};

use crate::support::cli::{guardhost, stderr, stdout};
use crate::support::{use_of, write};
use serde_json::Value;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cedar").join(name)
}

/// The example's config with the Cedar library this test build made in
/// place of the built-in provider.
fn cedar_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(example("config.yaml")).unwrap();
    let cedar = use_of("guardhost_cedar", "CedarGuardrailProvider");
    let yaml = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("use:") {
                format!("    use: {cedar}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .replace("policies: policies/", &format!("policies: {}", example("policies").display()))
        .replace(
            "schema: deerflow.cedarschema",
            &format!("schema: {}", example("deerflow.cedarschema").display()),
        )
        .replace("entities: entities.json", &format!("entities: {}", example("entities.json").display()));
    write(dir, "config.yaml", &yaml)
}

#[test]
fn the_example_policies_pass_their_tests_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let config = cedar_config(dir.path());
    let config = config.to_str().unwrap();
    let tests = example("tests.yaml");
    // As shipped (the built-in provider), then with the library.
    let out = guardhost(&["test", tests.to_str().unwrap()], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.ends_with("41 tests: 41 passed, 0 failed\n"), "{text}");
    let out = guardhost(&["test", tests.to_str().unwrap(), "--config", config], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains(
            "  PASS  sudo is never run, even by an admin: deny (cedar.forbid, policy listed-programs)"
        ),
        "{text}"
    );
    assert!(text.ends_with("41 tests: 41 passed, 0 failed\n"), "{text}");

    let out = guardhost(&["test", tests.to_str().unwrap(), "--config", config, "--format", "json"], None);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((json["passed"].as_u64(), json["failed"].as_u64()), (Some(41), Some(0)));
    assert_eq!(json["files"][0]["tests"][3]["got"]["policy"], "no-dot-dot");

    let junit = dir.path().join("junit.xml");
    let out = guardhost(
        &[
            "test",
            tests.to_str().unwrap(),
            "--config",
            config,
            "--format",
            "junit",
            "--output",
            junit.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let document = roxmltree::Document::parse(&xml).unwrap();
    let suite = document.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!((suite.attribute("tests"), suite.attribute("failures")), (Some("41"), Some("0")));
}

#[test]
fn a_failing_case_says_what_it_expected_and_got_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let config = cedar_config(dir.path());
    let tests = write(
        dir.path(),
        "tests.yaml",
        &format!(
            "config: {}
tests:
  - name: sudo passes
    tool: bash
    args: {{command: sudo ls}}
    context: {{user_role: admin}}
    expect: allow
  - name: the web, by the wrong policy
    tool: web_search
    args: {{query: q}}
    expect: allow
    policy: agent-tools
  - name: a read, right
    tool: ls
    args: {{path: /mnt/user-data/workspace}}
    expect: allow
",
            config.display()
        ),
    );
    let out = guardhost(&["test", tests.to_str().unwrap()], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("  FAIL  sudo passes: deny (cedar.forbid, policy listed-programs)\n        expected allow, got deny\n        message: only the listed programs run"), "{text}");
    assert!(text.contains("  FAIL  the web, by the wrong policy: allow (cedar.permit, policy web)\n        expected policy `agent-tools`, got `web`"), "{text}");
    assert!(text.contains("  PASS  a read, right"), "{text}");
    assert!(text.ends_with("3 tests: 1 passed, 2 failed\n"), "{text}");
}

#[test]
fn any_config_can_be_tested_chains_and_ask_and_rewrite_included() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "guardrails:
  enabled: true
  providers:
    - use: builtin:ApprovalGuardrailProvider
      name: caps
      config: {set: {web_fetch: {max_bytes: 1000}}}
    - use: builtin:ApprovalGuardrailProvider
      name: humans
      config: {ask: [bash]}
    - use: builtin:AllowlistProvider
      config: {denied_tools: [update_agent]}
",
    );
    let tests = write(
        dir.path(),
        "tests.yaml",
        "tests:
  - {name: commands wait for a human, tool: bash, args: {command: ls}, expect: ask, decided_by: humans}
  - {name: fetches are capped, tool: web_fetch, args: {url: u}, expect: rewrite, code: approvals.set, decided_by: caps}
  - {name: the agent cannot change itself, tool: update_agent, expect: deny, code: oap.tool_not_allowed, decided_by: allowlist}
  - {name: reads pass, tool: read_file, args: {path: x}, expect: allow}
",
    );
    let out = guardhost(&["test", tests.to_str().unwrap(), "--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("4 tests: 4 passed, 0 failed\n"));
}

#[test]
fn a_case_can_answer_the_ask_and_expect_the_approved_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "guardrails:
  enabled: true
  providers:
    - use: builtin:ApprovalGuardrailProvider
      name: humans
      config: {ask: [bash, write_file], approvers: [admin]}
    - use: builtin:AllowlistProvider
      config: {denied_tools: [write_file]}
",
    );
    let tests = write(
        dir.path(),
        "tests.yaml",
        "tests:
  - {name: held, tool: bash, args: {command: make}, expect: ask, decided_by: humans}
  - {name: approved by admin, tool: bash, args: {command: make}, approve: {by: admin}, expect: allow, code: guardhost.approved}
  - {name: not mallory's, tool: bash, args: {command: make}, approve: {by: mallory}, expect: deny, code: guardhost.approver_not_allowed}
  - {name: refused, tool: bash, approve: {by: admin, approved: false}, expect: deny, code: guardhost.approval_refused}
  - {name: approved then denied further on, tool: write_file, approve: {by: admin}, expect: deny, decided_by: allowlist}
",
    );
    let out = guardhost(&["test", tests.to_str().unwrap(), "--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("5 tests: 5 passed, 0 failed\n"), "{}", stdout(&out));

    let nothing = write(
        dir.path(),
        "nothing.yaml",
        "tests:\n  - {name: nothing to approve, tool: read_file, approve: {by: admin}, expect: allow}\n",
    );
    let out = guardhost(&["test", nothing.to_str().unwrap(), "--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("was not held for approval"), "{}", stdout(&out));
}

#[test]
fn a_test_file_or_config_that_cannot_be_used_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let no_config = write(dir.path(), "a.yaml", "tests:\n  - {name: x, tool: bash, expect: deny}\n");
    let out = guardhost(&["test", no_config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("names no config: add `config: path/to/config.yaml` to it, or pass --config"),
        "{}",
        stderr(&out)
    );
    let bad = write(dir.path(), "b.yaml", "tests:\n  - {name: x, tool: bash, expect: maybe}\n");
    let out = guardhost(
        &["test", bad.to_str().unwrap(), "--config", example("config.yaml").to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a test file: tests[0].expect: unknown variant `maybe`"),
        "{}",
        stderr(&out)
    );
    let empty = write(dir.path(), "c.yaml", "tests: []\n");
    let out = guardhost(&["test", empty.to_str().unwrap()], None);
    assert!(stderr(&out).contains("has no test under `tests:`"), "{}", stderr(&out));
}

#[test]
fn check_refuses_policies_that_do_not_validate_naming_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["deerflow.cedarschema", "entities.json"] {
        std::fs::copy(example(name), dir.path().join(name)).unwrap();
    }
    let cedar = use_of("guardhost_cedar", "CedarGuardrailProvider");
    write(
        dir.path(),
        "config.yaml",
        &format!("guardrails:\n  enabled: true\n  provider:\n    use: {cedar}\n    config: {{policies: policies/, schema: deerflow.cedarschema, entities: entities.json}}\n"),
    );
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    write(
        &dir.path().join("policies"),
        "mine.cedar",
        "@id(\"typo\")\npermit (principal, action == Action::\"call\", resource == Tool::\"bash\")\nwhen { context.args.comand == \"ls\" };\n",
    );
    let out = guardhost(&["check", "--config", dir.path().join("config.yaml").to_str().unwrap()], None);
    let error = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{error}");
    assert!(error.contains("policies/mine.cedar:3:8: for policy `typo`, attribute `args.comand` in context for Action::\"call\" not found"), "{error}");
}

#[test]
fn explain_walks_the_chain_entry_by_entry_and_names_the_cedar_policies() {
    let dir = tempfile::tempdir().unwrap();
    // The example as shipped: the command's built-in Cedar provider.
    let out = guardhost(
        &[
            "explain",
            "--config",
            example("config.yaml").to_str().unwrap(),
            "--tool",
            "bash",
            "--args",
            r#"{"command": "sudo ls"}"#,
            "--context",
            r#"{"user_role": "admin"}"#,
        ],
        None,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("  cedar (cedar provider at guardrails.provider): deny (cedar.forbid: only the listed programs run), policy listed-programs\n       also: cedar.forbid: sudo, su, shutdown and reboot are never run\n"), "{text}");
    assert!(
        text.contains("       Cedar: a forbid matched, and a forbid wins\n       decided by: listed-programs, no-privilege\n"),
        "{text}"
    );
    assert!(
        text.contains("did not match (or were not needed): a-query, agent-tools, get-or-head,"),
        "{text}"
    );
    assert!(
        text.ends_with("result: deny (cedar.forbid: only the listed programs run), policy listed-programs\n"),
        "{text}"
    );

    let config = write(
        dir.path(),
        "chain.yaml",
        &format!(
            "guardrails:
  enabled: true
  providers:
    - use: builtin:ApprovalGuardrailProvider
      name: humans
      config: {{ask: [bash]}}
    - use: builtin:AllowlistProvider
      tools: ['web_*']
    - use: {}
      config: {{policies: {}}}
",
            use_of("guardhost_cedar", "CedarGuardrailProvider"),
            example("policies").display()
        ),
    );
    let out = guardhost(
        &[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--tool",
            "bash",
            "--args",
            r#"{"command": "ls"}"#,
        ],
        None,
    );
    let text = stdout(&out);
    assert!(text.contains("  humans (approvals provider at guardrails.providers[0]): ask (approvals.ask: tool 'bash' needs a human's approval)\n"), "{text}");
    assert!(
        text.contains(
            "  allowlist (allowlist provider at guardrails.providers[1]): not asked: its `tools:` leave 'bash' out\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  cedar (cedar provider at guardrails.providers[2]): not asked: an entry before it decided the call\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "result: ask (approvals.ask: tool 'bash' needs a human's approval), decided by humans\n"
        ),
        "{text}"
    );
}

/// A provider that fails says why where the operator looks: `explain` and
/// `test` print its error (the RBAC provider's "Unknown role"), which the
/// decision itself never carries.
#[test]
fn explain_and_test_print_why_a_provider_failed() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        &format!(
            "authorization:
  enabled: true
  provider:
    use: {}
    config:
      roles:
        user: {{tools: {{allow: '*'}}}}
        admin: {{tools: {{allow: '*'}}}}
guardrails:
  enabled: true
  provider: {{use: builtin:AllowlistProvider}}
",
            use_of("guardhost_rbac", "RbacAuthorizationProvider")
        ),
    );
    let out = guardhost(
        &[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--tool",
            "bash",
            "--context",
            r#"{"user_role": "guest"}"#,
        ],
        None,
    );
    let text = stdout(&out);
    assert!(
        text.contains(
            "  authorization (rbac provider at authorization.provider): deny (oap.evaluator_error: guardrail provider error (fail-closed)), the provider failed\n       cause: Unknown role 'guest'; known roles: ['admin', 'user']\n"
        ),
        "{text}{}",
        stderr(&out)
    );
    let tests = write(
        dir.path(),
        "tests.yaml",
        "config: config.yaml
tests:
  - name: a guest is refused
    tool: bash
    context: {user_role: guest}
    expect: deny
",
    );
    let out = guardhost(&["test", tests.to_str().unwrap()], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("        expected deny, got error\n"), "{text}");
    assert!(
        text.contains("        cause: authorization: Unknown role 'guest'; known roles: ['admin', 'user']\n"),
        "{text}"
    );
    let out = guardhost(&["test", tests.to_str().unwrap(), "--format", "json"], None);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["files"][0]["tests"][0]["got"]["cause"],
        "authorization: Unknown role 'guest'; known roles: ['admin', 'user']"
    );
}
