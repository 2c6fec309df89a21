//! The permission rule covers the path as written (every directory and
//! link on it), the path each link leads to, and the config file itself;
//! a config that others can write cannot switch the rule off.
#![cfg(unix)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{stderr, Watched};
use crate::support::{library, write};
use guardhost::{LoadedConfig, ToolStatus, ALLOW_INSECURE_CONFIG_VAR};

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory of the test's own, `0755`.
fn subdir(dir: &Path, name: &str) -> PathBuf {
    let sub = dir.join(name);
    std::fs::create_dir(&sub).unwrap();
    mode(&sub, 0o755);
    sub
}

/// A safe copy of the allowlist library in `dir/lib`.
fn safe_library(dir: &Path) -> PathBuf {
    let lib = subdir(dir, "lib").join("libpolicy.so");
    std::fs::copy(library("guardhost_allowlist"), &lib).unwrap();
    mode(&lib, 0o755);
    lib
}

/// A config denying `bash` through the library at `use_path`.
fn config_text(use_path: &Path, extra: &str) -> String {
    format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n{extra}",
        use_path.display()
    )
}

/// `guardhost check --config CONFIG`, with `allow` as the escape variable.
fn check(config: &Path, allow: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_guardhost"));
    command.args(["check", "--config", config.to_str().unwrap()]).env("GUARDHOST_LOG", "warn");
    match allow {
        Some(value) => command.env(ALLOW_INSECURE_CONFIG_VAR, value),
        None => command.env_remove(ALLOW_INSECURE_CONFIG_VAR),
    };
    command.stdin(Stdio::null()).output().unwrap()
}

fn assert_refused(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "missing {needle:?} in: {err}");
    }
}

#[test]
fn a_link_to_a_safe_library_in_a_world_writable_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = safe_library(dir.path());
    let open = subdir(dir.path(), "rollout");
    let current = open.join("current.so");
    symlink(&lib, &current).unwrap();
    let config = write(&subdir(dir.path(), "etc"), "config.yaml", &config_text(&current, ""));
    assert_eq!(check(&config, None).status.code(), Some(0), "{}", stderr(&check(&config, None)));

    mode(&open, 0o757);
    assert_refused(
        &check(&config, None),
        &[
            &format!("{} is world-writable (mode 757)", open.display()),
            "so another user could replace the provider",
            &format!("chmod go-w {}", open.display()),
            "or set `provider.allow_insecure_permissions: true`",
        ],
    );
    // The library's own key still works for the library.
    let allowed = config_text(&current, "    allow_insecure_permissions: true\n");
    std::fs::write(&config, allowed).unwrap();
    assert_eq!(check(&config, None).status.code(), Some(0), "{}", stderr(&check(&config, None)));
}

#[test]
fn a_safe_link_into_a_world_writable_directory_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let lib = safe_library(dir.path());
    let current = subdir(dir.path(), "rollout").join("current.so");
    symlink(&lib, &current).unwrap();
    let config = write(&subdir(dir.path(), "etc"), "config.yaml", &config_text(&current, ""));
    mode(lib.parent().unwrap(), 0o757);
    assert_refused(
        &check(&config, None),
        &[&format!(
            "{} (reached through the symbolic link {}) is world-writable",
            lib.parent().unwrap().display(),
            current.display()
        )],
    );
}

#[test]
fn a_config_file_others_can_write_is_refused_and_cannot_switch_the_rule_off() {
    let dir = tempfile::tempdir().unwrap();
    let lib = safe_library(dir.path());
    let etc = subdir(dir.path(), "etc");
    let config = write(&etc, "config.yaml", &config_text(&lib, "    allow_insecure_permissions: true\n"));
    assert_eq!(check(&config, None).status.code(), Some(0), "{}", stderr(&check(&config, None)));

    // The file itself, then its directory, then a link to it from a
    // directory others can write.
    mode(&config, 0o646);
    let expected_file = format!("{} is world-writable (mode 646)", config.display());
    let needles = [
        expected_file.as_str(),
        "so another user could rewrite the guardrail config",
        "GUARDHOST_ALLOW_INSECURE_CONFIG=1",
        "`provider.allow_insecure_permissions` in the file cannot",
    ];
    assert_refused(&check(&config, None), &needles);
    assert!(LoadedConfig::from_path(&config).is_err(), "the library refuses it too");
    mode(&config, 0o644);

    mode(&etc, 0o757);
    assert_refused(&check(&config, None), &[&format!("{} is world-writable (mode 757)", etc.display())]);
    mode(&etc, 0o755);

    let open = subdir(dir.path(), "shared");
    let link = open.join("guardhost.yaml");
    symlink(&config, &link).unwrap();
    assert_eq!(check(&link, None).status.code(), Some(0), "{}", stderr(&check(&link, None)));
    mode(&open, 0o777);
    let out = check(&link, None);
    assert_refused(&out, &[&open.display().to_string(), "world-writable"]);

    // Whoever starts guardhost may accept it; nothing else turns it off.
    assert_eq!(check(&link, Some("0")).status.code(), Some(2));
    let out = check(&link, Some("1"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_reload_from_a_config_others_can_write_is_refused_and_the_old_guardrail_answers() {
    let dir = tempfile::tempdir().unwrap();
    let lib = safe_library(dir.path());
    let config = write(&subdir(dir.path(), "etc"), "config.yaml", &config_text(&lib, ""));
    let mut watched = Watched::start(&config, Stdio::null());
    assert_eq!(watched.ask("bash").status, ToolStatus::Error);

    // Someone else's edit: the file made writable by all, then emptied of
    // its denials. The reload is refused; `bash` stays denied.
    mode(&config, 0o666);
    let open_policy = config_text(&lib, "").replace("[bash]", "[]");
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(&config, &open_policy).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        assert_eq!(watched.ask("bash").status, ToolStatus::Error, "an insecure config was reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Fixed by the operator: the next change is taken.
    mode(&config, 0o644);
    std::fs::write(&config, format!("{open_policy}\n")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while watched.ask("bash").status == ToolStatus::Error {
        assert!(Instant::now() < deadline, "the fixed config was never reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    watched.stop();
}
