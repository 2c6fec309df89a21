//! `guardhost test --coverage`: which chain entries and Cedar policies the
//! tests reached, and which they never did, in text and JSON.

use std::path::Path;

use serde_json::Value;

use crate::support::cli::{guardhost, stderr, stdout};
use crate::support::write;

const TESTS: &str = "tests:
  - name: a workspace file may be read
    tool: read_file
    args: {path: /mnt/user-data/workspace/notes.md}
    expect: allow
  - name: sudo is never run
    tool: bash
    args: {command: sudo ls}
    context: {user_role: admin}
    expect: deny
";

#[test]
fn coverage_lists_the_policies_no_test_reached() {
    let dir = tempfile::tempdir().unwrap();
    let tests = write(dir.path(), "tests.yaml", TESTS);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cedar/config.yaml");
    let (tests, config) = (tests.to_str().unwrap(), config.to_str().unwrap());
    let out = guardhost(&["test", tests, "--config", config, "--coverage"], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("2 tests: 2 passed, 0 failed\ncoverage of "), "{text}");
    assert!(text.contains("  entry cedar (cedar provider): asked by 2 tests, decided 2\n"), "{text}");
    assert!(text.contains("    policies reached (3 of "), "{text}");
    assert!(text.contains("read-user-data (1)") && text.contains("listed-programs (1)"), "{text}");
    let never = text.lines().find(|l| l.starts_with("    policies never reached")).unwrap();
    assert!(never.contains("no-pastebin") && !never.contains("read-user-data"), "{text}");

    let out = guardhost(&["test", tests, "--config", config, "--coverage", "--format", "json"], None);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let entry = &json["coverage"][0]["entries"][0];
    assert_eq!(entry["entry"], "cedar");
    assert_eq!(entry["asked"], 2);
    assert_eq!(entry["policies"]["read-user-data"], 1);
    let never: Vec<&str> =
        entry["never_reached"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(never.contains(&"no-pastebin") && !never.contains(&"read-user-data"), "{never:?}");

    // Without --coverage, no coverage; with JUnit, a usage error.
    let out = guardhost(&["test", tests, "--config", config, "--format", "json"], None);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(json.get("coverage").is_none());
    let out = guardhost(&["test", tests, "--config", config, "--coverage", "--format", "junit"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn coverage_names_entries_never_asked() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config.yaml",
        "guardrails:
  enabled: true
  providers:
    - name: shell
      use: builtin:AllowlistProvider
      tools: [bash]
      config: {denied_tools: [bash]}
    - name: files
      use: builtin:AllowlistProvider
      tools: [write_file]
      config: {denied_tools: [write_file]}
",
    );
    let tests = write(
        dir.path(),
        "tests.yaml",
        "config: config.yaml\ntests:\n  - {name: no shell, tool: bash, expect: deny, decided_by: shell}\n",
    );
    let out = guardhost(&["test", tests.to_str().unwrap(), "--coverage"], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("(1 tests): 1 of 2 entries asked"), "{text}");
    assert!(text.contains("  entry shell (allowlist provider): asked by 1 tests, decided 1\n"), "{text}");
    assert!(text.contains("  entry files (allowlist provider): never asked\n"), "{text}");
}
