//! Limits: calls counted per minute, a pack's limits without its policy
//! refused, and inputs made to stall a decision decided with their codes.

use serde_json::json;

use crate::setup::{code, decide, example_passport, passport_with, with_passport};

#[test]
fn rate_limits_count_allowed_calls_per_minute() {
    let dir = tempfile::tempdir().unwrap();
    let path = passport_with(dir.path(), |p| {
        p["limits"]["web.fetch"]["max_requests_per_minute"] = json!(3);
        p["limits"]["mcp.tool.execute"]["max_calls_per_minute"] = json!(1);
    });
    let p = with_passport(&path);
    let fetch = json!({"url": "https://docs.rs/"});
    // A denied call does not count.
    assert_eq!(
        code(&*p, "web_fetch", json!({"url": "http://127.0.0.1/"})),
        "oap.private_network_destination"
    );
    for _ in 0..3 {
        assert_eq!(code(&*p, "web_fetch", fetch.clone()), "allow");
    }
    assert_eq!(code(&*p, "web_fetch", fetch), "oap.rate_limit_exceeded");
    assert_eq!(code(&*p, "web_search", json!({"query": "x"})), "oap.rate_limit_exceeded");
    assert_eq!(code(&*p, "mcp__github__x", json!({})), "allow");
    assert_eq!(code(&*p, "mcp__github__x", json!({})), "oap.rate_limit_exceeded");
}

#[test]
fn limits_on_a_pack_without_its_policy_are_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        passport_with(dir.path(), |p| p["limits"]["agent.session.create"] = json!({"max_sessions": 1}));
    let p = with_passport(&path);
    let d = decide(&*p, "task", json!({"prompt": "x"}));
    assert_eq!(d.reasons[0].code, "oap.misconfigured");
    assert!(d.reasons[0].message.contains("set policies_dir"), "{d:?}");
    let unlimited = with_passport(&example_passport());
    let d = decide(&*unlimited, "task", json!({"prompt": "x"}));
    assert!(d.allow);
    assert_eq!(d.metadata["limits_checked"], false);
}

/// Inputs made to stall a decision are decided, each with the code that
/// says why (how fast is measured by `cargo bench -p guardhost-oap --bench
/// decisions`, never by a timed test).
#[test]
fn hostile_inputs_are_decided_with_their_codes() {
    let p = with_passport(&example_passport());
    let mib = 1 << 20;
    let cases = [
        ("bash", json!({"command": format!("echo {}", "$((".repeat(mib / 3))}), "oap.context_too_large"),
        (
            "read_file",
            json!({"path": format!("/mnt/user-data/{}", "a/".repeat(mib / 2))}),
            "oap.context_too_large",
        ),
        (
            "web_fetch",
            json!({"url": format!("https://example.com/{}", "a".repeat(mib))}),
            "oap.context_too_large",
        ),
        ("bash", json!({"command": format!("echo {}", "$((".repeat(30_000))}), "oap.command_too_long"),
        ("bash", json!({"command": format!("echo {}", "$((".repeat(1_000))}), "oap.command_too_complex"),
        ("bash", json!({"command": format!("echo {}", "$(echo ".repeat(2_000))}), "oap.command_too_complex"),
        ("bash", json!({"command": "a;".repeat(8_000)}), "oap.command_not_allowed"),
        ("bash", json!({"command": format!("echo {}", "a ".repeat(8_000))}), "allow"),
    ];
    for (tool, args, expected) in cases {
        let size = args.to_string().len();
        assert_eq!(code(&*p, tool, args), expected, "{tool}, {size} bytes");
    }
}
