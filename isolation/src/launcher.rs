//! How the library starts a provider in a process of its own: the
//! [`ProcessLauncher`] that [`install`] gives it, and [`server_program`], the
//! program an `isolation: process` provider runs in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::launch::Launcher;
use guardhost::list_paths;
use guardhost::{BuildError, LoadedProvider, ProviderSpec};

use crate::client::{ProcessProvider, SERVER_ENV};

/// The programs that can run a provider process, in the order they are
/// looked for beside this program: the provider server of this crate, then
/// the `guardhost` command (`guardhost provider-server`).
const SERVER_NAMES: [&str; 2] = ["guardhost-provider-server", "guardhost"];

/// The launcher of this crate: a provider program (`command:`) runs as it
/// is, an `isolation: process` library in [`server_program`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessLauncher;

impl Launcher for ProcessLauncher {
    fn launch(
        &self,
        spec: &ProviderSpec,
        base_dir: &Path,
        program: Option<&Path>,
    ) -> Result<LoadedProvider, BuildError> {
        let (provider, info) = match (&spec.command, program) {
            (Some(_), _) => ProcessProvider::start_program(spec, base_dir)?,
            // `$GUARDHOST_BIN` comes before the caller's program.
            (None, Some(program)) if std::env::var_os(SERVER_ENV).is_none() => {
                ProcessProvider::start(spec, base_dir, program.to_path_buf())?
            }
            (None, _) => ProcessProvider::start(spec, base_dir, server_program()?)?,
        };
        Ok(LoadedProvider { provider: Arc::new(provider), info })
    }
}

/// Gives the guardhost library this crate's [`ProcessLauncher`], so that
/// every spec with `isolation: process` or `command:` it builds starts here.
/// Call it once at start; calling it again does nothing.
pub fn install() {
    guardhost::launch::install_launcher(&ProcessLauncher);
}

/// Finds the program to run a provider process in: `$GUARDHOST_BIN`, else
/// this program when it is `guardhost` or `guardhost-provider-server`, else
/// `guardhost-provider-server`, then `guardhost`, beside this program or one
/// directory up (where cargo puts them for tests and benchmarks).
pub fn server_program() -> Result<PathBuf, BuildError> {
    if let Some(path) = std::env::var_os(SERVER_ENV) {
        return Ok(PathBuf::from(path));
    }
    let names = SERVER_NAMES.map(|name| format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let current = std::env::current_exe().map_err(|e| BuildError::Isolation {
        message: format!("cannot find this program to run the provider process with: {e}; set {SERVER_ENV}"),
    })?;
    if current.file_name().is_some_and(|file| names.iter().any(|name| file == name.as_str())) {
        return Ok(current);
    }
    let candidates: Vec<PathBuf> = names
        .iter()
        .flat_map(|name| current.ancestors().skip(1).take(2).map(move |dir| dir.join(name)))
        .collect();
    candidates.iter().find(|path| path.is_file()).cloned().ok_or_else(|| BuildError::Isolation {
        message: format!(
            "`isolation: process` runs the provider in a `guardhost provider-server` process, but this program \
             is not guardhost and none was found at {}; set {SERVER_ENV} to the guardhost executable (or to \
             guardhost-provider-server)",
            list_paths(&candidates)
        ),
    })
}
