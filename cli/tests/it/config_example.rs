//! `config.example.yaml` is documentation that must stay true: its active
//! option and each commented-out option are loaded here.

use crate::support;

use std::path::{Path, PathBuf};

use guardhost::{install, BuildError, ConfigError, ConfigOrigin, LoadedConfig, ToolCallRequest, ToolStatus};

fn example() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("config.example.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// The commented-out `provider:` blocks, uncommented.
fn commented_providers(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let uncommented = line.strip_prefix("  # ").map(|l| format!("  {l}"));
        match (&mut current, uncommented) {
            (None, Some(l)) if l == "  provider:" => current = Some(vec![l]),
            (Some(block), Some(l)) if l.starts_with("    ") => block.push(l),
            (Some(_), _) => blocks.push(current.take().unwrap().join("\n")),
            _ => {}
        }
    }
    blocks.extend(current.map(|block| block.join("\n")));
    blocks
}

/// The example with its active provider replaced by `provider`.
fn with_provider(text: &str, provider: &str) -> String {
    let start = text.find("\n  provider:\n").unwrap();
    let end = start + text[start..].find("denied_tools: [\"bash\", \"write_file\"]\n").unwrap();
    let end = end + "denied_tools: [\"bash\", \"write_file\"]\n".len();
    format!("{}\n{provider}\n{}", &text[..start], &text[end..])
}

fn deny_bash(config: &LoadedConfig) {
    guardhost_builtins::register();
    let guardrail = install(config).unwrap().expect("installed");
    let message = guardrail
        .middleware
        .wrap_tool_call(ToolCallRequest::new("bash", Default::default()), &|_| unreachable!())
        .unwrap();
    assert_eq!(message.status, ToolStatus::Error);
}

#[test]
fn the_active_option_is_the_builtin_allowlist() {
    let (path, _) = example();
    let config = LoadedConfig::from_path(&path).unwrap();
    deny_bash(&config);
}

#[test]
fn every_commented_option_works_as_documented() {
    guardhost_isolation::install();
    let (_, text) = example();
    let blocks = commented_providers(&text);
    assert_eq!(blocks.len(), 4, "{blocks:#?}");

    // Option 2: the shipped libraries, from the build directory; the OAP
    // provider with the example passport.
    let built = support::library("guardhost_allowlist").parent().unwrap().to_path_buf();
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    for block in &blocks[..3] {
        assert!(block.contains("use: target/release/"), "{block}");
        let yaml = with_provider(&text, block);
        let base = built.join("../..");
        let yaml = yaml
            .replace("target/release/", &format!("{}/", built.display()))
            .replace("/etc/guardhost/passport.json", &passport.display().to_string());
        let config =
            LoadedConfig::from_yaml(&yaml, base, ConfigOrigin::File("example".into()), |_| None).unwrap();
        deny_bash(&config);
    }
    assert!(blocks[2].contains("guardhost_oap:OAPGuardrailProvider"), "{}", blocks[2]);

    // Option 3: the secret comes from the environment, and is required.
    let yaml = with_provider(&text, &blocks[3]);
    let missing = LoadedConfig::from_yaml(&yaml, "/".into(), ConfigOrigin::Embedded, |_| None).unwrap_err();
    assert!(
        matches!(missing, ConfigError::MissingEnvVar { ref var, .. } if var == "ACME_POLICY_KEY"),
        "{missing}"
    );
    let config = LoadedConfig::from_yaml(&yaml, "/".into(), ConfigOrigin::Embedded, |name| {
        (name == "ACME_POLICY_KEY").then(|| "k".to_owned())
    })
    .unwrap();
    let provider = config.guardrails.provider.as_ref().unwrap();
    assert_eq!(provider.config["api_key"], "k");
    assert_eq!(provider.isolation, guardhost::Isolation::Process);
    assert_eq!(provider.timeout_ms, Some(250));
    // The third-party library is not here, and the error, from the
    // provider's process, says where it looked.
    let error = install(&config).unwrap_err();
    assert!(matches!(error, BuildError::InProviderProcess { panicked: false, .. }), "{error:?}");
    assert!(error.to_string().contains("no such file; tried /opt/acme/libacme_policy.so"), "{error}");
    assert!(error.to_string().ends_with("(in the provider process)"), "{error}");
}
