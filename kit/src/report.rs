//! The kit's findings: one [`Case`] per check, and the [`Report`] that
//! renders them as a table, JSON or JUnit XML.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The provider does what the check asks.
    Pass,
    /// Not wrong, but worth fixing; does not fail the run.
    Warn,
    /// Wrong: the run fails.
    Fail,
    /// Not run, because an earlier check failed (the reason says which).
    Skip,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

macro_rules! case_ids {
    ($($variant:ident = $id:literal: $what:literal,)*) => {
        /// Every check of the kit, in the order it runs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum CaseId {
            $(
                #[doc = $what]
                #[serde(rename = $id)]
                $variant,
            )*
        }

        impl CaseId {
            /// Every case, in the order the kit runs them.
            pub const ALL: &'static [CaseId] = &[$(CaseId::$variant),*];

            /// The case's name in every output format.
            pub fn as_str(self) -> &'static str {
                match self { $(CaseId::$variant => $id,)* }
            }

            /// One line on what the case checks.
            pub fn what(self) -> &'static str {
                match self { $(CaseId::$variant => $what,)* }
            }
        }
    };
}

case_ids! {
    Load = "load": "the library file, OS loader, symbol, descriptor magic, ABI version and type layout",
    DescriptorName = "descriptor.name": "the provider has a usable name",
    DescriptorKeys = "descriptor.keys": "the accepted config keys are listed, without blanks or repeats",
    DescriptorFramework = "descriptor.framework": "a provider that takes `framework` accepts the injected `framework: deerflow`",
    ConstructionConfig = "construction.config": "the provider constructs from the given config, as the host does it",
    ConstructionUnknownKey = "construction.unknown_key": "an unknown config key is rejected, unless the provider takes any key",
    ConstructionErrors = "construction.errors": "a bad config value is an error, never a panic",
    EvaluationCorpus = "evaluation.corpus": "every request of the corpus gets a decision, in time",
    Determinism = "determinism": "the same request, asked again at once, gets the same decision",
    SyncAsyncAgreement = "agreement.sync_async": "evaluate and aevaluate decide the corpus alike",
    DecideAgreement = "agreement.decide": "a library's `decide` (ABI 1.4, what the host calls) and its `evaluate` and `aevaluate` decide the corpus alike",
    DeclaredInputs = "declarations.inputs": "a provider that declares it does not read an input decides the corpus alike when given it",
    EvaluationPanics = "evaluation.panics": "no evaluation panics (a panic is caught and reported; the kit goes on)",
    DecisionHygiene = "decisions.hygiene": "denials carry reasons with namespaced codes",
    ThreadSafety = "thread_safety": "concurrent evaluations agree with single-threaded ones",
    Latency = "latency": "p99 of an evaluation stays within the budget (1 ms for a provider that declares it never blocks)",
    Memory = "memory": "resident memory does not grow over many evaluations",
    Fuzz = "fuzz": "random requests, reproducible from a seed, each get a decision, in time",
}

impl std::fmt::Display for CaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one check.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Which check.
    pub id: CaseId,
    /// How it came out.
    pub status: Status,
    /// What was found and, for a warning or failure, what to do about it.
    pub reason: String,
    /// Particulars: the requests that failed, the decisions that differed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// Measurements (latency percentiles, memory growth, counts).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub metrics: Map<String, Value>,
    /// How long the check took, in seconds.
    pub seconds: f64,
}

/// Everything the kit found about one provider.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The `use:` value checked.
    #[serde(rename = "use")]
    pub use_: String,
    /// Which of several configs this report is about (`config 2 of 3
    /// (--config-file strict.yaml)`); never the config's values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The provider's name, once its descriptor was read.
    pub provider: Option<String>,
    /// The ABI version its library was built against.
    pub abi_version: Option<String>,
    /// The checks, in the order they ran.
    pub cases: Vec<Case>,
    /// The whole run, in seconds.
    pub seconds: f64,
}

impl Report {
    /// Whether no case failed.
    pub fn passed(&self) -> bool {
        !self.cases.iter().any(|c| c.status == Status::Fail)
    }

    /// The case with this id.
    pub fn case(&self, id: CaseId) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }

    /// How many cases came out as `status`.
    pub fn count(&self, status: Status) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }

    fn heading(&self) -> String {
        let mut heading = format!("guardhost conformance: {}", self.use_);
        if let Some(config) = &self.config {
            let _ = write!(heading, ", {config}");
        }
        if let (Some(name), Some(abi)) = (&self.provider, &self.abi_version) {
            let _ = write!(heading, " (provider '{name}', ABI {abi})");
        }
        heading
    }

    fn totals(&self) -> String {
        format!(
            "{} cases: {} pass, {} warn, {} fail, {} skip ({:.2} s)",
            self.cases.len(),
            self.count(Status::Pass),
            self.count(Status::Warn),
            self.count(Status::Fail),
            self.count(Status::Skip),
            self.seconds
        )
    }

    /// A table for people.
    pub fn to_text(&self) -> String {
        let mut out = self.heading();
        out.push('\n');
        let width = self.cases.iter().map(|c| c.id.as_str().len()).max().unwrap_or(0);
        for case in &self.cases {
            let _ = writeln!(out, "  {}  {:width$}  {}", case.status.label(), case.id.as_str(), case.reason);
            for detail in &case.details {
                let _ = writeln!(out, "  {:4}  {:width$}    - {detail}", "", "");
            }
        }
        out.push_str(&self.totals());
        out.push('\n');
        out
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("passed".into(), Value::Bool(self.passed()));
        }
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }

    /// JUnit XML, one `<testcase>` per case: a failure is `<failure>`, a
    /// skip `<skipped>`, a warning a pass whose `<system-out>` starts with
    /// `WARN`.
    pub fn to_junit(&self) -> String {
        Reports(vec![self.clone()]).to_junit()
    }

    /// This report as one `<testsuite>`.
    fn junit_suite(&self, out: &mut String) {
        let failures = self.count(Status::Fail);
        let skipped = self.count(Status::Skip);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{:.3}\">",
            xml(&self.heading(), true),
            self.cases.len(),
            self.seconds
        );
        for case in &self.cases {
            let _ = write!(
                out,
                "    <testcase classname=\"guardhost.conformance\" name=\"{}\" time=\"{:.3}\">",
                case.id, case.seconds
            );
            let body = std::iter::once(case.reason.as_str())
                .chain(case.details.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join("\n");
            match case.status {
                Status::Pass => {
                    let _ = write!(out, "<system-out>{}</system-out>", xml(&body, false));
                }
                Status::Warn => {
                    let _ = write!(out, "<system-out>WARN: {}</system-out>", xml(&body, false));
                }
                Status::Fail => {
                    let _ = write!(
                        out,
                        "<failure message=\"{}\" type=\"conformance\">{}</failure>",
                        xml(&case.reason, true),
                        xml(&body, false)
                    );
                }
                Status::Skip => {
                    let _ = write!(out, "<skipped message=\"{}\"/>", xml(&case.reason, true));
                }
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
}

/// The reports of one provider under several configs (`--config` given
/// more than once), one per config, as one document: it passes when every
/// report does.
#[derive(Debug, Clone)]
pub struct Reports(pub Vec<Report>);

impl Reports {
    /// Whether every report passed.
    pub fn passed(&self) -> bool {
        self.0.iter().all(Report::passed)
    }

    /// The reports' tables one after the other, and with several a last
    /// line counting them.
    pub fn to_text(&self) -> String {
        let mut out = self.0.iter().map(Report::to_text).collect::<Vec<_>>().join("\n");
        if self.0.len() > 1 {
            let failed = self.0.iter().filter(|r| !r.passed()).count();
            let _ = writeln!(
                out,
                "\n{} configs: {} passed, {failed} failed",
                self.0.len(),
                self.0.len() - failed
            );
        }
        out
    }

    /// One report as [`Report::to_json`]; several as
    /// `{"passed": bool, "reports": [...]}`.
    pub fn to_json(&self) -> String {
        if let [one] = &self.0[..] {
            return one.to_json();
        }
        let reports: Vec<Value> = self
            .0
            .iter()
            .map(|report| serde_json::from_str(&report.to_json()).unwrap_or(Value::Null))
            .collect();
        let mut text =
            serde_json::to_string_pretty(&serde_json::json!({"passed": self.passed(), "reports": reports}))
                .unwrap_or_default();
        text.push('\n');
        text
    }

    /// JUnit XML with one `<testsuite>` per report.
    pub fn to_junit(&self) -> String {
        let count = |status| self.0.iter().map(|r| r.count(status)).sum::<usize>();
        let tests: usize = self.0.iter().map(|r| r.cases.len()).sum();
        let seconds: f64 = self.0.iter().map(|r| r.seconds).sum();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"guardhost conformance\" tests=\"{tests}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{seconds:.3}\">",
            count(Status::Fail),
            count(Status::Skip),
        );
        for report in &self.0 {
            report.junit_suite(&mut out);
        }
        out.push_str("</testsuites>\n");
        out
    }
}

/// Text made safe for XML content (or, with `attribute`, an attribute value): markup characters
/// escaped, characters XML 1.0 cannot carry (most control characters)
/// replaced by U+FFFD.
pub fn xml(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Kept in content; in an attribute, a literal newline would be
            // normalised to a space by every parser.
            '\n' if attribute => out.push_str("&#10;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Renders `text` for a detail line: at most `max` characters, control
/// characters escaped, so one odd string cannot flood or garble a report.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            let _ = write!(out, "... ({} bytes)", text.len());
            break;
        }
        if c.is_control() {
            let _ = write!(out, "{}", c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Seconds as a float, for reports.
pub(crate) fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(
            xml("a<b>&\"c'\u{0}\u{7}\té\n", false),
            "a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD}\u{FFFD}\té\n"
        );
        assert_eq!(xml("a\nb", true), "a&#10;b");
    }

    #[test]
    fn shorten_cuts_and_escapes() {
        assert_eq!(shorten("ab\ncd", 10), "ab\\ncd");
        assert_eq!(shorten("abcdef", 3), "abc... (6 bytes)");
    }

    #[test]
    fn case_ids_are_unique() {
        let mut ids: Vec<_> = CaseId::ALL.iter().map(|c| c.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CaseId::ALL.len());
    }
}
