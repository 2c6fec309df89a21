//! Scale-out: several `guardhost-server` processes on loopback, each with
//! the OAP provider keeping its rate windows in one Redis server (`state:
//! redis://...`), enforce one passport's limit together, whichever replica
//! a call reaches; each alone, in its own memory, would let the limit
//! through once per replica. Needs `redis-server` on PATH (skipped, saying
//! so, without it, unless `GUARDHOST_REQUIRE_REDIS` is set).

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::Server;
use serde_json::{json, Value};

pub(crate) struct Redis(std::process::Child, pub(crate) u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn redis() -> Option<Redis> {
    if !Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success()) {
        assert!(std::env::var_os("GUARDHOST_REQUIRE_REDIS").is_none(), "redis-server is not on PATH");
        eprintln!("skipped: redis-server is not on PATH (install it, e.g. apt-get install redis-server)");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Redis(child, port))
}

fn replicas(dir: &std::path::Path, state: &str, count: usize) -> Vec<Server> {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    let mut passport: Value = serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    passport["limits"]["web.fetch"]["max_requests_per_min"] = json!(5);
    let passport_path = dir.join("passport.json");
    std::fs::write(&passport_path, passport.to_string()).unwrap();
    let provider = format!(
        "    use: {}\n    config:\n      passport_path: {}\n      state: {state}\n",
        support::use_of("guardhost_oap", "OAPGuardrailProvider"),
        passport_path.display()
    );
    let config = support::config(dir, &provider);
    (0..count).map(|_| Server::start(&["--config", config.to_str().unwrap()])).collect()
}

fn allowed(servers: &[Server], calls: usize) -> usize {
    (0..calls)
        .filter(|i| {
            let decision = servers[i % servers.len()]
                .decide(&json!({"name": "web_fetch", "args": {"url": "https://docs.rs/"}}));
            decision.json()["outcome"] == "allow"
        })
        .count()
}

#[test]
fn three_replicas_sharing_one_redis_hold_one_limit() {
    let Some(redis) = redis() else { return };
    let dir = tempfile::tempdir().unwrap();
    let shared = replicas(dir.path(), &format!("redis://127.0.0.1:{}", redis.1), 3);
    assert_eq!(allowed(&shared, 12), 5, "5 a minute across the three");
    let metrics = shared[0].call("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("code=\"oap.rate_limit_exceeded\""), "{metrics}");

    let dir = tempfile::tempdir().unwrap();
    let apart = replicas(dir.path(), "memory", 3);
    assert_eq!(allowed(&apart, 12), 12, "each in its own memory: 5 each, 12 calls all through");
}
