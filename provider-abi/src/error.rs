//! How a provider fails: an error, a panic, or a control-flow interrupt.

use std::fmt;

use abi_stable::std_types::RString;
use abi_stable::StableAbi;

/// The kind of a [`ProviderError`].
///
/// A plain `u8` so that a kind added by a later minor version reaches an
/// older host as an unknown value, which the host treats as an error.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorKind(pub u8);

impl ErrorKind {
    /// An ordinary failure: the host applies `fail_closed`.
    pub const ERROR: ErrorKind = ErrorKind(0);
    /// Provider code panicked; the panic was caught on the provider's side
    /// of the boundary. The host treats it like [`ErrorKind::ERROR`].
    pub const PANIC: ErrorKind = ErrorKind(1);
    /// A control-flow signal (the twin of LangGraph's `GraphBubbleUp`:
    /// interrupt, pause, resume). The host never turns it into a decision:
    /// it propagates it to the caller unchanged.
    pub const INTERRUPT: ErrorKind = ErrorKind(2);
}

/// A provider's failure, as it crosses the boundary.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// What kind of failure this is.
    pub kind: ErrorKind,
    /// What went wrong, for humans.
    pub message: RString,
    /// For interrupts: a JSON value for the caller (empty when none).
    pub payload_json: RString,
}

impl ProviderError {
    /// An ordinary error (→ `fail_closed`).
    pub fn error(message: impl Into<String>) -> Self {
        ProviderError {
            kind: ErrorKind::ERROR,
            message: RString::from(message.into()),
            payload_json: RString::new(),
        }
    }

    /// A control-flow interrupt carrying `payload` to the caller.
    pub fn interrupt(message: impl Into<String>, payload: serde_json::Value) -> Self {
        ProviderError {
            kind: ErrorKind::INTERRUPT,
            message: RString::from(message.into()),
            payload_json: RString::from(payload.to_string()),
        }
    }

    /// A caught panic.
    pub fn panic(message: impl Into<String>) -> Self {
        ProviderError { kind: ErrorKind::PANIC, ..ProviderError::error(message) }
    }

    /// Whether this is a control-flow interrupt.
    pub fn is_interrupt(&self) -> bool {
        self.kind == ErrorKind::INTERRUPT
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::PANIC => write!(f, "provider panicked: {}", self.message),
            ErrorKind::INTERRUPT => write!(f, "provider interrupt: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ProviderError {}
