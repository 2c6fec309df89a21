//! `guardhost-server` is never held by a slow decision or by clients that
//! do not authenticate: the real binary, real provider libraries, plain
//! HTTP over loopback. Calls of a provider that blocks are decided off the
//! I/O threads (64 in flight at once on a server with one I/O thread, and
//! `/healthz` answers meanwhile); a call not decided within
//! `--decision-timeout-ms` is answered as a provider error, which
//! `fail_closed` decides, and counted; a body with a key twice is refused
//! naming it.

use crate::support;

use std::time::{Duration, Instant};

use crate::support::{config, request, Server};
use serde_json::{json, Value};

fn faulty(extra: &str) -> String {
    format!("    use: {}\n{extra}", support::use_of("guardhost_test_providers", "FaultyProvider"))
}

fn metric(server: &Server, line_start: &str) -> Option<String> {
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    metrics.lines().find(|l| l.starts_with(line_start)).map(str::to_owned)
}

#[test]
fn sixty_four_slow_decisions_in_flight_and_health_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &faulty(""));
    // One I/O thread: a decision on it would hold every other request.
    let server = Server::start(&["--config", path.to_str().unwrap(), "--threads", "1"]);
    // `meet` returns only once 64 calls are inside the provider at the
    // same time (it gives up after 10 s alone).
    let meet = json!({"name": "meet", "args": {"parties": 64}}).to_string();
    let callers: Vec<_> = (0..63)
        .map(|_| {
            let (address, meet) = (server.address.clone(), meet.clone());
            std::thread::spawn(move || request(&address, "POST", "/v1/decide", &[], meet.as_bytes()))
        })
        .collect();
    // While 63 wait inside the provider, the server answers.
    std::thread::sleep(Duration::from_millis(300));
    let mut probe = std::net::TcpStream::connect(&server.address).unwrap();
    probe.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::io::Write::write_all(&mut probe, &support::request_bytes("GET", "/healthz", &[], b"")).unwrap();
    let health = support::read_response(&mut probe);
    assert_eq!(health.status, 200, "{}", health.text());
    let met_before = callers.iter().filter(|c| c.is_finished()).count();
    assert_eq!(met_before, 0, "no call met before the 64th came");
    // The 64th: all 64 meet.
    let last = server.decide(&serde_json::from_str(&meet).unwrap());
    let mut decisions = vec![last.json()];
    for caller in callers {
        let response = caller.join().unwrap();
        support::openapi::check("POST", "/v1/decide", &response);
        decisions.push(response.json());
    }
    for decision in &decisions {
        assert_eq!(decision["reasons"][0]["code"], "test.met", "{decision}");
    }
    assert_eq!(
        metric(&server, "guardhost_decisions_total{entry=\"faulty\",provider=\"faulty\",outcome=\"allow\",code=\"test.met\"}"),
        Some("guardhost_decisions_total{entry=\"faulty\",provider=\"faulty\",outcome=\"allow\",code=\"test.met\"} 64".into())
    );
}

#[test]
fn a_hung_decision_is_answered_at_the_deadline_as_fail_closed_decides_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    // In process (a decision thread), and in a provider process whose own
    // limit is longer (the I/O thread awaits it): the server's deadline
    // comes first.
    for (provider, fail_closed) in [
        (faulty(""), true),
        (faulty("    isolation: process\n    timeout_ms: 60000\n"), true),
        (faulty(""), false),
    ] {
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            format!("guardrails:\n  enabled: true\n  fail_closed: {fail_closed}\n  provider:\n{provider}"),
        )
        .unwrap();
        let server = Server::start(&[
            "--config",
            path.to_str().unwrap(),
            "--threads",
            "1",
            "--decision-timeout-ms",
            "400",
        ]);
        let started = Instant::now();
        let response = server.decide(&json!({"name": "hang", "id": "h1"}));
        let took = started.elapsed();
        assert_eq!(response.status, 200, "{}", response.text());
        let decision = response.json();
        let expected = if fail_closed { "deny" } else { "allow" };
        assert_eq!(decision["outcome"], expected, "{provider}: {decision}");
        assert_eq!(decision["provider_error"], true, "{decision}");
        assert_eq!(decision["reasons"][0]["code"], "oap.evaluator_error", "{decision}");
        assert_eq!(decision["tool_call_id"], "h1");
        assert!(took >= Duration::from_millis(400), "answered before the deadline: {took:?}");
        // A batch of hung calls: each answered at its deadline, in order,
        // and the server answers others meanwhile.
        let address = server.address.clone();
        let batch = std::thread::spawn(move || {
            let calls = json!({"calls": [{"name": "hang"}, {"name": "ls"}, {"name": "hang"}]});
            request(&address, "POST", "/v1/decide/batch", &[], calls.to_string().as_bytes())
        });
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200);
        let batch = batch.join().unwrap();
        support::openapi::check("POST", "/v1/decide/batch", &batch);
        let outcomes: Vec<Value> =
            batch.json()["decisions"].as_array().unwrap().iter().map(|d| d["outcome"].clone()).collect();
        assert_eq!(outcomes, [json!(expected), json!("allow"), json!(expected)]);
        let logged = server.logged();
        assert!(
            logged.iter().any(|l| l.contains("did not decide within 400 ms (--decision-timeout-ms)")),
            "{logged:?}"
        );
        for (name, n) in [("guardhost_decision_timeouts_total", 3), ("guardhost_provider_errors_total", 3)] {
            let line = format!("{name}{{entry=\"faulty\",provider=\"faulty\"}} {n}");
            assert_eq!(metric(&server, name).as_deref(), Some(line.as_str()), "{provider}");
        }
    }
    // The option is checked.
    let output =
        std::process::Command::new(support::SERVER).args(["--decision-timeout-ms", "0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--decision-timeout-ms"));
}

#[test]
fn connections_without_the_token_cannot_take_the_last_places() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &support::allowlist());
    let server = Server::start_with_env(
        &[
            "--config",
            path.to_str().unwrap(),
            "--token-env",
            "GH_TOKEN",
            "--max-connections",
            "16",
            "--approver",
            "ada=ADA_TOKEN",
        ],
        &[("GH_TOKEN", "t0ken"), ("ADA_TOKEN", "ada-t0ken")],
    );
    let bearer = [("authorization", "Bearer t0ken")];
    // 80 connections that send nothing (more than the 64 that may wait for
    // their first request), and 24 that send a request without the token
    // and keep their connection: all open at once (bounded, loopback, for
    // the request timeout at most).
    let silent: Vec<std::net::TcpStream> =
        (0..80).map(|_| std::net::TcpStream::connect(&server.address).unwrap()).collect();
    let mut refused = 0;
    let mut kept = Vec::new();
    for _ in 0..24 {
        let mut stream = std::net::TcpStream::connect(&server.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::Write::write_all(&mut stream, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut answer = [0u8; 12];
        std::io::Read::read_exact(&mut stream, &mut answer).unwrap();
        match &answer {
            b"HTTP/1.1 401" => kept.push(stream),
            b"HTTP/1.1 503" => refused += 1,
            other => panic!("{}", String::from_utf8_lossy(other)),
        }
    }
    // They took the 14 open places and no more.
    assert_eq!((kept.len(), refused), (14, 10));
    // A client with the token, and the probes, are still served.
    for _ in 0..3 {
        let response = server.call("POST", "/v1/decide", &bearer, br#"{"name":"ls"}"#);
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200);
        assert_eq!(server.call("GET", "/readyz", &[], b"").status, 200);
        // An approver's token, on the held calls' routes, is one too.
        let ada = [("authorization", "Bearer ada-t0ken")];
        assert_eq!(server.call("GET", "/v1/pending", &ada, b"").status, 200);
    }
    // The oldest silent ones were closed to make room for newer
    // connections; the others wait, holding no place.
    let closed = silent
        .into_iter()
        .map(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            matches!(std::io::Read::read(&mut stream, &mut [0u8; 1]), Ok(0))
        })
        .collect::<Vec<bool>>();
    let first_open = closed.iter().position(|c| !c).unwrap();
    assert!(first_open >= 16 && closed[first_open..].iter().all(|c| !c), "{closed:?}");
    drop(kept);
}

#[test]
fn a_body_with_a_key_twice_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--config", config(dir.path(), &support::allowlist()).to_str().unwrap()]);
    for (body, path) in [
        (r#"{"name":"read_file","name":"bash"}"#, "name"),
        (r#"{"name":"bash","args":{"command":"sudo rm -rf /","command":"ls"}}"#, "args.command"),
        (r#"{"name":"ls","args":{"a":[{"b":{"c":1,"c":2}}]}}"#, "args.a[0].b.c"),
    ] {
        let response = server.call("POST", "/v1/decide", &[], body.as_bytes());
        assert_eq!(response.status, 400, "{}", response.text());
        let decision = response.json();
        assert_eq!(decision["outcome"], "error");
        let message = decision["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("duplicate key `{path}`")), "{message}");
    }
    // In a batch, the call with a key twice is answered in its place.
    let batch = r#"{"calls":[{"name":"ls"},{"name":"read_file","args":{"path":"a","path":"/etc/shadow"}},{"name":"bash"}]}"#;
    let response = server.call("POST", "/v1/decide/batch", &[], batch.as_bytes());
    let decisions = response.json()["decisions"].as_array().unwrap().clone();
    let outcomes: Vec<&str> = decisions.iter().map(|d| d["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["allow", "error", "deny"]);
    assert!(decisions[1]["error"]["message"].as_str().unwrap().starts_with("duplicate key `args.path`"));
    // And the batch's own key twice.
    let response = server.call(
        "POST",
        "/v1/decide/batch",
        &[],
        br#"{"calls":[{"name":"ls"}],"calls":[{"name":"bash"}]}"#,
    );
    assert_eq!(response.status, 400);
    let message = response.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("duplicate key `calls`"), "{message}");
}

#[test]
fn a_shutdown_does_not_wait_for_connections_that_never_sent_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &support::allowlist());
    let mut server = Server::start(&["--config", path.to_str().unwrap(), "--request-timeout-ms", "60000"]);
    let silent: Vec<std::net::TcpStream> =
        (0..5).map(|_| std::net::TcpStream::connect(&server.address).unwrap()).collect();
    assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200);
    server.signal("TERM");
    // Not the 60 s they could wait for their first request.
    assert_eq!(server.wait(Duration::from_secs(10)), Some(0));
    drop(silent);
}
