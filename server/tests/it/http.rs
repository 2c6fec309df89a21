//! `guardhost-server` end to end: the real binary on a loopback port (or a
//! Unix socket), real provider libraries, a plain HTTP client; every
//! response checked against the OpenAPI document. Decisions are the ones
//! `guardhost run --output decisions` prints for the same calls; a token
//! guards every route but health and readiness; bad, large and slow
//! requests are refused saying why, and cannot hold the server; a shutdown
//! drains the calls in flight; a reload swaps the guardrail; `/metrics`
//! counts what happened; a provider process that crashes under load costs
//! no request its answer.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{allowlist, config, request, Server};
use serde_json::{json, Value};

fn examples() -> Vec<Value> {
    let text = include_str!("../../../examples/calls.jsonl");
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn a_call_gets_the_decision_run_prints_and_a_batch_gets_them_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let calls = examples();
    let mut singles = Vec::new();
    for call in &calls {
        let response = server.decide(call);
        assert_eq!(response.status, 200, "{}", response.text());
        singles.push(response.json());
    }
    assert!(
        singles.iter().any(|d| d["outcome"] == "deny") && singles.iter().any(|d| d["outcome"] == "allow")
    );

    // What `guardhost run --output decisions` prints for the same lines,
    // line numbers aside (a single call is line 1).
    let guardhost = std::path::Path::new(support::SERVER).with_file_name("guardhost");
    if guardhost.is_file() {
        let output = std::process::Command::new(&guardhost)
            .args(["run", "--output", "decisions", "--config", path.to_str().unwrap()])
            .arg("--input")
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/calls.jsonl"))
            .env("GUARDHOST_LOG", "error")
            .output()
            .unwrap();
        let printed: Vec<Value> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(printed.len(), singles.len());
        for (mut printed, single) in printed.into_iter().zip(&singles) {
            printed["line"] = json!(1);
            assert_eq!(&printed, single);
        }
    } else {
        eprintln!("skipped the comparison with `guardhost run`: {} is not built", guardhost.display());
    }

    let batch = server.call("POST", "/v1/decide/batch", &[], json!({"calls": calls}).to_string().as_bytes());
    assert_eq!(batch.status, 200);
    let decisions = batch.json()["decisions"].as_array().unwrap().clone();
    assert_eq!(decisions.len(), singles.len());
    for (i, (decision, single)) in decisions.into_iter().zip(&singles).enumerate() {
        let mut expected = single.clone();
        expected["line"] = json!(i + 1);
        assert_eq!(decision, expected);
    }
}

#[test]
fn a_call_that_is_not_one_is_answered_400_saying_why_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--config", config(dir.path(), &allowlist()).to_str().unwrap()]);
    for (body, why) in [
        (&b"not json"[..], "invalid JSON"),
        (b"[1, 2]", "expected one JSON object"),
        (br#"{"name": ["bash"]}"#, "name"),
        (br#"{"name": "ls", "context": {"authz_attributes": 5}}"#, "authz_attributes must be a Mapping"),
    ] {
        let response = server.call("POST", "/v1/decide", &[], body);
        assert_eq!(response.status, 400, "{}", response.text());
        let decision = response.json();
        assert_eq!(decision["outcome"], "error");
        assert!(decision["error"]["message"].as_str().unwrap().contains(why), "{decision}");
    }
    for (body, why) in [
        (json!([{"name": "ls"}]), "a batch is {\"calls\": [call, ...]}"),
        (json!({"calls": {"name": "ls"}}), "a batch is"),
        (json!({"calls": [], "more": 1}), "a batch is"),
    ] {
        let response = server.call("POST", "/v1/decide/batch", &[], body.to_string().as_bytes());
        assert_eq!(response.status, 400);
        assert!(response.json()["error"]["message"].as_str().unwrap().contains(why), "{}", response.text());
    }
    // A batch's bad call is answered in its place; the others are decided.
    let mixed = json!({"calls": [{"name": "bash"}, 7, {"name": "ls"}]});
    let response = server.call("POST", "/v1/decide/batch", &[], mixed.to_string().as_bytes());
    let outcomes: Vec<Value> =
        response.json()["decisions"].as_array().unwrap().iter().map(|d| d["outcome"].clone()).collect();
    assert_eq!(outcomes, [json!("deny"), json!("error"), json!("allow")]);
    // Not in the document, so not checked against it: the `Error` shape.
    let wrong_method = request(&server.address, "GET", "/v1/decide", &[], b"");
    assert_eq!(
        (wrong_method.status, wrong_method.json()["error"]["kind"].clone()),
        (405, json!("method_not_allowed"))
    );
    let nowhere = request(&server.address, "GET", "/nowhere", &[], b"");
    assert_eq!((nowhere.status, nowhere.json()["error"]["kind"].clone()), (404, json!("not_found")));
    assert_eq!(server.decide(&json!({"name": "ls"})).status, 200);
}

#[test]
fn a_token_guards_every_route_but_health_and_readiness_and_is_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "GH_SENTINEL_t0ken";
    let path = config(dir.path(), &allowlist());
    let server = Server::start_with_env(
        &["--config", path.to_str().unwrap(), "--token-env", "GH_TOKEN"],
        &[("GH_TOKEN", secret)],
    );
    let call = json!({"name": "ls"}).to_string();
    for (headers, status) in [
        (vec![], 401),
        (vec![("authorization", "Bearer wrong")], 401),
        (vec![("authorization", "Bearer GH_SENTINEL_t0keN")], 401),
        (vec![("authorization", "GH_SENTINEL_t0ken")], 401),
        (vec![("authorization", "Bearer GH_SENTINEL_t0ken")], 200),
    ] {
        let response = server.call("POST", "/v1/decide", &headers, call.as_bytes());
        assert_eq!(response.status, status, "{headers:?}");
        if status == 401 {
            assert_eq!(response.header("www-authenticate"), Some("Bearer"));
            assert!(!response.text().contains(secret));
        }
    }
    assert_eq!(server.call("GET", "/metrics", &[], b"").status, 401);
    assert_eq!(server.call("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(server.call("GET", "/readyz", &[], b"").json()["provider"], "allowlist");
    let bearer = [("authorization", "Bearer GH_SENTINEL_t0ken")];
    assert_eq!(server.call("GET", "/openapi.json", &bearer, b"").json()["openapi"], "3.0.3");
    assert!(server.logged().iter().all(|line| !line.contains(secret)));

    // A missing variable is named, never guessed.
    let output =
        std::process::Command::new(support::SERVER).args(["--token-env", "GH_NO_SUCH_VAR"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("GH_NO_SUCH_VAR is not set or empty"));
}

#[test]
fn large_slow_and_too_many_requests_are_refused_and_cannot_hold_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    let server = Server::start(&[
        "--config",
        path.to_str().unwrap(),
        "--max-body",
        "4096",
        "--max-batch",
        "3",
        "--max-connections",
        "8",
        "--request-timeout-ms",
        "300",
    ]);
    let big = json!({"name": "ls", "args": {"x": "y".repeat(5000)}}).to_string();
    let response = server.call("POST", "/v1/decide", &[], big.as_bytes());
    assert_eq!((response.status, response.json()["error"]["kind"].clone()), (413, json!("body_too_large")));
    let four = json!({"calls": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]}).to_string();
    let response = server.call("POST", "/v1/decide/batch", &[], four.as_bytes());
    assert!(
        response.json()["error"]["message"].as_str().unwrap().contains("more than the 3"),
        "{}",
        response.text()
    );

    // A client that sends half its headers and stops is dropped.
    let started = Instant::now();
    let mut stalled = TcpStream::connect(&server.address).unwrap();
    stalled.write_all(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\n").unwrap();
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(5), "held for {:?}", started.elapsed());

    // One that sends its headers, then its body too slowly, gets 408.
    let mut slow = TcpStream::connect(&server.address).unwrap();
    slow.write_all(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"name\"").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let response = support::read_response(&mut slow);
    support::openapi::check("POST", "/v1/decide", &response);
    assert_eq!((response.status, response.json()["error"]["kind"].clone()), (408, json!("slow_body")));

    // Connections beyond the limit are answered 503 at once; the ones
    // within are served as usual once the busy ones are dropped (by the
    // client here; after the request timeout, the server drops them too).
    // (A connection holds a place once its request has begun.)
    let busy = Server::start(&["--config", path.to_str().unwrap(), "--max-connections", "8"]);
    // A probe that comes before the server has placed all 8 takes a place
    // itself, and the last of the 8 is refused: so the 8 are given time to
    // be placed before one probe, and on a busy machine the whole is tried
    // again with more time.
    let begin = || -> Vec<TcpStream> {
        (0..8)
            .map(|_| {
                let mut begun = TcpStream::connect(&busy.address).unwrap();
                begun
                    .write_all(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
                    .unwrap();
                begun
            })
            .collect()
    };
    let mut idle = Vec::new();
    let mut response = None;
    for attempt in 1..=5u64 {
        idle = begin();
        std::thread::sleep(Duration::from_millis(200 * attempt));
        let probed = request(&busy.address, "GET", "/healthz", &[], b"");
        let refused = probed.status == 503;
        response = Some(probed);
        if refused {
            break;
        }
        drop(std::mem::take(&mut idle));
        // Their places are freed once the server sees them closed.
        std::thread::sleep(Duration::from_millis(200));
    }
    let response = response.unwrap();
    assert_eq!(response.status, 503, "{}", response.text());
    assert_eq!(response.json()["error"]["kind"], "busy");
    drop(idle);
    let server = busy;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = request(&server.address, "POST", "/v1/decide", &[], br#"{"name":"ls"}"#);
        if response.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {}", response.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_shutdown_stops_taking_calls_and_finishes_the_ones_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = format!(
        "    use: {}\n    timeout_ms: 1500\n",
        support::use_of("guardhost_test_providers", "FaultyProvider")
    );
    let path = config(dir.path(), &faulty);
    let mut server = Server::start(&["--config", path.to_str().unwrap()]);
    let address = server.address.clone();
    // A call that takes the whole 1.5 s limit (the provider never answers).
    let in_flight = std::thread::spawn(move || {
        let started = Instant::now();
        let response = request(&address, "POST", "/v1/decide", &[], br#"{"name":"hang","id":"h"}"#);
        (started.elapsed(), response)
    });
    std::thread::sleep(Duration::from_millis(300));
    server.signal("TERM");
    std::thread::sleep(Duration::from_millis(200));
    // No new connection is taken.
    assert!(
        TcpStream::connect(&server.address).is_err() || {
            let response = std::panic::catch_unwind(|| request(&server.address, "GET", "/readyz", &[], b""));
            response.map_or(true, |r| r.status == 503)
        }
    );
    let (took, response) = in_flight.join().unwrap();
    support::openapi::check("POST", "/v1/decide", &response);
    let decision = response.json();
    assert_eq!(
        (decision["outcome"].clone(), decision["provider_error"].clone()),
        (json!("deny"), json!(true))
    );
    assert!(took >= Duration::from_millis(1400), "{took:?}");
    assert_eq!(server.wait(Duration::from_secs(10)), Some(0));
    assert!(server.logged().iter().any(|line| line.contains("draining")), "{:?}", server.logged());
}

#[test]
fn sighup_and_watch_reload_the_guardrail_and_a_broken_config_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    let server = Server::start(&["--config", path.to_str().unwrap(), "--watch"]);
    assert_eq!(server.decide(&json!({"name": "bash"})).json()["outcome"], "deny");
    let allow_all = format!("    use: {}\n", support::use_of("guardhost_test_providers", "AllowAllProvider"));
    config(dir.path(), &allow_all);
    server.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.decide(&json!({"name": "bash"})).json()["outcome"] != "allow" {
        assert!(Instant::now() < deadline, "not reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.call("GET", "/readyz", &[], b"").json()["provider"], "allow-all");
    std::fs::write(&path, "guardrails:\n  enabled: true\n  provider:\n    use: /nonexistent/lib.so:X\n")
        .unwrap();
    server.signal("HUP");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        server.decide(&json!({"name": "bash"})).json()["outcome"],
        "allow",
        "the old guardrail serves"
    );
}

#[test]
fn watch_follows_the_built_in_cedar_providers_policy_files() {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("all.cedar"), "permit(principal, action, resource);\n").unwrap();
    let path =
        config(dir.path(), "    use: builtin:CedarGuardrailProvider\n    config: {policies: policies/}\n");
    let server = Server::start(&["--config", path.to_str().unwrap(), "--watch"]);
    assert_eq!(server.decide(&json!({"name": "bash"})).json()["outcome"], "allow");
    std::fs::write(policies.join("bash.cedar"), "forbid(principal, action, resource == Tool::\"bash\");\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.decide(&json!({"name": "bash"})).json()["outcome"] != "deny" {
        assert!(Instant::now() < deadline, "the new policy was never picked up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A policy that does not parse: the old policies keep serving.
    std::fs::write(policies.join("ls.cedar"), "forbid(principal, action resource);\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut logged = Vec::new();
    while !logged.iter().any(|line: &String| line.contains("ls.cedar:1:")) {
        assert!(Instant::now() < deadline, "the failed reload was never logged: {logged:?}");
        std::thread::sleep(Duration::from_millis(50));
        logged.extend(server.logged());
    }
    assert_eq!(server.decide(&json!({"name": "bash"})).json()["outcome"], "deny");
    assert_eq!(server.decide(&json!({"name": "ls"})).json()["outcome"], "allow");
}

#[test]
fn a_unix_socket_serves_the_same_routes() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("guardhost.sock");
    let path = config(dir.path(), &allowlist());
    let server = Server::start(&["--config", path.to_str().unwrap(), "--unix", socket.to_str().unwrap()]);
    assert_eq!(server.address, socket.to_str().unwrap());
    let response = support::unix_request(&socket, "POST", "/v1/decide", br#"{"name":"bash","id":"u"}"#);
    support::openapi::check("POST", "/v1/decide", &response);
    assert_eq!(response.json()["outcome"], "deny");
    // A file that is not a socket is never replaced.
    let file = dir.path().join("plain");
    std::fs::write(&file, "keep me").unwrap();
    let output = std::process::Command::new(support::SERVER).arg("--unix").arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("a file that is not a socket is there"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn metrics_count_decisions_by_outcome_and_code_and_requests_by_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--config", config(dir.path(), &allowlist()).to_str().unwrap()]);
    for _ in 0..3 {
        server.decide(&json!({"name": "bash"}));
    }
    server.decide(&json!({"name": "ls"}));
    server.call("POST", "/v1/decide", &[], b"{");
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    for line in [
        "guardhost_decisions_total{entry=\"allowlist\",provider=\"allowlist\",outcome=\"deny\",code=\"oap.tool_not_allowed\"} 3",
        "guardhost_decisions_total{entry=\"allowlist\",provider=\"allowlist\",outcome=\"allow\",code=\"oap.allowed\"} 1",
        "guardhost_decisions_total{entry=\"allowlist\",provider=\"allowlist\",outcome=\"error\",code=\"\"} 1",
        "guardhost_decision_seconds_count{entry=\"allowlist\",provider=\"allowlist\"} 5",
        "guardhost_http_requests_total{route=\"/v1/decide\",status=\"200\"} 4",
        "guardhost_http_requests_total{route=\"/v1/decide\",status=\"400\"} 1",
        "guardhost_provider_restarts_total 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}\n{metrics}");
    }
}

#[test]
fn a_provider_process_that_crashes_under_load_costs_no_request_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = format!(
        "    use: {}\n    isolation: process\n    timeout_ms: 2000\n",
        support::use_of("guardhost_test_providers", "FaultyProvider")
    );
    let server = Server::start(&["--config", config(dir.path(), &faulty).to_str().unwrap()]);
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let address = server.address.clone();
            std::thread::spawn(move || {
                let mut answered = 0;
                for i in 0..40 {
                    let tool = if c == 0 && i % 10 == 5 { "abort" } else { "read_file" };
                    let response = request(
                        &address,
                        "POST",
                        "/v1/decide",
                        &[],
                        json!({"name": tool}).to_string().as_bytes(),
                    );
                    assert_eq!(response.status, 200, "{}", response.text());
                    let decision = response.json();
                    // The crash fails its call (and the calls in flight with
                    // it) closed; every other call is allowed.
                    let fine = decision["outcome"] == "allow" || decision["provider_error"] == true;
                    assert!(fine, "{decision}");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    let answered: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(answered, 8 * 40);
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    let restarts =
        metrics.lines().find_map(|l| l.strip_prefix("guardhost_provider_restarts_total ")).unwrap();
    assert!(restarts.parse::<u64>().unwrap() >= 4, "{metrics}");
}

#[test]
fn observe_mode_lets_every_call_through_and_counts_what_would_have_been_denied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        format!("guardrails:\n  enabled: true\n  mode: observe\n  provider:\n{}", allowlist()),
    )
    .unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    for _ in 0..2 {
        let decision = server.decide(&json!({"name": "bash", "id": "b"})).json();
        assert_eq!(decision["outcome"], "allow");
        assert_eq!(decision["message"]["status"], "success");
        assert_eq!(decision["metadata"]["would_deny"]["code"], "oap.tool_not_allowed");
        assert_eq!(decision["reasons"][0]["code"], "guardhost.shadow");
    }
    assert_eq!(server.decide(&json!({"name": "ls"})).json()["metadata"], json!({}));
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    assert!(
        metrics
            .lines()
            .any(|l| l == "guardhost_shadow_would_deny_total{entry=\"allowlist\",provider=\"allowlist\"} 2"),
        "{metrics}"
    );
}

#[test]
fn idle_connections_and_clients_that_never_read_are_closed_and_free_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &allowlist());
    // A connection that sends nothing at all is closed after the request
    // timeout.
    let idle_server = Server::start(&["--config", path.to_str().unwrap(), "--request-timeout-ms", "400"]);
    let started = Instant::now();
    let mut idle = TcpStream::connect(&idle_server.address).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut nothing = Vec::new();
    let _ = idle.read_to_end(&mut nothing);
    assert!(started.elapsed() < Duration::from_secs(5), "held for {:?}", started.elapsed());

    // Two clients that pipeline requests and never read their answers take
    // both places, until the answers stall past the request timeout and
    // they are dropped.
    let server = Server::start(&[
        "--config",
        path.to_str().unwrap(),
        "--max-connections",
        "2",
        "--request-timeout-ms",
        "300",
    ]);
    let flood: Vec<u8> =
        (0..100_000).flat_map(|_| b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n".iter().copied()).collect();
    let stallers: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(&server.address).unwrap();
            stream.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
            let _ = stream.write_all(&flood);
            stream
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = request(&server.address, "POST", "/v1/decide", &[], br#"{"name":"ls"}"#);
        if response.status == 200 {
            break;
        }
        assert_eq!(response.status, 503, "{}", response.text());
        assert!(Instant::now() < deadline, "the stalled clients kept their places");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stallers);
}

#[test]
fn the_token_is_not_in_the_environment_provider_processes_inherit() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = format!(
        "    use: {}\n    isolation: process\n",
        support::use_of("guardhost_test_providers", "FaultyProvider")
    );
    let path = config(dir.path(), &faulty);
    let server = Server::start_with_env(
        &["--config", path.to_str().unwrap(), "--token-env", "GH_SERVE_TOKEN"],
        &[("GH_SERVE_TOKEN", "t0ken"), ("GH_OTHER_VAR", "kept")],
    );
    let bearer = [("authorization", "Bearer t0ken")];
    let response = server.call("POST", "/v1/decide", &bearer, br#"{"name":"env"}"#);
    let names = response.json()["metadata"].clone();
    assert_eq!(names["GH_OTHER_VAR"], json!(true), "{names}");
    assert!(names.get("GH_SERVE_TOKEN").is_none(), "{names}");
}
