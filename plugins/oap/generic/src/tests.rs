//! Tests of the generic engine: the parser and evaluator on packs written
//! here, and every published pack loads (read at run time from APort's data
//! in `GUARDHOST_OAP_DATA`, see [`crate::testdata`]). The packs' own fixtures
//! are replayed through the OAP provider in its `tests/packs.rs`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::eval::{truth, Cx, Tri};
use crate::{GenericPack, GenericState, RuleSupport, Verdict};

/// 2025-01-30T12:00:00Z, the fixtures' day.
const NOW: f64 = 1_738_238_400.0;

/// The `policy.json` of every published pack (`policies/` and
/// `policies-repo/`), or `None` when the data is not configured.
fn published_packs(test: &str) -> Option<Vec<(&'static str, PathBuf)>> {
    let data = crate::testdata::root(test)?;
    let mut out = Vec::new();
    for root in ["policies", "policies-repo"] {
        for dir in sorted_dirs(&crate::testdata::path(&data, root)) {
            out.push((root, dir.join("policy.json")));
        }
    }
    Some(out)
}

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn load_pack(path: &Path) -> GenericPack {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    GenericPack::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sorted_dirs(path: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(path)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn obj(v: &Value) -> Value {
    if v.is_object() {
        v.clone()
    } else {
        Value::Object(Map::new())
    }
}

fn verdict_code(v: &Verdict) -> &str {
    match v {
        Verdict::Allow => "oap.allowed",
        Verdict::Deny { code, .. } => code,
        Verdict::Unavailable(why) => panic!("no state in Redis here: {why}"),
    }
}

/// Rules that are skipped although they are not custom validators.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("code.release.publish.v1", "version_format_valid"),
    ("code.release.publish.v1", "file_extensions_allowed"),
    ("code.release.publish.v1", "repository_permission"),
    ("finance.crypto.trade.v1", "market_hours_check"),
];

#[test]
fn every_pack_loads() {
    let mut report = String::new();
    let mut unsupported = Vec::new();
    let mut packs = 0;
    let Some(files) = published_packs("tests::every_pack_loads") else { return };
    for (root, file) in files {
        let pack = load_pack(&file);
        packs += 1;
        let (mut evaluated, mut validators, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for r in pack.rules() {
            match &r.support {
                RuleSupport::Evaluated => evaluated.push(r.name.as_str()),
                RuleSupport::CustomValidator(v) => validators.push(format!("{} ({v})", r.name)),
                RuleSupport::Unsupported(why) => {
                    skipped.push(format!("{} ({why})", r.name));
                    unsupported.push((pack.id.clone(), r.name.clone()));
                }
            }
        }
        let _ = writeln!(
            report,
            "{root}/{}: evaluated [{}]; custom validators [{}]; unsupported [{}]; state [{}]",
            pack.id,
            evaluated.join(", "),
            validators.join(", "),
            skipped.join(", "),
            pack.state_names().collect::<Vec<_>>().join(", ")
        );
    }
    assert_eq!(packs, 30, "{report}");
    unsupported.sort();
    unsupported.dedup();
    let mut want: Vec<(String, String)> =
        UNSUPPORTED.iter().map(|(p, r)| (p.to_string(), r.to_string())).collect();
    want.sort();
    assert_eq!(unsupported, want, "unexpected set of unsupported rules:\n{report}");
}

// ---------------------------------------------------------------------------
// Parser and evaluator.

/// A one-rule pack around `cond`, requiring capability `cap.x`.
fn pack_with(cond: &str) -> GenericPack {
    let doc = json!({
        "id": "test.pack.v1",
        "requires_capabilities": ["cap.x"],
        "min_assurance": "L0",
        "optional_fields": ["amount", "currency", "items", "x", "flag", "key", "tool", "pair", "ts"],
        "assurance_rules": [{"lte_minor": 100, "min_level": "L1"}, {"lte_minor": 1000, "min_level": "L2"}],
        "evaluation_rules": [{"name": "r", "condition": cond, "deny_code": "oap.test_denied"}]
    });
    GenericPack::from_json(&doc.to_string()).expect("test pack")
}

fn passport() -> Value {
    json!({
        "passport_id": "p1",
        "assurance_level": "L2",
        "status": "active",
        "capabilities": [{"id": "cap.x"}, {"id": "other.cap"}],
        "regions": ["US", "EU"],
        "limits": {
            "cap.x": {
                "max": 5,
                "allow_pii": false,
                "currency_limits": {"USD": {"max_per_tx": 100, "daily_cap": 150}, "EUR": {"max_per_tx": 90}},
                "reason_codes": ["fraud"],
                "allowed": ["a", "b"],
                "empty_list": []
            },
            "a": {"b": {"c": 1}},
            "a.b": {"c": 2},
            "finance.transaction": {"max": 7}
        }
    })
}

fn tri_with(cond: &str, passport: &Value, context: &Value) -> Tri {
    let pack = pack_with(cond);
    let rule = &pack.rules[0];
    let expr =
        rule.expr.as_ref().unwrap_or_else(|| panic!("`{cond}` did not parse: {:?}", rule.info.support));
    let context = context.as_object().cloned().unwrap_or_default();
    let state = GenericState::new();
    let guard = state.lock();
    let cx =
        Cx { pack: pack.view(), passport, context: &context, state: Some(&*guard), subject: "p1", now: NOW };
    truth(&cx.eval(expr, &mut Vec::new()))
}

fn tri(cond: &str) -> Tri {
    tri_with(cond, &passport(), &json!({"amount": 50, "currency": "USD", "items": [{"c": "x"}, {"c": "y"}]}))
}

fn is_error(t: Tri) -> bool {
    matches!(t, Tri::Error(_))
}

#[test]
fn precedence() {
    for (cond, want) in [
        ("1 + 2 * 3 == 7", Tri::True),
        ("(1 + 2) * 3 == 9", Tri::True),
        ("10 - 2 - 3 == 5", Tri::True),
        ("7 % 4 == 3 && -2 < 0", Tri::True),
        ("true or false and false", Tri::True),
        ("(true or false) and false", Tri::False),
        ("not 1 == 1", Tri::False),      // Python: not (1 == 1)
        ("!1 == false", Tri::True),      // JavaScript: (!1) == false
        ("NOT true OR true", Tri::True), // (NOT true) OR true
        ("not 'x' in ['x']", Tri::False),
        ("'x' not in ['y']", Tri::True),
        ("1 === 1 && 1 !== 2", Tri::True),
        ("amount + 50 <= 100 and amount + 51 <= 100", Tri::False),
    ] {
        assert_eq!(tri(cond), want, "{cond}");
    }
    let chained = pack_with("1 < 2 < 3");
    assert!(matches!(chained.rules[0].info.support, RuleSupport::Unsupported(_)));
}

#[test]
fn missing_values() {
    for (cond, want) in [
        ("context.nope <= 5", Tri::Unknown),
        ("context.nope in ['a']", Tri::Unknown),
        ("'a' in limits.nope", Tri::Unknown),
        ("NOT context.nope", Tri::Unknown),
        ("NOT passport.limits.cap.x.nope", Tri::True), // an unset flag is false
        ("NOT limits.allow_pii", Tri::True),
        ("context.nope is empty", Tri::True),
        ("limits.nope is not empty", Tri::False),
        ("false and context.nope", Tri::False),
        ("context.nope and false", Tri::False),
        ("true or context.nope", Tri::True),
        ("context.nope or false", Tri::Unknown),
        ("context.nope == null", Tri::Unknown),
        ("items[5].c == 'x'", Tri::Unknown),
        ("items[0].c == 'x'", Tri::True),
        ("amount.deeper.still == 1", Tri::Unknown),
        ("any(i.nope == 1 for i in items)", Tri::Unknown),
        ("any(i.c == 'y' for i in items)", Tri::True),
        ("all(i.c == 'y' for i in items)", Tri::False),
        ("NOT (context.include_pii AND NOT limits.allow_pii)", Tri::Unknown),
        ("limits.currency_limits[currency].nope <= 1", Tri::Unknown),
        ("limits.currency_limits[context.nope].max_per_tx <= 1", Tri::Unknown),
    ] {
        assert_eq!(tri(cond), want, "{cond}");
    }
    // A rule that is unknown does not apply; one that is false denies.
    let state = GenericState::new();
    let ctx = obj(&json!({}));
    assert_eq!(pack_with("context.nope <= 5").evaluate_at(&passport(), &ctx, &state, NOW), Verdict::Allow);
    let denied =
        pack_with("context.amount <= 5").evaluate_at(&passport(), &obj(&json!({"amount": 6})), &state, NOW);
    assert!(
        matches!(&denied, Verdict::Deny { code, message } if code == "oap.test_denied" && message.contains('6'))
    );
}

#[test]
fn type_errors_deny() {
    let p = passport();
    for cond in
        ["'a' + 1 == 2", "1 / 0 == 1", "5 in 5", "to_timestamp('garbage') > 0", "'a' < 1", "-'a' == 1"]
    {
        assert!(is_error(tri(cond)), "{cond}");
    }
    assert!(is_error(tri_with("context.amount <= 100", &p, &json!({"amount": "9999"}))));
    assert_eq!(tri("false and 'a' < 1"), Tri::False);
    assert_eq!(tri("true or 'a' < 1"), Tri::True);
    let state = GenericState::new();
    let v = pack_with("amount <= 100").evaluate_at(&p, &obj(&json!({"amount": "9999"})), &state, NOW);
    assert!(
        matches!(&v, Verdict::Deny { code, message } if code == "oap.test_denied" && message.contains("could not"))
    );
}

#[test]
fn values_paths_and_functions() {
    for cond in [
        "'L4KYC' >= 'L3' and 'L1' < 'L2' and 'L4FIN' >= 'L4KYC' and 'L4FIN' != 'L4KYC'",
        "passport.assurance_level >= policy.min_assurance",
        "'2025-01-02T00:00:00Z' > '2025-01-01'",
        "'USD' in limits.currency_limits and 'GBP' not in limits.currency_limits",
        "'USD' in limits.supported_currencies and 'JPY' not in limits.supported_currencies",
        "'fraud' in limits.refund_reason_codes",
        "passport.limits.finance.transaction.max == 7",
        "passport.limits.a.b.c == 2", // the longest dotted key wins
        "limits.max == 5 and limits.cap.x.max == 5 and passport.limits.cap.x.max == 5",
        "'cap.x' in passport.capabilities and 'nope' not in passport.capabilities",
        "limits.empty_list is empty and limits.allowed is not empty",
        "items.length == 2 and len(items) == 2 and 'abc'.length == 3",
        "limits.allowed.includes('a') && limits.allowed.some(x => x.startsWith('b'))",
        "limits.allowed.every(x => ['a', 'b'].includes(x))",
        "all(t in ['BTC', 'USD'] for t in 'BTC-USD'.split('-'))",
        "'a*'.replace('*', '') == 'a' and 'AbC'.toLowerCase() == 'abc' and upper('x') == 'X'",
        "ceil(11 / 10) == 2 and floor(1.9) == 1 and abs(-3) == 3 and min(3, 1, 2) == 1 and max(limits.allowed.length, 4) == 4",
        "to_timestamp('2025-01-30T00:00:00Z') == 1738195200 and to_timestamp('2025-01-30') == 1738195200",
        "to_timestamp('2025-01-30T02:30:00.5+02:30') == 1738195200.5 and to_timestamp(1738195200000) == 1738195200",
        "now() - to_timestamp('2025-01-30T11:00:00Z') == 3600",
        "getRequiredAssuranceLevel(100, 'USD') == 'L1' and getRequiredAssuranceLevel(101) == 'L2'",
        "getRequiredAssuranceLevel(1001, 'USD') == 'L4'",
        "'x' + 'y' == 'xy' and 1 == 1.0 and 1 != '1'",
        "'ab' in 'cabd' and 'x' not in 'abc'",
        "1e2 == 100 and 2.5e-1 == 0.25 and 1.5 + 1 == 2.5 and 12E+1 == 120",
    ] {
        assert_eq!(tri(cond), Tri::True, "{cond}");
    }
}

fn charge_like() -> GenericPack {
    let doc = json!({
        "id": "finance.test.charge.v1",
        "requires_capabilities": ["cap.x"],
        "required_fields": ["amount", "currency", "key"],
        "evaluation_rules": [
            {"name": "cap", "condition": "amount <= limits.currency_limits[currency].max_per_tx", "deny_code": "oap.limit_exceeded"},
            {"name": "daily", "condition": "daily_total + amount <= limits.currency_limits[currency].daily_cap", "deny_code": "oap.limit_exceeded"},
            {"name": "count", "condition": "calls_per_hour < 3", "deny_code": "oap.rate_limit_exceeded"},
            {"name": "idem", "condition": "key not in recent_keys", "deny_code": "oap.idempotency_conflict"}
        ]
    });
    GenericPack::from_json(&doc.to_string()).expect("pack")
}

#[test]
fn state_accumulates_only_on_allow() {
    let pack = charge_like();
    let mut names: Vec<&str> = pack.state_names().collect();
    names.sort_unstable();
    assert_eq!(names, ["calls_per_hour", "daily_total", "recent_keys"]);
    let p = passport();
    let state = GenericState::new();
    let call = |amount: i64, currency: &str, key: &str, now: f64| {
        let ctx = obj(&json!({"amount": amount, "currency": currency, "key": key,
                              "daily_total": -100_000, "recent_keys": [], "calls_per_hour": 0}));
        verdict_code(&pack.evaluate_at(&p, &ctx, &state, now)).to_owned()
    };
    assert_eq!(call(100, "USD", "k1", NOW), "oap.allowed");
    assert_eq!(call(101, "USD", "k2", NOW), "oap.limit_exceeded"); // per-tx cap; no state change
    assert_eq!(call(50, "USD", "k1", NOW), "oap.idempotency_conflict");
    assert_eq!(call(60, "USD", "k3", NOW), "oap.limit_exceeded"); // 100 + 60 > 150 (the context's daily_total is ignored)
    assert_eq!(call(50, "USD", "k4", NOW), "oap.allowed"); // daily total 150, 2 calls this hour
    assert_eq!(call(90, "EUR", "k5", NOW), "oap.allowed"); // EUR has no daily_cap: that rule does not apply
    assert_eq!(call(1, "EUR", "k6", NOW), "oap.rate_limit_exceeded"); // a fourth call this hour
    assert_eq!(call(1, "EUR", "k6", NOW + 3600.0), "oap.allowed"); // a new hour
    assert_eq!(call(50, "USD", "k7", NOW + 86_400.0), "oap.allowed"); // the next day: the USD total restarts
    assert_eq!(call(1, "USD", "k1", NOW + 3.0 * 86_400.0), "oap.allowed"); // keys are kept 24 hours
    let missing = pack.evaluate_at(&p, &obj(&json!({"amount": 1, "currency": "USD"})), &state, NOW + 5e6);
    assert!(
        matches!(&missing, Verdict::Deny { code, message } if code == "oap.invalid_context" && message.ends_with(": key"))
    );
    state.clear();
    assert_eq!(call(100, "USD", "k1", NOW), "oap.allowed");
}

#[test]
fn state_is_consistent_under_concurrency() {
    let doc = json!({
        "id": "t.v1", "requires_capabilities": ["cap.x"], "optional_fields": ["amount", "currency"],
        "evaluation_rules": [{"name": "daily", "condition": "daily_total + amount <= limits.currency_limits[currency].daily_cap",
                              "deny_code": "oap.limit_exceeded"}]
    });
    let pack = GenericPack::from_json(&doc.to_string()).expect("pack");
    let (p, state) = (passport(), GenericState::new());
    let ctx = obj(&json!({"amount": 1, "currency": "USD"}));
    let allowed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..60 {
                    if pack.evaluate_at(&p, &ctx, &state, NOW) == Verdict::Allow {
                        allowed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(allowed.into_inner(), 150);
}

#[test]
fn negative_amounts_do_not_lower_totals_and_types_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<GenericPack>();
    send_sync::<GenericState>();
    let pack = charge_like();
    let (p, state) = (passport(), GenericState::new());
    let call = |amount: i64, key: &str| {
        let ctx = obj(&json!({"amount": amount, "currency": "USD", "key": key}));
        verdict_code(&pack.evaluate_at(&p, &ctx, &state, NOW)).to_owned()
    };
    assert_eq!(call(100, "a"), "oap.allowed");
    assert_eq!(call(-100, "b"), "oap.allowed"); // the pack has no minimum; the total stays 100
    assert_eq!(call(60, "c"), "oap.limit_exceeded");
}

#[test]
fn pack_errors_name_the_problem() {
    let cases = [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        (r#"{"requires_capabilities": [], "evaluation_rules": []}"#, "`id`"),
        (r#"{"id": "x.v1", "evaluation_rules": []}"#, "`requires_capabilities`"),
        (
            r#"{"id": "x.v1", "requires_capabilities": [1], "evaluation_rules": []}"#,
            "`requires_capabilities`",
        ),
        (
            r#"{"id": "x.v1", "requires_capabilities": [], "min_assurance": "L9", "evaluation_rules": []}"#,
            "`min_assurance`",
        ),
        (r#"{"id": "x.v1", "requires_capabilities": []}"#, "`evaluation_rules`"),
        (
            r#"{"id": "x.v1", "requires_capabilities": [], "evaluation_rules": [{"name": "r"}]}"#,
            "`deny_code`",
        ),
        (
            r#"{"id": "x.v1", "requires_capabilities": [], "evaluation_rules": [{"deny_code": "c"}]}"#,
            "`name`",
        ),
        (
            r#"{"id": "x.v1", "requires_capabilities": [], "assurance_rules": [{"lte_minor": "a"}], "evaluation_rules": []}"#,
            "assurance_rules[0]",
        ),
    ];
    for (text, needle) in cases {
        match GenericPack::from_json(text) {
            Ok(_) => panic!("{text} loaded"),
            Err(e) => assert!(e.to_string().contains(needle), "{text}: {e}"),
        }
    }
}

/// Every condition of every published pack.
fn published_conditions(files: &[(&str, PathBuf)]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, file) in files {
        let doc = read_json(file);
        for r in doc.get("evaluation_rules").and_then(Value::as_array).into_iter().flatten() {
            if let Some(c) = r.get("condition").and_then(Value::as_str) {
                out.push(c.to_owned());
            }
        }
    }
    out
}

const MALFORMED: &[&str] = &[
    "",
    "   ",
    "(",
    ")",
    "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((x))))))))))))))))))))))))))))))))))))))))))))))))))))",
    "a[",
    "a.",
    "a..b",
    "=> x",
    "x =>",
    "x = 1",
    "a & b",
    "a | b",
    "'unterminated",
    "\"unterminated",
    "'\\",
    "any(x for)",
    "any(x for y)",
    "any()",
    "all(x for x in)",
    "[1, 2",
    "[1,,2]",
    "f(1)",
    "a.b(1)",
    "a.some(1)",
    "a.some(x => )",
    "not",
    "not not not",
    "1 +",
    "1e999 == 1",
    "1e5 == 100000",
    "12.5.3",
    "is empty",
    "x is",
    "x is not full",
    "x in",
    "x not",
    "a < b < c",
    "€ == 1",
    "a\u{0}b",
    "ñ.x == 1",
    "x.length.length.length",
    "context[0][1][2]",
    "passport.limits[passport.limits][limits]",
    "(1)(2)",
    "'a'.nope()",
    "now(1)",
    "min()",
    "getRequiredAssuranceLevel()",
    "to_timestamp(1, 2)",
    "-(-(-(-(-1))))",
    "!!!!!!!!!!x",
];

fn garbage_inputs() -> Vec<(Value, Value)> {
    let weird = json!({"amount": "12", "currency": 5, "items": "abc", "x": [null, {}, []], "flag": {"a": 1},
                       "key": [1], "tool": null, "pair": 7, "ts": "2025-13-45", "context": {"timeout": "x"},
                       "limits": "nope", "daily_total": "x", "recent_keys": 3});
    vec![
        (passport(), json!({})),
        (passport(), weird.clone()),
        (json!({}), weird.clone()),
        (json!(null), json!({"amount": 1e308, "currency": "USD"})),
        (json!({"limits": [1, 2], "assurance_level": 7, "capabilities": "x", "regions": null}), weird),
        (json!({"limits": {"cap.x": null, "a": {"b": []}}}), json!({"amount": -1, "items": [[[]]]})),
    ]
}

/// Every condition against every garbage input, at odd times too.
fn evaluate_all_against_garbage(conditions: &[String]) {
    let inputs = garbage_inputs();
    let state = GenericState::new();
    for cond in conditions {
        let pack = pack_with(cond);
        for (p, c) in &inputs {
            let ctx = obj(c);
            let _ = pack.evaluate_at(p, &ctx, &state, NOW);
            let _ = pack.evaluate_at(p, &ctx, &state, f64::NAN);
            let _ = pack.explain(p, &ctx, &state, -1e300);
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut conditions: Vec<String> = MALFORMED.iter().map(|s| s.to_string()).collect();
    conditions.push("(".repeat(5000));
    conditions.push("a + ".repeat(900) + "a");
    conditions.push("not ".repeat(900) + "a");
    conditions.push("x.".repeat(2000) + "y");
    // Token soup from a fixed pseudo-random sequence.
    let vocab = [
        "a", "b.c", "[", "]", "(", ")", ",", "in", "not", "and", "or", "!", "==", "<", "+", "*", "'s'", "1",
        "is", "empty", "for", "any", "=>", ".", "x", "limits", "context", "passport", "now", "length",
        "some", "null",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..3000 {
        let n = (seed % 12) as usize + 1;
        let mut s = String::new();
        for _ in 0..n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            s.push_str(vocab[(seed % vocab.len() as u64) as usize]);
            s.push(' ');
        }
        conditions.push(s);
    }
    evaluate_all_against_garbage(&conditions);
    // Garbage pack files.
    for text in ["{", "null", "1", "\"x\"", "{\"id\": {}}", &"[".repeat(10_000)] {
        assert!(GenericPack::from_json(text).is_err());
    }
}

#[test]
fn published_packs_never_panic_on_garbage() {
    let Some(files) = published_packs("tests::published_packs_never_panic_on_garbage") else {
        return;
    };
    let conditions = published_conditions(&files);
    assert!(conditions.len() > 100, "found only {} conditions", conditions.len());
    evaluate_all_against_garbage(&conditions);
    // The real packs, whole, against garbage.
    let (inputs, state) = (garbage_inputs(), GenericState::new());
    for (_, file) in &files {
        let pack = load_pack(file);
        for (p, c) in &inputs {
            let _ = pack.evaluate_at(p, &obj(c), &state, NOW);
        }
    }
}
