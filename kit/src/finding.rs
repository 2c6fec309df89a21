//! What a check found ([`Finding`]), and the cases recorded so far
//! ([`Recorder`]).

use std::time::Instant;

use serde_json::{Map, Value};

use crate::report::{self, Case, CaseId, Status};

/// What a check found, before it is timed into a [`Case`].
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    status: Status,
    reason: String,
    details: Vec<String>,
    metrics: Map<String, Value>,
}

impl Finding {
    fn new(status: Status, reason: impl Into<String>) -> Self {
        Finding { status, reason: reason.into(), details: Vec::new(), metrics: Map::new() }
    }
    pub(crate) fn pass(reason: impl Into<String>) -> Self {
        Finding::new(Status::Pass, reason)
    }
    pub(crate) fn warn(reason: impl Into<String>) -> Self {
        Finding::new(Status::Warn, reason)
    }
    pub(crate) fn fail(reason: impl Into<String>) -> Self {
        Finding::new(Status::Fail, reason)
    }
    pub(crate) fn skip(reason: impl Into<String>) -> Self {
        Finding::new(Status::Skip, reason)
    }
    /// Adds particulars (at most [`MAX_DETAILS`], then a count of the rest).
    pub(crate) fn details(mut self, details: Vec<String>) -> Self {
        let extra = details.len().saturating_sub(MAX_DETAILS);
        self.details = details.into_iter().take(MAX_DETAILS).collect();
        if extra > 0 {
            self.details.push(format!("and {extra} more"));
        }
        self
    }
    pub(crate) fn metric(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.metrics.insert(name.to_owned(), value.into());
        self
    }
}

/// Detail lines kept per case.
const MAX_DETAILS: usize = 8;

/// The cases found so far.
pub(crate) struct Recorder {
    pub(crate) cases: Vec<Case>,
}

impl Recorder {
    /// No case yet.
    pub(crate) fn new() -> Self {
        Recorder { cases: Vec::new() }
    }

    /// Runs one check and records it, timed.
    pub(crate) fn check(&mut self, id: CaseId, check: impl FnOnce() -> Finding) -> Status {
        let started = Instant::now();
        let finding = check();
        let status = finding.status;
        self.cases.push(Case {
            id,
            status,
            reason: finding.reason,
            details: finding.details,
            metrics: finding.metrics,
            seconds: report::seconds(started.elapsed()),
        });
        status
    }

    /// Records every case not run yet as skipped, because of `why`.
    pub(crate) fn skip_rest(&mut self, why: &str) {
        for &id in CaseId::ALL {
            if !self.cases.iter().any(|c| c.id == id) {
                self.check(id, || Finding::skip(why));
            }
        }
    }
}
