//! What a guardrail costs per tool call, measured with criterion.
//!
//! `cargo bench -p guardhost --bench guardrail` (add a filter such as
//! `-- middleware` to run one group). Groups:
//! - `decision`: `provider.evaluate` alone, for the allowlist built in and as
//!   a `.so`, the template provider (parses its arguments) and the OAP
//!   provider (example passport);
//! - `middleware`: `wrap_tool_call` / `awrap_tool_call` allow and deny (the
//!   request built, the denial message built, an audit event written);
//! - `request`: building a request with every attribution field;
//! - `load`: resolving, loading, checking and constructing a library
//!   provider, cached and with a fresh `dlopen` of a new copy each time;
//! - `decision_log`: masking a call's arguments for the decision log, with
//!   patterns anchored at the top (`$.`) and matching at any depth;
//! - `cedar`: the Cedar provider with 10, 100 and 1,000 generated policies
//!   and a schema (its rows next to the OAP provider's are in `decision`);
//! - `chain`: `decide` through `guardrails.providers` chains of 1, 2, 4 and
//!   8 built-in entries (the cost per entry), entries that do not select
//!   the tool, and the approvals provider's `ask` (digest and deadline) and
//!   `rewrite`;
//!
//! The provider in a process of its own is measured by
//! `cargo bench -p guardhost-isolation --bench isolation`.
//!
//! The calls are cloned outside the timed part (`iter_batched`).

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use guardhost::{
    async_handler, GuardrailMiddleware, GuardrailRequest, JsonlAuditSink, ProviderSpec, ToolCallRequest,
};
use guardhost_test_support::{load, object, passthrough, tool_call as call, use_of};
use serde_json::{json, Map, Value};

fn allowlist_config() -> Map<String, Value> {
    object(json!({"denied_tools": ["bash", "write_file", "str_replace"]}))
}

fn oap_config() -> Map<String, Value> {
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    object(json!({ "passport_path": passport }))
}

/// The allowed and the denied call each provider is measured with.
fn providers() -> Vec<(&'static str, Arc<dyn guardhost::GuardrailProvider>, ToolCallRequest, ToolCallRequest)>
{
    let read = call("read_file", json!({"path": "/mnt/user-data/workspace/README.md"}));
    let bash = call("bash", json!({"command": "ls -la"}));
    vec![
        (
            "allowlist built-in",
            load("builtin:AllowlistProvider", allowlist_config()).provider,
            read.clone(),
            bash.clone(),
        ),
        (
            "allowlist .so",
            load(&use_of("guardhost_allowlist", "AllowlistProvider"), allowlist_config()).provider,
            read.clone(),
            bash.clone(),
        ),
        (
            "template .so (parses args)",
            load(
                &use_of("guardhost_provider_template", "TemplateProvider"),
                object(json!({"blocked_patterns": ["rm -rf"]})),
            )
            .provider,
            bash.clone(),
            call("bash", json!({"command": "rm -rf build"})),
        ),
        (
            "oap .so",
            load(&use_of("guardhost_oap", "OAPGuardrailProvider"), oap_config()).provider,
            bash.clone(),
            call("bash", json!({"command": "sudo ls"})),
        ),
        // The same calls, by a developer (the example policies give commands
        // to developers and admins).
        (
            "cedar .so (example policies, schema)",
            load(&use_of("guardhost_cedar", "CedarGuardrailProvider"), cedar_config()).provider,
            bash.with_context(object(json!({"user_role": "developer"}))),
            call("bash", json!({"command": "sudo ls"}))
                .with_context(object(json!({"user_role": "developer"}))),
        ),
    ]
}

fn cedar_example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cedar").join(name)
}

fn cedar_config() -> Map<String, Value> {
    object(json!({
        "policies": cedar_example("policies"),
        "schema": cedar_example("deerflow.cedarschema"),
        "entities": cedar_example("entities.json"),
        "derive": ["command", "url", "path"],
    }))
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("decision");
    // The baseline: the allowlist's own Rust code called directly with a
    // prepared request, no host, no ABI conversion.
    {
        use guardhost_abi::Provider;
        let config = guardhost_allowlist::AllowlistConfig {
            denied_tools: Some(vec!["bash".into(), "write_file".into(), "str_replace".into()]),
            ..Default::default()
        };
        let provider = guardhost_allowlist::AllowlistProvider::new(config).unwrap();
        let args = r#"{"path":"/mnt/user-data/workspace/README.md"}"#;
        for (kind, tool) in [("allow", "read_file"), ("deny", "bash")] {
            let request = guardhost_abi::Request::for_tool(tool).with_tool_input_json(args);
            group.bench_function(format!("allowlist direct Rust call/{kind}"), |b| {
                b.iter(|| black_box(provider.evaluate(black_box(&request)).unwrap()))
            });
            // Its `decide` (ABI 1.4), which the host calls: no reason built.
            group.bench_function(format!("allowlist direct Rust call, decide/{kind}"), |b| {
                b.iter(|| black_box(provider.decide(black_box(&request)).unwrap()))
            });
        }
    }
    for (name, provider, allowed, denied) in providers() {
        for (kind, call) in [("allow", allowed), ("deny", denied)] {
            let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
            group.bench_function(format!("{name}/{kind}"), |b| {
                b.iter(|| black_box(provider.evaluate(black_box(&request)).unwrap()))
            });
        }
    }
    group.finish();
}

fn middleware(c: &mut Criterion) {
    let mut group = c.benchmark_group("middleware");
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let handler = async_handler(|call: ToolCallRequest| async move { passthrough(call) });
    let audit = Arc::new(JsonlAuditSink::open(Path::new("/dev/null")).unwrap());
    for (name, provider, allowed, denied) in providers().into_iter().take(2) {
        let mw = GuardrailMiddleware::new(provider).with_audit_sink(audit.clone());
        for (kind, call) in [("allow", &allowed), ("deny", &denied)] {
            group.bench_function(format!("wrap_tool_call/{name}/{kind}"), |b| {
                b.iter_batched(
                    || call.clone(),
                    |call| black_box(mw.wrap_tool_call(call, &passthrough).unwrap()),
                    BatchSize::SmallInput,
                )
            });
            group.bench_function(format!("awrap_tool_call/{name}/{kind}"), |b| {
                b.to_async(&runtime).iter_batched(
                    || call.clone(),
                    |call| async { black_box(mw.awrap_tool_call(call, handler.clone()).await.unwrap()) },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    // The same calls without an audit sink: the decision and the message
    // alone (and no clock read for a provider that does not read the time).
    let (_, provider, allowed, denied) = providers().swap_remove(1);
    let bare = GuardrailMiddleware::new(provider);
    for (kind, call) in [("allow", &allowed), ("deny", &denied)] {
        group.bench_function(format!("wrap_tool_call/allowlist .so/{kind}, no audit sink"), |b| {
            b.iter_batched(
                || call.clone(),
                |call| black_box(bare.wrap_tool_call(call, &passthrough).unwrap()),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn request(c: &mut Criterion) {
    let call = ToolCallRequest::new("bash", object(json!({"command": "ls -la"}))).with_id("c").with_context(
        object(json!({
            "thread_id": "t", "user_id": "u", "user_role": "r", "oauth_provider": "p", "oauth_id": "o",
            "run_id": "run", "channel_user_id": "ch", "is_subagent": true, "is_internal": true,
            "authz_attributes": {"team": "infra"}
        })),
    );
    c.bench_function("request/every attribution field", |b| {
        b.iter(|| black_box(GuardrailRequest::from_tool_call(black_box(&call), Some("agent")).unwrap()))
    });
}

/// Fresh loads per measurement at most: each maps a new copy of the
/// library for good (libraries are never unloaded).
const FRESH_LOADS: u64 = 32;

fn loading(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(2));
    let original = guardhost_test_support::library("guardhost_allowlist");
    let cached = ProviderSpec::new(use_of("guardhost_allowlist", "AllowlistProvider"), allowlist_config());
    group.bench_function("construct (library already loaded)", |b| {
        b.iter(|| black_box(guardhost::instantiate(&cached, Path::new("/")).unwrap()))
    });
    let dir = tempfile::tempdir().unwrap();
    let mut copies = 0u64;
    group.bench_function("load + check + construct (fresh dlopen)", |b| {
        // Times FRESH_LOADS real loads and scales to the iterations asked
        // for, so the run does not map thousands of copies.
        b.iter_custom(|iters| {
            let n = iters.min(FRESH_LOADS);
            let mut total = Duration::ZERO;
            for _ in 0..n {
                copies += 1;
                let copy = dir.path().join(format!("libcopy{copies}.so"));
                std::fs::copy(&original, &copy).unwrap();
                let spec =
                    ProviderSpec::new(format!("{}:AllowlistProvider", copy.display()), allowlist_config());
                let start = Instant::now();
                black_box(guardhost::instantiate(&spec, dir.path()).unwrap());
                total += start.elapsed();
            }
            total.mul_f64(iters as f64 / n as f64)
        })
    });
    group.finish();
}

fn decision_log(c: &mut Criterion) {
    use guardhost::decision_log::{DecisionLog, DecisionLogConfig, WhenFull};
    let dir = tempfile::tempdir().unwrap();
    let log = |mask: &[&str]| {
        let config = DecisionLogConfig {
            path: dir.path().join("decisions.jsonl"),
            args: true,
            mask: mask.iter().map(|m| m.to_string()).collect(),
            when_full: WhenFull::Drop,
            buffer: 16,
            max_bytes: 1 << 20,
            keep: 1,
        };
        DecisionLog::open(&config, dir.path()).unwrap()
    };
    // A web_fetch call with headers, a body with a list of records, and an
    // environment: 40 values in all.
    let args = object(json!({
        "url": "https://api.example.com/v1/items", "method": "POST",
        "headers": {"Authorization": "Bearer abc", "Accept": "application/json", "X-Trace": "t-1"},
        "body": {"items": (0..8).map(|n| json!({"id": n, "name": format!("item {n}"), "password": "p"})).collect::<Vec<_>>()},
        "env": {"HOME": "/home/a", "PATH": "/usr/bin", "TOKEN": "t"}
    }));
    let mut group = c.benchmark_group("decision_log");
    for (label, mask) in [
        ("mask/no pattern (the copy alone)", &[][..]),
        ("mask/3 anchored patterns", &["$.headers.authorization", "$.body.items[*].password", "$.env.*"][..]),
        ("mask/3 patterns at any depth", &["authorization", "password", "env.*"][..]),
    ] {
        let log = log(mask);
        group.bench_function(label, |b| b.iter(|| black_box(log.masked(black_box(&args)))));
    }
    group.finish();
}

fn chain(c: &mut Criterion) {
    let install = |entries: &str| {
        let yaml = format!("guardrails:\n  enabled: true\n  providers:\n{entries}");
        let config = guardhost::LoadedConfig::from_yaml(
            &yaml,
            Path::new("/").into(),
            guardhost::ConfigOrigin::Embedded,
            |_| None,
        )
        .unwrap();
        guardhost::install(&config).unwrap().unwrap().middleware
    };
    let allowlist = "    - use: builtin:AllowlistProvider\n      config: {denied_tools: [bash]}\n";
    let read = call("read_file", json!({"path": "/mnt/user-data/workspace/README.md"}));
    let mut group = c.benchmark_group("chain");
    for entries in [1, 2, 4, 8] {
        let middleware = install(&allowlist.repeat(entries));
        group.bench_function(format!("decide, allow, {entries} allowlist entries"), |b| {
            b.iter(|| black_box(middleware.decide(black_box(&read)).unwrap()))
        });
    }
    let skipped = install(&format!(
        "{allowlist}{}",
        "    - use: builtin:AllowlistProvider\n      tools: [bash]\n".repeat(3)
    ));
    group.bench_function("decide, allow, 1 entry + 3 that do not select the tool", |b| {
        b.iter(|| black_box(skipped.decide(black_box(&read)).unwrap()))
    });
    let approvals = install(
        "    - use: builtin:ApprovalGuardrailProvider\n      config: {ask: [bash], set: {web_fetch: {max_bytes: 1000}}}\n",
    );
    let bash = call("bash", json!({"command": "make deploy"}));
    group.bench_function("decide, ask (digest and deadline computed)", |b| {
        b.iter(|| black_box(approvals.decide(black_box(&bash)).unwrap()))
    });
    let fetch = call("web_fetch", json!({"url": "https://example.com", "max_bytes": 9000000}));
    group.bench_function("decide, rewrite", |b| {
        b.iter(|| black_box(approvals.decide(black_box(&fetch)).unwrap()))
    });
    group.bench_function("decide, allow (approvals provider, tool not listed)", |b| {
        b.iter(|| black_box(approvals.decide(black_box(&read)).unwrap()))
    });
    group.finish();
}

/// The Cedar provider with `n` generated policies (a permit each, for a
/// tool of its own under a folder of its own) and the example schema: a
/// call none of them matches is decided by evaluating every one.
fn cedar(c: &mut Criterion) {
    let mut group = c.benchmark_group("cedar");
    let read = call("read_file", json!({"path": "/mnt/user-data/workspace/README.md"}));
    let request = GuardrailRequest::from_tool_call(&read, None).unwrap();
    for n in [10, 100, 1000] {
        let dir = tempfile::tempdir().unwrap();
        let policies: String = (0..n)
            .map(|i| {
                format!(
                    "permit (principal, action == Action::\"call\", resource == Tool::\"tool_{i}\")\n  when {{ context.args has path && context.args.path like \"/mnt/user-data/{i}/*\" }};\n"
                )
            })
            .collect();
        std::fs::write(dir.path().join("generated.cedar"), policies).unwrap();
        let config = object(json!({"policies": dir.path(), "schema": cedar_example("deerflow.cedarschema")}));
        let provider = load(&use_of("guardhost_cedar", "CedarGuardrailProvider"), config).provider;
        group.bench_function(format!("{n} policies and the schema, none matches (deny)"), |b| {
            b.iter(|| black_box(provider.evaluate(black_box(&request)).unwrap()))
        });
    }
    group.finish();
}

/// The groups (a private module: `criterion_group!` makes an undocumented
/// public function).
mod groups {
    use super::*;
    criterion_group!(benches, decision, middleware, request, loading, decision_log, chain, cedar);
}
criterion_main!(groups::benches);
