//! `guardhost-server`'s integration tests, one test program with a module
//! per subject. The modules other than `windows` assume Unix (signals, Unix
//! sockets, `sh`), so a Windows build compiles only `windows` and the
//! helpers.

#[cfg(unix)]
mod approvals;
#[cfg(unix)]
mod chains;
#[cfg(unix)]
mod deploy;
#[cfg(unix)]
mod http;
#[cfg(unix)]
mod outcomes;
#[cfg(unix)]
mod reload_weakening;
#[cfg(unix)]
mod replicas;
#[cfg(unix)]
mod stalls;
mod support;
#[cfg(unix)]
mod tool_names;
#[cfg(unix)]
mod unguarded;
mod windows;
