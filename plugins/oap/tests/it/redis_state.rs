//! `state: redis://...`: the per-minute windows and the policy packs'
//! running totals and key sets in a real Redis server, started here on a
//! free loopback port (`redis-server` must be on PATH; without it these
//! tests are skipped, saying so, except where `GUARDHOST_REQUIRE_REDIS` is
//! set, as `.ci/run` sets it). Two providers (two replicas) share one
//! limit, one daily total and one set of idempotency keys, also under
//! concurrent calls; an unreachable server is a provider error naming it,
//! decided by `fail_closed`; a server killed and restarted under load
//! costs errors while it is down, never a hang, and serves again after.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::{
    GuardrailMiddleware, GuardrailProvider, GuardrailRequest, ProviderFailure, ProviderSpec, ToolCallRequest,
};
use guardhost_oap::generic::{GenericPack, GenericState, Verdict};
use guardhost_oap::redis::RedisState;
use serde_json::{json, Map, Value};

/// A private `redis-server`, killed on drop.
struct Redis {
    child: Option<Child>,
    port: u16,
}

impl Redis {
    /// Starts one, or says why not (and `None`).
    fn start() -> Option<Redis> {
        let found = Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("GUARDHOST_REQUIRE_REDIS").is_none(),
                "GUARDHOST_REQUIRE_REDIS is set and redis-server is not on PATH"
            );
            eprintln!("skipped: redis-server is not on PATH (install it, e.g. apt-get install redis-server)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut redis = Redis { child: None, port };
        redis.run();
        Some(redis)
    }

    fn run(&mut self) {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn use_() -> String {
    format!("{}:OAPGuardrailProvider", guardhost_kit::cdylib("guardhost_oap").display())
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

/// The example passport with a fetch limit of `per_minute`, in `dir`.
fn passport(dir: &Path, per_minute: u32) -> PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json");
    let mut passport: Value = serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    passport["limits"]["web.fetch"]["max_requests_per_min"] = json!(per_minute);
    let path = dir.join("passport.json");
    std::fs::write(&path, passport.to_string()).unwrap();
    path
}

fn provider(passport: &Path, state: Option<&str>) -> Arc<dyn GuardrailProvider> {
    let mut config = json!({"passport_path": passport});
    if let Some(state) = state {
        config["state"] = json!(state);
    }
    guardhost::instantiate(&ProviderSpec::new(use_(), object(config)), Path::new("/")).unwrap().provider
}

fn fetch() -> GuardrailRequest {
    let call = ToolCallRequest::new("web_fetch", object(json!({"url": "https://docs.rs/"})));
    GuardrailRequest::from_tool_call(&call, None).unwrap()
}

/// `"allow"`, the denial's code, or `"error: ..."`.
fn outcome(provider: &dyn GuardrailProvider) -> String {
    match provider.evaluate(&fetch()) {
        Ok(d) if d.allow => "allow".into(),
        Ok(d) => d.reasons[0].code.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn two_replicas_sharing_one_redis_enforce_one_limit_together() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let passport = passport(dir.path(), 3);
    let (a, b) = (provider(&passport, Some(&redis.url())), provider(&passport, Some(&redis.url())));
    let outcomes: Vec<String> = (0..6).map(|i| outcome(if i % 2 == 0 { &*a } else { &*b })).collect();
    assert_eq!(
        outcomes,
        [
            "allow",
            "allow",
            "allow",
            "oap.rate_limit_exceeded",
            "oap.rate_limit_exceeded",
            "oap.rate_limit_exceeded"
        ]
    );
    // Each in its own memory, the two would have let through 3 each.
    let (a, b) = (provider(&passport, None), provider(&passport, None));
    let allowed = (0..6).filter(|i| outcome(if i % 2 == 0 { &*a } else { &*b }) == "allow").count();
    assert_eq!(allowed, 6);
}

#[test]
fn an_unreachable_redis_is_a_provider_error_naming_it_and_fail_closed_decides() {
    let dir = tempfile::tempdir().unwrap();
    let passport = passport(dir.path(), 3);
    // Nothing listens on port 1.
    let p = provider(&passport, Some("redis://:hunter2@127.0.0.1:1/0"));
    match p.evaluate(&fetch()) {
        Err(ProviderFailure::Error { message, .. }) => {
            assert!(message.contains("cannot reach the shared state at redis://127.0.0.1:1/0"), "{message}");
            assert!(!message.contains("hunter2"));
        }
        other => panic!("{other:?}"),
    }
    // A call no rate applies to is decided without Redis.
    let read = GuardrailRequest::from_tool_call(
        &ToolCallRequest::new("read_file", object(json!({"path": "/mnt/user-data/workspace/a"}))),
        None,
    )
    .unwrap();
    assert!(p.evaluate(&read).unwrap().allow);
    // Through the middleware: denied, fail-closed.
    let call = ToolCallRequest::new("web_fetch", object(json!({"url": "https://docs.rs/"})));
    let (decision, provider_error) = GuardrailMiddleware::new(p).decide(&call).unwrap();
    assert!(!decision.allow && provider_error);
    assert_eq!(decision.reasons[0].code, "oap.evaluator_error");
    // A bad URL is refused when the provider is built.
    let error = guardhost::instantiate(
        &ProviderSpec::new(use_(), object(json!({"passport_path": passport, "state": "redis://h:port"}))),
        Path::new("/"),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("`state`: the port is not a number"), "{error}");
}

#[test]
fn a_redis_killed_and_restarted_under_load_costs_errors_while_down_never_a_hang() {
    let Some(mut redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = provider(&passport(dir.path(), 100_000), Some(&redis.url()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut allowed, mut errors, mut slowest) = (0, 0, Duration::ZERO);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let started = Instant::now();
                    match outcome(&*p).as_str() {
                        "allow" => allowed += 1,
                        error => {
                            assert!(error.starts_with("error: "), "{error}");
                            errors += 1;
                        }
                    }
                    slowest = slowest.max(started.elapsed());
                }
                (allowed, errors, slowest)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    redis.kill();
    std::thread::sleep(Duration::from_millis(500));
    redis.run();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut totals = (0, 0);
    for caller in callers {
        let (allowed, errors, slowest) = caller.join().unwrap();
        totals = (totals.0 + allowed, totals.1 + errors);
        // Connecting and every reply have a 500 ms limit.
        assert!(slowest < Duration::from_millis(1500), "a call took {slowest:?}");
    }
    assert!(totals.0 > 0 && totals.1 > 0, "{totals:?}");
    // Served again after the restart (which forgot the script: it is sent again).
    assert_eq!(outcome(&*p), "allow");
}

/// A pack with a daily cap per currency and idempotency keys.
fn charge_pack() -> GenericPack {
    let pack = json!({
        "id": "finance.test.charge.v1",
        "requires_capabilities": ["finance.test.charge"],
        "required_fields": ["amount", "currency", "key"],
        "evaluation_rules": [
            {"name": "daily", "condition": "daily_total + amount <= limits.currency_limits[currency].daily_cap",
             "deny_code": "oap.limit_exceeded"},
            {"name": "idem", "condition": "key not in recent_keys", "deny_code": "oap.idempotency_conflict"}
        ]
    });
    GenericPack::from_json(&pack.to_string()).unwrap()
}

fn charge_passport() -> Value {
    json!({
        "passport_id": "replicated-agent", "status": "active", "assurance_level": "L2",
        "capabilities": [{"id": "finance.test.charge"}],
        "limits": {"finance.test.charge": {"currency_limits": {"USD": {"daily_cap": 150}}}}
    })
}

/// Two replicas' state: two clients of one server.
fn two_replicas(redis: &Redis) -> [GenericState; 2] {
    [0, 1].map(|_| GenericState::shared(Arc::new(RedisState::new(&redis.url()).unwrap())))
}

fn verdict(pack: &GenericPack, state: &GenericState, amount: u32, key: &str, now: f64) -> String {
    let context = json!({"amount": amount, "currency": "USD", "key": key});
    match pack.evaluate_at(&charge_passport(), &context, state, now) {
        Verdict::Allow => "allow".into(),
        Verdict::Deny { code, .. } => code,
        Verdict::Unavailable(why) => format!("error: {why}"),
    }
}

#[test]
fn two_replicas_share_a_packs_daily_total_and_its_keys() {
    let Some(redis) = Redis::start() else { return };
    let (pack, [a, b]) = (charge_pack(), two_replicas(&redis));
    let now = 1_738_238_400.0;
    assert_eq!(verdict(&pack, &a, 100, "k1", now), "allow");
    // The other replica sees the day's 100: 100 + 60 > 150.
    assert_eq!(verdict(&pack, &b, 60, "k2", now), "oap.limit_exceeded");
    // And the key the first one accepted.
    assert_eq!(verdict(&pack, &b, 10, "k1", now), "oap.idempotency_conflict");
    assert_eq!(verdict(&pack, &b, 50, "k3", now), "allow");
    assert_eq!(verdict(&pack, &a, 1, "k4", now), "oap.limit_exceeded");
    // The keys are kept for 24 hours; the next day starts a new total.
    assert_eq!(verdict(&pack, &b, 0, "k3", now + 86_000.0), "oap.idempotency_conflict");
    assert_eq!(verdict(&pack, &a, 150, "k5", now + 86_400.0), "allow");
    assert_eq!(verdict(&pack, &b, 0, "k3", now + 86_401.0), "allow");
    // Each in its own memory, the replicas would have let 100 + 60 through.
    let (a, b) = (GenericState::new(), GenericState::new());
    assert_eq!(verdict(&pack, &a, 100, "k1", now), "allow");
    assert_eq!(verdict(&pack, &b, 60, "k2", now), "allow");
}

#[test]
fn concurrent_calls_on_two_replicas_spend_a_daily_cap_exactly_once() {
    let Some(redis) = Redis::start() else { return };
    let (pack, replicas) = (charge_pack(), two_replicas(&redis));
    let now = 1_738_238_400.0;
    let outcomes: Vec<String> = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..4)
            .map(|thread| {
                let (pack, state) = (&pack, &replicas[thread % 2]);
                scope.spawn(move || {
                    (0..60)
                        .map(|i| verdict(pack, state, 1, &format!("t{thread}-{i}"), now))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        callers.into_iter().flat_map(|c| c.join().unwrap()).collect()
    });
    let allowed = outcomes.iter().filter(|o| *o == "allow").count();
    let errors: Vec<&String> = outcomes.iter().filter(|o| o.starts_with("error")).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(allowed, 150, "240 calls of 1 against a cap of 150, on two replicas");
}

#[test]
fn a_packs_state_in_an_unreachable_redis_is_no_decision_but_an_error_naming_it() {
    let pack = charge_pack();
    let state = GenericState::shared(Arc::new(RedisState::new("redis://:hunter2@127.0.0.1:1").unwrap()));
    let outcome = verdict(&pack, &state, 1, "k", 1_738_238_400.0);
    assert!(outcome.contains("cannot reach the shared state at redis://127.0.0.1:1/0"), "{outcome}");
    assert!(!outcome.contains("hunter2"), "{outcome}");
}

#[test]
fn providers_configured_with_one_redis_share_a_packs_state() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("policies");
    std::fs::create_dir(&packs).unwrap();
    let pack = serde_json::to_string(&json!({
        "id": "finance.test.charge.v1",
        "requires_capabilities": ["finance.test.charge"],
        "evaluation_rules": [{"name": "daily", "deny_code": "oap.limit_exceeded",
            "condition": "daily_total + amount <= limits.currency_limits[currency].daily_cap"}]
    }))
    .unwrap();
    std::fs::write(packs.join("finance.test.charge.v1.json"), pack).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json");
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    document["capabilities"].as_array_mut().unwrap().push(json!({"id": "finance.test.charge"}));
    document["limits"]["finance.test.charge"] = charge_passport()["limits"]["finance.test.charge"].clone();
    let passport = dir.path().join("passport.json");
    std::fs::write(&passport, document.to_string()).unwrap();
    let replica = || {
        let config = json!({"passport_path": passport, "policies_dir": packs, "state": redis.url(),
                            "tool_mapping": {"charge": "finance.test.charge.v1"}});
        guardhost::instantiate(&ProviderSpec::new(use_(), object(config)), Path::new("/")).unwrap().provider
    };
    let (a, b) = (replica(), replica());
    let charge = |provider: &dyn GuardrailProvider, amount: u32| {
        let call = ToolCallRequest::new("charge", object(json!({"amount": amount, "currency": "USD"})));
        match provider.evaluate(&GuardrailRequest::from_tool_call(&call, None).unwrap()) {
            Ok(d) if d.allow => "allow".to_owned(),
            Ok(d) => d.reasons[0].code.to_string(),
            Err(e) => format!("error: {e}"),
        }
    };
    assert_eq!(charge(&*a, 100), "allow");
    assert_eq!(charge(&*b, 60), "oap.limit_exceeded");
    assert_eq!(charge(&*b, 50), "allow");
    assert_eq!(charge(&*a, 1), "oap.limit_exceeded");
}
