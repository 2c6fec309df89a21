//! A test file: the config it tests and its cases.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// The outcome a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// The call may run.
    Allow,
    /// The call is denied.
    Deny,
    /// The call is held for a human's approval.
    Ask,
    /// The call may run, with rewritten arguments.
    Rewrite,
    /// The provider fails on the call (whatever `fail_closed` makes of it).
    Error,
}

impl Expect {
    /// As the outcome names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Allow => "allow",
            Expect::Deny => "deny",
            Expect::Ask => "ask",
            Expect::Rewrite => "rewrite",
            Expect::Error => "error",
        }
    }
}

/// One call and what it must come to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    /// What the case checks, in words.
    pub name: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// The runtime context (`user_role`, `user_id`, `thread_id` ...).
    #[serde(default)]
    pub context: Option<Map<String, Value>>,
    /// The outcome it must get.
    pub expect: Expect,
    /// The first reason's code it must have.
    #[serde(default)]
    pub code: Option<String>,
    /// The deciding policy it must name.
    #[serde(default)]
    pub policy: Option<String>,
    /// The chain entry that must decide it.
    #[serde(default)]
    pub decided_by: Option<String>,
    /// A human's answer to the call's `ask`: the call is decided, the ask
    /// answered as a runtime answers it (an approval of exactly this call,
    /// in its context), and decided again; `expect` is what that comes to.
    #[serde(default)]
    pub approve: Option<Approve>,
}

/// A case's answer to an `ask` (`approve: {by: admin}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// Who answers (`approved_by`).
    #[serde(default)]
    pub by: Option<String>,
    /// `false` refuses the call.
    #[serde(default = "yes")]
    pub approved: bool,
}

fn yes() -> bool {
    true
}

/// A test file, read.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Where it was read from.
    pub path: PathBuf,
    /// The config it names (`config:`), joined to its folder.
    pub config: Option<PathBuf>,
    /// Its cases, in order.
    pub tests: Vec<TestCase>,
}

/// A test file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Not readable.
    #[error("cannot read the test file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a test file.
    #[error("{path} is not a test file: {message}; a test file is `tests:` (a list of {{name, tool, args, context, expect: allow|deny|ask|rewrite|error, code, policy, decided_by, approve: {{by, approved}}}}), with an optional `config:`")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What was wrong (YAML's words, with its line and column).
        message: String,
    },
    /// No case.
    #[error("{path} has no test under `tests:`")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    config: Option<PathBuf>,
    tests: Vec<TestCase>,
}

impl Suite {
    /// Reads the test file at `path`.
    pub fn read(path: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SuiteError::Read { path: path.to_owned(), source })?;
        Suite::parse(path, &text)
    }

    /// Parses `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Suite, SuiteError> {
        let file: File = serde_yaml::from_str(text)
            .map_err(|e| SuiteError::Shape { path: path.to_owned(), message: e.to_string() })?;
        if file.tests.is_empty() {
            return Err(SuiteError::Empty { path: path.to_owned() });
        }
        let folder = path.parent().unwrap_or(Path::new("."));
        let config = file.config.map(|c| if c.is_relative() { folder.join(c) } else { c });
        Ok(Suite { path: path.to_owned(), config, tests: file.tests })
    }
}
