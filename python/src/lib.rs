//! `guardhost._guardhost`: the extension module behind the `guardhost`
//! Python package. The pure-Python modules (`guardhost`, `guardhost.deerflow`,
//! `guardhost.langchain`) are the public face; this module holds what must
//! be fast or must touch the host library:
//!
//! - `Guardrail`: a whole `guardrails:` section, installed as the
//!   `guardhost` command installs it (middleware, `fail_closed`, passport);
//! - `Provider`: one provider, built from `use:` + `config` (what DeerFlow's
//!   `GuardrailProvider` is), deciding DeerFlow-shaped requests;
//! - `conformance_json`: the conformance kit;
//! - `serve_provider`: the child side of `isolation: process`.
//!
//! Every call into a provider releases the GIL, but `Provider`'s into one
//! that declares it never blocks (ABI 1.3 `NEVER_BLOCKS`: releasing and
//! retaking the GIL would cost as much as its decision).
//!
//! The modules, one idea each:
//!
//! - `errors`: the exception classes, and the conversions from the host's
//!   errors;
//! - `convert`: Python values as JSON values; `to_py`, the other way;
//! - `instantiate`: building a provider (the `isolation: process` server
//!   program), and what both classes report about it;
//! - `guardrail`: the `Guardrail` class;
//! - `decision`: `Reason` and `Decision`, what `Guardrail.decide` returns;
//! - `provider`: the `Provider` class; `request`, how it reads DeerFlow's
//!   `GuardrailRequest`; `dataclass`, how it builds DeerFlow's decisions;
//! - `kit`: the conformance kit, `conformance_json`;
//! - `server`: `serve_provider`, the crate's only `unsafe` code.

mod convert;
mod dataclass;
mod decision;
mod errors;
mod guardrail;
mod instantiate;
mod kit;
mod provider;
mod request;
mod server;
mod texts;
mod to_py;

use pyo3::prelude::*;

use crate::decision::{Decision, Reason};
use crate::errors::{
    ApprovalRequired, BuildError, ConfigError, GuardhostError, Interrupt, ProviderError, RequestError,
};
use crate::guardrail::Guardrail;
use crate::instantiate::SERVER_ENV;
use crate::kit::conformance_json;
use crate::provider::Provider;
use crate::server::serve_provider;

/// The extension module.
#[pymodule]
fn _guardhost(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // `isolation: process` and `command:` providers start through
    // guardhost-isolation.
    guardhost_isolation::install();
    // The shipped providers, built in as in the command and the server (the
    // library links none): `use: builtin:AllowlistProvider` and the others.
    guardhost_builtins::register();
    m.add("GuardhostError", py.get_type::<GuardhostError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("BuildError", py.get_type::<BuildError>())?;
    m.add("ProviderError", py.get_type::<ProviderError>())?;
    m.add("RequestError", py.get_type::<RequestError>())?;
    m.add("Interrupt", py.get_type::<Interrupt>())?;
    m.add("ApprovalRequired", py.get_type::<ApprovalRequired>())?;
    m.add_class::<Guardrail>()?;
    m.add_class::<Provider>()?;
    m.add_class::<Decision>()?;
    m.add_class::<Reason>()?;
    m.add_function(wrap_pyfunction!(conformance_json, m)?)?;
    m.add_function(wrap_pyfunction!(serve_provider, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SERVER_ENV", SERVER_ENV)?;
    Ok(())
}
