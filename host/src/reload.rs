//! Hot reload: a guardrail that follows its config file, its provider
//! library and its providers' data files (the paths their configs name:
//! a Cedar entry's policies, schema and entities; every file under a
//! folder).
//!
//! [`Reloader::reload`] builds the new guardrail aside (read the config,
//! load and check the library, construct the provider); only when all of
//! that worked does it swap the new one in, atomically. When anything
//! fails, the old guardrail keeps serving and the error is returned (and,
//! from [`Reloader::watch`], logged). A caller takes [`Reloader::current`]
//! once per call, so a call in flight finishes on the provider it started
//! with, which stays alive as long as the call holds it.
//!
//! Libraries are loaded from content-addressed copies
//! (private copies of the checked bytes): a library replaced on disk,
//! even overwritten in place, never touches the loaded copy, and a new
//! version is really loaded. Old versions stay mapped (libraries are never
//! unloaded), so each distinct version costs its mapping until the process
//! exits.
//!
//! ```no_run
//! # fn main() -> Result<(), guardhost::ReloadError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let reloader = Arc::new(guardhost::Reloader::open("config.yaml".as_ref())?);
//! let _watcher = Arc::clone(&reloader).watch(Duration::from_millis(500)).expect("a thread");
//! // For each tool call:
//! if let Some(guardrail) = reloader.current() {
//!     // guardrail.middleware.wrap_tool_call(call, &handler)
//! }
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::built::{BuildError, ProviderSource};
use crate::config::{ConfigError, LoadedConfig};
use crate::resolve::{library_candidates, parse_use, UseTarget};
use crate::setup::{install_with, Guardrail};

mod weakening;

use weakening::{shapes, weakenings, GuardShape};

/// What a reload may do to the guards the running guardrail has.
///
/// A reload never installs *no* guardrail in place of one
/// ([`ReloadError::WouldRemove`], under either policy). Beyond that, a new
/// config can weaken the guardrail: remove a guard (`enabled: false` with an
/// `authorization:` section left, an entry dropped or renamed), move a guard
/// out of `enforce` mode, make one fail open, or narrow the tools one
/// decides. What happens then is the policy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReloadPolicy {
    /// The weaker guardrail is installed, and the change is logged as an
    /// error and kept in [`Reloader::status`] (`/readyz` shows it).
    #[default]
    Report,
    /// The weaker guardrail is refused ([`ReloadError::WouldWeaken`]); the
    /// current one stays. What `--require-guardrail` asks for.
    Refuse,
}

/// Why a reload did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The config could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The provider could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The new config installs no guardrail (`enabled: false`, no provider,
    /// or a file caught half-written): reloading would let every call
    /// through, so it is refused. Restart to turn the guardrail off.
    #[error("{}: the new config installs no guardrail; the current one stays (restart to turn the guardrail off)", path.display())]
    WouldRemove {
        /// The config file.
        path: PathBuf,
    },
    /// The new config weakens the guardrail and the policy is
    /// [`ReloadPolicy::Refuse`]: the current guardrail stays.
    #[error("{}: the new config weakens the guardrail ({}), and a guardrail is required (--require-guardrail), so the reload is refused and the current guardrail stays; restart to make this change", path.display(), changes.join("; "))]
    WouldWeaken {
        /// The config file.
        path: PathBuf,
        /// Each weakening, for an operator.
        changes: Vec<String>,
    },
}

/// How reloads have gone, for `/readyz`, metrics and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReloadStatus {
    /// The SHA-256 of the running config's text ([`LoadedConfig::digest`]).
    pub config_digest: String,
    /// How the running guardrail is weaker than the one the reloader
    /// started with (empty when it is not): what [`ReloadPolicy::Report`]
    /// let through.
    pub weakened: Vec<String>,
    /// Reloads that swapped a new guardrail in (weakening ones included).
    pub applied: u64,
    /// Of those, the ones that weakened the guardrail.
    pub weakening: u64,
    /// Reloads refused because they would remove or weaken the guardrail.
    pub refused: u64,
    /// Reloads that failed (a bad config, a provider that would not build).
    pub failed: u64,
    /// What the last applied reload changed, entry by entry (entries
    /// added, removed, changed, with their digests); empty when it changed
    /// no entry (a data file or a library changed) or none was applied.
    pub last_changes: Vec<String>,
}

/// What identifies one version of a file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Stamp(Option<(u64, Option<SystemTime>, u64)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        let Ok(meta) = std::fs::metadata(path) else { return Stamp(None) };
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Stamp(Some((meta.len(), meta.modified().ok(), inode)))
    }
}

/// What identifies the library path as written in `use:` (before symbolic
/// links are followed): the entry itself (not its target), where a link
/// points, and the file it all resolves to. Repointing `current.so` from
/// `v1.so` to `v2.so` changes the last two, though neither file changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Written {
    entry: Option<(u64, Option<SystemTime>, u64)>,
    link: Option<PathBuf>,
    resolved: Option<PathBuf>,
}

impl Written {
    fn of(path: &Path) -> Written {
        let entry = std::fs::symlink_metadata(path).ok().map(|meta| {
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&meta);
            #[cfg(not(unix))]
            let inode = 0;
            (meta.len(), meta.modified().ok(), inode)
        });
        Written { entry, link: std::fs::read_link(path).ok(), resolved: path.canonicalize().ok() }
    }
}

/// The data files a provider was built from (the values of the config keys
/// it declares to be paths: a Cedar entry's policies, schema and entities),
/// each a file or a folder, as they were then. A folder stands for every
/// file under it, at any depth, so a file added, removed or changed in it
/// is a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Data {
    roots: Vec<PathBuf>,
    files: Vec<(PathBuf, Stamp)>,
}

impl Data {
    fn of(roots: Vec<PathBuf>) -> Data {
        let mut files = Vec::new();
        for root in &roots {
            collect(root, &mut files, 0);
        }
        Data { roots, files }
    }
}

/// Folders deeper than this under a data root are not looked into (a link
/// loop must not hang the watcher).
const MAX_DEPTH: usize = 16;

/// The most files and folders looked at for one guardrail at each poll: a
/// path key that names a huge tree (or a link loop) costs at most this many
/// `stat`s a poll; a change past them is seen when the config changes.
const MAX_FILES: usize = 4096;

/// `path` and, when it is a folder, every entry under it, sorted (at most
/// [`MAX_FILES`] in all).
fn collect(path: &Path, files: &mut Vec<(PathBuf, Stamp)>, depth: usize) {
    if files.len() >= MAX_FILES {
        return;
    }
    files.push((path.to_path_buf(), Stamp::of(path)));
    if depth >= MAX_DEPTH || !path.is_dir() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for entry in entries {
        collect(&entry, files, depth + 1);
    }
}

/// The data files of every provider of `config`: each entry's path-key
/// values, joined to the config file's folder (`~/...` left alone).
fn data_roots(config: &LoadedConfig, guardrail: &Guardrail) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for (spec, info) in config.guard_specs().into_iter().zip(&guardrail.entries) {
        for key in &info.path_keys {
            let values = match spec.config.get(key) {
                Some(serde_json::Value::String(path)) => vec![path.as_str()],
                Some(serde_json::Value::Array(paths)) => paths.iter().filter_map(|p| p.as_str()).collect(),
                _ => Vec::new(),
            };
            for value in values.into_iter().filter(|v| !v.is_empty() && !v.starts_with('~')) {
                roots.push(crate::paths::join_relative(&config.base_dir, Path::new(value)));
            }
        }
    }
    roots
}

/// The files a guardrail was built from, as they were then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Watched {
    config: Stamp,
    /// The library loaded (canonical path).
    library: Option<(PathBuf, Stamp)>,
    /// The library's path as `use:` names it.
    written: Option<(PathBuf, Written)>,
    /// The providers' data files.
    data: Data,
}

impl Watched {
    fn of(config: &Path, built: &Built) -> Watched {
        let library = built.guardrail.as_deref().and_then(|g| match &g.info.source {
            ProviderSource::Library { path, .. } => Some((path.clone(), Stamp::of(path))),
            ProviderSource::Builtin { .. } | ProviderSource::Program { .. } => None,
        });
        let written = built
            .written
            .as_deref()
            .filter(|_| library.is_some())
            .map(|path| (path.to_path_buf(), Written::of(path)));
        Watched { config: Stamp::of(config), library, written, data: Data::of(built.data.clone()) }
    }

    fn changed(&self, config: &Path) -> bool {
        *self != self.now(config)
    }

    /// The same files as they are now.
    fn now(&self, config: &Path) -> Watched {
        let library = self.library.as_ref().map(|(path, _)| (path.clone(), Stamp::of(path)));
        let written = self.written.as_ref().map(|(path, _)| (path.clone(), Written::of(path)));
        Watched { config: Stamp::of(config), library, written, data: Data::of(self.data.roots.clone()) }
    }
}

/// A guardrail rebuilt from its config file on demand, swapped in only when
/// the rebuild works.
pub struct Reloader {
    path: PathBuf,
    current: RwLock<Option<Arc<Guardrail>>>,
    /// One reload at a time (held while building, unlike `watched`).
    reloading: Mutex<()>,
    /// The files as they were at the last attempt (successful or not), so a
    /// broken version is tried once, not on every poll.
    watched: Mutex<Watched>,
    policy: ReloadPolicy,
    /// The guards the reloader started with, and those running now.
    started: Vec<GuardShape>,
    running: Mutex<Vec<GuardShape>>,
    status: Mutex<ReloadStatus>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A guardrail built from a config file, and what to watch for it.
struct Built {
    guardrail: Option<Arc<Guardrail>>,
    /// The config's digest.
    digest: String,
    /// The library path its first library entry's `use:` names (the first
    /// candidate that exists, symbolic links not followed), if any.
    written: Option<PathBuf>,
    /// Its providers' data files and folders.
    data: Vec<PathBuf>,
}

/// Builds the guardrail of the config file at `path`.
fn build(path: &Path) -> Result<Built, ReloadError> {
    let config = LoadedConfig::from_path(path)?;
    let guardrail = install_with(&config, true)?.map(Arc::new);
    let data = guardrail.as_deref().map(|g| data_roots(&config, g)).unwrap_or_default();
    // The first entry that is a library (in a chain, replacing another
    // entry's library is seen when the config file changes).
    let written = config.guardrails.entries().iter().find_map(|spec| match parse_use(&spec.use_) {
        Ok(UseTarget::Library { path, .. }) => {
            library_candidates(&path, &config.base_dir).into_iter().find(|p| p.exists())
        }
        _ => None,
    });
    Ok(Built { guardrail, digest: config.digest, written, data })
}

impl Reloader {
    /// Builds the guardrail of the config file at `path`; an error here
    /// means there is nothing to serve with. A reload that weakens the
    /// guardrail is installed and reported
    /// ([`ReloadPolicy::Report`]); see [`Reloader::open_with`].
    pub fn open(path: &Path) -> Result<Reloader, ReloadError> {
        Reloader::open_with(path, ReloadPolicy::Report)
    }

    /// [`Reloader::open`], with what a reload that weakens the guardrail
    /// does.
    pub fn open_with(path: &Path, policy: ReloadPolicy) -> Result<Reloader, ReloadError> {
        let built = build(path)?;
        let watched = Watched::of(path, &built);
        let started = shapes(built.guardrail.as_deref());
        Ok(Reloader {
            path: path.to_path_buf(),
            status: Mutex::new(ReloadStatus {
                config_digest: built.digest.clone(),
                ..ReloadStatus::default()
            }),
            current: RwLock::new(built.guardrail),
            reloading: Mutex::new(()),
            watched: Mutex::new(watched),
            policy,
            running: Mutex::new(started.clone()),
            started,
        })
    }

    /// How reloads have gone: the running config's digest, how the running
    /// guardrail is weaker than the first, and the reloads counted by
    /// outcome.
    pub fn status(&self) -> ReloadStatus {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The guardrail to use for the next call (`None` when the config
    /// installs none). Hold it for the whole call.
    pub fn current(&self) -> Option<Arc<Guardrail>> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the config file, the provider's library or a provider's data
    /// file (a path its config names: a Cedar entry's policies) changed
    /// since the last reload attempt.
    pub fn changed(&self) -> bool {
        self.watched.lock().unwrap_or_else(|e| e.into_inner()).changed(&self.path)
    }

    /// Rebuilds from the config file and swaps the result in; on an error
    /// the current guardrail stays. The files' stamps are taken before the
    /// build, so an edit made during it is seen by the next check.
    pub fn reload(&self) -> Result<(), ReloadError> {
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.watched.lock().unwrap_or_else(|e| e.into_inner()).now(&self.path);
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let built = build(&self.path).and_then(|built| {
            if built.guardrail.is_none() && self.current().is_some() {
                return Err(ReloadError::WouldRemove { path: self.path.clone() });
            }
            let changes = weakenings(&running, &shapes(built.guardrail.as_deref()));
            if !changes.is_empty() && self.policy == ReloadPolicy::Refuse {
                return Err(ReloadError::WouldWeaken { path: self.path.clone(), changes });
            }
            Ok((built, changes))
        });
        let (built, changes) = match built {
            Ok(built) => built,
            Err(error) => {
                // This version is not retried until a file changes again.
                *self.watched.lock().unwrap_or_else(|e| e.into_inner()) = before;
                let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
                match error {
                    ReloadError::WouldRemove { .. } | ReloadError::WouldWeaken { .. } => status.refused += 1,
                    _ => status.failed += 1,
                }
                return Err(error);
            }
        };
        if !changes.is_empty() {
            tracing::error!(
                config = %self.path.display(),
                digest = %built.digest,
                "the reloaded config weakens the guardrail: {} (start with --require-guardrail to refuse such reloads)",
                changes.join("; ")
            );
        }
        let now_running = shapes(built.guardrail.as_deref());
        let changed =
            weakening::changes(&self.running.lock().unwrap_or_else(|e| e.into_inner()), &now_running);
        {
            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            status.last_changes = changed;
            status.applied += 1;
            status.weakening += u64::from(!changes.is_empty());
            status.config_digest = built.digest.clone();
            status.weakened = weakenings(&self.started, &now_running);
        }
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = now_running;
        let mut watched = Watched::of(&self.path, &built);
        // Stamps from before the build: a change during it is not lost.
        watched.config = before.config;
        if watched.data.roots == before.data.roots {
            watched.data = before.data;
        }
        if let (Some((path, stamp)), Some((old_path, old_stamp))) = (watched.library.as_mut(), before.library)
        {
            if *path == old_path {
                *stamp = old_stamp;
            }
        }
        if let (Some((path, stamp)), Some((old_path, old_stamp))) = (watched.written.as_mut(), before.written)
        {
            if *path == old_path {
                *stamp = old_stamp;
            }
        }
        *self.watched.lock().unwrap_or_else(|e| e.into_inner()) = watched;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = built.guardrail;
        Ok(())
    }

    /// Logs (at `warn`) that a reload was applied: the config's digest,
    /// what changed entry by entry, and the entries now running.
    pub fn log_reloaded(&self) {
        let status = self.status();
        let entries: Vec<String> = self
            .current()
            .map(|g| g.middleware.guards().iter().map(|guard| guard.name().to_owned()).collect())
            .unwrap_or_default();
        let changed = match status.last_changes.is_empty() {
            true => "no entry changed (a data file or a library did)".to_owned(),
            false => status.last_changes.join("; "),
        };
        tracing::warn!(
            config = %self.path.display(),
            digest = %status.config_digest,
            "guardrail reloaded: {changed}; entries now: {}",
            entries.join(", ")
        );
    }

    /// The watched files as they are now, to tell whether they have
    /// settled.
    fn snapshot(&self) -> Watched {
        self.watched.lock().unwrap_or_else(|e| e.into_inner()).now(&self.path)
    }

    /// Polls the files every `interval` on a thread of its own and reloads
    /// when they change and have then settled (size, modification time and
    /// inode the same at two polls in a row, so a file still being written
    /// is not loaded half-way), logging the outcome. The thread ends when
    /// the reloader is dropped.
    pub fn watch(self: Arc<Self>, interval: Duration) -> std::io::Result<JoinHandle<()>> {
        let weak = Arc::downgrade(&self);
        drop(self);
        let mut settling: Option<Watched> = None;
        std::thread::Builder::new().name("guardhost-watch".into()).spawn(move || loop {
            std::thread::sleep(interval);
            let Some(reloader) = weak.upgrade() else { return };
            if !reloader.changed() {
                settling = None;
                continue;
            }
            let now = reloader.snapshot();
            if settling.as_ref() != Some(&now) {
                // Changed since the last poll: look again at the next one.
                settling = Some(now);
                continue;
            }
            settling = None;
            match reloader.reload() {
                Ok(()) => reloader.log_reloaded(),
                Err(error) => tracing::error!(
                    config = %reloader.path.display(),
                    "reload failed, still serving the previous guardrail: {error}"
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Data, MAX_FILES};

    #[test]
    fn a_data_folder_is_every_file_under_it_up_to_a_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.cedar"), "x").unwrap();
        std::fs::write(dir.path().join("a.cedar"), "x").unwrap();
        let data = Data::of(vec![dir.path().to_path_buf()]);
        let names: Vec<_> =
            data.files.iter().map(|(p, _)| p.strip_prefix(dir.path()).unwrap().to_owned()).collect();
        assert_eq!(names, ["", "a.cedar", "sub", "sub/b.cedar"].map(std::path::PathBuf::from));
        // A file added deep down is a change.
        std::fs::write(dir.path().join("sub/c.cedar"), "x").unwrap();
        assert_ne!(Data::of(vec![dir.path().to_path_buf()]), data);

        for n in 0..MAX_FILES + 10 {
            std::fs::write(dir.path().join(format!("many-{n}")), "").unwrap();
        }
        assert_eq!(Data::of(vec![dir.path().to_path_buf()]).files.len(), MAX_FILES);
    }
}
