//! Loading the provider: a config error names its key, and the host
//! injects the framework.

use std::path::Path;

use guardhost::ProviderSpec;
use serde_json::{json, Value};

use crate::setup::{example_passport, object, try_provider, use_};

#[test]
fn config_errors_name_the_key() {
    let cases: &[(Value, &str)] = &[
        (json!({"mode": "audit"}), "`mode`: unknown variant (a string of 5 characters), expected one of `enforce`, `warn`, `observe`"),
        (json!({"passport": "x"}), "does not accept config key `passport`"),
        (
            json!({"tool_mapping": {"bash": "no.such.pack.v1"}}),
            "tool_mapping.bash: unknown policy pack `no.such.pack.v1`",
        ),
        (
            json!({"passport_path": "/no/such/passport.json"}),
            "passport_path: no passport at /no/such/passport.json",
        ),
        (json!({"policies_dir": "/no/such/dir"}), "policies_dir /no/such/dir cannot be read"),
        // A relative path is joined to the config file's directory (here
        // `/`, the base `try_provider` gives) and named in full.
        (
            json!({"passport_path": "no-such-dir/passport.json"}),
            &*Box::leak(
                format!(
                    "passport_path: no passport at {}",
                    Path::new("/").join("no-such-dir/passport.json").display()
                )
                .into_boxed_str(),
            ),
        ),
        (
            json!({"policies_dir": "no-such-policies"}),
            &*Box::leak(
                format!("policies_dir {} cannot be read", Path::new("/").join("no-such-policies").display())
                    .into_boxed_str(),
            ),
        ),
    ];
    for (config, expected) in cases {
        let error = try_provider(config.clone()).err().unwrap_or_else(|| panic!("{config} was accepted"));
        assert!(error.contains(expected), "{config}: {error}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("p.json");
    std::fs::write(&bad, r#"{"passport_id": "x"}"#).unwrap();
    let error = try_provider(json!({"passport_path": bad})).err().unwrap();
    assert!(error.contains("required field `spec_version` is missing"), "{error}");
}

#[test]
fn the_framework_is_injected_by_the_host() {
    let loaded = guardhost::instantiate(
        &ProviderSpec::new(use_(), object(json!({"passport_path": example_passport()}))),
        Path::new("/"),
    )
    .unwrap();
    assert!(loaded.info.framework_injected);
    assert_eq!(loaded.info.name, "oap");
}
