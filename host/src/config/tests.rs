use super::*;
use serde_json::{json, Value};

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    parse_with_env(text, &[])
}

fn parse_with_env(text: &str, env: &[(&str, &str)]) -> Result<LoadedConfig, ConfigError> {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    LoadedConfig::from_yaml(
        text,
        PathBuf::from("/cfg"),
        ConfigOrigin::File("/cfg/config.yaml".into()),
        |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
    )
}

#[test]
fn defaults_are_disabled_fail_closed_no_passport_no_provider() {
    let c = parse("guardrails: {}\n").unwrap().guardrails;
    assert_eq!(
        c,
        GuardrailsConfig {
            enabled: false,
            fail_closed: true,
            passport: None,
            provider: None,
            providers: None,
            mode: Mode::Enforce,
            decision_log: None,
            audit_messages: crate::config::AuditMessages::Declared,
        }
    );
    assert_eq!(GuardrailsConfig::default(), c);
    assert!(!c.is_active());
}

#[test]
fn full_section_is_parsed() {
    let c = parse(
        "guardrails:\n  enabled: true\n  fail_closed: false\n  passport: ./passport.json\n  provider:\n    use: builtin:AllowlistProvider\n    config:\n      denied_tools: [bash]\n",
    )
    .unwrap()
    .guardrails;
    assert!(c.enabled && !c.fail_closed && c.is_active());
    assert_eq!(c.passport, Some(in_cfg("passport.json")));
    let p = c.provider.unwrap();
    assert_eq!(p.use_, "builtin:AllowlistProvider");
    assert_eq!(Value::Object(p.config), json!({"denied_tools": ["bash"]}));
}

#[test]
fn inactive_when_disabled_or_without_provider() {
    let disabled =
        parse("guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n").unwrap();
    assert!(!disabled.guardrails.is_active());
    let no_provider = parse("guardrails:\n  enabled: true\n").unwrap();
    assert!(!no_provider.guardrails.is_active());
}

#[test]
fn other_top_level_sections_are_ignored() {
    let c = parse("models: [{name: gpt}]\nsandbox: {use: x}\nguardrails:\n  enabled: true\n").unwrap();
    assert!(c.guardrails.enabled && c.section_found);
}

#[test]
fn a_file_may_be_the_section_itself() {
    let c = parse("enabled: true\nprovider:\n  use: builtin:AllowlistProvider\n").unwrap();
    assert!(c.guardrails.is_active() && c.section_found);
}

#[test]
fn a_whole_config_without_the_section_means_defaults() {
    let c = parse("models: []\n").unwrap();
    assert!(!c.section_found);
    assert_eq!(c.guardrails, GuardrailsConfig::default());
    assert_eq!(c.unguarded_reason(), Some("the file has no `guardrails:` section"));
}

#[test]
fn an_empty_file_is_refused_not_read_as_no_guardrail() {
    for text in ["", "\n\n", "# only a comment\n", "---\n", "~\n", "null\n"] {
        let err = parse(text).unwrap_err();
        assert!(matches!(err, ConfigError::Empty { .. }), "{text:?}: {err}");
        let err = err.to_string();
        assert!(
            err.starts_with("/cfg/config.yaml: the config is empty") && err.contains("no guardrail"),
            "{err}"
        );
    }
}

#[test]
fn a_guardrails_key_that_is_not_a_mapping_is_refused_as_deerflow_refuses_it() {
    for (text, found) in [
        ("guardrails:\n", "found nothing under it (null)"),
        ("guardrails: null\nmodels: []\n", "found nothing under it (null)"),
        ("models: []\nguardrails: ~\n", "found nothing under it (null)"),
        ("guardrails: []\n", "found a list"),
        ("guardrails: [enabled, provider]\n", "found a list"),
        ("guardrails: true\n", "found a boolean"),
        ("guardrails: 1\n", "found a number"),
        ("guardrails: \"\"\n", "found a string"),
        ("guardrails: builtin:AllowlistProvider\n", "found a string"),
    ] {
        let err = parse(text).unwrap_err();
        assert!(matches!(err, ConfigError::SectionNotAMapping { .. }), "{text:?}: {err}");
        let err = err.to_string();
        assert!(err.contains("`guardrails` must be a mapping"), "{err}");
        assert!(err.contains(found), "{text:?}: {err}");
    }
    // A value from the environment is described, never quoted.
    let err = parse_with_env("guardrails: $GR\n", &[("GR", "s3cret-value")]).unwrap_err().to_string();
    assert!(err.contains("found a string") && !err.contains("s3cret"), "{err}");
    // An empty mapping is DeerFlow's defaults: explicit, so it stays.
    assert_eq!(parse("guardrails: {}\n").unwrap().unguarded_reason(), Some("`enabled` is false"));
}

#[test]
fn section_keys_beside_the_guardrails_key_are_named() {
    for (text, keys, empty) in [
        (
            "guardrails:\nenabled: true\nprovider:\n  use: builtin:AllowlistProvider\n",
            "`enabled`, `provider`",
            true,
        ),
        ("guardrails:\n  enabled: true\nprovider:\n  use: builtin:AllowlistProvider\n", "`provider`", false),
        (
            "models: []\nguardrails:\n  enabled: true\n  provider: {use: x.so:Y}\nfail_closed: false\n",
            "`fail_closed`",
            false,
        ),
        ("guardrails: {enabled: true}\nmode: observe\npassport: p.json\n", "`passport`, `mode`", false),
        ("guardrails: {enabled: true}\ndecision_log: {path: d.jsonl}\n", "`decision_log`", false),
    ] {
        let err = parse(text).unwrap_err();
        assert!(matches!(err, ConfigError::MisplacedKeys { .. }), "{text:?}: {err}");
        let err = err.to_string();
        assert!(err.contains(&format!("{keys} belong in the `guardrails:` section")), "{text:?}: {err}");
        assert!(err.contains("Indent them under `guardrails:`"), "{err}");
        assert_eq!(err.contains("which has nothing under it"), empty, "{err}");
    }
}

#[test]
fn a_misspelled_section_is_refused_with_the_right_name() {
    for key in
        ["guardrail", "gaurdrails", "Guardrails", "GUARDRAILS", "guard_rails", "guardrials", "gardrail"]
    {
        let err = parse(&format!("models: []\n{key}:\n  enabled: true\n")).unwrap_err();
        assert!(matches!(err, ConfigError::MisspelledSection { .. }), "{key}: {err}");
        assert!(
            err.to_string().contains(&format!("a top-level key `{key}`: did you mean `guardrails`?")),
            "{err}"
        );
    }
    // Keys further away are other sections of a whole config.
    for key in ["guards", "guardian", "rails", "sandbox", "guardrails_extra_long_name"] {
        assert!(!parse(&format!("{key}: {{}}\n")).unwrap().section_found, "{key}");
    }
    assert_eq!(edit_distance("gaurdrails", "guardrails"), 1);
    assert_eq!(edit_distance("guardrail", "guardrails"), 1);
    assert_eq!(edit_distance("", "guardrails"), 10);
}

#[test]
fn a_null_provider_is_refused() {
    for text in [
        "guardrails:\n  enabled: true\n  provider: null\n",
        "guardrails:\n  enabled: true\n  provider:\n",
        "guardrails:\n  enabled: false\n  provider: ~\n",
        "enabled: true\nprovider:\n",
    ] {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains("invalid `guardrails` section: `provider` is empty (null)"), "{text:?}: {err}");
    }
    // `passport: null` is DeerFlow's default, as the embedded config writes it.
    assert!(parse("guardrails:\n  enabled: true\n  passport: null\n  provider: {use: x.so:Y}\n").is_ok());
}

#[test]
fn a_required_guardrail_is_checked_and_explained() {
    for (text, why) in [
        ("models: []\n", "the file has no `guardrails:` section"),
        ("guardrails: {}\n", "`enabled` is false"),
        (
            "guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n",
            "`enabled` is false",
        ),
        ("guardrails:\n  enabled: true\n", "no `provider` is set"),
    ] {
        let config = parse(text).unwrap();
        assert_eq!(config.unguarded_reason(), Some(why), "{text:?}");
        let err = config.require_guardrail().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "/cfg/config.yaml: installs no guardrail ({why}), and a guardrail is required"
            )),
            "{err}"
        );
    }
    let active =
        parse("guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider}\n").unwrap();
    assert!(active.unguarded_reason().is_none() && active.require_guardrail().is_ok());
    assert!(LoadedConfig::embedded_default().require_guardrail().is_ok());
}

#[test]
fn the_require_variable_takes_one_zero_true_or_false_only() {
    for (value, expected) in [("1", true), ("true", true), ("TRUE", true), ("0", false), ("false", false)] {
        assert_eq!(parse_require(Some(value)).unwrap(), expected, "{value}");
    }
    for value in [Some(""), Some("yes"), Some("2"), Some(" 1"), Some("on"), None] {
        let err = parse_require(value).unwrap_err().to_string();
        assert!(err.contains("GUARDHOST_REQUIRE_GUARDRAIL must be 1 or true"), "{err}");
    }
}

#[test]
fn unknown_keys_in_the_section_are_named() {
    let err = parse("guardrails:\n  enabled: true\n  fail_open: true\n").unwrap_err().to_string();
    assert!(
        err.contains(
            "unknown field `fail_open`, expected one of `enabled`, `fail_closed`, `passport`, `provider`"
        ),
        "{err}"
    );
    let err = parse("guardrails:\n  provider: {use: x, settings: {}}\n").unwrap_err().to_string();
    assert!(err.contains("unknown field `settings`"), "{err}");
    // A section file with a typo next to a real key is still a section file.
    let err = parse("enabled: true\nfailclosed: false\n").unwrap_err().to_string();
    assert!(err.contains("unknown field `failclosed`"), "{err}");
}

#[test]
fn wrong_types_and_missing_use_are_explained() {
    let err = parse("guardrails:\n  enabled: yes please\n").unwrap_err().to_string();
    assert!(
        err.ends_with("invalid `guardrails` section: `enabled`: invalid type: a string, expected a boolean"),
        "{err}"
    );
    let err = parse("guardrails:\n  provider: {use: x.so:Y, config: [a]}\n").unwrap_err().to_string();
    assert!(err.contains("`provider.config`: invalid type: a sequence, expected a map"), "{err}");
    let err = parse("guardrails:\n  provider: {config: {}}\n").unwrap_err().to_string();
    assert!(err.contains("missing field `use`"), "{err}");
    let err = parse("- a\n- b\n").unwrap_err().to_string();
    assert!(err.contains("top level must be a mapping") && err.contains("a list"), "{err}");
}

#[test]
fn env_vars_in_provider_config_are_resolved() {
    let c = parse_with_env(
        "guardrails:\n  provider:\n    use: x.so:Y\n    config:\n      api_key: $POLICY_KEY\n      nested: {token: '${TOKEN}', list: [$POLICY_KEY, plain]}\n      price: $5.00\n      literal: a$B\n",
        &[("POLICY_KEY", "s3cret"), ("TOKEN", "t0k")],
    )
    .unwrap();
    let config = Value::Object(c.guardrails.provider.unwrap().config);
    assert_eq!(
        config,
        json!({"api_key": "s3cret", "nested": {"token": "t0k", "list": ["s3cret", "plain"]}, "price": "$5.00", "literal": "a$B"})
    );
}

#[test]
fn a_missing_env_var_is_named_with_its_key() {
    let err = parse("guardrails:\n  provider:\n    use: x.so:Y\n    config:\n      nested: {api_key: $NOT_SET_ANYWHERE}\n")
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::MissingEnvVar { var, key, .. } if var == "NOT_SET_ANYWHERE" && key == "guardrails.provider.config.nested.api_key")
    );
    let text = err.to_string();
    // DeerFlow's own wording, inside guardhost's message.
    assert!(text.contains("Environment variable NOT_SET_ANYWHERE not found for config value"), "{text}");
    assert!(text.contains("`guardrails.provider.config.nested.api_key`"), "{text}");
}

#[test]
fn env_vars_are_resolved_everywhere_in_the_section_as_deerflow_does() {
    let c = parse_with_env(
        "guardrails:
  enabled: $GUARD_ON
  fail_closed: ${FAIL_CLOSED}
  passport: $MY_PASSPORT
  provider:
    use: $GUARD_USE
    config: {denied_tools: [$TOOL]}
",
        &[
            ("GUARD_ON", "true"),
            ("FAIL_CLOSED", "false"),
            ("MY_PASSPORT", "agent-123"),
            ("GUARD_USE", "builtin:AllowlistProvider"),
            ("TOOL", "bash"),
        ],
    )
    .unwrap()
    .guardrails;
    assert!(c.enabled && !c.fail_closed);
    assert_eq!(c.passport.as_deref(), Some("agent-123"));
    let provider = c.provider.unwrap();
    assert_eq!(provider.use_, "builtin:AllowlistProvider");
    assert_eq!(Value::Object(provider.config), json!({"denied_tools": ["bash"]}));

    let err = parse(
        "guardrails:
  passport: $NO_SUCH_PASSPORT_VAR
",
    )
    .unwrap_err();
    assert!(matches!(&err, ConfigError::MissingEnvVar { key, .. } if key == "guardrails.passport"), "{err}");
}

#[test]
fn deerflow_boolean_spellings_are_read_as_booleans() {
    for (spelling, expected) in [
        ("yes", true),
        ("'true'", true),
        ("On", true),
        ("1", true),
        ("'Y'", true),
        ("no", false),
        ("'false'", false),
        ("off", false),
        ("0", false),
        ("0.0", false),
    ] {
        let text = format!(
            "guardrails:\n  enabled: {spelling}\n  fail_closed: {spelling}\n  provider:\n    use: x.so:Y\n    allow_insecure_permissions: {spelling}\n"
        );
        let c = parse(&text).unwrap_or_else(|e| panic!("{spelling}: {e}")).guardrails;
        assert_eq!((c.enabled, c.fail_closed), (expected, expected), "{spelling}");
        assert_eq!(c.provider.unwrap().allow_insecure_permissions, expected, "{spelling}");
    }
    // What pydantic refuses stays refused, naming the key.
    for bad in ["2", "maybe", "[true]", "{a: 1}"] {
        let err = parse(&format!("guardrails:\n  enabled: {bad}\n")).unwrap_err();
        assert!(err.to_string().contains("`enabled`"), "{bad}: {err}");
    }
}

#[test]
fn a_relative_passport_path_is_relative_to_the_config_file() {
    let passport = |value: &str| {
        parse(&format!("guardrails:\n  passport: {value}\n")).unwrap().guardrails.passport.unwrap()
    };
    assert_eq!(passport("./passport.json"), in_cfg("passport.json"));
    assert_eq!(passport("passports/agent.json"), in_cfg("passports/agent.json"));
    assert_eq!(passport("passport.json"), in_cfg("passport.json"));
    assert_eq!(passport("/etc/aport/passport.json"), "/etc/aport/passport.json");
    // A hosted agent id is not a path and is kept as written.
    assert_eq!(passport("ap_128094d3"), "ap_128094d3");
    assert_eq!(passport("~/.aport/passport.json"), "~/.aport/passport.json");
}

#[test]
fn the_embedded_default_is_active_and_uses_the_builtin() {
    let c = LoadedConfig::embedded_default();
    assert_eq!(c.origin, ConfigOrigin::Embedded);
    assert!(c.guardrails.is_active());
    assert_eq!(c.guardrails.provider.unwrap().use_, "builtin:AllowlistProvider");
}

#[test]
fn section_errors_name_the_key_never_the_value() {
    const SECRET: &str = "GH_SENTINEL_S3cr3t";
    let cases = [
        ("guardrails:\n  provider: {use: x.so:Y, timeout_ms: $S}\n", "`provider.timeout_ms`: invalid type: a string, expected u64"),
        (
            "guardrails:\n  provider: {use: x.so:Y, isolation: $S}\n",
            "`provider.isolation`: unknown variant (a string of 18 characters), expected `in_process` or `process`",
        ),
        ("guardrails:\n  enabled: $S\n", "`enabled`: invalid type: a string, expected a boolean"),
        ("guardrails:\n  passport: [$S]\n", "`passport`: invalid type: a sequence, expected a string"),
        ("guardrails:\n  provider: {use: [$S]}\n", "`provider.use`: invalid type: a sequence, expected a string"),
    ];
    for (text, expected) in cases {
        let err = parse_with_env(text, &[("S", SECRET)]).unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
        assert!(!err.contains(SECRET), "{text}: {err}");
    }
}

#[test]
fn hostile_yaml_is_refused_by_name_of_the_limit() {
    let err = parse(&"[".repeat(1 << 20)).unwrap_err().to_string();
    assert!(err.contains("nested more than 64 deep"), "{err}");
    let err = parse(&format!("a: {}", " ".repeat(1 << 20))).unwrap_err().to_string();
    assert!(err.contains("over the limit of 1048576 bytes"), "{err}");
    let err = parse(&crate::yaml::tests::alias_bomb()).unwrap_err().to_string();
    assert!(err.contains("more than 100000 values"), "{err}");
}

#[test]
fn transport_is_for_provider_processes_and_says_how_to_fix_it() {
    let ok = parse("guardrails:\n  provider: {use: x.so:Y, isolation: process, transport: pipes}\n").unwrap();
    assert_eq!(ok.guardrails.provider.unwrap().transport, Some(Transport::Pipes));
    let ok = parse("guardrails:\n  provider: {use: x.so:Y, isolation: process}\n").unwrap();
    assert_eq!(ok.guardrails.provider.unwrap().transport, None, "shared memory where it can be");
    let cases = [
        (
            "guardrails:\n  provider: {use: x.so:Y, transport: shared_memory}\n",
            "`provider.transport: shared_memory` chooses how calls reach a provider process; add `isolation: process`, or remove `transport`",
        ),
        (
            "guardrails:\n  provider: {command: [python3, p.py], isolation: process, transport: shared_memory}\n",
            "a `command:` provider program speaks over pipes, so remove `transport`",
        ),
        (
            "guardrails:\n  provider: {use: x.so:Y, isolation: process, transport: mmap}\n",
            "`provider.transport`: unknown variant (a string of 4 characters), expected `shared_memory` or `pipes`",
        ),
    ];
    for (text, expected) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
    let ok =
        parse("guardrails:\n  provider: {command: [python3, p.py], isolation: process, transport: pipes}\n");
    assert!(ok.is_ok(), "{ok:?}");
    // Shared memory is Linux's alone: refused elsewhere, saying what to write.
    let shared =
        parse("guardrails:\n  provider: {use: x.so:Y, isolation: process, transport: shared_memory}\n");
    if cfg!(target_os = "linux") {
        assert_eq!(shared.unwrap().guardrails.provider.unwrap().transport, Some(Transport::SharedMemory));
    } else {
        let err = shared.unwrap_err().to_string();
        assert!(err.contains("`provider.transport: shared_memory` is Linux only"), "{err}");
        assert!(err.contains("write `transport: pipes` or remove `transport`"), "{err}");
    }
}

#[test]
fn mode_is_enforce_unless_set_and_names_its_values() {
    assert_eq!(parse("guardrails:\n  enabled: true\n").unwrap().guardrails.mode, Mode::Enforce);
    assert_eq!(parse("guardrails:\n  mode: observe\n").unwrap().guardrails.mode, Mode::Observe);
    let err = parse("guardrails:\n  mode: audit\n").unwrap_err().to_string();
    assert!(err.contains("`mode`: unknown variant") && err.contains("`enforce`, `warn`, `observe`"), "{err}");
}

/// `relative` (written with `/`) in the test configs' folder, `/cfg`, with
/// this system's separator (`/cfg\\passports\\agent.json` on Windows).
fn in_cfg(relative: &str) -> String {
    let separator = std::path::MAIN_SEPARATOR_STR;
    format!("/cfg{separator}{}", relative.replace('/', separator))
}
