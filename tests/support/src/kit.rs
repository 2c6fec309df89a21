//! What the tests of the conformance kit share (the kit's own in
//! `kit/tests/`, the command's in `cli/tests/`).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use guardhost_kit::{CaseId, Options, Report, Status};
use serde_json::{Map, Value};

use crate::use_of;

/// One kit run at a time: the memory check reads the whole process's
/// resident memory, which a concurrent run (a leaking zoo member) would move.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static KIT: Mutex<()> = Mutex::new(());
    KIT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Generous limits: a debug build on a busy CI machine must not fail a good
/// provider on time. The zoo members whose fault is time get tight ones.
pub fn options() -> Options {
    Options {
        iterations: 2_000,
        call_timeout: Duration::from_secs(2),
        latency_budget: Duration::from_millis(50),
        case_time_limit: Duration::from_secs(1),
        fuzz: Duration::from_millis(200),
        ..Options::default()
    }
}

/// The kit on `use_` with `config`, under [`options`].
pub fn run(use_: &str, config: Map<String, Value>) -> Report {
    guardhost_builtins::register();
    guardhost_kit::run(use_, &config, &options())
}

/// `use:` of a member of the seeded-fault zoo.
pub fn zoo(symbol: &str) -> String {
    use_of("guardhost_zoo", symbol)
}

/// Every case of `report` passed.
#[track_caller]
pub fn assert_clean(report: &Report) {
    let not_passed: Vec<_> = report.cases.iter().filter(|c| c.status != Status::Pass).collect();
    assert!(not_passed.is_empty(), "{}", report.to_text());
    assert_eq!(report.cases.len(), CaseId::ALL.len());
}
