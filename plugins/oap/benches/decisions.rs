//! Decisions per second, and p50 / p99 per decision, of the OAP provider
//! loaded as the host loads it (the real cdylib, through guardhost), with
//! the example passport.
//!
//! `cargo bench -p guardhost-oap --bench decisions`. Each case times
//! 200,000 decisions one by one (after a warm-up); numbers are for
//! comparison on one machine, not assertions. The last case goes through a
//! pack of our own in `policies_dir` (rules and a `required_context`
//! schema), written to a temporary directory. Arguments keep only the
//! cases whose name contains one of them (`-- "bash ls"`, for profiling).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use guardhost::{GuardrailRequest, ProviderSpec, ToolCallRequest};
use serde_json::{json, Value};

const DECISIONS: usize = 200_000;

fn main() {
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json");
    let use_ = format!("{}:OAPGuardrailProvider", guardhost_kit::cdylib("guardhost_oap").display());
    let config = json!({ "passport_path": passport }).as_object().cloned().unwrap();
    let provider =
        guardhost::instantiate(&ProviderSpec::new(use_.clone(), config), Path::new("/")).unwrap().provider;
    let dir = tempfile::tempdir().unwrap();
    let with_pack = {
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&passport).unwrap()).unwrap();
        doc["capabilities"].as_array_mut().unwrap().push(json!({"id": "demo.ticket.create"}));
        doc["limits"]["demo.ticket.create"] = json!({"max_priority": 3});
        let passport = dir.path().join("passport.json");
        std::fs::write(&passport, doc.to_string()).unwrap();
        let packs = dir.path().join("packs");
        std::fs::create_dir(&packs).unwrap();
        std::fs::write(packs.join("demo.ticket.create.v1.json"), TICKET_PACK).unwrap();
        let config = json!({
            "passport_path": passport,
            "policies_dir": packs,
            "tool_mapping": {"create_ticket": "demo.ticket.create.v1"},
        });
        let spec = ProviderSpec::new(use_, config.as_object().cloned().unwrap());
        guardhost::instantiate(&spec, Path::new("/")).unwrap().provider
    };

    let cases: [(&str, &str, Value, bool); 6] = [
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
        (
            "pack in policies_dir (create_ticket)",
            "create_ticket",
            json!({"title": "Disk full on build-3", "priority": 2, "severity": "high", "labels": ["ops"]}),
            true,
        ),
    ];
    // Cargo passes `--bench`.
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    println!("{:<36} {:>14} {:>10} {:>10} {:>10}", "case", "decisions/s", "p50", "p99", "max");
    for (name, tool, args, allow) in cases {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let call = ToolCallRequest::new(tool, args.as_object().cloned().unwrap());
        let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
        let provider = if tool == "create_ticket" { &with_pack } else { &provider };
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
    hostile(&provider, &filters);
}

/// Inputs made to stall a decision: 1 MiB arguments, and the worst shapes
/// just under the command pack's caps. Each is decided 20 times; the
/// slowest decision is what counts (the goal: under 50 ms).
fn hostile(provider: &std::sync::Arc<dyn guardhost::GuardrailProvider>, filters: &[String]) {
    const MIB: usize = 1 << 20;
    let under_cap = 16_000;
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "1 MiB command ($(( nesting)",
            "bash",
            json!({"command": format!("echo {}", "$((".repeat(MIB / 3))}),
        ),
        ("1 MiB command (words)", "bash", json!({"command": format!("echo {}", "a ".repeat(MIB / 2))})),
        ("1 MiB path", "read_file", json!({"path": format!("/mnt/user-data/{}", "a/".repeat(MIB / 2))})),
        ("1 MiB URL", "web_fetch", json!({"url": format!("https://example.com/{}", "a".repeat(MIB))})),
        ("90 KB $(( (the old stall)", "bash", json!({"command": format!("echo {}", "$((".repeat(30_000))})),
        ("16 KB command list (a;)", "bash", json!({"command": "a;".repeat(under_cap / 2)})),
        ("16 KB pipeline (a|)", "bash", json!({"command": format!("{}a", "a|".repeat(under_cap / 2))})),
        ("16 KB words", "bash", json!({"command": format!("echo {}", "a ".repeat(under_cap / 2))})),
        (
            "16 KB quoted words",
            "bash",
            json!({"command": format!("echo {}", "'a' \"b\" ".repeat(under_cap / 8))}),
        ),
        (
            "16 KB $(...) in a row",
            "bash",
            json!({"command": format!("echo {}", "$(id) ".repeat(under_cap / 6))}),
        ),
        (
            "16 KB here-document",
            "bash",
            json!({"command": format!("cat <<EOF\n{}EOF", "line $x\n".repeat(under_cap / 8))}),
        ),
        (
            "16 KB pipeline of shells",
            "bash",
            json!({"command": format!("echo x | {}cat", "sh | ".repeat(under_cap / 5 - 4))}),
        ),
        (
            "16 KB of find -exec sh -c",
            "bash",
            json!({"command": "find a b c d e f g h -exec sh -c 'ls; ls' \\; ".repeat(under_cap / 48)}),
        ),
        ("16 KB of $( without )", "bash", json!({"command": format!("echo {}", "$(".repeat(under_cap / 2))})),
    ];
    println!();
    println!("{:<36} {:>10} {:>10}  outcome", "hostile input", "p50", "max");
    for (name, tool, args) in cases {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let call = ToolCallRequest::new(tool, args.as_object().cloned().unwrap());
        let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
        let mut samples = Vec::with_capacity(20);
        let mut outcome = String::new();
        for _ in 0..20 {
            let t = Instant::now();
            let decision = black_box(provider.evaluate(black_box(&request)).unwrap());
            samples.push(t.elapsed());
            outcome = if decision.allow { "allow".into() } else { decision.reasons[0].code.to_string() };
        }
        samples.sort_unstable();
        println!(
            "{name:<36} {:>10} {:>10}  {outcome}",
            fmt(samples[samples.len() / 2]),
            fmt(samples[samples.len() - 1])
        );
    }
}

/// A pack of our own, in APort's shape: one rule and a context schema.
const TICKET_PACK: &str = r#"{
  "id": "demo.ticket.create.v1",
  "requires_capabilities": ["demo.ticket.create"],
  "min_assurance": "L0",
  "required_fields": ["title", "priority"],
  "required_context": {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["title", "priority"],
    "properties": {
      "title": {"type": "string", "minLength": 1, "maxLength": 200},
      "priority": {"type": "integer", "minimum": 1, "maximum": 5},
      "severity": {"type": "string", "enum": ["low", "medium", "high"]},
      "labels": {"type": "array", "items": {"type": "string"}}
    }
  },
  "evaluation_rules": [
    {
      "name": "priority_cap",
      "condition": "priority <= limits.max_priority",
      "deny_code": "oap.limit_exceeded"
    }
  ]
}"#;

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
