//! The library's integration tests, one test program with a module per
//! subject. Two tests keep programs of their own: `logging.rs` installs the
//! process's global tracing subscriber and reads back what every test in its
//! process logs, and `timeout_threads.rs` counts the process's evaluation
//! threads, which other tests' stuck calls would add to.

mod abi_versions;
mod attribution;
mod authorization;
mod c_abi;
mod chains;
mod loading;
mod middleware;
mod outcomes;
mod reload_weakening;
mod timeout;
mod tool_names;
