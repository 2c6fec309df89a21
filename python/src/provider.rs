//! `Provider`: one provider, built from `use:` + `config` (what DeerFlow's
//! `GuardrailProvider` is), deciding DeerFlow-shaped requests.

use std::path::PathBuf;
use std::sync::Arc;

use guardhost::decision_log::{Decided, DecisionLog, DecisionLogConfig};
use guardhost::{aevaluate_call, evaluate_call, Evaluation};
use guardhost::{
    block_on, CallView, GuardrailProvider, Isolation, LoadedProvider, ProviderFailure, ProviderInfo,
    ProviderSpec, Transport,
};
use guardhost::{shadowed, AuditProvider, Mode};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

use crate::convert::config_map;
use crate::dataclass::Class;
use crate::errors::{build_error, ConfigError, ProviderError};
use crate::instantiate::{absolute_base, info_dict, instantiate, may_block};
use crate::request::{Reads, Request};
use crate::texts::StaticTexts;
use crate::to_py::{map_to_dict, to_python};

/// One provider built from `use:` and `config` (DeerFlow's
/// `GuardrailProvider`). Decisions are built with the classes given at
/// construction (DeerFlow's own dataclasses, or guardhost's).
#[pyclass(frozen, module = "guardhost._guardhost")]
pub(crate) struct Provider {
    provider: Arc<dyn GuardrailProvider>,
    info: ProviderInfo,
    /// `enforce`, or shadow mode: denials returned as allows that say what
    /// would have been denied.
    mode: Mode,
    /// Where every decision is written, if anywhere.
    decision_log: Option<DecisionLog>,
    /// What of a request is read (what the provider, or the decision log,
    /// reads).
    reads: Reads,
    /// Whether the GIL is kept while the provider decides: only for one
    /// that declares it never blocks (releasing and retaking the GIL costs
    /// about as much as such a decision).
    keeps_gil: bool,
    decision_cls: Class,
    reason_cls: Class,
    /// The strings of the library's static reason codes, made once.
    texts: StaticTexts,
    interrupt: Py<PyAny>,
}

/// The fields of DeerFlow's `GuardrailDecision` and `GuardrailReason`, in
/// the order their constructors take them.
const DECISION_FIELDS: [&str; 4] = ["allow", "reasons", "policy_id", "metadata"];
const REASON_FIELDS: [&str; 2] = ["code", "message"];

#[pymethods]
impl Provider {
    /// Builds the provider of `use_` from `config`, as the host builds
    /// `guardrails.provider` (key check, `framework` injection, path keys
    /// joined to `base_dir`, default: the working directory).
    #[new]
    #[pyo3(signature = (use_, config=None, *, isolation=None, timeout_ms=None, sha256=None,
                        allow_insecure_permissions=false, base_dir=None, program=None, command=None,
                        transport=None, mode=None, decision_log=None, decision_cls, reason_cls, interrupt))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        use_: String,
        config: Option<&Bound<'_, PyAny>>,
        isolation: Option<&str>,
        timeout_ms: Option<u64>,
        sha256: Option<String>,
        allow_insecure_permissions: bool,
        base_dir: Option<PathBuf>,
        program: Option<PathBuf>,
        command: Option<Vec<String>>,
        transport: Option<&str>,
        mode: Option<&str>,
        decision_log: Option<&Bound<'_, PyAny>>,
        decision_cls: Py<PyAny>,
        reason_cls: Py<PyAny>,
        interrupt: Py<PyAny>,
    ) -> PyResult<Self> {
        let config = config_map(config, "config")?;
        let isolation = match isolation {
            None | Some("in_process") => Isolation::InProcess,
            Some("process") => Isolation::Process,
            Some(other) => {
                // Never the value: it may come from a secret.
                return Err(ConfigError::new_err(format!(
                    "isolation: unknown variant (a string of {} characters), expected `in_process` or `process`",
                    other.chars().count()
                )));
            }
        };
        let transport = match transport {
            None => None,
            Some("shared_memory") => Some(Transport::SharedMemory),
            Some("pipes") => Some(Transport::Pipes),
            Some(other) => {
                return Err(ConfigError::new_err(format!(
                    "transport: unknown variant (a string of {} characters), expected `shared_memory` or `pipes`",
                    other.chars().count()
                )));
            }
        };
        let mode = match mode {
            None | Some("enforce") => Mode::Enforce,
            Some("warn") => Mode::Warn,
            Some("observe") => Mode::Observe,
            Some(other) => {
                return Err(ConfigError::new_err(format!(
                    "mode: unknown variant (a string of {} characters), expected `enforce`, `warn` or `observe`",
                    other.chars().count()
                )));
            }
        };
        let spec = ProviderSpec {
            sha256,
            allow_insecure_permissions,
            timeout_ms,
            isolation,
            command,
            transport,
            ..ProviderSpec::new(use_, config)
        };
        let base_dir = absolute_base(base_dir);
        let decision_log = match decision_log {
            Some(section) => {
                let section = serde_json::Value::Object(config_map(Some(section), "decision_log")?);
                let config: DecisionLogConfig = serde_json::from_value(section)
                    .map_err(|e| ConfigError::new_err(format!("decision_log: {e}")))?;
                let log = DecisionLog::open(&config, &base_dir).map_err(|e| {
                    ConfigError::new_err(format!("decision_log: cannot open {}: {e}", config.path.display()))
                })?;
                Some(log)
            }
            None => None,
        };
        let LoadedProvider { provider, info } =
            py.allow_threads(|| instantiate(&spec, &base_dir, program)).map_err(build_error)?;
        let logged = decision_log.is_some();
        let reads = Reads {
            arguments: provider.reads_tool_input() || logged,
            attribution: provider.reads_attribution() || logged,
        };
        let keeps_gil = provider.never_blocks();
        let sample = (true, PyList::empty(py), py.None(), PyDict::new(py)).into_pyobject(py)?;
        let decision_cls = Class::new(py, decision_cls, &DECISION_FIELDS, &sample)?;
        let reason_cls =
            Class::new(py, reason_cls, &REASON_FIELDS, &("guardhost.sample", "").into_pyobject(py)?)?;
        Ok(Provider {
            provider,
            info,
            mode,
            decision_log,
            reads,
            keeps_gil,
            decision_cls,
            reason_cls,
            texts: StaticTexts::new(),
            interrupt,
        })
    }

    /// The provider's name.
    #[getter]
    fn name(&self) -> &str {
        &self.info.name
    }

    /// What is known about the provider.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.info)
    }

    /// Whether decisions are filled in directly (plain dataclasses) rather
    /// than built by calling their classes; for tests.
    #[getter]
    fn _fills_decisions(&self) -> bool {
        self.decision_cls.is_filled() && self.reason_cls.is_filled()
    }

    /// Whether requests' arguments are read, and whether their attribution
    /// is (for the provider, or the decision log); for tests.
    #[getter]
    fn _reads(&self) -> (bool, bool) {
        (self.reads.arguments, self.reads.attribution)
    }

    /// Whether the GIL is kept while the provider decides (it declares it
    /// never blocks); for tests.
    #[getter]
    fn _keeps_gil(&self) -> bool {
        self.keeps_gil
    }

    /// Whether a decision can block for long (`timeout_ms`, `isolation: process`).
    #[getter]
    fn may_block(&self) -> bool {
        may_block(&self.info)
    }

    /// Decides a DeerFlow `GuardrailRequest` (read by attribute); returns a
    /// `decision_cls(allow, [reason_cls(code, message)...], policy_id, metadata)`.
    /// A provider error raises `ProviderError`; an interrupt raises what
    /// `interrupt(message, payload)` returns.
    #[pyo3(signature = (request, asynchronous=false))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        asynchronous: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = Request::read(request, self.reads)?;
        let call = request.view()?;
        let provider = &self.provider;
        let started = self.decision_log.as_ref().map(|_| std::time::Instant::now());
        let ask = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                decide(&**provider, &call, asynchronous)
            }))
            .unwrap_or_else(|_| {
                Err(ProviderFailure::error(format!("provider '{}' panicked", provider.name())))
            })
        };
        let evaluation = if self.keeps_gil { ask() } else { py.allow_threads(ask) };
        let evaluation = evaluation.map(|decision| shadowed(decision, self.mode));
        if let (Some(log), Some(started)) = (&self.decision_log, started) {
            let decided = match &evaluation {
                Ok(decision) => Decided::Decision(decision, false),
                Err(ProviderFailure::Interrupt(_)) => Decided::Interrupt,
                Err(_) => Decided::ProviderError,
            };
            let provider = AuditProvider { name: self.info.name.clone(), sha256: self.info.sha256.clone() };
            log.record_call(&call, decided, self.mode, &provider, started.elapsed());
        }
        match evaluation {
            Ok(decision) => {
                let reasons = decision
                    .reasons
                    .iter()
                    .map(|r| {
                        let (code, message) = (self.texts.get(py, &r.code), self.texts.get(py, &r.message));
                        self.reason_cls.build(py, [code.into_any(), message.into_any()])
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                let reasons = PyList::new(py, reasons)?;
                let policy_id = match &decision.policy_id {
                    Some(id) => PyString::new(py, id).into_any(),
                    None => py.None().into_bound(py),
                };
                let metadata = map_to_dict(py, &decision.metadata)?;
                let allow = PyBool::new(py, decision.allow).to_owned().into_any();
                self.decision_cls.build(py, [allow, reasons.into_any(), policy_id, metadata.into_any()])
            }
            Err(ProviderFailure::Interrupt(interrupt)) => {
                let payload = to_python(py, &interrupt.payload)?;
                let error = self.interrupt.bind(py).call1((interrupt.message, payload))?;
                Err(PyErr::from_value(error))
            }
            Err(error) => Err(ProviderError::new_err(error.to_string())),
        }
    }

    /// `evaluate(request, asynchronous=True)`: the provider's `aevaluate`,
    /// driven to completion on this thread (the GIL released meanwhile).
    fn aevaluate_here<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.evaluate(py, request, true)
    }

    fn __repr__(&self) -> String {
        format!("Provider(name={:?}, source={:?})", self.info.name, self.info.source.to_string())
    }
}

/// Asks `provider` about `call`, on the sync path or (driven here) the
/// async one; a provider that never blocks is asked on the sync path
/// either way (as the host's middleware asks it).
fn decide(provider: &dyn GuardrailProvider, call: &CallView<'_>, asynchronous: bool) -> Evaluation {
    if asynchronous && !provider.never_blocks() {
        block_on(aevaluate_call(provider, call))
    } else {
        evaluate_call(provider, call)
    }
}
