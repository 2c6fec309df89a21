//! The command model's integration tests, one program (see tests/README.md).

mod shell_differential;
