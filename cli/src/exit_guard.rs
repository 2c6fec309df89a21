//! A provider running in the host's process can end it by calling `exit`.
//! Left alone, `eval` would then end with status 0, "allowed", and `run`
//! with status 0 and neither the answers still due nor a summary. While a
//! command is armed, an `exit` that does not come from guardhost itself
//! prints what was left undone and ends the process with
//! [`EXIT_CODE`] instead.
//!
//! On Unix the way in is an `atexit` handler. On Windows a Rust provider's
//! `exit` is `ExitProcess`, which runs no `atexit` handler of the program
//! (nor, under wine, its TLS callbacks), but does call every loaded DLL's
//! `DllMain`: the command carries a small DLL, the exit sentinel
//! (`windows/exit_sentinel.c`, built by `build.rs`), writes it to the
//! temporary folder, loads it and hands it [`sentinel_message`]; the
//! sentinel prints the message and ends the process with [`EXIT_CODE`].
//! Built without a C compiler, the command has no sentinel, and the status
//! is the provider's own. This module holds the binary's only `unsafe`.
//!
//! A provider that calls `_exit`, or is killed by a signal,
//! bypasses every handler; its status (a signal, or its own code) then
//! speaks for itself.

// `atexit`, loading the sentinel and calling it, `_exit`: each block says
// why it is sound.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The exit status when a provider ended the process.
#[cfg_attr(not(any(unix, guardhost_exit_sentinel)), allow(dead_code))]
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

#[cfg(all(windows, guardhost_exit_sentinel))]
fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(error) = sentinel::install() {
            tracing::warn!(
                "cannot load the exit sentinel ({error}): a provider that calls exit ends guardhost with its own status"
            );
        }
    });
}

#[cfg(not(any(unix, all(windows, guardhost_exit_sentinel))))]
fn register() {}

/// The sentinel DLL the command carries, loaded from a copy in the
/// temporary folder.
#[cfg(all(windows, guardhost_exit_sentinel))]
mod sentinel {
    use std::io::Write as _;
    use std::path::PathBuf;

    use super::{sentinel_message, EXIT_CODE};

    static DLL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/exit_sentinel.dll"));

    /// `guardhost_sentinel_arm`.
    type Arm = unsafe extern "C" fn(extern "C" fn(*mut usize) -> *const u8, u32);

    /// A copy of the DLL with exactly the bytes carried: one file per
    /// version (named by a hash of its bytes), made once and used by every
    /// later run; a file of that name with other bytes is left alone and
    /// a copy of this process's own is made beside it.
    fn copy() -> std::io::Result<PathBuf> {
        // FNV-1a: a name, not a check (the bytes are compared).
        let hash = DLL
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
        let dir = std::env::temp_dir();
        let shared = dir.join(format!("guardhost-exit-sentinel-{hash:016x}.dll"));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&shared) {
            Ok(mut file) => {
                file.write_all(DLL)?;
                return Ok(shared);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if std::fs::read(&shared).is_ok_and(|bytes| bytes == DLL) {
                    return Ok(shared);
                }
            }
            Err(e) => return Err(e),
        }
        let own = dir.join(format!("guardhost-exit-sentinel-{hash:016x}-{}.dll", std::process::id()));
        std::fs::write(&own, DLL)?;
        Ok(own)
    }

    /// Loads the sentinel (for the rest of the process) and arms it.
    pub fn install() -> Result<(), String> {
        let path = copy().map_err(|e| format!("cannot write it to the temporary folder: {e}"))?;
        // SAFETY: the file holds exactly the DLL built from
        // `windows/exit_sentinel.c` (written or compared just above); its
        // `DllMain` only reads two statics and, while the process ends,
        // calls the function it was handed.
        let library = unsafe { libloading::Library::new(&path) }.map_err(|e| e.to_string())?;
        // SAFETY: `guardhost_sentinel_arm` is declared in
        // `windows/exit_sentinel.c` as `void (guardhost_message_fn, UINT)`,
        // the C signature of `Arm`.
        let arm = unsafe { library.get::<Arm>(b"guardhost_sentinel_arm\0") }.map_err(|e| e.to_string())?;
        // SAFETY: `sentinel_message` is an `extern "C"` function of this
        // program, which outlives the DLL's every use of it.
        unsafe { arm(sentinel_message, u32::from(EXIT_CODE)) };
        // Never unloaded: it must see the process end.
        std::mem::forget(library);
        Ok(())
    }
}

/// For the sentinel, while the process ends: the message when a command is
/// armed (its length in `*len`), else null. It allocates nothing (other
/// threads, already gone, may have held the allocator's lock): the message
/// is written into a buffer of this module.
#[cfg(all(windows, guardhost_exit_sentinel))]
extern "C" fn sentinel_message(len: *mut usize) -> *const u8 {
    use std::io::Write as _;
    static BUFFER: std::sync::Mutex<[u8; 1024]> = std::sync::Mutex::new([0; 1024]);
    let armed = ARMED.load(Ordering::SeqCst);
    if armed == 0 {
        return std::ptr::null();
    }
    let Ok(mut buffer) = BUFFER.try_lock() else { return std::ptr::null() };
    let mut rest: &mut [u8] = &mut buffer[..];
    let capacity = rest.len();
    let _ = write!(rest, "{}", Left { armed, line: LINE.load(Ordering::SeqCst) });
    let written = capacity - rest.len();
    // SAFETY: the sentinel hands a valid `size_t *`.
    unsafe { *len = written };
    let text = buffer.as_ptr();
    // Held until the process is gone: the text stays as written.
    std::mem::forget(buffer);
    text
}

/// What was left undone, for the message.
#[cfg_attr(not(unix), allow(dead_code))]
fn what_was_left(armed: u8, line: u64) -> String {
    Left { armed, line }.to_string()
}

/// The message, written without allocating.
struct Left {
    armed: u8,
    line: u64,
}

impl std::fmt::Display for Left {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (armed, line) = (self.armed, self.line);
        match armed {
            1 => f.write_str("guardhost check: the provider ended the process (it called exit); the check did not finish")?,
            2 => f.write_str("guardhost eval: the provider ended the process (it called exit) before deciding; no decision was made")?,
            3 if line > 0 => write!(
                f,
                "guardhost run: the provider ended the process (it called exit) while deciding line {line}; every line before it was answered, line {line} and the lines after it were not, and there is no summary"
            )?,
            3 => f.write_str("guardhost run: the provider ended the process (it called exit) outside a call; lines not yet answered were not, and there is no summary")?,
            _ => f.write_str("guardhost: the provider ended the process (it called exit); the command did not finish")?,
        }
        writeln!(f, ". Run the provider with `isolation: process` to contain it (exit status {EXIT_CODE})")
    }
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
