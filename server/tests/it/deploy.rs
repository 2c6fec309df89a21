//! The Kubernetes files in `deploy/kubernetes/` are documentation that must
//! stay true: every option they give `guardhost-server` is one it has, the
//! probes ask `/readyz` and `/healthz` on the port it listens on, the
//! token comes from a secret through the variable `--token-env` names, the
//! grace period outlasts the drain, a config that installs no guardrail
//! stops the start (`--require-guardrail`), and each ConfigMap's
//! `config.yaml` is a `guardrails:` section guardhost reads.

use std::path::Path;

use serde_yaml::Value;

fn documents(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect()
}

use serde::Deserialize;

fn options() -> String {
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_guardhost-server")).arg("--help").output().unwrap();
    String::from_utf8(output.stdout).unwrap()
}

fn check(file: &str) {
    let help = options();
    let docs = documents(file);
    let configs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "ConfigMap").collect();
    assert!(!configs.is_empty(), "{file}: a ConfigMap");
    for config in configs {
        let text = config["data"]["config.yaml"].as_str().unwrap();
        let loaded = guardhost::LoadedConfig::from_yaml(
            text,
            "/etc/guardhost".into(),
            guardhost::ConfigOrigin::Embedded,
            |_| None,
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        loaded.require_guardrail().unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let deployments: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Deployment").collect();
    assert_eq!(deployments.len(), 1, "{file}");
    let spec = &deployments[0]["spec"]["template"]["spec"];
    let containers = spec["containers"].as_sequence().unwrap();
    let guardhost = containers
        .iter()
        .find(|c| c["name"] == "guardhost")
        .unwrap_or_else(|| panic!("{file}: no guardhost container"));
    let args: Vec<&str> =
        guardhost["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--require-guardrail"), "{file}: a broken config must not start as allow-all");
    let mut port = None;
    let mut drain_ms = 30_000;
    for arg in &args {
        let flag = arg.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{file}: guardhost-server has no {flag}"
        );
        if let Some(listen) = arg.strip_prefix("--listen=") {
            port = Some(listen.rsplit(':').next().unwrap().parse::<u64>().unwrap());
        }
        if let Some(ms) = arg.strip_prefix("--drain-timeout-ms=") {
            drain_ms = ms.parse().unwrap();
        }
        if let Some(name) = arg.strip_prefix("--token-env=") {
            let env = guardhost["env"].as_sequence().unwrap();
            let var =
                env.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{file}: {name} is not set"));
            assert!(var["valueFrom"]["secretKeyRef"].is_mapping(), "{file}: the token comes from a secret");
        }
    }
    let port = port.unwrap_or(8787);
    let named_port = |p: &Value| match p {
        Value::Number(n) => n.as_u64() == Some(port),
        Value::String(name) => guardhost["ports"]
            .as_sequence()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == name.as_str() && p["containerPort"].as_u64() == Some(port)),
        _ => false,
    };
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &guardhost[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{file}: {probe}");
        assert!(named_port(&get["port"]), "{file}: {probe} asks port {port}");
    }
    if let Some(grace) = spec["terminationGracePeriodSeconds"].as_u64() {
        assert!(grace * 1000 > drain_ms, "{file}: the grace period outlasts the drain");
    }
}

#[test]
fn the_replicated_service_is_wired_as_the_server_wants() {
    check("replicated.yaml");
}

#[test]
fn the_sidecar_is_wired_as_the_server_wants() {
    check("sidecar.yaml");
}
