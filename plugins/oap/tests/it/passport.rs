//! The passport: named by `agent_id` when no path is configured, re-read
//! when its file changes (a suspension denies the next call), never
//! written, its status and spec version checked.

use std::path::Path;

use serde_json::{json, Value};

use crate::setup::{code, decide, example_passport, passport_with, provider, request, with_passport};

fn write_passport(path: &Path, status: &str) {
    let mut passport: Value =
        serde_json::from_str(&std::fs::read_to_string(example_passport()).unwrap()).unwrap();
    passport["status"] = json!(status);
    // Write aside and rename, as editors and deploy tools do.
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, passport.to_string()).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

#[test]
fn suspending_the_passport_denies_the_next_call_and_reactivating_allows_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    write_passport(&path, "active");
    let p = with_passport(&path);
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "allow");
    write_passport(&path, "suspended");
    let denied = decide(&*p, "bash", json!({"command": "ls"}));
    assert_eq!(denied.reasons[0].code, "oap.passport_suspended");
    assert_eq!(denied.reasons[0].message, "Passport status is 'suspended', not 'active'. Agent suspended.");
    write_passport(&path, "revoked");
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.passport_suspended");
    write_passport(&path, "active");
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "allow");
    std::fs::write(&path, "{ not json").unwrap();
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.misconfigured");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.passport_not_found");
}

#[test]
fn parallel_calls_during_a_suspension_are_safe_and_the_switch_is_never_missed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    write_passport(&path, "active");
    let p = with_passport(&path);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let p = &p;
            scope.spawn(move || {
                for i in 0..500 {
                    let d = decide(&**p, "bash", json!({"command": format!("echo {t} {i}")}));
                    let c = if d.allow { "allow" } else { d.reasons[0].code.as_ref() };
                    assert!(matches!(c, "allow" | "oap.passport_suspended"), "{c}");
                }
            });
        }
        scope.spawn(|| {
            for i in 0..50 {
                write_passport(&path, if i % 2 == 0 { "suspended" } else { "active" });
            }
        });
    });
    write_passport(&path, "suspended");
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.passport_suspended");
}

#[test]
fn the_passport_comes_from_agent_id_when_no_path_is_configured() {
    let p = provider(json!({"framework": "guardhost-test-no-such-framework"}));
    let mut r = request("bash", json!({"command": "ls"}));
    r.agent_id = Some(example_passport().display().to_string());
    assert!(p.evaluate(&r).unwrap().allow);
    r.agent_id = Some("ap_hosted_agent_123".into());
    let d = p.evaluate(&r).unwrap();
    assert_eq!(d.reasons[0].code, "oap.passport_not_found");
    assert!(
        d.reasons[0].message.contains(".aport/guardhost-test-no-such-framework/aport/passport.json"),
        "{d:?}"
    );
}

#[test]
fn a_passport_named_by_agent_id_is_suspended_and_removed_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    write_passport(&path, "active");
    let p = provider(json!({"framework": "guardhost-test-no-such-framework"}));
    let mut r = request("bash", json!({"command": "ls"}));
    r.agent_id = Some(path.display().to_string());
    assert!(p.evaluate(&r).unwrap().allow);
    write_passport(&path, "suspended");
    assert_eq!(p.evaluate(&r).unwrap().reasons[0].code, "oap.passport_suspended");
    write_passport(&path, "active");
    assert!(p.evaluate(&r).unwrap().allow);
    // Gone: agent_id names no file, so the default passport is tried.
    std::fs::remove_file(&path).unwrap();
    let d = p.evaluate(&r).unwrap();
    assert_eq!(d.reasons[0].code, "oap.passport_not_found");
    assert!(d.reasons[0].message.contains(".aport/guardhost-test-no-such-framework/"), "{d:?}");
    write_passport(&path, "active");
    assert!(p.evaluate(&r).unwrap().allow);
}

#[test]
fn passport_and_context_failures_deny_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let draft = with_passport(&passport_with(dir.path(), |p| p["status"] = json!("draft")));
    assert_eq!(code(&*draft, "bash", json!({"command": "ls"})), "oap.passport_suspended");
    let dir = tempfile::tempdir().unwrap();
    let old_spec_path = passport_with(dir.path(), |p| p["spec_version"] = json!("oap/0.9"));
    let d = decide(&*with_passport(&old_spec_path), "bash", json!({"command": "ls"}));
    assert_eq!(d.reasons[0].code, "oap.passport_version_mismatch");
    // Like a suspension, a broken setup: `warn` mode does not let it pass.
    let warn = provider(json!({"passport_path": old_spec_path, "mode": "warn"}));
    assert_eq!(code(&*warn, "bash", json!({"command": "ls"})), "oap.passport_version_mismatch");

    let p = with_passport(&example_passport());
    let big = "x".repeat(101 * 1024);
    assert_eq!(code(&*p, "bash", json!({"command": "echo", "note": big})), "oap.context_too_large");
    // A write's text is not context: only its size counts, against the passport's limit.
    let path = "/mnt/user-data/outputs/big.md";
    assert_eq!(code(&*p, "write_file", json!({"path": path, "content": big})), "allow");
    let edit = json!({"path": path, "old_str": big, "new_str": big});
    assert_eq!(code(&*p, "str_replace", edit), "allow");
}

#[test]
fn nothing_is_written_and_a_read_only_passport_directory_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let path = passport_with(dir.path(), |_| {});
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    let mut permissions = std::fs::metadata(dir.path()).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(dir.path(), permissions.clone()).unwrap();
    let p = with_passport(&path);
    for tool in ["bash", "web_fetch", "write_file"] {
        decide(
            &*p,
            tool,
            json!({"command": "ls", "url": "https://x.org", "path": "/mnt/user-data/outputs/a", "content": ""}),
        );
    }
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(dir.path(), permissions).unwrap();
    let after: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(before, after);
}

#[test]
fn an_edit_in_place_is_picked_up_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = passport_with(dir.path(), |_| {});
    let p = with_passport(&path);
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "allow");
    // Same length, same file, rewritten in place within the same second.
    let text = std::fs::read_to_string(&path).unwrap().replace("\"active\"", "\"revoked\"");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "oap.passport_suspended");
    std::fs::write(&path, text.replace("\"revoked\"", "\"active\"")).unwrap();
    assert_eq!(code(&*p, "bash", json!({"command": "ls"})), "allow");
}
