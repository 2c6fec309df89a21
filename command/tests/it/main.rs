//! The command model's integration tests, one program (see tests/README.md).

mod help_differential;
mod oracle;
mod rng;
mod shell_differential;
