//! Decisions per second, and p50 / p99 per decision, of the OAP provider
//! loaded as the host loads it (the real cdylib, through guardhost), with
//! the example passport.
//!
//! `cargo bench -p guardhost-oap --bench decisions`. Each case times
//! 200,000 decisions one by one (after a warm-up); numbers are for
//! comparison on one machine, not assertions.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use guardhost::{GuardrailRequest, ProviderSpec, ToolCallRequest};
use serde_json::{json, Value};

const DECISIONS: usize = 200_000;

fn main() {
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json");
    let use_ = format!("{}:OAPGuardrailProvider", guardhost::conformance::cdylib("guardhost_oap").display());
    let config = json!({ "passport_path": passport }).as_object().cloned().unwrap();
    let provider = guardhost::instantiate(&ProviderSpec::new(use_, config), Path::new("/")).unwrap().provider;

    let cases: [(&str, &str, Value, bool); 5] = [
        (
            "allowed command (bash ls -la)",
            "bash",
            json!({"command": "ls -la /mnt/user-data/workspace"}),
            true,
        ),
        ("blocked pattern (bash sudo ...)", "bash", json!({"command": "sudo rm -r build"}), false),
        (
            "file write (write_file, 1 KB)",
            "write_file",
            json!({"path": "/mnt/user-data/outputs/r.md", "content": "x".repeat(1024)}),
            true,
        ),
        (
            "web fetch (web_fetch https)",
            "web_fetch",
            json!({"url": "https://docs.rs/serde/latest/serde/"}),
            true,
        ),
        ("unmapped tool (denied early)", "frobnicate", json!({}), false),
    ];
    println!("{:<36} {:>14} {:>10} {:>10} {:>10}", "case", "decisions/s", "p50", "p99", "max");
    for (name, tool, args, allow) in cases {
        let call = ToolCallRequest::new(tool, args.as_object().cloned().unwrap());
        let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
        assert_eq!(provider.evaluate(&request).unwrap().allow, allow, "{name}");
        for _ in 0..10_000 {
            black_box(provider.evaluate(black_box(&request)).unwrap());
        }
        let mut samples = Vec::with_capacity(DECISIONS);
        let started = Instant::now();
        for _ in 0..DECISIONS {
            let t = Instant::now();
            black_box(provider.evaluate(black_box(&request)).unwrap());
            samples.push(t.elapsed());
        }
        let total = started.elapsed();
        samples.sort_unstable();
        let at = |q: usize| samples[(samples.len() * q).div_ceil(100) - 1];
        println!(
            "{name:<36} {:>14.0} {:>10} {:>10} {:>10}",
            DECISIONS as f64 / total.as_secs_f64(),
            fmt(at(50)),
            fmt(at(99)),
            fmt(samples[samples.len() - 1])
        );
    }
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
