//! Approvals as a workflow, against the real server: held calls listed
//! (`GET /v1/pending`, with filters) and shown (`GET /v1/pending/{id}`,
//! with the answer once given); approvers authenticated by their own
//! bearer tokens or a trusted proxy's header; an answer that is refused
//! (unauthenticated, another approver, a body naming someone else) leaves
//! the call held for the right approver; of concurrent answers exactly one
//! is taken; the held calls' gauge and the answers' counters. Every
//! response is checked against the OpenAPI document.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{Response, Server};

const ADMIN: &str = "admin-token-7f3a";
const MALLORY: &str = "mallory-token-91c2";
const SERVICE: &str = "service-token-55d0";

fn config(dir: &std::path::Path) -> String {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        "guardrails:
  enabled: true
  providers:
    - use: builtin:ApprovalGuardrailProvider
      name: humans
      config: {ask: [bash], approvers: [admin]}
    - use: builtin:ApprovalGuardrailProvider
      name: anyone
      config: {ask: [write_file]}
",
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// A server whose approvers are admin and mallory (each with a token).
fn server(dir: &std::path::Path, more: &[&str]) -> Server {
    let config = config(dir);
    let mut args =
        vec!["--config", &config, "--approver", "admin=ADMIN_TOKEN", "--approver", "mallory=MALLORY_TOKEN"];
    args.extend_from_slice(more);
    Server::start_with_env(&args, &[("ADMIN_TOKEN", ADMIN), ("MALLORY_TOKEN", MALLORY)])
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn held(server: &Server, tool: &str, command: &str) -> String {
    let call = json!({"name": tool, "args": {"command": command}, "id": "c1",
                      "context": {"thread_id": "t-1", "user_id": "u-1"}});
    let decision = server.decide(&call).json();
    assert_eq!(decision["outcome"], "ask", "{decision}");
    // What the agent reads: it waits, it does not give up.
    let told = decision["message"]["content"].as_str().unwrap();
    let by = if tool == "bash" { " from admin" } else { "" };
    assert!(
        told.starts_with(&format!("Guardrail held: tool '{tool}' awaits a human's approval{by} (")),
        "{told}"
    );
    assert!(told.contains("the runtime resumes it") && !told.contains("alternative approach"), "{told}");
    decision["pending"]["id"].as_str().unwrap().to_owned()
}

fn answer(server: &Server, id: &str, token: Option<&str>, body: Value) -> Response {
    let authorization = token.map(bearer);
    let headers: Vec<(&str, &str)> = authorization.iter().map(|a| ("authorization", a.as_str())).collect();
    server.call("POST", &format!("/v1/pending/{id}"), &headers, body.to_string().as_bytes())
}

/// [`answer`] to the server at `address`, from any thread.
fn answer_at(address: &str, id: &str, token: &str, body: Value) -> u16 {
    let path = format!("/v1/pending/{id}");
    let authorization = bearer(token);
    let response = crate::support::request(
        address,
        "POST",
        &path,
        &[("authorization", &authorization)],
        body.to_string().as_bytes(),
    );
    crate::support::openapi::check("POST", &path, &response);
    response.status
}

fn get(server: &Server, path: &str, token: Option<&str>) -> Response {
    let authorization = token.map(bearer);
    let headers: Vec<(&str, &str)> = authorization.iter().map(|a| ("authorization", a.as_str())).collect();
    server.call("GET", path, &headers, b"")
}

fn metric(server: &Server, line: &str) -> bool {
    server.call("GET", "/metrics", &[], b"").text().lines().any(|l| l == line)
}

#[test]
fn held_calls_are_listed_and_shown_their_arguments_to_approvers_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), &[]);
    let bash = held(&server, "bash", "make deploy");
    let write = held(&server, "write_file", "x");

    let anonymous = get(&server, "/v1/pending", None);
    assert_eq!(anonymous.status, 200, "{}", anonymous.text());
    let listed = anonymous.json()["pending"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let first = &listed[0];
    assert_eq!(first["id"], bash.as_str());
    assert_eq!(first["tool"], "bash");
    assert_eq!(first["entry"], "humans");
    assert_eq!(first["approvers"], json!(["admin"]));
    assert_eq!((first["thread_id"].as_str(), first["user_id"].as_str()), (Some("t-1"), Some("u-1")));
    assert_eq!(first["status"], "pending");
    assert!(first["digest"].as_str().unwrap().starts_with("sha256:"));
    assert!(first.get("args").is_none(), "no arguments for a caller who is not an approver: {first}");

    // An approver sees the arguments of the calls they may answer.
    let admin = get(&server, "/v1/pending", Some(ADMIN)).json()["pending"].clone();
    assert_eq!(admin[0]["args"], json!({"command": "make deploy"}));
    assert_eq!(admin[1]["args"], json!({"command": "x"}), "a call naming no approver: any approver");
    let mallory = get(&server, "/v1/pending", Some(MALLORY)).json()["pending"].clone();
    assert!(mallory[0].get("args").is_none(), "not mallory's to answer");

    // Filters.
    let ids = |path: &str| -> Vec<String> {
        let listed = get(&server, path, None).json()["pending"].as_array().unwrap().clone();
        listed.iter().map(|item| item["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids("/v1/pending?tool=bash"), vec![bash.clone()]);
    assert_eq!(ids("/v1/pending?entry=anyone"), vec![write.clone()]);
    assert_eq!(ids("/v1/pending?approver=admin"), vec![bash.clone(), write.clone()]);
    assert_eq!(ids("/v1/pending?approver=mallory"), vec![write.clone()]);
    assert_eq!(ids("/v1/pending?tool=write%5Ffile&entry=anyone"), vec![write.clone()]);
    assert!(ids("/v1/pending?tool=ls").is_empty());
    let bad = get(&server, "/v1/pending?colour=red", None);
    assert_eq!((bad.status, bad.json()["error"]["kind"].as_str()), (400, Some("bad_query")));

    // One call.
    let shown = get(&server, &format!("/v1/pending/{bash}"), Some(ADMIN));
    assert_eq!(shown.status, 200);
    assert_eq!(shown.json()["args"], json!({"command": "make deploy"}));
    assert_eq!(shown.json()["resume"], format!("/v1/pending/{bash}"));
    let unknown = get(&server, "/v1/pending/p-00", None);
    assert_eq!((unknown.status, unknown.json()["error"]["kind"].as_str()), (404, Some("unknown_pending")));
    let wrong_method = crate::support::request(&server.address, "POST", "/v1/pending", &[], b"{}");
    assert_eq!(wrong_method.status, 405);
}

#[test]
fn a_refused_answer_leaves_the_call_held_for_the_right_approver() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), &[]);
    let id = held(&server, "bash", "make deploy");

    let anonymous = answer(&server, &id, None, json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    assert_eq!(anonymous.json()["error"]["kind"], "approver_unauthenticated");
    let unknown_token = answer(&server, &id, Some("guess"), json!({"approved": true}));
    assert_eq!(unknown_token.status, 401);
    let mallory = answer(&server, &id, Some(MALLORY), json!({"approved": true}));
    assert_eq!(mallory.status, 403, "{}", mallory.text());
    assert_eq!(mallory.json()["error"]["kind"], "approver_not_allowed");
    let posing = answer(&server, &id, Some(MALLORY), json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(posing.status, 403);
    assert_eq!(posing.json()["error"]["kind"], "approved_by_mismatch");
    for refusal in [&anonymous, &mallory, &posing] {
        let text = refusal.text();
        assert!(!text.contains(ADMIN) && !text.contains(MALLORY), "no token in an answer: {text}");
    }
    assert_eq!(get(&server, &format!("/v1/pending/{id}"), None).json()["status"], "pending", "still held");

    let approved = answer(&server, &id, Some(ADMIN), json!({"approved": true}));
    assert_eq!(approved.status, 200, "{}", approved.text());
    let decision = approved.json();
    assert_eq!(decision["outcome"], "allow", "{decision}");
    assert_eq!(decision["reasons"][0]["code"], "guardhost.approved");
    assert_eq!(decision["metadata"]["approved_by"], "admin", "the authenticated approver");

    // Answered once; the runtime learns the answer.
    let again = answer(&server, &id, Some(ADMIN), json!({"approved": false}));
    assert_eq!((again.status, again.json()["error"]["kind"].as_str()), (409, Some("already_answered")));
    let shown = get(&server, &format!("/v1/pending/{id}"), None).json();
    assert_eq!(shown["status"], "approved");
    assert_eq!(shown["answer"]["approved_by"], "admin");
    assert_eq!(shown["answer"]["decision"]["outcome"], "allow");
    assert!(get(&server, "/v1/pending", None).json()["pending"].as_array().unwrap().is_empty());

    // A refusal by an approver consumes the call too, and denies it.
    let id = held(&server, "bash", "make deploy");
    let refused = answer(&server, &id, Some(ADMIN), json!({"approved": false, "approved_by": "admin"}));
    assert_eq!(refused.json()["reasons"][0]["code"], "guardhost.approval_refused");
    assert_eq!(get(&server, &format!("/v1/pending/{id}"), None).json()["status"], "refused");

    assert!(metric(&server, "guardhost_pending_answers_total{result=\"unauthenticated\"} 2"));
    assert!(metric(&server, "guardhost_pending_answers_total{result=\"forbidden\"} 2"));
    assert!(metric(&server, "guardhost_pending_answers_total{result=\"approved\"} 1"));
    assert!(metric(&server, "guardhost_pending_answers_total{result=\"refused\"} 1"));
    assert!(metric(&server, "guardhost_pending_answers_total{result=\"conflict\"} 1"));
    let logged = server.logged().join("\n");
    assert!(!logged.contains(ADMIN) && !logged.contains(MALLORY), "no token logged: {logged}");
}

#[test]
fn of_concurrent_answers_exactly_one_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), &[]);
    for _ in 0..3 {
        let id = held(&server, "bash", "make deploy");
        let statuses: Vec<u16> = std::thread::scope(|scope| {
            let answers: Vec<_> = (0..8)
                .map(|i| {
                    let (address, id) = (&server.address, &id);
                    scope.spawn(move || answer_at(address, id, ADMIN, json!({"approved": i % 2 == 0})))
                })
                .collect();
            answers.into_iter().map(|a| a.join().unwrap()).collect()
        });
        assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 1, "{statuses:?}");
        assert!(statuses.iter().all(|&s| s == 200 || s == 409), "{statuses:?}");
    }
}

#[test]
fn the_gauge_counts_the_calls_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), &[]);
    assert!(metric(&server, "guardhost_pending_calls 0"));
    let ids: Vec<String> = (0..3).map(|i| held(&server, "bash", &format!("make {i}"))).collect();
    assert!(metric(&server, "guardhost_pending_calls 3"));
    assert_eq!(answer(&server, &ids[1], Some(ADMIN), json!({"approved": true})).status, 200);
    assert!(metric(&server, "guardhost_pending_calls 2"));
}

#[test]
fn a_trusted_proxy_names_the_approver_behind_the_service_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let server = Server::start_with_env(
        &[
            "--config",
            &config,
            "--token-env",
            "SERVICE_TOKEN",
            "--approver-header",
            "X-Forwarded-User",
            "--trust-approver-header",
        ],
        &[("SERVICE_TOKEN", SERVICE)],
    );
    let service = bearer(SERVICE);
    let call = json!({"name": "bash", "args": {"command": "ls"}, "id": "c9"});
    let decided =
        server.call("POST", "/v1/decide", &[("authorization", &service)], call.to_string().as_bytes());
    let id = decided.json()["pending"]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/pending/{id}");
    let body = json!({"approved": true}).to_string();
    // The header without the service token: refused before anything.
    let without = server.call("POST", &path, &[("x-forwarded-user", "admin")], body.as_bytes());
    assert_eq!(without.status, 401);
    let nobody = server.call("POST", &path, &[("authorization", &service)], body.as_bytes());
    assert_eq!(
        (nobody.status, nobody.json()["error"]["kind"].as_str()),
        (401, Some("approver_unauthenticated"))
    );
    let other = server.call(
        "POST",
        &path,
        &[("authorization", &service), ("x-forwarded-user", "eve")],
        body.as_bytes(),
    );
    assert_eq!(other.status, 403);
    let admin = server.call(
        "POST",
        &path,
        &[("authorization", &service), ("x-forwarded-user", "admin")],
        body.as_bytes(),
    );
    assert_eq!(admin.status, 200, "{}", admin.text());
    assert_eq!(admin.json()["metadata"]["approved_by"], "admin");

    // Not trusted unless the operator says so.
    let refused = std::process::Command::new(crate::support::SERVER)
        .args(["--config", &config, "--approver-header", "X-Forwarded-User"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--trust-approver-header"));
}

#[test]
fn unauthenticated_answers_only_when_the_operator_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let server = Server::start(&["--config", &config, "--approvals-unauthenticated"]);
    std::thread::sleep(Duration::from_millis(200));
    let logged = server.logged().join("\n");
    assert!(logged.contains("WARN") && logged.contains("--approvals-unauthenticated"), "{logged}");
    let id = held(&server, "bash", "ls");
    let wrong = answer(&server, &id, None, json!({"approved": true, "approved_by": "mallory"}));
    assert_eq!(wrong.status, 403, "named, but not an approver: still refused, and still held");
    let approved = answer(&server, &id, None, json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(approved.json()["outcome"], "allow");

    // Without the option, and without approvers, nobody can answer.
    let closed = Server::start(&["--config", &config]);
    let id = held(&closed, "bash", "ls");
    let refused = answer(&closed, &id, None, json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(refused.status, 401);
    assert!(refused.json()["error"]["message"].as_str().unwrap().contains("--approver"));
}

#[test]
fn an_ask_held_on_one_replica_is_answered_on_another_through_redis() {
    let Some(redis) = crate::replicas::redis() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redis://127.0.0.1:{}/3", redis.1);
    let a = server(dir.path(), &["--pending-store", &store]);
    let b = server(dir.path(), &["--pending-store", &store]);
    let id = held(&a, "bash", "make deploy");
    let listed = get(&b, "/v1/pending?tool=bash", Some(ADMIN)).json()["pending"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["args"], json!({"command": "make deploy"}));
    assert!(metric(&b, "guardhost_pending_calls 1"), "the gauge counts the shared store");

    // Refused on B: still held on A.
    assert_eq!(answer(&b, &id, Some(MALLORY), json!({"approved": true})).status, 403);
    assert_eq!(get(&a, &format!("/v1/pending/{id}"), None).json()["status"], "pending");
    let approved = answer(&b, &id, Some(ADMIN), json!({"approved": true}));
    assert_eq!(approved.status, 200, "{}", approved.text());
    assert_eq!(approved.json()["outcome"], "allow");
    // The replica that held it learns the answer; neither takes another.
    let shown = get(&a, &format!("/v1/pending/{id}"), None).json();
    assert_eq!(
        (shown["status"].as_str(), shown["answer"]["decision"]["outcome"].as_str()),
        (Some("approved"), Some("allow"))
    );
    assert_eq!(answer(&a, &id, Some(ADMIN), json!({"approved": true})).status, 409);
    assert!(metric(&a, "guardhost_pending_calls 0"));

    // Concurrent answers on both replicas: one is taken.
    for _ in 0..3 {
        let id = held(&b, "bash", "make deploy");
        let statuses: Vec<u16> = std::thread::scope(|scope| {
            let answers: Vec<_> = (0..6)
                .map(|i| {
                    let (address, id) = (if i % 2 == 0 { &a.address } else { &b.address }, &id);
                    scope.spawn(move || answer_at(address, id, ADMIN, json!({"approved": true})))
                })
                .collect();
            answers.into_iter().map(|a| a.join().unwrap()).collect()
        });
        assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 1, "{statuses:?}");
    }

    // A store that cannot be reached: the call is still answered ask, and
    // the held calls' routes say why, never the password.
    let down = server(dir.path(), &["--pending-store", "redis://:hunter2@127.0.0.1:1"]);
    let call = json!({"name": "bash", "args": {"command": "ls"}});
    let decision = down.decide(&call).json();
    assert_eq!(decision["outcome"], "ask");
    assert!(decision.get("pending").is_none());
    let listed = get(&down, "/v1/pending", None);
    assert_eq!(listed.status, 503);
    assert!(
        !listed.text().contains("hunter2") && listed.text().contains("redis://127.0.0.1:1/0"),
        "{}",
        listed.text()
    );
}

#[test]
fn a_policy_test_case_answers_the_ask_and_expects_the_approved_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(config(dir.path())).unwrap()
        + "    - use: builtin:AllowlistProvider
      config: {denied_tools: [write_file]}
";
    let config = guardhost::LoadedConfig::from_yaml(
        &config,
        dir.path().into(),
        guardhost::ConfigOrigin::Embedded,
        |_| None,
    )
    .unwrap();
    guardhost_builtins::register();
    let guardrail = guardhost::install(&config).unwrap().unwrap();
    let suite = guardhost_policytest::Suite::parse(
        &dir.path().join("tests.yaml"),
        "tests:
  - {name: held without an answer, tool: bash, args: {command: make}, expect: ask, decided_by: humans}
  - {name: approved by admin, tool: bash, args: {command: make}, approve: {by: admin}, expect: allow, code: guardhost.approved}
  - {name: not mallory's to approve, tool: bash, args: {command: make}, approve: {by: mallory}, expect: deny, code: guardhost.approver_not_allowed}
  - {name: refused, tool: bash, args: {command: make}, approve: {by: admin, approved: false}, expect: deny, code: guardhost.approval_refused}
  - {name: approved then denied by a later entry, tool: write_file, approve: {by: ada}, expect: deny, code: oap.tool_not_allowed, decided_by: allowlist}
  - {name: nothing to approve, tool: read_file, approve: {by: admin}, expect: allow}
",
    )
    .unwrap();
    let results = guardhost_policytest::run_suite(&suite, &guardrail.middleware);
    let failed: Vec<_> = results.iter().filter(|r| !r.passed()).map(|r| (&r.name, &r.problems)).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "nothing to approve");
    assert_eq!(results[5].got.outcome, "error");
    assert!(
        results[5].got.message.as_deref().unwrap().contains("was not held for approval"),
        "{:?}",
        results[5]
    );
}

#[test]
fn approvers_can_be_named_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let file = dir.path().join("approvers");
    std::fs::write(&file, "# name=environment variable\nadmin = ADMIN_TOKEN\n\nmallory=MALLORY_TOKEN\n")
        .unwrap();
    let file = file.to_str().unwrap();
    let env = [("ADMIN_TOKEN", ADMIN), ("MALLORY_TOKEN", MALLORY)];
    let server = Server::start_with_env(&["--config", &config, "--approvers-file", file], &env);
    let id = held(&server, "bash", "ls");
    assert_eq!(answer(&server, &id, Some(MALLORY), json!({"approved": true})).status, 403);
    assert_eq!(answer(&server, &id, Some(ADMIN), json!({"approved": true})).status, 200);

    // A variable that is not set: the start fails, naming the line and the
    // variable.
    let refused = std::process::Command::new(crate::support::SERVER)
        .args(["--config", &config, "--approvers-file", file])
        .env("ADMIN_TOKEN", ADMIN)
        .env_remove("MALLORY_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("line 4") && stderr.contains("MALLORY_TOKEN"), "{stderr}");
    assert!(!stderr.contains(ADMIN), "{stderr}");
}
