//! A server without a guardrail never passes for ready: the real
//! `guardhost-server` binary answers `/readyz` with 503 `unguarded` while
//! its config installs no guardrail (unless started with
//! `--allow-unguarded`), refuses to start on a broken config, and with
//! `--require-guardrail` (or `GUARDHOST_REQUIRE_GUARDRAIL=1`) on one that
//! installs none. Every response is checked against the OpenAPI document.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{allowlist, config, Server, SERVER};
use serde_json::json;

/// Configs that install no guardrail on purpose.
const UNGUARDED: [&str; 3] = [
    "guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n",
    "guardrails:\n  enabled: true\n",
    "models: []\n",
];

fn write(dir: &Path, text: &str) -> String {
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs `program ARGS` (a server expected to refuse to start) and waits for
/// it to exit; one that is still running after the guard listens, which is
/// the failure, so it is killed and the test fails.
fn refused_start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    refused_start_as(program, &[], args, env)
}

/// [`refused_start`] with `before` ahead of the options (`serve`).
fn refused_start_as(program: &Path, before: &[&str], args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(program)
        .args(before)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove(guardhost::REQUIRE_GUARDRAIL_VAR)
        .envs(env.iter().copied())
        .env("GUARDHOST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!("{args:?} started: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn readyz_is_503_while_no_guardrail_is_installed_unless_the_operator_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    for yaml in UNGUARDED {
        let path = write(dir.path(), yaml);
        let server = Server::start(&["--config", &path]);
        let ready = server.call("GET", "/readyz", &[], b"");
        assert_eq!(ready.status, 503, "{yaml}: {}", ready.text());
        let body = ready.json();
        assert_eq!((body["status"].clone(), body["provider"].clone()), (json!("unguarded"), json!(null)));
        assert!(body["message"].as_str().unwrap().contains("--allow-unguarded"), "{body}");
        // It still answers calls as before, the way `run` does without a
        // guardrail: it is the rollout that must not pass.
        let decided = server.decide(&json!({"name": "bash", "args": {"command": "rm -rf /"}}));
        assert_eq!((decided.status, decided.json()["guardrail"].clone()), (200, json!(false)));
        assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200, "alive, only not ready");
        let logged = server.logged().join("\n");
        assert!(logged.contains("no guardrail is installed"), "{logged}");

        let allowed = Server::start(&["--config", &path, "--allow-unguarded"]);
        let ready = allowed.call("GET", "/readyz", &[], b"");
        assert_eq!(ready.status, 200, "{yaml}: {}", ready.text());
        assert_eq!(ready.json(), json!({"status": "ready", "provider": null}));
    }
    // With a guardrail it is ready, --allow-unguarded or not.
    let guarded = config(dir.path(), &allowlist());
    for extra in [&[][..], &["--allow-unguarded"][..]] {
        let server = Server::start(&[&["--config", guarded.to_str().unwrap()][..], extra].concat());
        let ready = server.call("GET", "/readyz", &[], b"");
        assert_eq!(ready.status, 200);
        let mut ready = ready.json();
        let entries = ready.as_object_mut().unwrap().remove("entries").unwrap();
        assert_eq!(ready, json!({"status": "ready", "provider": "allowlist"}));
        assert_eq!(entries[0]["at"], "guardrails.provider");
    }
}

#[test]
fn a_watched_config_that_gains_a_guardrail_makes_the_server_ready() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), UNGUARDED[0]);
    let server = Server::start(&["--config", &path, "--watch"]);
    assert_eq!(server.call("GET", "/readyz", &[], b"").status, 503);
    // A new inode, so the watcher sees the change whatever the clock.
    let fresh = dir.path().join("fresh.yaml");
    std::fs::write(&fresh, "guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider}\n")
        .unwrap();
    std::fs::rename(&fresh, &path).unwrap();
    server.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = server.call("GET", "/readyz", &[], b"");
        if ready.status == 200 {
            assert_eq!(ready.json()["provider"], "allowlist");
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {}", ready.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_broken_config_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    for (yaml, expected) in [
        ("guardrails:\n", "`guardrails` must be a mapping"),
        ("guardrails: []\n", "found a list"),
        ("", "the config is empty"),
        ("guardrails:\n  enabled: true\n  provider: null\n", "`provider` is empty (null)"),
        ("guardrail:\n  enabled: true\n", "did you mean `guardrails`?"),
        (
            "guardrails:\nenabled: true\nprovider: {use: builtin:AllowlistProvider}\n",
            "`enabled`, `provider` belong in the `guardrails:` section",
        ),
    ] {
        let path = write(dir.path(), yaml);
        for extra in [&[][..], &["--watch"][..], &["--allow-unguarded"][..]] {
            let args = [&["--config", path.as_str()][..], extra].concat();
            let output = refused_start(Path::new(SERVER), &args, &[]);
            let err = stderr(&output);
            assert!(
                err.starts_with("guardhost-server: error: ") && err.contains(expected),
                "{yaml:?}: {err}"
            );
        }
    }
}

#[test]
fn require_guardrail_refuses_to_start_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let var = guardhost::REQUIRE_GUARDRAIL_VAR;
    for yaml in UNGUARDED {
        let path = write(dir.path(), yaml);
        for (extra, env) in [
            (&["--require-guardrail"][..], &[][..]),
            (&["--require-guardrail", "--watch"][..], &[][..]),
            (&[][..], &[(var, "1")][..]),
            (&["--watch"][..], &[(var, "true")][..]),
            (&["--require-guardrail"][..], &[(var, "0")][..]),
        ] {
            let args = [&["--config", path.as_str()][..], extra].concat();
            let err = stderr(&refused_start(Path::new(SERVER), &args, env));
            assert!(
                err.contains("installs no guardrail") && err.contains("a guardrail is required"),
                "{err}"
            );
        }
    }
    let path = write(dir.path(), UNGUARDED[0]);
    let err = stderr(&refused_start(Path::new(SERVER), &["--config", &path], &[(var, "yes")]));
    assert!(err.contains("GUARDHOST_REQUIRE_GUARDRAIL must be 1 or true"), "{err}");
    let err = stderr(&refused_start(Path::new(SERVER), &["--require-guardrail", "--allow-unguarded"], &[]));
    assert!(err.contains("cannot be used with"), "{err}");
    let err = stderr(&refused_start(Path::new(SERVER), &["--allow-unguarded"], &[(var, "1")]));
    assert!(
        err.contains("--allow-unguarded serves without a guardrail, but GUARDHOST_REQUIRE_GUARDRAIL=1"),
        "{err}"
    );

    // A guarded config (and the embedded default) starts and is ready.
    let guarded = config(dir.path(), &allowlist());
    for args in
        [vec!["--config", guarded.to_str().unwrap(), "--require-guardrail"], vec!["--require-guardrail"]]
    {
        let server = Server::start_with_env(&args, &[(var, "1")]);
        assert_eq!(server.call("GET", "/readyz", &[], b"").status, 200);
    }

    // `guardhost serve` passes the option on.
    let guardhost = Path::new(SERVER).with_file_name("guardhost");
    if guardhost.is_file() {
        let path = write(dir.path(), UNGUARDED[0]);
        let output =
            refused_start_as(&guardhost, &["serve"], &["--config", &path, "--require-guardrail"], &[]);
        assert!(stderr(&output).contains("a guardrail is required"), "{}", stderr(&output));
        let output = refused_start_as(&guardhost, &["serve"], &["--config", &path], &[(var, "1")]);
        assert!(stderr(&output).contains("a guardrail is required"), "{}", stderr(&output));
    } else {
        eprintln!("skipped `guardhost serve --require-guardrail`: {} is not built", guardhost.display());
    }
}
