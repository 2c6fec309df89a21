//! Providers in a process of their own (`isolation: process`, and provider
//! programs named by `command:`): the narrow interface through which the
//! library starts them.
//!
//! The library does not contain the process side. The
//! `guardhost-isolation` crate implements [`Launcher`] and installs it with
//! `guardhost_isolation::install()`; the `guardhost` command, the decision
//! service and the Python package do this at start, and a program that
//! embeds the library and wants `isolation: process` does the same once.
//! Until a launcher is installed, a spec that needs one is refused with a
//! [`BuildError::Isolation`] that says so.

use std::path::Path;
use std::sync::OnceLock;

use crate::built::{BuildError, LoadedProvider};
use crate::config::ProviderSpec;

/// Starts the provider of a spec in a process of its own.
pub trait Launcher: Send + Sync {
    /// Starts the provider `spec` names (`spec.command` for a provider
    /// program, else `spec.use_` under `isolation: process`), resolving
    /// relative paths against `base_dir`. `spec` has been checked
    /// ([`ProviderSpec::validate`]). `server_program`: the program an
    /// `isolation: process` provider runs in, when the caller ships one
    /// (see [`crate::Instantiation::server_program`]).
    fn launch(
        &self,
        spec: &ProviderSpec,
        base_dir: &Path,
        server_program: Option<&Path>,
    ) -> Result<LoadedProvider, BuildError>;
}

static LAUNCHER: OnceLock<&'static dyn Launcher> = OnceLock::new();

/// Installs the launcher of this process. The first one installed stays;
/// installing again is a no-op (several parts of one program may each
/// make sure a launcher is there).
pub fn install_launcher(launcher: &'static dyn Launcher) {
    let _ = LAUNCHER.set(launcher);
}

/// Whether a launcher is installed.
pub fn has_launcher() -> bool {
    LAUNCHER.get().is_some()
}

/// Starts `spec`'s provider with the installed launcher.
pub(crate) fn launch(
    spec: &ProviderSpec,
    base_dir: &Path,
    server_program: Option<&Path>,
) -> Result<LoadedProvider, BuildError> {
    match LAUNCHER.get() {
        Some(launcher) => launcher.launch(spec, base_dir, server_program),
        None => Err(BuildError::Isolation {
            message: format!(
                "{} runs the provider in a process of its own, and this program has no process launcher: \
                 link the guardhost-isolation crate and call guardhost_isolation::install() once at start",
                if spec.command.is_some() { "`command:`" } else { "`isolation: process`" }
            ),
        }),
    }
}
