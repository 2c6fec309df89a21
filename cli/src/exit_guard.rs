//! A provider running in the host's process can end it by calling `exit`.
//! Left alone, `eval` would then end with status 0, "allowed", and `run`
//! with status 0 and neither the answers still due nor a summary. While a
//! command is armed, an `exit` that does not come from guardhost itself
//! prints what was left undone and ends the process with
//! [`EXIT_CODE`] instead.
//!
//! The only way in is an `atexit` handler, so this module holds the binary's
//! only `unsafe`. Unix only: on Windows a Rust provider's `exit` is
//! `ExitProcess`, which runs no `atexit` handler, so the guard could not
//! see it (measured under wine, which also calls no TLS callback of the
//! program at that point); there the status is the provider's own.
//!
//! A provider that calls `_exit`, or is killed by a signal,
//! bypasses every handler; its status (a signal, or its own code) then
//! speaks for itself.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The exit status when a provider ended the process.
#[cfg_attr(not(unix), allow(dead_code))]
pub const EXIT_CODE: u8 = 5;

/// Which command is armed (`0`: none).
static ARMED: AtomicU8 = AtomicU8::new(0);
/// The `run` line being decided (`0`: none).
static LINE: AtomicU64 = AtomicU64::new(0);

/// The commands that call into a provider in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Armed {
    /// `guardhost check`.
    Check = 1,
    /// `guardhost eval`.
    Eval = 2,
    /// `guardhost run`.
    Run = 3,
    /// `guardhost bench` and `guardhost conformance`.
    Other = 4,
}

/// Disarms on drop: guardhost's own return from `main` exits normally.
#[must_use = "the guard is disarmed when dropped"]
pub struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        ARMED.store(0, Ordering::SeqCst);
    }
}

/// Arms the handler for `command` until the guard is dropped.
pub fn arm(command: Armed) -> Guard {
    register();
    LINE.store(0, Ordering::SeqCst);
    ARMED.store(command as u8, Ordering::SeqCst);
    Guard(())
}

/// `run` is about to ask the provider about line `number` (`0`: done with it).
pub fn deciding_line(number: u64) {
    LINE.store(number, Ordering::SeqCst);
}

#[cfg(unix)]
fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `on_exit` is an `extern "C" fn()` with no arguments, as
        // `atexit` requires; it touches only atomics, stderr and `_exit`, so
        // it is sound to run on whichever thread calls `exit`, at any point.
        let failed = unsafe { libc::atexit(on_exit) } != 0;
        if failed {
            tracing::warn!(
                "cannot register the exit handler: a provider that calls exit ends guardhost unreported"
            );
        }
    });
}

#[cfg(not(unix))]
fn register() {}

/// What was left undone, for the message.
#[cfg_attr(not(unix), allow(dead_code))]
fn what_was_left(armed: u8, line: u64) -> String {
    let what = match armed {
        1 => "guardhost check: the provider ended the process (it called exit); the check did not finish".to_owned(),
        2 => "guardhost eval: the provider ended the process (it called exit) before deciding; no decision was made".to_owned(),
        3 if line > 0 => format!(
            "guardhost run: the provider ended the process (it called exit) while deciding line {line}; every line before it was answered, line {line} and the lines after it were not, and there is no summary"
        ),
        3 => "guardhost run: the provider ended the process (it called exit) outside a call; lines not yet answered were not, and there is no summary".to_owned(),
        _ => "guardhost: the provider ended the process (it called exit); the command did not finish".to_owned(),
    };
    format!("{what}. Run the provider with `isolation: process` to contain it (exit status {EXIT_CODE})\n")
}

#[cfg(unix)]
extern "C" fn on_exit() {
    let armed = ARMED.load(Ordering::SeqCst);
    if armed == 0 {
        return;
    }
    let message = what_was_left(armed, LINE.load(Ordering::SeqCst));
    // Straight to the descriptor: the standard library's stderr lock may be
    // held by the thread that is exiting, or by one that never returns.
    let _ = rustix::io::write(std::os::fd::AsFd::as_fd(&std::io::stderr()), message.as_bytes());
    // SAFETY: `_exit` ends the process at once; calling `exit` again from
    // an `atexit` handler would be undefined behaviour, and the process is
    // ending anyway.
    unsafe { libc::_exit(EXIT_CODE.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_which_line_was_left() {
        let message = what_was_left(Armed::Run as u8, 31);
        assert!(message.contains("while deciding line 31; every line before it was answered"), "{message}");
        assert!(message.ends_with("(exit status 5)\n"), "{message}");
        assert!(what_was_left(Armed::Eval as u8, 0).contains("no decision was made"));
    }
}
