//! A reload never quietly weakens the guardrail: every edit that removes a
//! guard or makes one let more through is refused under
//! `ReloadPolicy::Refuse` (`--require-guardrail`), the old guardrail still
//! deciding, and applied but reported under `ReloadPolicy::Report`, with
//! what changed in the reloader's status. Edits that only add or tighten
//! guards are applied under both.

use std::path::Path;

use guardhost::{ReloadError, ReloadPolicy, Reloader};
use guardhost_test_support::{tool_call, write};
use serde_json::json;

/// An `authorization:` section that lets everyone use every tool, so the
/// guardrails decide.
const AUTHORIZATION: &str = "authorization:
  enabled: true
  default_role: user
  provider:
    use: builtin:RbacAuthorizationProvider
    config:
      roles:
        user:
          tools: {allow: \"*\"}
";

/// The starting config: authorization, then a chain of two entries, the
/// allowlist denying `bash` and another denying `write_file` for the tools
/// it selects.
fn config(guardrails: &str) -> String {
    format!("{AUTHORIZATION}guardrails:\n{guardrails}")
}

const START: &str = "  enabled: true
  fail_closed: true
  providers:
    - use: builtin:AllowlistProvider
      name: shell
      config: {denied_tools: [bash]}
    - use: builtin:AllowlistProvider
      name: files
      tools: [write_file, str_replace]
      config: {denied_tools: [write_file]}
";

/// A reloader over `START` with `policy`, and the config file.
fn reloader(dir: &Path, policy: ReloadPolicy) -> (Reloader, std::path::PathBuf) {
    guardhost_builtins::register();
    let path = write(dir, "config.yaml", &config(START));
    (Reloader::open_with(&path, policy).unwrap(), path)
}

/// Whether the reloader's current guardrail lets `tool` run.
fn allows(reloader: &Reloader, tool: &str) -> bool {
    let guardrail = reloader.current().expect("a guardrail");
    guardrail.middleware.decide(&tool_call(tool, json!({}))).unwrap().0.allow
}

/// The edits that weaken `START`, each with what the status must say.
fn weakening_edits() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "enabled: false (the authorization section stays)",
            config(&START.replace("enabled: true", "enabled: false")),
            "entry 'shell' removed",
        ),
        (
            "an entry dropped",
            config(&START[..START.find("    - use: builtin:AllowlistProvider\n      name: files").unwrap()]),
            "entry 'files' removed",
        ),
        ("an entry renamed", config(&START.replace("name: shell", "name: shell-2")), "entry 'shell' removed"),
        (
            "mode moved from enforce to observe",
            config(&START.replace("  fail_closed: true\n", "  fail_closed: true\n  mode: observe\n")),
            "entry 'shell' moved from enforce to observe mode",
        ),
        (
            "one entry moved to warn mode on its own",
            config(&START.replace("      name: files\n", "      name: files\n      mode: warn\n")),
            "entry 'files' moved from enforce to warn mode",
        ),
        (
            "fail_closed turned off",
            config(&START.replace("fail_closed: true", "fail_closed: false")),
            "entry 'shell' no longer fails closed",
        ),
        (
            "the tools an entry decides narrowed",
            config(&START.replace("tools: [write_file, str_replace]", "tools: [str_replace]")),
            "entry 'files' decides tools str_replace instead of tools write_file, str_replace",
        ),
        (
            "the authorization section removed",
            format!("guardrails:\n{START}"),
            "the `authorization:` provider removed",
        ),
    ]
}

#[test]
fn every_weakening_edit_is_refused_under_refuse_and_the_old_guardrail_decides() {
    for (what, text, change) in weakening_edits() {
        let dir = tempfile::tempdir().unwrap();
        let (reloader, path) = reloader(dir.path(), ReloadPolicy::Refuse);
        let digest = reloader.status().config_digest;
        std::fs::write(&path, text).unwrap();
        let error = reloader.reload().expect_err(what);
        let ReloadError::WouldWeaken { changes, .. } = &error else { panic!("{what}: {error}") };
        assert!(changes.iter().any(|c| c == change), "{what}: {changes:?}");
        let message = error.to_string();
        assert!(message.contains(change) && message.contains("--require-guardrail"), "{what}: {message}");
        // The old guardrail still decides, and the status says so.
        assert!(!allows(&reloader, "bash") && !allows(&reloader, "write_file"), "{what}");
        let status = reloader.status();
        assert_eq!((status.applied, status.refused, status.failed), (0, 1, 0), "{what}");
        assert!(status.weakened.is_empty() && status.config_digest == digest, "{what}");
    }
}

#[test]
fn every_weakening_edit_is_applied_and_reported_under_report() {
    for (what, text, change) in weakening_edits() {
        let dir = tempfile::tempdir().unwrap();
        let (reloader, path) = reloader(dir.path(), ReloadPolicy::Report);
        let digest = reloader.status().config_digest;
        std::fs::write(&path, text).unwrap();
        reloader.reload().unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = reloader.status();
        assert_eq!((status.applied, status.weakening, status.refused), (1, 1, 0), "{what}");
        assert!(status.weakened.iter().any(|c| c == change), "{what}: {:?}", status.weakened);
        assert_ne!(status.config_digest, digest, "{what}: the digest follows the running config");

        // Put back, the guardrail is no longer weaker than the first (a
        // rename put back is a rename again: the new name goes).
        std::fs::write(&path, config(START)).unwrap();
        reloader.reload().unwrap();
        let status = reloader.status();
        assert!(status.weakened.is_empty(), "{what}: {:?}", status.weakened);
        let weakening = if what == "an entry renamed" { 2 } else { 1 };
        assert_eq!(
            (status.applied, status.weakening, status.config_digest),
            (2, weakening, digest),
            "{what}"
        );
    }
}

#[test]
fn edits_that_add_or_tighten_guards_are_applied_under_refuse() {
    let tighter = [
        // Another entry.
        START.to_owned()
            + "    - use: builtin:AllowlistProvider\n      name: search\n      config: {denied_tools: [web_search]}\n",
        // An entry that decides more tools.
        START.replace("tools: [write_file, str_replace]", "tools: [write_file, str_replace, ls]"),
        // The same entries, another policy inside one (the provider's own
        // config is the policy's business, not the reload's).
        START.replace("denied_tools: [bash]", "denied_tools: [bash, ls]"),
    ];
    for text in tighter {
        let dir = tempfile::tempdir().unwrap();
        let (reloader, path) = reloader(dir.path(), ReloadPolicy::Refuse);
        std::fs::write(&path, config(&text)).unwrap();
        reloader.reload().unwrap_or_else(|e| panic!("{text}: {e}"));
        let status = reloader.status();
        assert_eq!((status.applied, status.weakening, status.refused), (1, 0, 0), "{text}");
    }
    // From observe to enforce is tightening too.
    let dir = tempfile::tempdir().unwrap();
    let observing = START.replace("  fail_closed: true\n", "  fail_closed: true\n  mode: observe\n");
    let path = write(dir.path(), "config.yaml", &config(&observing));
    guardhost_builtins::register();
    let reloader = Reloader::open_with(&path, ReloadPolicy::Refuse).unwrap();
    assert!(allows(&reloader, "bash"), "observe mode lets the call run");
    std::fs::write(&path, config(START)).unwrap();
    reloader.reload().unwrap();
    assert!(!allows(&reloader, "bash"));
}

#[test]
fn a_config_that_installs_no_guardrail_is_refused_under_both_policies() {
    for policy in [ReloadPolicy::Refuse, ReloadPolicy::Report] {
        let dir = tempfile::tempdir().unwrap();
        let (reloader, path) = reloader(dir.path(), policy);
        std::fs::write(&path, "guardrails:\n  enabled: false\n").unwrap();
        let error = reloader.reload().expect_err("no guardrail");
        assert!(matches!(error, ReloadError::WouldRemove { .. }), "{policy:?}: {error}");
        assert!(!allows(&reloader, "bash"), "{policy:?}");
        assert_eq!(reloader.status().refused, 1, "{policy:?}");
    }
}

#[test]
fn a_broken_config_counts_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let (reloader, path) = reloader(dir.path(), ReloadPolicy::Refuse);
    std::fs::write(&path, "guardrails: [").unwrap();
    reloader.reload().expect_err("not YAML");
    let status = reloader.status();
    assert_eq!((status.applied, status.refused, status.failed), (0, 0, 1));
}

#[test]
fn a_reload_says_what_it_changed_entry_by_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (reloader, path) = reloader(dir.path(), ReloadPolicy::Report);
    assert!(reloader.status().last_changes.is_empty(), "nothing reloaded yet");
    let before = reloader.current().unwrap().written[2].digest.clone();
    // One entry's policy changed, one entry added.
    let text = START.replace("denied_tools: [write_file]", "denied_tools: [write_file, ls]")
        + "    - use: builtin:AllowlistProvider\n      name: search\n      config: {denied_tools: [web_search]}\n";
    std::fs::write(&path, config(&text)).unwrap();
    reloader.reload().unwrap();
    let after = reloader.current().unwrap().written[2].digest.clone();
    assert_ne!(before, after, "the changed entry has another digest");
    let changes = reloader.status().last_changes;
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(changes[0], format!("entry 'files' changed ({} -> {})", &before[..19], &after[..19]));
    assert!(changes[1].starts_with("entry 'search' added (sha256:"), "{changes:?}");
    // The other entries are unchanged, so not named.
    assert!(!changes.iter().any(|c| c.contains("'shell'") || c.contains("authorization")), "{changes:?}");

    // Removed, and then nothing changed at all.
    std::fs::write(&path, config(START)).unwrap();
    reloader.reload().unwrap();
    let changes = reloader.status().last_changes;
    assert!(changes.contains(&"entry 'search' removed".to_owned()), "{changes:?}");
    std::fs::write(&path, config(START) + "\n# a comment\n").unwrap();
    reloader.reload().unwrap();
    assert!(reloader.status().last_changes.is_empty(), "a comment changes no entry");
}

#[test]
fn an_entry_digest_names_the_entry_as_written_and_never_a_secret_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let text = config(&START.replace("config: {denied_tools: [bash]}", "config: {denied_tools: [$DENIED]}"));
    let path = write(dir.path(), "config.yaml", &text);
    let digests = |value: &str| {
        let loaded = guardhost::LoadedConfig::from_yaml(
            &std::fs::read_to_string(&path).unwrap(),
            dir.path().into(),
            guardhost::ConfigOrigin::File(path.clone()),
            |_| Some(value.to_owned()),
        )
        .unwrap();
        loaded.guard_digests()
    };
    // The same text with another value behind `$DENIED`: the same digests.
    assert_eq!(digests("bash"), digests("write_file"));
    assert_eq!(digests("bash").len(), 3);
    assert!(digests("bash").iter().all(|d| d.starts_with("sha256:") && d.len() == 71));
}
