//! Hot reload: a good new config swaps in, a broken one keeps the old
//! guardrail, a call in flight finishes on its provider, and a library
//! overwritten in place neither crashes the host nor hides the new version.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::cli::Watched;
use crate::support::{library, write};
use guardhost::{Reloader, ToolCallRequest, ToolStatus};
use serde_json::Map;

fn config(tool: &str) -> String {
    format!("guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {{denied_tools: [{tool}]}}\n")
}

fn allowed(reloader: &Reloader, tool: &str) -> bool {
    let guardrail = reloader.current().expect("a guardrail");
    let call = ToolCallRequest::new(tool, Map::new()).with_id("c");
    guardrail.middleware.check(&call).unwrap().allowed()
}

/// Rewrites a file with a modification time surely different from before.
fn rewrite(path: &Path, text: &str) {
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_good_config_swaps_in_and_a_broken_one_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "config.yaml", &config("bash"));
    guardhost_builtins::register();
    let reloader = Reloader::open(&path).unwrap();
    assert!(!allowed(&reloader, "bash") && allowed(&reloader, "ls"));
    assert!(!reloader.changed());

    rewrite(&path, &config("ls"));
    assert!(reloader.changed());
    reloader.reload().unwrap();
    assert!(allowed(&reloader, "bash") && !allowed(&reloader, "ls"));

    rewrite(&path, "guardrails:\n  enabled: true\n  provider:\n    use: builtin:NoSuchProvider\n");
    let error = reloader.reload().unwrap_err().to_string();
    assert!(error.contains("names no built-in provider"), "{error}");
    assert!(!allowed(&reloader, "ls"), "the old guardrail keeps serving");
    assert!(!reloader.changed(), "a broken version is tried once, not on every poll");

    rewrite(&path, "guardrails: [not, a, mapping");
    assert!(reloader.reload().is_err());
    assert!(!allowed(&reloader, "ls"));

    // A config that would switch the guardrail off (or a file caught empty)
    // is refused: every call would be let through.
    rewrite(&path, "guardrails:\n  enabled: false\n");
    let error = reloader.reload().unwrap_err().to_string();
    assert!(
        error.ends_with(
            "the new config installs no guardrail; the current one stays (restart to turn the guardrail off)"
        ),
        "{error}"
    );
    rewrite(&path, "");
    assert!(reloader.reload().is_err());
    assert!(!allowed(&reloader, "ls"));
}

#[test]
fn a_call_in_flight_finishes_on_the_provider_it_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let slow = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}:Slow\n",
        library("guardhost_zoo").display()
    );
    let path = write(dir.path(), "config.yaml", &slow);
    guardhost_builtins::register();
    let reloader = Arc::new(Reloader::open(&path).unwrap());
    let in_flight = reloader.current().unwrap();
    let call = std::thread::spawn(move || {
        // The zoo's Slow provider takes 3 ms a call and denies bash.
        (0..50).all(|_| {
            let call = ToolCallRequest::new("bash", Map::new()).with_id("c");
            !in_flight.middleware.check(&call).unwrap().allowed()
        })
    });
    rewrite(&path, &config("read_file"));
    reloader.reload().unwrap();
    assert!(allowed(&reloader, "bash"), "new calls use the new guardrail");
    assert!(call.join().unwrap(), "the call in flight kept its provider");
}

#[test]
fn a_library_overwritten_in_place_keeps_serving_and_its_new_version_loads() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libpolicy.so");
    std::fs::copy(library("guardhost_allowlist"), &lib).unwrap();
    let yaml = |symbol: &str, config: &str| {
        format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}:{symbol}\n    config: {config}\n",
            lib.display()
        )
    };
    let path = write(dir.path(), "config.yaml", &yaml("AllowlistProvider", "{denied_tools: [bash]}"));
    guardhost_builtins::register();
    let reloader = Reloader::open(&path).unwrap();
    let old = reloader.current().unwrap();
    assert_eq!(old.info.name, "allowlist");

    // Overwrite the library in place (same inode) with another provider's.
    let other = std::fs::read(library("blocked_prefixes")).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(&lib).unwrap();
    file.write_all(&other).unwrap();
    drop(file);
    // The loaded copy is untouched: the old provider still answers.
    let call = ToolCallRequest::new("bash", Map::new()).with_id("c");
    assert!(!old.middleware.check(&call).unwrap().allowed());
    assert!(reloader.changed());

    rewrite(&path, &yaml("MyGuardrailProvider", "{blocked_prefixes: [web_]}"));
    reloader.reload().unwrap();
    let new = reloader.current().unwrap();
    assert_eq!(new.info.name, "my-policy");
    assert!(new.middleware.check(&call).unwrap().allowed());
    assert!(!old.middleware.check(&call).unwrap().allowed(), "and the old one still works");
}

/// Asks about `bash` until the answer is `status`: the watcher looks every
/// 200 ms; a reload takes at most 10 s here.
fn until_bash_is(host: &mut Watched, status: ToolStatus, never: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while host.ask("bash").status != status {
        assert!(Instant::now() < deadline, "{never}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn run_watch_follows_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "config.yaml", &config("bash"));
    let mut host = Watched::start(&path, Stdio::null());
    assert_eq!(host.ask("bash").status, ToolStatus::Error);
    rewrite(&path, &config("ls"));
    until_bash_is(&mut host, ToolStatus::Success, "the new config was never picked up");
    assert_eq!(host.ask("ls").status, ToolStatus::Error);
    host.stop();
}

/// A Cedar entry (the library this test build made) over a folder of
/// policies that permits everything (`all.cedar`): the config file and
/// the folder.
fn cedar_config(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let policies = dir.join("policies");
    std::fs::create_dir_all(policies.join("more")).unwrap();
    write(&policies, "all.cedar", PERMIT_ALL);
    let config = write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    config: {{policies: policies/}}\n",
            support::use_of("guardhost_cedar", "CedarGuardrailProvider")
        ),
    );
    (config, policies)
}

const PERMIT_ALL: &str = "@id(\"all\")\npermit(principal, action, resource);\n";

fn forbid(tool: &str) -> String {
    format!("@id(\"no-{tool}\")\nforbid(principal, action, resource == Tool::\"{tool}\");\n")
}

#[test]
fn a_policy_file_changed_added_or_removed_reloads_and_a_broken_one_keeps_the_old_policies() {
    let dir = tempfile::tempdir().unwrap();
    let (path, policies) = cedar_config(dir.path());
    let bash = write(&policies, "bash.cedar", &forbid("bash"));
    guardhost_builtins::register();
    let reloader = Reloader::open(&path).unwrap();
    assert!(!allowed(&reloader, "bash") && allowed(&reloader, "ls"));
    assert!(!reloader.changed(), "nothing changed yet");

    // A policy file changed (the config file did not).
    rewrite(&bash, &format!("{}{}", forbid("bash"), forbid("ls").replace("no-ls", "no-ls-too")));
    assert!(reloader.changed());
    reloader.reload().unwrap();
    assert!(!allowed(&reloader, "bash") && !allowed(&reloader, "ls"));

    // A file added in a folder below: a broken one keeps the old policies,
    // with the file, line and column of the problem, and is tried once.
    let broken = write(&policies.join("more"), "broken.cedar", "permit(principal, action resource);\n");
    assert!(reloader.changed());
    let error = reloader.reload().unwrap_err().to_string();
    assert!(error.contains("broken.cedar:1:"), "{error}");
    assert!(!allowed(&reloader, "bash") && !allowed(&reloader, "ls"), "the old policies keep serving");
    assert!(allowed(&reloader, "cat"));
    assert!(!reloader.changed(), "a broken version is tried once, not on every poll");

    // Fixed: it loads; removed: the policies without it.
    rewrite(&broken, &forbid("cat"));
    assert!(reloader.changed());
    reloader.reload().unwrap();
    assert!(!allowed(&reloader, "cat"));
    std::fs::remove_file(&broken).unwrap();
    assert!(reloader.changed());
    reloader.reload().unwrap();
    assert!(allowed(&reloader, "cat") && !allowed(&reloader, "ls"));
}

#[test]
fn run_watch_follows_the_policy_files() {
    let dir = tempfile::tempdir().unwrap();
    let (path, policies) = cedar_config(dir.path());
    let mut host = Watched::start(&path, Stdio::null());
    assert_eq!(host.ask("bash").status, ToolStatus::Success);
    rewrite(&policies.join("bash.cedar"), &forbid("bash"));
    until_bash_is(&mut host, ToolStatus::Error, "the new policy was never picked up");
    assert_eq!(host.ask("ls").status, ToolStatus::Success);
    host.stop();
}
