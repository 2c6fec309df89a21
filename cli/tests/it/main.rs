//! The `guardhost` command's integration tests, one test program with a
//! module per subject (one program links once; nextest still runs each test
//! in a process of its own). Every test that runs the binary is here. The
//! modules other than `windows` assume Unix (modes, signals, `sh`), so a
//! Windows build compiles only `windows` and the helpers.

#[cfg(unix)]
mod audit_privacy;
#[cfg(unix)]
mod chains;
#[cfg(unix)]
mod cli;
#[cfg(unix)]
mod closed_stdout;
#[cfg(unix)]
mod config_example;
#[cfg(unix)]
mod conformance;
#[cfg(unix)]
mod coverage;
#[cfg(unix)]
mod decision_log;
#[cfg(unix)]
mod diff;
#[cfg(unix)]
mod differential;
#[cfg(unix)]
mod fault_matrix;
#[cfg(unix)]
mod hardening_config;
#[cfg(unix)]
mod hardening_load;
#[cfg(unix)]
mod hardening_permissions;
#[cfg(unix)]
mod hardening_run;
#[cfg(unix)]
mod isolation;
#[cfg(unix)]
mod load;
#[cfg(unix)]
mod outcomes;
#[cfg(unix)]
mod policy_tests;
#[cfg(unix)]
mod program_provider;
#[cfg(unix)]
mod reload;
#[cfg(unix)]
mod run_decisions;
#[cfg(unix)]
mod schema;
mod support;
#[cfg(unix)]
mod unguarded;
mod windows;
