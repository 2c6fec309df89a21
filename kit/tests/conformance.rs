//! The conformance kit against real libraries: every good plugin passes,
//! every member of the seeded-fault zoo is flagged by the right case, and
//! the reports (text, JSON, JUnit XML) are right (the `guardhost conformance`
//! command, its exit codes included, is tested in `cli/tests/it/conformance.rs`).

use guardhost_test_support as support;

use std::time::Duration;

use guardhost_kit::{self as conformance, CaseId, Options, Report, Status};
use serde_json::{json, Map, Value};
use support::kit::{assert_clean, exclusive, options, run, zoo};
use support::{object, use_of};

fn options_for(symbol: &str) -> Options {
    match symbol {
        "Hangs" | "HangsInConstructor" | "HangsListingKeys" => {
            Options { call_timeout: Duration::from_millis(300), ..options() }
        }
        // It sleeps 3 ms per call: every one of 200 calls is over budget
        // (2,000, the default here, would take 6 s a check for nothing).
        "Slow" => Options { latency_budget: Duration::from_millis(1), iterations: 200, ..options() },
        // It sleeps 2 ms per call, within this budget, but declares it
        // never blocks.
        "MisdeclaresBlocking" => {
            Options { latency_budget: Duration::from_millis(50), iterations: 200, ..options() }
        }
        _ => options(),
    }
}

fn run_zoo(symbol: &str) -> Report {
    conformance::run(&zoo(symbol), &Map::new(), &options_for(symbol))
}

#[test]
fn every_plugin_of_the_workspace_passes_cleanly() {
    let _one = exclusive();
    let allowlist = use_of("guardhost_allowlist", "AllowlistProvider");
    for (use_, config) in [
        (allowlist.clone(), json!({})),
        (allowlist.clone(), json!({"denied_tools": ["bash", "write_file"]})),
        (allowlist, json!({"allowed_tools": ["read_file", "ls"]})),
        ("builtin:AllowlistProvider".to_owned(), json!({"denied_tools": ["bash"]})),
        (use_of("blocked_prefixes", "MyGuardrailProvider"), json!({"blocked_prefixes": ["bash", "write_"]})),
        (zoo("VolatileDeclared"), json!({})),
        (zoo("ReadsNameOnly"), json!({})),
    ] {
        let report = run(&use_, object(config));
        assert_clean(&report);
        assert!(report.passed());
    }
}

/// Each member of the zoo is run once (a run takes seconds): it is flagged
/// by the case of its fault, and that case's finding says what was wrong.
#[test]
fn every_zoo_member_is_flagged_by_its_case_saying_what_was_wrong() {
    let _one = exclusive();
    let cases = [
        ("PanicsOnInput", CaseId::EvaluationPanics, Status::Fail),
        ("Hangs", CaseId::EvaluationCorpus, Status::Fail),
        ("Nondeterministic", CaseId::Determinism, Status::Fail),
        ("SyncAsyncDisagree", CaseId::SyncAsyncAgreement, Status::Fail),
        ("DecideDisagrees", CaseId::DecideAgreement, Status::Fail),
        ("MisdeclaresInputs", CaseId::DeclaredInputs, Status::Fail),
        ("EmptyReasons", CaseId::DecisionHygiene, Status::Warn),
        ("LeaksMemory", CaseId::Memory, Status::Fail),
        ("NotThreadSafe", CaseId::ThreadSafety, Status::Fail),
        ("BadCodes", CaseId::DecisionHygiene, Status::Fail),
        ("Slow", CaseId::Latency, Status::Fail),
        ("MisdeclaresBlocking", CaseId::Latency, Status::Fail),
        ("PanicsInConstructor", CaseId::ConstructionConfig, Status::Fail),
        ("RejectsFramework", CaseId::DescriptorFramework, Status::Fail),
        ("IgnoresUnknownKeys", CaseId::ConstructionUnknownKey, Status::Warn),
        ("PanicsOnBadValue", CaseId::ConstructionErrors, Status::Fail),
        ("HangsInConstructor", CaseId::ConstructionConfig, Status::Fail),
        ("HangsListingKeys", CaseId::DescriptorKeys, Status::Fail),
    ];
    let mut findings = std::collections::HashMap::new();
    for (symbol, id, expected) in cases {
        let report = run_zoo(symbol);
        let case = report.case(id).unwrap();
        assert_eq!(case.status, expected, "{symbol}: {}", report.to_text());
        assert_eq!(report.passed(), expected != Status::Fail, "{symbol}");
        // The kit ran every case, and nothing else failed before the fault.
        assert_eq!(report.cases.len(), CaseId::ALL.len());
        let first_failure = report.cases.iter().find(|c| c.status == Status::Fail).map(|c| c.id);
        if expected == Status::Fail {
            assert_eq!(first_failure, Some(id), "{symbol}: {}", report.to_text());
        } else {
            assert_eq!(first_failure, None, "{symbol}: {}", report.to_text());
        }
        findings.insert(symbol, format!("{} | {}", case.reason, case.details.join(" | ")));
    }

    // The findings say what was wrong.
    let hangs = &findings["Hangs"];
    assert!(hangs.contains("tool:web_fetch: hung: no answer within 300 ms"), "{hangs}");
    let panics = &findings["PanicsOnInput"];
    assert!(
        panics.contains(
            "name:unicode (evaluate, evaluate again, aevaluate): provider panicked: evaluate: cannot"
        ),
        "{panics}"
    );
    let leak = &findings["LeaksMemory"];
    assert!(leak.contains("bytes per evaluation") && leak.contains("a leak"), "{leak}");
    let slow = &findings["Slow"];
    assert!(slow.contains("p99 exceeds the budget of 1000 µs"), "{slow}");
    let inputs = &findings["MisdeclaresInputs"];
    assert!(
        inputs.contains("declares it does not read tool_input")
            && inputs.contains("decided differently when it is given them"),
        "{inputs}"
    );
    let decide = &findings["DecideDisagrees"];
    assert!(
        decide.contains("decisions of evaluate or aevaluate differ from decide's")
            && decide.contains("tool:bash: decide allow [zoo.allowed]; evaluate deny"),
        "{decide}"
    );
    let blocking = &findings["MisdeclaresBlocking"];
    assert!(
        blocking.contains("declares that it never blocks (`NEVER_BLOCKS`), but its p99 exceeds 1000 µs"),
        "{blocking}"
    );
    let codes = &findings["BadCodes"];
    assert!(codes.contains("tool:bash: code `blocked <&>\\u{1}` is not namespaced"), "{codes}");
}

/// Memory freed before the check, left resident between blocks still in use,
/// is where a leak of blocks that size goes first: the kit must see it all
/// the same (it hands free pages back to the OS before each reading).
#[test]
fn a_leak_is_found_where_memory_freed_earlier_could_absorb_it() {
    let _one = exclusive();
    // A thread writes 128 MiB in blocks of the leak's size, each followed
    // by a small block kept, then frees the big ones and ends: its malloc
    // arena, 128 MiB free but resident in holes of 16 KiB, goes to the
    // next thread that starts.
    let kept = std::thread::spawn(|| {
        let mut big = Vec::new();
        let mut small = Vec::new();
        for _ in 0..8192 {
            big.push(vec![0xA5u8; 16 * 1024].into_boxed_slice());
            small.push(vec![0x5Au8; 64].into_boxed_slice());
        }
        drop(big);
        small
    })
    .join()
    .unwrap();
    let report = run_zoo("LeaksMemory");
    drop(kept);
    let memory = report.case(CaseId::Memory).unwrap();
    assert_eq!(memory.status, Status::Fail, "{}", report.to_text());
}

#[test]
fn broken_descriptors_fail_load_with_their_own_error_and_skip_the_rest() {
    let _one = exclusive();
    for (symbol, expected) in [
        ("WrongMajor", "built for guardhost provider ABI 99.3"),
        ("WrongLayout", "do not match this host's ABI layout"),
        ("PanicAbort", "panic = \"abort\""),
        ("NotADescriptor", "is not a guardhost provider descriptor"),
        ("NoSuchSymbol", "exports no symbol `NoSuchSymbol`"),
    ] {
        let report = run(&use_of("guardhost_bad_descriptors", symbol), Map::new());
        let load = report.case(CaseId::Load).unwrap();
        assert_eq!(load.status, Status::Fail);
        assert!(load.reason.contains(expected), "{symbol}: {}", load.reason);
        assert!(report.cases[1..].iter().all(|c| c.status == Status::Skip), "{}", report.to_text());
    }
    let missing = run("no/such/libfoo.so:Foo", Map::new());
    assert!(missing.case(CaseId::Load).unwrap().reason.contains("no such file"));
}

#[test]
fn a_library_built_against_abi_1_0_conforms() {
    let _one = exclusive();
    let report = run(&use_of("guardhost_bad_descriptors", "AbiOneZero"), Map::new());
    assert_clean(&report);
    assert_eq!(report.abi_version.as_deref(), Some("1.0"));
}

#[test]
fn junit_output_is_valid_xml_with_one_testcase_per_case() {
    let _one = exclusive();
    for (symbol, failures, skipped) in
        [("BadCodes", 1, 0), ("PanicsInConstructor", 1, 13), ("VolatileDeclared", 0, 0)]
    {
        let report = run_zoo(symbol);
        let xml = report.to_junit();
        let document = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{symbol}: {e}\n{xml}"));
        let count = |tag: &str| document.descendants().filter(|n| n.has_tag_name(tag)).count();
        assert_eq!(count("testcase"), CaseId::ALL.len());
        assert_eq!(count("failure"), failures, "{symbol}");
        assert_eq!(count("skipped"), skipped, "{symbol}");
        let suite = document.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
        assert_eq!(suite.attribute("failures"), Some(failures.to_string().as_str()));
        if symbol == "BadCodes" {
            let failure = document.descendants().find(|n| n.has_tag_name("failure")).unwrap();
            assert!(failure.text().unwrap().contains("code `blocked <&>\\u{1}`"));
        }
    }
}

#[test]
fn json_output_carries_every_case_and_the_verdict() {
    let _one = exclusive();
    let report = run_zoo("Slow");
    let value: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(value["passed"], json!(false));
    assert_eq!(value["provider"], json!("zoo-slow"));
    let cases = value["cases"].as_array().unwrap();
    assert_eq!(cases.len(), CaseId::ALL.len());
    let latency = cases.iter().find(|c| c["id"] == "latency").unwrap();
    assert_eq!(latency["status"], "fail");
    assert!(latency["metrics"]["p99_us"].as_f64().unwrap() >= 3000.0, "{latency}");
}

#[test]
fn assert_conforms_passes_a_good_library_and_panics_with_the_report_on_a_bad_one() {
    let _one = exclusive();
    let report =
        conformance::assert_conforms(&use_of("guardhost_allowlist", "AllowlistProvider"), &Map::new());
    assert!(report.passed());
    let failure = std::panic::catch_unwind(|| {
        conformance::assert_conforms(&zoo("BadCodes"), &Map::new());
    })
    .unwrap_err();
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(message.contains("FAIL  decisions.hygiene"), "{message}");
}

#[test]
fn a_provider_that_panics_on_a_missing_path_is_flagged_naming_each_request() {
    let _one = exclusive();
    let report = run_zoo("PanicsOnMissingPath");
    assert!(!report.passed());
    let panics = report.case(CaseId::EvaluationPanics).unwrap();
    assert_eq!(panics.status, Status::Fail, "{}", report.to_text());
    let details = panics.details.join("\n");
    for request in
        ["shape:write_file.path=missing", "shape:write_file.path=null", "shape:write_file.path=number"]
    {
        assert!(details.contains(request), "{request} not named in:\n{details}");
    }
    // Each of the four file tools, in the five shapes that are not strings.
    assert!(panics.reason.starts_with("20 requests made the provider panic"), "{}", panics.reason);
    assert!(details.ends_with("and 12 more"), "{details}");
    assert!(details.contains("every file tool has a string path"), "{details}");
    // The everyday calls alone would have passed: the everyday `ls` decides.
    let corpus = report.case(CaseId::EvaluationCorpus).unwrap();
    assert!(!corpus.details.iter().any(|d| d.starts_with("tool:ls")), "{:?}", corpus.details);
}

#[test]
fn a_crash_on_one_request_fails_that_request_in_a_provider_process_and_the_kit_goes_on() {
    let _one = exclusive();
    let options = Options { isolation: guardhost::Isolation::Process, ..options() };
    let report = conformance::run(&zoo("AbortsOnOneRequest"), &Map::new(), &options);
    assert!(!report.passed());
    let corpus = report.case(CaseId::EvaluationCorpus).unwrap();
    assert_eq!(corpus.status, Status::Fail, "{}", report.to_text());
    let details = corpus.details.join("\n");
    assert!(details.contains("shape:view_image.image_path=dotdot"), "{details}");
    assert!(details.contains("SIGABRT"), "{details}");
    // Every case ran, and the measured ones after the crash still passed.
    assert_eq!(report.cases.len(), CaseId::ALL.len());
    for id in [CaseId::ThreadSafety, CaseId::Latency] {
        assert_eq!(report.case(id).unwrap().status, Status::Pass, "{id:?}: {}", report.to_text());
    }
    assert!(report.case(CaseId::Load).unwrap().reason.contains("in a provider process"));
}

#[test]
fn a_good_library_conforms_in_a_provider_process_too() {
    let _one = exclusive();
    let options = Options { isolation: guardhost::Isolation::Process, ..options() };
    let report = conformance::run(
        &use_of("guardhost_allowlist", "AllowlistProvider"),
        &object(json!({"denied_tools": ["bash"]})),
        &options,
    );
    // Every case passes but the checks of what the library declares it does
    // not read and of its `decide`, which need a second instance in the
    // kit's own process.
    assert!(report.passed(), "{}", report.to_text());
    for case in &report.cases {
        if matches!(case.id, CaseId::DeclaredInputs | CaseId::DecideAgreement) {
            assert_eq!(case.status, Status::Skip, "{}", report.to_text());
            assert!(
                case.reason.contains("checked when the kit loads the library in process"),
                "{}",
                case.reason
            );
        } else {
            assert_eq!(case.status, Status::Pass, "{}", report.to_text());
        }
    }
    // Constructor faults are found in the provider process as in process.
    let report = conformance::run(&zoo("PanicsOnBadValue"), &Map::new(), &options);
    let errors = report.case(CaseId::ConstructionErrors).unwrap();
    assert_eq!(errors.status, Status::Fail, "{}", report.to_text());
    assert!(
        errors.details.iter().all(|d| d.starts_with("limit = ") && d.contains("panicked")),
        "{:?}",
        errors.details
    );
}

/// A path jail that keeps the path in shared state: the everyday calls'
/// paths are all inside its root, so only a mix of path-bearing requests it
/// allows and denies, replayed side by side, shows the race. Several runs
/// in a row, in process and in a provider process, so a catch is not luck.
#[test]
fn a_path_jail_that_shares_the_path_between_calls_is_flagged_every_time() {
    let _one = exclusive();
    let jail = zoo("RacyPathJail");
    let config = object(json!({"root": "/mnt/user-data"}));
    let in_process = options();
    let isolated = Options { isolation: guardhost::Isolation::Process, ..options() };
    for (run, options) in (0..5).map(|run| (run, &in_process)).chain((5..8).map(|run| (run, &isolated))) {
        let report = conformance::run(&jail, &config, options);
        let threads = report.case(CaseId::ThreadSafety).unwrap();
        assert_eq!(threads.status, Status::Fail, "run {run}: {}", report.to_text());
        // Nothing else failed: alone, the jail decides right.
        let failed: Vec<_> = report.cases.iter().filter(|c| c.status == Status::Fail).map(|c| c.id).collect();
        assert_eq!(failed, [CaseId::ThreadSafety], "run {run}: {}", report.to_text());
        // The flipped pairs are named: a path-bearing request that got the
        // answer of another evaluated at the same time.
        let named =
            threads.details.iter().any(|d| d.contains(".path=") && d.contains("evaluated at the same time"));
        assert!(named, "run {run}: {}", threads.details.join("\n"));
        assert!(threads.reason.contains("path 16, from 2 distinct answers"), "run {run}: {}", threads.reason);
        // The configured root is named by its key, never shown.
        let shown = format!("{} {}", threads.reason, threads.details.join(" "));
        // (Which requests are listed varies from run to run: each names
        // the key as `at root`, `under root`, `beside root` or `escaping
        // root`, or masks the value as `<root>`.)
        let named = ["at root", "under root", "beside root", "escaping root", "<root>"]
            .iter()
            .any(|n| shown.contains(n));
        assert!(!shown.contains("/mnt/user-data") && named, "run {run}: {shown}");
    }
}

/// Correct providers pass the thread check, whatever mix their config
/// gives it: the workspace's plugins, the zoo members whose fault is not a
/// race, and the same jail keeping the path in the call; in process and in
/// a provider process.
#[test]
fn the_thread_check_raises_no_false_alarm() {
    let _one = exclusive();
    let passport = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    let allowlist = use_of("guardhost_allowlist", "AllowlistProvider");
    let mut subjects = vec![
        (allowlist.clone(), json!({"denied_tools": ["bash", "write_file"]})),
        (allowlist, json!({"allowed_tools": ["read_file", "ls"]})),
        ("builtin:AllowlistProvider".to_owned(), json!({"denied_tools": ["bash"]})),
        (use_of("blocked_prefixes", "MyGuardrailProvider"), json!({"blocked_prefixes": ["bash", "write_"]})),
        (use_of("c_allowlist", "CAllowlistProvider"), json!({"denied_tools": ["bash"]})),
        (use_of("cpp_blocked_prefixes", "CppBlockedPrefixes"), json!({"blocked_prefixes": ["bash"]})),
        (use_of("guardhost_oap", "OAPGuardrailProvider"), json!({ "passport_path": passport })),
        (
            use_of("guardhost_provider_template", "TemplateProvider"),
            json!({"denied_tools": ["write_file"], "blocked_patterns": ["rm -rf"]}),
        ),
        (zoo("RacyPathJail"), json!({"root": "/mnt/user-data", "keep_in_call": true})),
        (zoo("RacyUnderOneConfig"), json!({})),
    ];
    for symbol in ["SyncAsyncDisagree", "EmptyReasons", "BadCodes", "IgnoresUnknownKeys", "VolatileDeclared"]
    {
        subjects.push((zoo(symbol), json!({})));
    }
    let isolated = Options { isolation: guardhost::Isolation::Process, ..options() };
    let mut reasons = Vec::new();
    for (use_, config) in &subjects {
        let report = run(use_, object(config.clone()));
        let threads = report.case(CaseId::ThreadSafety).unwrap();
        assert_eq!(threads.status, Status::Pass, "{use_} {config}: {}", report.to_text());
        reasons.push(threads.reason.clone());
    }
    // In a provider process, those whose mixes hold the most answers.
    for (use_, config) in [&subjects[0], &subjects[6], &subjects[8]] {
        let report = conformance::run(use_, &object(config.clone()), &isolated);
        let threads = report.case(CaseId::ThreadSafety).unwrap();
        assert_eq!(threads.status, Status::Pass, "{use_} {config}: {}", report.to_text());
        assert!(threads.reason.contains("side by side"), "{use_}: {}", threads.reason);
    }
    // The control jail's path mix holds both answers: it was tried.
    let reason = &reasons[8];
    assert!(reason.contains("path 16, from 2 distinct answers"), "{reason}");
}
