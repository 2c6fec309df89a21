//! `guardhost schema`: the JSON Schema of the config file validates every
//! shipped config, and refuses misspelt keys at every level.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::cli::{guardhost, stderr, stdout};

fn validator() -> jsonschema::Validator {
    let out = guardhost(&["schema"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let schema: Value = serde_json::from_str(&stdout(&out)).expect("the schema is JSON");
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    jsonschema::draft202012::new(&schema).expect("the schema is a valid draft 2020-12 schema")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// config.example.yaml, examples/**/config.yaml, the embedded default.
fn shipped_configs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut configs = vec![root.join("config.example.yaml"), root.join("host/src/default-config.yaml")];
    let mut folders = vec![root.join("examples")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.file_name().is_some_and(|n| n == "config.yaml") {
                configs.push(path);
            }
        }
    }
    configs.sort();
    configs
}

fn problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator.iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn every_shipped_config_validates() {
    let validator = validator();
    let configs = shipped_configs();
    assert!(configs.len() >= 5, "{configs:?}");
    for config in configs {
        let value = yaml(&config);
        let problems = problems(&validator, &value);
        assert!(problems.is_empty(), "{}: {problems:?}", config.display());
    }
}

#[test]
fn misspelt_keys_are_refused_at_every_level() {
    let validator = validator();
    let good = json!({
        "guardrails": {
            "enabled": true,
            "mode": "warn",
            "decision_log": {"path": "decisions.jsonl", "args": true},
            "providers": [
                {"use": "builtin:AllowlistProvider", "config": {"denied_tools": ["bash"]}, "tools": ["*"]},
                {"use": "builtin:CedarGuardrailProvider", "config": {"policies": "policies/"}},
                {"use": "lib/libguardhost_oap.so:OAPGuardrailProvider", "config": {"passport_path": "passport.json"}},
                {"use": "builtin:ApprovalGuardrailProvider", "config": {"ask": ["write_file"], "timeout_s": 60}},
                {"use": "lib/libmine.so:MyProvider", "config": {"anything": ["goes"]}}
            ]
        },
        "authorization": {"enabled": true, "provider": {"use": "builtin:RbacAuthorizationProvider", "config": {"roles": {}}}},
        "mcp": {"name": "files", "servers": {"files": {"command": ["server"]}}},
        "models": [{"name": "the application's own section"}]
    });
    assert!(problems(&validator, &good).is_empty(), "{:?}", problems(&validator, &good));
    let misspelt = [
        "/guardrails/enabeld",
        "/guardrails/decision_log/pth",
        "/guardrails/providers/0/tool",
        "/guardrails/providers/0/config/denied_tool",
        "/guardrails/providers/1/config/polices",
        "/guardrails/providers/2/config/passport",
        "/guardrails/providers/3/config/timeout",
        "/authorization/provider/config/role",
        "/mcp/server",
        "/mcp/servers/files/comand",
    ];
    for pointer in misspelt {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        bad.pointer_mut(parent).unwrap().as_object_mut().unwrap().insert(key.to_owned(), json!(true));
        assert!(!validator.is_valid(&bad), "{pointer} was accepted");
    }
    // A wrong value, a section key beside `guardrails:`, and the section form.
    let mut bad = good.clone();
    bad["guardrails"]["mode"] = json!("enforcing");
    assert!(!validator.is_valid(&bad));
    let mut bad = good.clone();
    bad["guardrails"]["decision_log"] = json!({"args": true});
    assert!(!validator.is_valid(&bad), "`decision_log.path` is required");
    let mut bad = good.clone();
    bad["enabled"] = json!(true);
    assert!(!validator.is_valid(&bad));
    // `$NAME` where the host reads it from the environment, and only there.
    let mut env = good.clone();
    env["guardrails"]["enabled"] = json!("$GUARDRAILS_ON");
    env["guardrails"]["mode"] = json!("${GUARDRAILS_MODE}");
    env["authorization"]["fail_closed"] = json!("$AUTHZ_FAIL_CLOSED");
    assert!(problems(&validator, &env).is_empty(), "{:?}", problems(&validator, &env));
    let mut bad = good.clone();
    bad["guardrails"]["enabled"] = json!("maybe");
    assert!(!validator.is_valid(&bad));
    let mut bad = good.clone();
    bad["guardrails"]["decision_log"]["args"] = json!("$LOG_ARGS");
    assert!(!validator.is_valid(&bad), "`decision_log` is not read from the environment");
    let section = json!({"enabled": true, "provider": {"use": "builtin:AllowlistProvider"}});
    assert!(validator.is_valid(&section));
    let section = json!({"enabled": true, "provider": {"use": "builtin:AllowlistProvider"}, "models": []});
    assert!(!validator.is_valid(&section));
}
