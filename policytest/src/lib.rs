//! **guardhost-policytest**: policy tests for any guardhost config, the
//! engine of `guardhost test`.
//!
//! A test file (YAML) lists calls and the outcome each must get; they are
//! decided by the configured guardrail (a chain, an `authorization:`
//! section, any provider) and reported like a test runner: text, JSON or
//! JUnit XML.
//!
//! ```yaml
//! config: config.yaml              # optional: the config under test, from this file's folder
//! tests:
//!   - name: a workspace file may be read
//!     tool: read_file
//!     args: {path: /mnt/user-data/workspace/notes.md}
//!     context: {user_role: developer}      # optional: the runtime context
//!     expect: allow                        # allow, deny, ask, rewrite or error
//!     code: cedar.permit                   # optional: the first reason's code
//!     policy: everyone-reads               # optional: the deciding policy (`policy_id`)
//!     decided_by: cedar                    # optional: the chain entry that decided
//!   - name: an approved deploy runs
//!     tool: bash
//!     args: {command: make deploy}
//!     approve: {by: admin}                 # optional: answer the ask, then decide again
//!     expect: allow
//!     code: guardhost.approved
//! ```
//!
//! - [`suite`]: reading a test file;
//! - [`run`]: deciding its calls and comparing;
//! - [`report`]: the results, as text, JSON and JUnit;
//! - [`coverage`]: what the cases exercised of the guardrail (`--coverage`).

pub mod coverage;
pub mod report;
pub mod run;
pub mod suite;

pub use coverage::{Coverage, EntryCoverage, Policies, PolicyLister, Recorder};
pub use report::{FileReport, Report, TestResult};
pub use run::{run_suite, run_suite_covered};
pub use suite::{Approve, Expect, Suite, SuiteError, TestCase};
