//! `guardhost-server` on Windows (run under wine by `scripts/test-windows`):
//! it serves decisions from a `.dll` provider over loopback TCP, each
//! response checked against the OpenAPI document, and refuses a Unix
//! socket, which Windows does not have, saying what to use instead. On
//! other systems this file is empty.
#![cfg(windows)]

use crate::support::{allowlist, config, Server, SERVER};
use serde_json::json;

#[test]
fn decisions_come_from_a_dll_over_loopback_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    assert!(allowlist().contains(".dll"), "{}", allowlist());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let denied = server.decide(&json!({"name": "bash", "args": {"command": "ls"}, "id": "c1"}));
    assert_eq!(denied.status, 200, "{}", denied.text());
    assert_eq!(denied.json()["outcome"], "deny", "{}", denied.text());
    let allowed = server.decide(&json!({"name": "read_file", "args": {"path": "a.txt"}}));
    assert_eq!(allowed.json()["outcome"], "allow", "{}", allowed.text());
    let batch = server.call(
        "POST",
        "/v1/decide/batch",
        &[],
        json!({"calls": [{"name": "bash"}, {"name": "ls"}]}).to_string().as_bytes(),
    );
    assert_eq!(batch.status, 200, "{}", batch.text());
    assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200);
}

#[test]
fn a_unix_socket_is_refused_saying_to_listen_on_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    let socket = dir.path().join("guardhost.sock");
    let output = std::process::Command::new(SERVER)
        .args(["--config", path.to_str().unwrap(), "--unix", socket.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("this system has no Unix sockets; listen on TCP instead (--listen 127.0.0.1:PORT)"),
        "{stderr}"
    );
    assert!(!socket.exists());
}
