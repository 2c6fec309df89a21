//! `use:` resolution and library loading: every error with its specific
//! message, framework injection, and the allowlist as built-in and as `.so`.

use guardhost_test_support as support;

use std::path::{Path, PathBuf};

use guardhost::{
    install, instantiate, BuildError, ConfigOrigin, LoadErrorKind, LoadedConfig, ProviderSource,
    ProviderSpec, ToolCallRequest,
};
use serde_json::{json, Map, Value};
use support::{library, load, object, try_load, use_of};

fn load_error(use_: &str) -> (BuildError, String) {
    let error = try_load(use_, Map::new()).expect_err("must not load");
    let text = error.to_string();
    (error, text)
}

fn kind(error: &BuildError) -> &LoadErrorKind {
    match error {
        BuildError::Load(e) => &e.kind,
        other => panic!("expected a load error, got {other:?}"),
    }
}

#[test]
fn malformed_use_is_explained() {
    let (error, text) = load_error("plugins/libfoo.so");
    assert!(matches!(error, BuildError::MalformedUse(_)));
    assert_eq!(
        text,
        "malformed `use: plugins/libfoo.so`: there is no `:Symbol` after the path; expected `path/to/libfoo.so:Symbol` (or `builtin:AllowlistProvider`)"
    );
}

#[test]
fn a_missing_file_shows_the_resolved_path() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProviderSpec::new("plugins/libnothere.so:P", Map::new());
    let error = instantiate(&spec, dir.path()).unwrap_err();
    let resolved = dir.path().join("plugins").join("libnothere.so");
    assert_eq!(kind(&error), &LoadErrorKind::NotFound { tried: vec![resolved.clone()] });
    assert!(error.to_string().contains(&format!("no such file; tried {}", resolved.display())), "{error}");
}

#[test]
fn a_missing_file_without_suffix_lists_every_spelling_tried() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProviderSpec::new("plugins/nothere:P", Map::new());
    let text = instantiate(&spec, dir.path()).unwrap_err().to_string();
    let platform_name = format!("{}nothere{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let plugins = dir.path().join("plugins");
    assert!(text.contains(&plugins.join(platform_name).display().to_string()), "{text}");
    assert!(text.ends_with(&plugins.join("nothere").display().to_string()), "{text}");
}

#[test]
fn a_file_that_is_not_a_library_shows_the_loaders_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(dir.path(), "libfake.so", "this is not a shared object\n");
    let (error, text) = load_error(&format!("{}:P", path.display()));
    let LoadErrorKind::NotLoadable { reason } = kind(&error) else { panic!("{error:?}") };
    assert_ne!(reason, "dlopen failed", "the OS loader's own reason must be shown");
    if cfg!(target_os = "linux") {
        assert!(reason.contains("invalid ELF header") || reason.contains("file too short"), "{reason}");
    }
    assert!(
        text.contains("not a loadable library: ") && text.contains(&path.display().to_string()),
        "{text}"
    );
}

#[test]
fn a_directory_is_not_a_library() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("libdir.so")).unwrap();
    let spec = ProviderSpec::new("libdir.so:P", Map::new());
    let error = instantiate(&spec, dir.path()).unwrap_err();
    assert_eq!(
        kind(&error),
        &LoadErrorKind::NotLoadable { reason: "it is a directory, not a library file".into() }
    );
}

#[test]
fn a_python_class_path_gets_a_hint() {
    let (error, text) = load_error("aport_guardrails.providers.generic:OAPGuardrailProvider");
    assert!(matches!(error, BuildError::PythonModulePath { .. }));
    assert!(
        text.starts_with(
            "`use: aport_guardrails.providers.generic:OAPGuardrailProvider` looks like a Python module path;"
        ),
        "{text}"
    );
    let platform_name = format!(
        "{}aport_guardrails.providers.generic{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let tried = Path::new(std::path::MAIN_SEPARATOR_STR).join(platform_name);
    assert!(text.contains(&format!("no library was found at {}, ", tried.display())), "{text}");
}

#[test]
fn a_panic_while_listing_keys_is_an_error() {
    let e = try_load(&use_of("guardhost_test_providers", "PanickingKeysProvider"), Map::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "provider 'panicking-keys' rejected its config: provider panicked: accepted_keys: keys boom"
    );
}

#[test]
fn a_missing_symbol_is_named() {
    let (error, text) = load_error(&use_of("guardhost_allowlist", "NoSuchProvider"));
    let LoadErrorKind::SymbolMissing { symbol, reason, exported } = kind(&error) else { panic!("{error:?}") };
    assert_eq!(symbol, "NoSuchProvider");
    // The loader's own reason is kept: dlsym names the symbol; Windows'
    // GetProcAddress gives its error text ("Procedure not found").
    let kept = if cfg!(windows) { "(os error 127)" } else { "NoSuchProvider" };
    assert!(reason.contains(kept), "the loader's own reason is kept: {reason}");
    assert!(text.contains("exports no symbol `NoSuchProvider`"), "{text}");
    // What the library does export, so the fix is in the message.
    assert_eq!(exported.as_deref(), Some(&["AllowlistProvider".to_owned()][..]));
    assert!(
        text.ends_with("it exports one provider descriptor, `AllowlistProvider`: write that after the colon"),
        "{text}"
    );
}

#[test]
fn a_missing_symbol_lists_every_provider_the_library_exports_rust_and_c() {
    // A wrongly cased name among many descriptors (some of them broken:
    // listed all the same, since `use:` may name them).
    let (error, text) = load_error(&use_of("guardhost_zoo", "notthreadsafe"));
    let LoadErrorKind::SymbolMissing { exported: Some(exported), .. } = kind(&error) else {
        panic!("{error:?}")
    };
    assert!(exported.iter().any(|s| s == "NotThreadSafe"), "{exported:?}");
    assert!(exported.iter().any(|s| s == "VolatileDeclared"), "{exported:?}");
    assert!(text.contains("it exports these provider descriptors: `"), "{text}");
    assert!(text.ends_with("write one of them after the colon (names are case-sensitive)"), "{text}");
    // C descriptors are found by their own magic; data that is not a
    // descriptor is left out.
    let (error, _) = load_error(&use_of("guardhost_c_descriptors", "Nope"));
    let LoadErrorKind::SymbolMissing { exported: Some(exported), .. } = kind(&error) else {
        panic!("{error:?}")
    };
    assert!(
        exported.iter().any(|s| s == "CScripted") && exported.iter().any(|s| s == "CWrongMajor"),
        "{exported:?}"
    );
    assert!(!exported.iter().any(|s| s == "CNotADescriptor"), "{exported:?}");
    let (error, _) = load_error(&use_of("guardhost_bad_descriptors", "Nope"));
    let LoadErrorKind::SymbolMissing { exported: Some(exported), .. } = kind(&error) else {
        panic!("{error:?}")
    };
    assert!(!exported.iter().any(|s| s == "NotADescriptor"), "{exported:?}");
    assert!(exported.iter().any(|s| s == "FineProvider"), "{exported:?}");
}

#[test]
fn a_symbol_that_is_not_a_descriptor_is_refused() {
    for symbol in ["NotADescriptor", "not_a_provider"] {
        let lib =
            if symbol == "NotADescriptor" { "guardhost_bad_descriptors" } else { "guardhost_test_providers" };
        let (error, text) = load_error(&use_of(lib, symbol));
        assert_eq!(kind(&error), &LoadErrorKind::NotADescriptor { symbol: symbol.into() });
        assert!(text.contains("is not a guardhost provider descriptor"), "{text}");
    }
}

#[test]
fn an_abi_major_mismatch_shows_both_versions() {
    let (error, text) = load_error(&use_of("guardhost_bad_descriptors", "WrongMajor"));
    assert_eq!(
        kind(&error),
        &LoadErrorKind::AbiMajorMismatch {
            found_major: 99,
            found_minor: 3,
            expected: guardhost_abi::ABI_MAJOR
        }
    );
    assert!(text.contains("built for guardhost provider ABI 99.3, but this host speaks ABI 1.x"), "{text}");
}

#[test]
fn a_panic_abort_library_is_refused() {
    let (error, text) = load_error(&use_of("guardhost_bad_descriptors", "PanicAbort"));
    assert_eq!(kind(&error), &LoadErrorKind::PanicAbort);
    assert!(text.contains("panic = \"abort\""), "{text}");
}

#[test]
fn a_layout_mismatch_is_summarised() {
    let (error, text) = load_error(&use_of("guardhost_bad_descriptors", "WrongLayout"));
    let LoadErrorKind::LayoutMismatch { summary } = kind(&error) else { panic!("{error:?}") };
    assert_eq!(
        summary,
        "`ProviderFactory`: the type is `ProviderFactory` here, `OldFactory` in the provider"
    );
    assert!(text.contains("do not match this host's ABI layout"), "{text}");
}

#[test]
fn the_good_descriptor_next_to_the_bad_ones_loads() {
    let loaded = load(&use_of("guardhost_bad_descriptors", "FineProvider"), Map::new());
    assert_eq!(loaded.info.name, "fine");
}

#[test]
fn a_constructor_error_carries_its_message() {
    let (error, text) = {
        let e = try_load(
            &use_of("guardhost_test_providers", "FrameworkAwareProvider"),
            object(json!({"limit": 11})),
        )
        .unwrap_err();
        let t = e.to_string();
        (e, t)
    };
    assert!(matches!(error, BuildError::Constructor { .. }));
    assert_eq!(text, "provider 'framework-aware' rejected its config: limit must be at most 10");
}

#[test]
fn a_constructor_type_error_names_the_provider() {
    let e = try_load(
        &use_of("guardhost_allowlist", "AllowlistProvider"),
        object(json!({"denied_tools": "bash"})),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("provider 'allowlist' rejected its config: invalid config: `denied_tools`: invalid type: a string, expected a sequence"), "{e}");
    // Inside a list, the path names the element; the value (perhaps a
    // secret) is never repeated.
    let e = try_load(
        &use_of("guardhost_allowlist", "AllowlistProvider"),
        object(json!({"denied_tools": ["bash", 3], "allowed_tools": ["ls"]})),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "provider 'allowlist' rejected its config: invalid config: `denied_tools[1]`: invalid type: a number, expected a string"
    );
}

#[test]
fn a_panicking_constructor_is_an_error_and_the_host_survives() {
    let e = try_load(&use_of("guardhost_test_providers", "PanickingConstructorProvider"), Map::new())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "provider 'panicking-constructor' rejected its config: provider panicked: constructor: constructor boom"
    );
}

#[test]
fn an_unknown_key_is_rejected_before_construction_with_the_accepted_list() {
    for use_ in ["builtin:AllowlistProvider".to_owned(), use_of("guardhost_allowlist", "AllowlistProvider")] {
        let e = try_load(&use_, object(json!({"allowed_tools": [], "blocked": ["x"]}))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "provider 'allowlist' does not accept config key `blocked`; it accepts: allowed_tools, denied_tools, \
             allowed_patterns, denied_patterns"
        );
    }
    let e = try_load(&use_of("guardhost_test_providers", "AllowAllProvider"), object(json!({"x": 1})))
        .unwrap_err();
    assert!(e.to_string().ends_with("it accepts: no keys at all"), "{e}");
}

#[test]
fn an_unknown_builtin_lists_the_builtins() {
    let e = try_load("builtin:OAPGuardrailProvider", Map::new()).unwrap_err().to_string();
    // Cedar follows when the build turns on guardhost-builtins' `cedar`.
    let listed = "`use: builtin:OAPGuardrailProvider` names no built-in provider; the built-ins are: \
                  builtin:AllowlistProvider, builtin:RbacAuthorizationProvider, builtin:ApprovalGuardrailProvider";
    assert!(e.starts_with(listed), "{e}");
}

#[test]
fn framework_is_injected_for_kwargs_providers() {
    let loaded = load(
        &use_of("blocked_prefixes", "MyGuardrailProvider"),
        object(json!({"blocked_prefixes": ["bash"]})),
    );
    assert!(loaded.info.framework_injected && loaded.info.accepts_extra_keys);
    let decision = loaded.provider.evaluate(&request("ls")).unwrap();
    assert_eq!(decision.metadata, object(json!({"framework": "deerflow"})));
}

#[test]
fn framework_is_injected_for_providers_declaring_it() {
    let loaded = load(&use_of("guardhost_test_providers", "FrameworkAwareProvider"), Map::new());
    assert!(loaded.info.framework_injected && !loaded.info.accepts_extra_keys);
    assert_eq!(loaded.provider.evaluate(&request("ls")).unwrap().metadata["framework"], json!("deerflow"));
}

#[test]
fn framework_is_never_injected_for_the_allowlist() {
    for use_ in ["builtin:AllowlistProvider".to_owned(), use_of("guardhost_allowlist", "AllowlistProvider")] {
        let loaded = load(&use_, Map::new());
        assert!(!loaded.info.framework_injected, "{use_}");
    }
    // And passing it explicitly is an unknown key, as in Python.
    let e = try_load("builtin:AllowlistProvider", object(json!({"framework": "deerflow"}))).unwrap_err();
    assert!(e.to_string().contains("does not accept config key `framework`"), "{e}");
}

#[test]
fn an_explicit_framework_is_not_overridden() {
    let loaded =
        load(&use_of("blocked_prefixes", "MyGuardrailProvider"), object(json!({"framework": "langgraph"})));
    assert!(!loaded.info.framework_injected);
    assert_eq!(loaded.provider.evaluate(&request("ls")).unwrap().metadata["framework"], json!("langgraph"));
}

#[test]
fn extra_keys_are_accepted_by_kwargs_providers() {
    let loaded = load(&use_of("blocked_prefixes", "MyGuardrailProvider"), object(json!({"team": "infra"})));
    assert_eq!(loaded.info.accepted_keys, ["blocked_prefixes", "framework"]);
}

fn request(tool: &str) -> guardhost::GuardrailRequest {
    guardhost::GuardrailRequest::from_tool_call(&ToolCallRequest::new(tool, Map::new()), None).unwrap()
}

#[test]
fn the_allowlist_is_the_same_built_in_and_as_a_library() {
    let configs = [
        json!({}),
        json!({"denied_tools": ["bash"]}),
        json!({"allowed_tools": ["read_file", "bash"], "denied_tools": ["bash"]}),
        json!({"allowed_tools": []}),
    ];
    for config in configs {
        let builtin = load("builtin:AllowlistProvider", object(config.clone()));
        let deerflow = load("deerflow.guardrails.builtin:AllowlistProvider", object(config.clone()));
        let library = load(&use_of("guardhost_allowlist", "AllowlistProvider"), object(config.clone()));
        assert!(matches!(builtin.info.source, ProviderSource::Builtin { .. }));
        assert!(matches!(library.info.source, ProviderSource::Library { .. }));
        for tool in ["bash", "read_file", "write_file", "", "mcp__x__y"] {
            let expected = builtin.provider.evaluate(&request(tool)).unwrap();
            assert_eq!(deerflow.provider.evaluate(&request(tool)).unwrap(), expected, "{config} {tool}");
            assert_eq!(library.provider.evaluate(&request(tool)).unwrap(), expected, "{config} {tool}");
            let rt = tokio::runtime::Runtime::new().unwrap();
            let r = request(tool);
            assert_eq!(
                rt.block_on(library.provider.aevaluate(&r)).unwrap(),
                expected,
                "async {config} {tool}"
            );
        }
    }
}

#[test]
fn library_info_reports_path_symbol_and_abi() {
    let loaded = load(&use_of("guardhost_allowlist", "AllowlistProvider"), Map::new());
    let ProviderSource::Library { path, symbol } = &loaded.info.source else { panic!() };
    assert_eq!(path, &guardhost::paths::canonical(&library("guardhost_allowlist")));
    assert_eq!(symbol, "AllowlistProvider");
    assert_eq!(loaded.info.abi_version, (guardhost_abi::ABI_MAJOR, guardhost_abi::ABI_MINOR));
    assert_eq!(loaded.info.name, "allowlist");
}

#[test]
fn relative_use_paths_resolve_against_the_config_file_and_suffixes_are_optional() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let lib = library("guardhost_allowlist");
    std::fs::copy(&lib, plugins.join(lib.file_name().unwrap())).unwrap();
    let absolute = format!("{}:AllowlistProvider", plugins.join(lib.file_name().unwrap()).display());
    let mut spellings = vec!["plugins/guardhost_allowlist:AllowlistProvider".to_owned()];
    if cfg!(target_os = "linux") {
        spellings.push("plugins/libguardhost_allowlist.so:AllowlistProvider".to_owned());
    }
    if cfg!(windows) {
        // What a Windows operator writes: back slashes, `.\`, a drive
        // letter, and both separators at once.
        spellings.extend(
            [
                r".\plugins\guardhost_allowlist:AllowlistProvider",
                r"plugins\guardhost_allowlist.dll:AllowlistProvider",
                r"./plugins\guardhost_allowlist.dll:AllowlistProvider",
            ]
            .map(str::to_owned),
        );
        assert!(absolute.as_bytes()[1] == b':', "a drive letter: {absolute}");
    }
    spellings.push(absolute);
    for use_ in &spellings {
        let yaml = format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: '{use_}'\n    config:\n      denied_tools: [bash]\n"
        );
        let path = support::write(dir.path(), "config.yaml", &yaml);
        // Run from somewhere else: the path must not depend on the working directory.
        let config = LoadedConfig::from_path(&path).unwrap();
        assert_eq!(config.origin, ConfigOrigin::File(path.clone()));
        let guardrail = install(&config).unwrap().expect("installed");
        let message = guardrail
            .middleware
            .wrap_tool_call(ToolCallRequest::new("bash", Map::new()), &|_| unreachable!())
            .unwrap();
        assert!(message.content.contains("tool 'bash' is denied"), "{use_}");
    }
}

#[test]
fn install_is_none_when_disabled_or_without_provider() {
    for yaml in [
        "guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n",
        "guardrails:\n  enabled: true\n",
    ] {
        let config = LoadedConfig::from_yaml(yaml, "/".into(), ConfigOrigin::Embedded, |_| None).unwrap();
        assert!(install(&config).unwrap().is_none(), "{yaml}");
    }
}

#[test]
fn install_applies_fail_closed_and_passport() {
    let yaml = format!(
        "guardrails:\n  enabled: true\n  fail_closed: false\n  passport: agent-9\n  provider:\n    use: '{}'\n",
        use_of("guardhost_test_providers", "ErroringProvider")
    );
    let config = LoadedConfig::from_yaml(&yaml, "/".into(), ConfigOrigin::Embedded, |_| None).unwrap();
    let guardrail = install(&config).unwrap().unwrap();
    assert!(!guardrail.middleware.fail_closed());
    assert_eq!(guardrail.middleware.passport(), Some("agent-9"));
    let verdict = guardrail.middleware.check(&ToolCallRequest::new("bash", Map::new())).unwrap();
    assert!(verdict.allowed() && verdict.provider_error);
    assert_eq!(verdict.request.agent_id.as_deref(), Some("agent-9"));
}

#[test]
fn env_var_secrets_reach_the_constructor() {
    let yaml = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: '{}'\n    config:\n      api_key: $GUARDHOST_TEST_SECRET\n      nested: [{{token: '${{GUARDHOST_TEST_SECRET}}'}}]\n",
        use_of("guardhost_test_providers", "EchoConfigProvider")
    );
    let config = LoadedConfig::from_yaml(&yaml, "/".into(), ConfigOrigin::Embedded, |name| {
        (name == "GUARDHOST_TEST_SECRET").then(|| "s3cret".to_owned())
    })
    .unwrap();
    let guardrail = install(&config).unwrap().unwrap();
    // A map config: any key is accepted, none is declared, framework is injected.
    assert!(guardrail.info.accepted_keys.is_empty() && guardrail.info.accepts_extra_keys);
    let verdict = guardrail.middleware.check(&ToolCallRequest::new("ls", Map::new())).unwrap();
    assert_eq!(
        Value::Object(verdict.decision.metadata),
        json!({"api_key": "s3cret", "nested": [{"token": "s3cret"}], "framework": "deerflow"})
    );
}

/// Builds the scripted test providers for real with `panic = "abort"` (in a
/// target directory of its own, so the normal build is left alone) and
/// checks that the host refuses the result. Not on Windows, where the
/// test runs without cargo (under wine); the descriptor-level refusal is
/// `a_panic_abort_library_is_refused`.
#[test]
#[cfg_attr(windows, ignore = "builds with cargo, which the Windows test run does not have")]
fn a_library_really_built_with_panic_abort_is_refused() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // The target directory the nested builds of the tests share (the test
    // run holds the normal one); `-C panic=abort` reaches only this crate.
    let target = root.join("target").join("nested");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .current_dir(root)
        .args([
            "rustc",
            "--offline",
            "-q",
            "-p",
            "guardhost-test-providers",
            "--lib",
            "--crate-type",
            "cdylib",
        ])
        .arg("--target-dir")
        .arg(&target)
        .args(["--", "-C", "panic=abort"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the panic=abort variant failed");
    let file =
        format!("{}guardhost_test_providers{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let path = target.join("debug").join(file);
    let (error, text) = load_error(&format!("{}:AllowAllProvider", path.display()));
    assert_eq!(kind(&error), &LoadErrorKind::PanicAbort, "{text}");
}

#[test]
fn a_library_built_against_abi_1_0_loads_and_declares_no_volatile_metadata() {
    let loaded = load(&use_of("guardhost_bad_descriptors", "AbiOneZero"), Map::new());
    assert_eq!(loaded.info.name, "fine-1.0");
    assert_eq!(loaded.info.abi_version, (1, 0));
    assert!(loaded.info.volatile_metadata_keys.is_empty());
    let call = guardhost::ToolCallRequest::new("bash", Map::new());
    let request = guardhost::GuardrailRequest::from_tool_call(&call, None).unwrap();
    assert!(loaded.provider.evaluate(&request).unwrap().allow);

    let current = load(&use_of("guardhost_bad_descriptors", "FineProvider"), Map::new());
    assert_eq!(current.info.abi_version, (1, 4));
}

#[test]
fn a_library_built_against_abi_1_1_loads_and_declares_no_path_keys() {
    let loaded = load(&use_of("guardhost_bad_descriptors", "AbiOneOne"), Map::new());
    assert_eq!(loaded.info.name, "fine-1.1");
    assert_eq!(loaded.info.abi_version, (1, 1));
    assert_eq!(loaded.info.volatile_metadata_keys, ["evaluated_at"]);
    assert!(loaded.info.path_keys.is_empty());
    let call = guardhost::ToolCallRequest::new("bash", Map::new());
    let request = guardhost::GuardrailRequest::from_tool_call(&call, None).unwrap();
    assert!(loaded.provider.evaluate(&request).unwrap().allow);
}

#[test]
fn a_library_built_against_abi_1_2_loads_and_is_handed_every_input() {
    let loaded = load(&use_of("guardhost_bad_descriptors", "AbiOneTwo"), Map::new());
    assert_eq!(loaded.info.name, "fine-1.2");
    assert_eq!(loaded.info.abi_version, (1, 2));
    assert!(loaded.info.unread_inputs.is_empty());
    assert!(loaded.provider.reads_tool_input());
    let mut args = Map::new();
    args.insert("command".into(), "ls".into());
    let call = guardhost::ToolCallRequest::new("bash", args);
    let request = guardhost::GuardrailRequest::from_tool_call(&call, None).unwrap();
    for asynchronous in [false, true] {
        let decision = guardhost::evaluate_here(&*loaded.provider, &request, asynchronous).unwrap();
        assert!(decision.allow, "{decision:?}");
        assert_eq!(decision.reasons[0].code, "fine.parsed");
    }
}

#[test]
fn a_library_built_against_abi_1_3_is_decided_through_evaluate() {
    // The same provider, whose `decide` and `evaluate` answer with their own
    // codes, exported as a 1.3 library (no `decide`) and as a 1.4 one.
    let call = guardhost::ToolCallRequest::new("bash", Map::new());
    let request = guardhost::GuardrailRequest::from_tool_call(&call, None).unwrap();
    let code = |provider: &dyn guardhost::GuardrailProvider, asynchronous| {
        let decision = guardhost::evaluate_here(provider, &request, asynchronous).unwrap();
        decision.reasons[0].code.to_string()
    };
    let old = load(&use_of("guardhost_bad_descriptors", "AbiOneThree"), Map::new());
    assert_eq!(old.info.abi_version, (1, 3));
    assert_eq!(old.info.unread_inputs, ["tool_input"]);
    assert_eq!(code(&*old.provider, false), "fine.evaluated");
    // (Its async path is the library's `aevaluate`, compiled here against
    // 1.4, so `decide`'s: a 1.3 library's default calls `evaluate`.)
    let now = load(&use_of("guardhost_bad_descriptors", "TwoEntriesNow"), Map::new());
    assert_eq!(now.info.abi_version, (1, 4));
    // The async path calls `aevaluate`, by default `decide`'s decision.
    assert_eq!(code(&*now.provider, false), "fine.decided");
    assert_eq!(code(&*now.provider, true), "fine.decided");
}

#[test]
fn a_provider_that_reads_no_arguments_is_handed_none() {
    // The allowlist declares it reads neither input (ABI 1.3; the library is of 1.4).
    let loaded = load(&use_of("guardhost_allowlist", "AllowlistProvider"), Map::new());
    assert_eq!(loaded.info.abi_version, (1, 4));
    assert_eq!(loaded.info.unread_inputs, ["tool_input", "authz_attributes", "attribution"]);
    assert!(!loaded.provider.reads_tool_input());
    // The zoo's `MisdeclaresInputs` claims it does not read the arguments
    // but denies any whose text mentions /etc: handed none, it allows.
    let loaded = load(&use_of("guardhost_zoo", "MisdeclaresInputs"), Map::new());
    assert_eq!(loaded.info.unread_inputs, ["tool_input"]);
    let mut args = Map::new();
    args.insert("path".into(), "/etc/passwd".into());
    let call = guardhost::ToolCallRequest::new("read_file", args);
    let request = guardhost::GuardrailRequest::from_tool_call(&call, None).unwrap();
    for asynchronous in [false, true] {
        let decision = guardhost::evaluate_here(&*loaded.provider, &request, asynchronous).unwrap();
        assert!(decision.allow, "{decision:?}");
    }
}

/// A fresh copy of the allowlist library in a directory of its own.
fn fresh_copy(dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    std::fs::copy(support::library("guardhost_allowlist"), &copy).unwrap();
    copy
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A pinned digest on every system: the file it names loads from a private
/// copy (so on Windows the `.dll` stays replaceable), another is refused
/// naming both digests. (Linux's test below also proves what is mapped.)
#[test]
fn a_pinned_digest_loads_the_file_it_names_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{}pinned{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let pinned = fresh_copy(dir.path(), &name);
    let mut spec = ProviderSpec::new(format!("{}:AllowlistProvider", pinned.display()), Map::new());
    spec.sha256 = Some(sha256_hex(&pinned));
    let loaded = instantiate(&spec, dir.path()).unwrap();
    assert_eq!(loaded.info.sha256, Some(sha256_hex(&pinned)));
    std::fs::write(&pinned, b"replaced while loaded").expect("the named file is not the mapped one");
    spec.sha256 = Some("0".repeat(64));
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(error.contains("but `provider.sha256` says 0000"), "{error}");
}

/// Whether the process has `path` mapped (Linux).
#[cfg(target_os = "linux")]
fn mapped(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/maps").unwrap().contains(&path.display().to_string())
}

#[cfg(target_os = "linux")]
#[test]
fn a_configured_digest_is_checked_before_anything_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let good = fresh_copy(dir.path(), "libgood.so");
    let mut spec = ProviderSpec::new(format!("{}:AllowlistProvider", good.display()), Map::new());
    spec.sha256 = Some(sha256_hex(&good).to_uppercase());
    assert_eq!(instantiate(&spec, dir.path()).unwrap().info.name, "allowlist");
    // What is mapped is a private copy of the bytes that were checked.
    assert!(!mapped(&good), "the checked file itself must not be what is mapped");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let copy_line = maps
        .lines()
        .find(|line| line.contains(&format!("{}-libgood.so", sha256_hex(&good))))
        .expect("no private copy mapped");
    // The copy was removed once mapped: nothing is left on disk.
    assert!(copy_line.ends_with(" (deleted)"), "{copy_line}");
    let copy = copy_line.split_whitespace().nth(5).unwrap();
    assert!(!Path::new(copy).exists() && !Path::new(copy).parent().unwrap().exists(), "{copy_line}");
    // Loading the same bytes again reuses the mapping.
    assert_eq!(instantiate(&spec, dir.path()).unwrap().info.sha256, Some(sha256_hex(&good)));
    let copies = std::fs::read_to_string("/proc/self/maps").unwrap();
    let distinct: std::collections::HashSet<&str> = copies
        .lines()
        .filter(|line| line.contains(&format!("{}-libgood.so", sha256_hex(&good))))
        .filter_map(|line| line.split_whitespace().nth(5))
        .collect();
    assert_eq!(distinct.len(), 1, "{distinct:?}");

    let other = fresh_copy(dir.path(), "libother.so");
    let mut spec = ProviderSpec::new(format!("{}:AllowlistProvider", other.display()), Map::new());
    spec.sha256 = Some("0".repeat(64));
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "the library's SHA-256 is {}, but `provider.sha256` says 0000",
            sha256_hex(&other)
        )),
        "{error}"
    );
    assert!(!mapped(&other), "a library with the wrong digest was mapped");

    spec.sha256 = Some("abc".into());
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(error.contains("must be 64 hexadecimal digits"), "{error}");
    assert!(!mapped(&other));
}

#[cfg(target_os = "linux")]
#[test]
fn a_library_of_another_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fresh_copy(dir.path(), "libforeign.so");
    // Only root can give a file away; as anyone else there is nothing to test.
    if std::os::unix::fs::chown(&lib, Some(12345), None).is_err() {
        return;
    }
    let spec = ProviderSpec::new(format!("{}:AllowlistProvider", lib.display()), Map::new());
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(error.contains(&format!("{} belongs to user 12345", lib.display())), "{error}");
    let mut allowed = spec.clone();
    allowed.allow_insecure_permissions = true;
    assert!(instantiate(&allowed, dir.path()).is_ok());
}

#[cfg(target_os = "linux")]
#[test]
fn a_library_others_can_write_is_refused_unless_allowed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("plugins");
    std::fs::create_dir(&sub).unwrap();
    let lib = fresh_copy(&sub, "libwritable.so");
    let spec = ProviderSpec::new(format!("{}:AllowlistProvider", lib.display()), Map::new());

    // (Group-writable alone passes where the group is private to the owner:
    // the permissions module's tests cover that rule.)
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o646)).unwrap();
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(error.contains(&format!("{} is world-writable (mode 646)", lib.display())), "{error}");
    assert!(error.contains("chmod go-w") && error.contains("allow_insecure_permissions"), "{error}");
    assert!(!mapped(&lib));

    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o757)).unwrap();
    let error = instantiate(&spec, dir.path()).unwrap_err().to_string();
    assert!(error.contains(&format!("{} is world-writable (mode 757)", sub.display())), "{error}");

    let mut allowed = spec.clone();
    allowed.allow_insecure_permissions = true;
    assert!(instantiate(&allowed, dir.path()).is_ok());
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn integrity_keys_are_read_from_yaml() {
    let yaml = "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    sha256: abc\n    allow_insecure_permissions: true\n";
    let config =
        guardhost::LoadedConfig::from_yaml(yaml, "/".into(), guardhost::ConfigOrigin::Embedded, |_| None)
            .unwrap();
    let provider = config.guardrails.provider.unwrap();
    assert_eq!(provider.sha256.as_deref(), Some("abc"));
    assert!(provider.allow_insecure_permissions);
}

/// This library alone starts no process: a spec that needs one is refused,
/// saying what to link (the `guardhost` command, the server and the Python
/// package install `guardhost-isolation`'s launcher; these tests do not).
#[test]
fn a_spec_that_needs_a_process_is_refused_without_a_launcher_saying_what_to_link() {
    assert!(!guardhost::launch::has_launcher());
    let mut isolated = ProviderSpec::new(use_of("guardhost_allowlist", "AllowlistProvider"), Map::new());
    isolated.isolation = guardhost::Isolation::Process;
    let error = instantiate(&isolated, Path::new("/")).unwrap_err();
    assert!(matches!(error, BuildError::Isolation { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "`isolation: process` runs the provider in a process of its own, and this program has no process \
         launcher: link the guardhost-isolation crate and call guardhost_isolation::install() once at start"
    );

    let mut program = ProviderSpec::new("", Map::new());
    program.use_.clear();
    program.command = Some(vec!["python3".into(), "provider.py".into()]);
    program.isolation = guardhost::Isolation::Process;
    let error = instantiate(&program, Path::new("/")).unwrap_err().to_string();
    assert!(error.starts_with("`command:` runs the provider in a process of its own"), "{error}");
}
