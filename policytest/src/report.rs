//! What a run of test files came to, as a test runner says it.

use std::fmt::Write;
use std::path::PathBuf;

use guardhost_kit::xml;
use serde::Serialize;

use crate::coverage::Coverage;

/// What a call got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Got {
    /// `allow`, `deny`, `ask`, `rewrite` or `error`.
    pub outcome: String,
    /// The first reason's code.
    pub code: Option<String>,
    /// The first reason's message (or the error).
    pub message: Option<String>,
    /// The deciding policy.
    pub policy: Option<String>,
    /// The chain entry that decided.
    pub decided_by: Option<String>,
    /// When a provider failed: why, in its own words (see
    /// `guardhost::Guard::cause_of_failure`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    /// The case's name.
    pub name: String,
    /// What the call got.
    pub got: Got,
    /// What differed from the expectation; none when it passed.
    pub problems: Vec<String>,
    /// How long deciding took.
    pub seconds: f64,
}

impl TestResult {
    /// Whether it got what it expected.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One test file's results.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The test file.
    pub file: PathBuf,
    /// The config it was run against.
    pub config: PathBuf,
    /// Each case, in order.
    pub tests: Vec<TestResult>,
}

/// Every file's results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Each file, in the order given.
    pub files: Vec<FileReport>,
    /// With `--coverage`: what the cases exercised, a config each (in the
    /// order the configs were first used).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<Coverage>,
}

impl Report {
    fn results(&self) -> impl Iterator<Item = &TestResult> {
        self.files.iter().flat_map(|f| &f.tests)
    }

    /// How many cases passed and failed.
    pub fn counts(&self) -> (usize, usize) {
        let passed = self.results().filter(|r| r.passed()).count();
        (passed, self.results().count() - passed)
    }

    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        self.counts().1 == 0
    }

    /// One line a case, the problems under a failure, the counts last.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for file in &self.files {
            let _ = writeln!(out, "{} (config {})", file.file.display(), file.config.display());
            for result in &file.tests {
                let got = &result.got;
                let why = match (&got.code, &got.policy) {
                    (Some(code), Some(policy)) => format!(" ({code}, policy {policy})"),
                    (Some(code), None) => format!(" ({code})"),
                    _ => String::new(),
                };
                let status = if result.passed() { "PASS" } else { "FAIL" };
                let _ = writeln!(out, "  {status}  {}: {}{why}", result.name, got.outcome);
                for problem in &result.problems {
                    let _ = writeln!(out, "        {problem}");
                }
                if !result.passed() {
                    if let Some(message) = &got.message {
                        let _ = writeln!(out, "        message: {message}");
                    }
                }
                if let Some(cause) = &got.cause {
                    let _ = writeln!(out, "        cause: {cause}");
                }
            }
        }
        let (passed, failed) = self.counts();
        let _ = writeln!(out, "{} tests: {passed} passed, {failed} failed", passed + failed);
        for coverage in &self.coverage {
            out.push_str(&coverage.to_text());
        }
        out
    }

    /// The whole report as one JSON document, with the counts.
    pub fn to_json(&self) -> String {
        let (passed, failed) = self.counts();
        let mut document = serde_json::json!({"passed": passed, "failed": failed, "files": self.files});
        if !self.coverage.is_empty() {
            document["coverage"] = serde_json::json!(self.coverage);
        }
        serde_json::to_string_pretty(&document).unwrap_or_default()
    }

    /// JUnit XML: a `<testsuite>` a file, a `<testcase>` a case.
    pub fn to_junit(&self) -> String {
        let mut out = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"guardhost test\">\n",
        );
        for file in &self.files {
            let failures = file.tests.iter().filter(|r| !r.passed()).count();
            let seconds: f64 = file.tests.iter().map(|r| r.seconds).sum();
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{seconds:.6}\">",
                xml(&file.file.display().to_string(), true),
                file.tests.len()
            );
            for result in &file.tests {
                let _ = write!(
                    out,
                    "    <testcase classname=\"guardhost.policy\" name=\"{}\" time=\"{:.6}\">",
                    xml(&result.name, true),
                    result.seconds
                );
                if !result.passed() {
                    let body = result.problems.join("\n");
                    let _ = write!(
                        out,
                        "<failure message=\"{}\" type=\"policy\">{}</failure>",
                        xml(&result.problems[0], true),
                        xml(&body, false)
                    );
                }
                out.push_str("</testcase>\n");
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }
}
