//! `guardhost conformance`: exit codes 0 / 1 / 2, every report format
//! written, hints that name the command's own options, and a race found
//! when the command is given both configs. The kit itself is tested in
//! `kit/tests/conformance.rs`.

use crate::support;

use std::process::Command;

use crate::support::kit::{assert_clean, exclusive, options, run, zoo};
use crate::support::{object, use_of};
use guardhost_kit::{self as conformance, CaseId, Options, Status};
use serde_json::{json, Map, Value};

/// The command, with the in-process default whatever the CI environment
/// says (tests that want a provider process ask for it).
fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(args)
        .env_remove("CI")
        .output()
        .expect("guardhost runs")
}

#[test]
fn the_command_exits_0_1_or_2_and_writes_every_format() {
    let _one = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let allowlist = use_of("guardhost_allowlist", "AllowlistProvider");
    let quick = ["--iterations", "500", "--latency-budget-us", "50000", "--fuzz-seconds", "0.2"];

    let good =
        cli(&[&["conformance", allowlist.as_str(), "--config", r#"{"denied_tools": ["bash"]}"#][..], &quick]
            .concat());
    assert_eq!(good.status.code(), Some(0), "{}", String::from_utf8_lossy(&good.stdout));
    let text = String::from_utf8(good.stdout).unwrap();
    assert!(text.contains("PASS  decisions.hygiene") && text.contains("18 cases: 18 pass"), "{text}");

    let junit = dir.path().join("report.xml");
    let bad = cli(&[
        &["conformance", &zoo("BadCodes"), "--format", "junit", "--output", junit.to_str().unwrap()][..],
        &quick,
    ]
    .concat());
    assert_eq!(bad.status.code(), Some(1));
    assert!(bad.stdout.is_empty());
    roxmltree::Document::parse(&std::fs::read_to_string(&junit).unwrap()).unwrap();

    let config_file = support::write(dir.path(), "config.yaml", "blocked_prefixes: [bash]\n");
    let json = cli(&[
        &["conformance", &use_of("blocked_prefixes", "MyGuardrailProvider"), "--format", "json"][..],
        &["--config-file", config_file.to_str().unwrap()],
        &quick,
    ]
    .concat());
    assert_eq!(json.status.code(), Some(0));
    let value: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["passed"], json!(true));

    let unusable = cli(&["conformance", &allowlist, "--config", "[1, 2]"]);
    assert_eq!(unusable.status.code(), Some(2));
    let stderr = String::from_utf8(unusable.stderr).unwrap();
    assert!(stderr.contains("--config: a provider config must be a mapping of config keys"), "{stderr}");

    let unwritable = cli(&["conformance", &allowlist, "--output", "/nonexistent-dir/report.txt"]);
    assert_eq!(unwritable.status.code(), Some(2));
}

#[test]
fn hints_name_the_options_of_whoever_runs_the_kit() {
    use std::os::unix::fs::PermissionsExt;
    let _one = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let library = shared.join("liballowlist.so");
    std::fs::copy(support::library("guardhost_allowlist"), &library).unwrap();
    let use_ = format!("{}:AllowlistProvider", library.display());

    // The Rust API: its own option, never the YAML key or a flag.
    let report = conformance::run(&use_, &Map::new(), &options());
    let load = report.case(CaseId::Load).unwrap();
    assert_eq!(load.status, Status::Fail);
    assert!(load.reason.ends_with(", or set `Options::allow_insecure_permissions`"), "{}", load.reason);
    assert!(!load.reason.contains("provider.allow_insecure_permissions"), "{}", load.reason);
    let report =
        conformance::run(&use_, &Map::new(), &Options { allow_insecure_permissions: true, ..options() });
    assert!(report.passed(), "{}", report.to_text());
    let refused = conformance::run(
        &use_,
        &object(json!({"deny_tools": []})),
        &Options { allow_insecure_permissions: true, ..options() },
    );
    let config = refused.case(CaseId::ConstructionConfig).unwrap();
    assert!(
        config.reason.ends_with("; pass a config the provider accepts (the `config` argument)"),
        "{}",
        config.reason
    );

    // The command: its flags.
    let quick = ["--iterations", "500", "--latency-budget-us", "50000", "--fuzz-seconds", "0.2"];
    let output = cli(&[&["conformance", use_.as_str()][..], &quick].concat());
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(", or pass --allow-insecure-permissions"), "{text}");
    let output = cli(&[&["conformance", use_.as_str(), "--allow-insecure-permissions"][..], &quick].concat());
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    // In a provider process too.
    let output = cli(&[&["conformance", use_.as_str(), "--isolation", "process"][..], &quick].concat());
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(", or pass --allow-insecure-permissions"), "{text}");
    assert!(!text.contains("provider.allow_insecure_permissions"), "{text}");
    let output = cli(&[
        &["conformance", use_.as_str(), "--allow-insecure-permissions"][..],
        &quick,
        &["--config", r#"{"deny_tools": []}"#],
    ]
    .concat());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("; pass a config the provider accepts with --config or --config-file"), "{text}");
}

#[test]
fn a_race_under_one_config_is_found_when_that_config_is_given_too() {
    let _one = exclusive();
    let alone = run(&zoo("RacyUnderOneConfig"), Map::new());
    assert_clean(&alone);
    let racy = run(&zoo("RacyUnderOneConfig"), object(json!({"shared_scratch": true})));
    assert_eq!(racy.case(CaseId::ThreadSafety).unwrap().status, Status::Fail, "{}", racy.to_text());

    // The command runs the kit under each config it is given.
    let racy = zoo("RacyUnderOneConfig");
    let both = [
        "conformance",
        racy.as_str(),
        "--config",
        "{}",
        "--config",
        r#"{"shared_scratch": true}"#,
        "--iterations",
        "2000",
        "--latency-budget-us",
        "50000",
        "--fuzz-seconds",
        "0.2",
    ];
    let output = cli(&both);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(", config 1 of 2 (--config #1)"), "{text}");
    assert!(text.contains(", config 2 of 2 (--config #2)"), "{text}");
    assert!(text.trim_end().ends_with("2 configs: 1 passed, 1 failed"), "{text}");
    let json_output = cli(&[&both[..], &["--format", "json"]].concat());
    let value: Value = serde_json::from_slice(&json_output.stdout).unwrap();
    assert_eq!(value["passed"], json!(false));
    assert_eq!(value["reports"].as_array().unwrap().len(), 2);
    assert_eq!(value["reports"][0]["passed"], json!(true));
    assert_eq!(value["reports"][1]["config"], json!("config 2 of 2 (--config #2)"));
}
