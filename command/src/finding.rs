//! Why a command is refused, or what about it could not be known: a code
//! a policy names (the OAP provider prefixes it with `oap.`) and a message
//! for the agent and the operator.

use std::fmt;

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// A built-in dangerous operation (`rm -rf /` however spelled,
    /// download-and-run, disk writes, formatting, fork bombs).
    Dangerous,
    /// Something the command runs is known only when it runs (a program
    /// name from a variable, a function it defines, shell code from a
    /// substitution).
    Unresolved,
    /// Longer than the parser reads.
    TooLong,
    /// Nested deeper, or more code in all, than the parser reads.
    TooComplex,
    /// Not valid shell syntax.
    Unparsable,
    /// A program without a grammar, or an option its grammar does not
    /// know: what it runs cannot be said.
    Unverified,
    /// An environment change that affects what runs (`PATH`, `LD_*`,
    /// `BASH_ENV`, git's command variables ...), anywhere in the script.
    Environment,
    /// Code known only at run time handed to an interpreter (a pipe, a
    /// file written earlier, `/dev/stdin`, `/dev/tcp`).
    RuntimeCode,
}

impl Code {
    /// The code's name as policies write it, without a provider's prefix
    /// (`command_unverified`).
    pub fn name(self) -> &'static str {
        match self {
            Code::Dangerous => "dangerous_operation",
            Code::Unresolved => "command_unresolved",
            Code::TooLong => "command_too_long",
            Code::TooComplex => "command_too_complex",
            Code::Unparsable => "command_unparsable",
            Code::Unverified => "command_unverified",
            Code::Environment => "command_environment",
            Code::RuntimeCode => "command_runtime_code",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reason to refuse a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub code: Code,
    /// What was found, without the command's text beyond program names.
    pub message: String,
}

impl Finding {
    /// A finding of `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Finding { code, message: message.into() }
    }
}
