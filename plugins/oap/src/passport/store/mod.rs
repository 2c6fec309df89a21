//! Passports by path, each re-read when its file changes: noticed by
//! inotify watches where it can, by one `stat` per call elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::watch::{WatchMode, Watched, Watcher};

use super::read::{read, PassportError, Stamp};
use super::validate::Passport;

/// A file modified this recently may still change within the same
/// timestamp tick (coarse file-system clocks), so in [`WatchMode::Stat`]
/// its cache entry is not trusted: it is re-read on every call until it
/// settles. (Watched files need no such rule: every write is an event.)
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// How an entry learns that its file changed.
enum Freshness {
    /// Watched: `dirty` is set by an event on the path's chain.
    Watched { dirty: Arc<AtomicBool>, watched: Watched },
    /// Not watched: the file's stamp when it was read, compared on every
    /// call.
    Stat { stamp: Option<Stamp>, settled: bool },
}

struct Entry {
    freshness: Freshness,
    loaded: Result<Arc<Passport>, PassportError>,
    /// Whether the path named a file (`Path::is_file`) when it was read.
    is_file: bool,
    /// Times this path was read (tests).
    reads: u64,
}

/// The most paths [`PassportStore::is_file`] keeps an entry for that name
/// no file (agent ids that are not paths), so that they cannot grow the
/// store without bound.
const MAX_ENTRIES: usize = 1024;

/// Passports by path, each re-read when its file changes, so an edit (a
/// suspension, a new limit) applies to the very next call; the file is
/// parsed only when it changed. Safe to share between threads; no file is
/// ever written.
///
/// How a change is noticed ([`PassportStore::watch_mode`]):
/// - [`WatchMode::Inotify`] (Linux, a local file system): inotify watches
///   on every directory entry the path goes through, symlinks' targets
///   included, and on the file ([`crate::watch`]). Each call starts with
///   one non-blocking `read` of the inotify descriptor (no `stat`, no path
///   walk); the kernel queues the event before the `rename` or `write`
///   that changed the file returns, so every call that starts after that
///   sees the change. A missing passport is watched too: creating it is
///   noticed by the next call.
/// - [`WatchMode::Stat`], the fallback where inotify cannot be used (not
///   Linux, no inotify instance, the watch limit reached, a directory that
///   cannot be watched, no `/proc/self/mountinfo` to tell the file system,
///   a network or FUSE file system, whose other clients' changes inotify
///   does not report): one `stat` of the path per call, as
///   before, with the same guarantee. A bounded interval (a `stat` at most
///   every 100 ms, say) would be cheaper but would let calls run on a
///   suspended passport for up to that long; the fallback keeps the kill
///   switch exact instead, at the old cost.
///
/// Dropping the store closes the inotify descriptor, which ends every
/// watch; there is no thread ([`crate::watch`] says why: a thread would
/// leave a window after each change).
pub struct PassportStore {
    /// `None`: every path is in [`WatchMode::Stat`].
    watcher: Option<Mutex<Watcher>>,
    /// By the path's bytes: hashing them is cheaper than hashing a
    /// `Path`, component by component.
    entries: RwLock<HashMap<std::ffi::OsString, Arc<Entry>>>,
    /// `stat`s of a passport path made so far (tests).
    #[cfg(test)]
    stats: std::sync::atomic::AtomicU64,
}

impl Default for PassportStore {
    fn default() -> Self {
        PassportStore::with_watcher(Watcher::new())
    }
}

impl fmt::Debug for PassportStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassportStore").field("watching", &self.watcher.is_some()).finish_non_exhaustive()
    }
}

impl Drop for PassportStore {
    fn drop(&mut self) {
        // Not needed for the descriptor (closed with the watcher), but it
        // keeps the watcher's bookkeeping honest until then.
        let Some(watcher) = self.watcher.as_mut() else { return };
        let watcher = watcher.get_mut().unwrap_or_else(|e| e.into_inner());
        for entry in self.entries.get_mut().unwrap_or_else(|e| e.into_inner()).values() {
            if let Freshness::Watched { dirty, watched } = &entry.freshness {
                watcher.unwatch(watched, dirty);
            }
        }
    }
}

impl PassportStore {
    /// A store that never watches: every path is in [`WatchMode::Stat`]
    /// (tests of the fallback).
    #[cfg(test)]
    pub(crate) fn without_watches() -> PassportStore {
        PassportStore::with_watcher(None)
    }

    fn with_watcher(watcher: Option<Watcher>) -> PassportStore {
        PassportStore {
            watcher: watcher.map(Mutex::new),
            entries: RwLock::default(),
            #[cfg(test)]
            stats: Default::default(),
        }
    }

    /// `std::fs::metadata`, counted in tests.
    fn stat(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        #[cfg(test)]
        self.stats.fetch_add(1, Ordering::Relaxed);
        std::fs::metadata(path)
    }

    /// How changes to `path` are noticed, once it has been read; `None`
    /// before.
    pub fn watch_mode(&self, path: &Path) -> Option<WatchMode> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(path.as_os_str()).map(|entry| match entry.freshness {
            Freshness::Watched { .. } => WatchMode::Inotify,
            Freshness::Stat { .. } => WatchMode::Stat,
        })
    }

    /// The inotify descriptor (tests).
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn inotify_fd(&self) -> Option<i32> {
        self.watcher.as_ref().map(|w| w.lock().unwrap_or_else(|e| e.into_inner()).fd())
    }

    /// How many times `path` has been read from disk (tests).
    #[cfg(test)]
    pub(crate) fn reads(&self, path: &Path) -> u64 {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(path.as_os_str()).map_or(0, |entry| entry.reads)
    }

    /// The current passport at `path`.
    pub fn get(&self, path: &Path) -> Result<Arc<Passport>, PassportError> {
        self.poll();
        self.get_polled(path)
    }

    /// The current passport at `preferred` when it names a file, else at
    /// `otherwise` (the engine's `agent_id`, then the default passport),
    /// with one look at the watch events for both.
    pub fn first_file(
        &self,
        preferred: Option<&Path>,
        otherwise: &Path,
    ) -> Result<Arc<Passport>, PassportError> {
        self.poll();
        match preferred {
            Some(path) if self.is_file_polled(path) => self.get_polled(path),
            _ => self.get_polled(otherwise),
        }
    }

    fn get_polled(&self, path: &Path) -> Result<Arc<Passport>, PassportError> {
        match self.fresh(path, |entry| entry.loaded.clone()) {
            Some(loaded) => loaded,
            None => self.reload(path),
        }
    }

    /// `path.is_file()`, without a `stat` when the path is watched: the
    /// answer comes from the path's entry, which is read (and watched) if
    /// there is none yet.
    pub fn is_file(&self, path: &Path) -> bool {
        self.poll();
        self.is_file_polled(path)
    }

    fn is_file_polled(&self, path: &Path) -> bool {
        if self.watcher.is_none() {
            return path.is_file();
        }
        if let Some(is_file) = self.fresh(path, |entry| entry.is_file) {
            return is_file;
        }
        let known = self.entries.read().unwrap_or_else(|e| e.into_inner()).contains_key(path.as_os_str());
        if !known && self.entries.read().unwrap_or_else(|e| e.into_inner()).len() >= MAX_ENTRIES {
            return path.is_file();
        }
        let _ = self.reload(path);
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(path.as_os_str()).is_some_and(|entry| entry.is_file)
    }

    /// Reads the queued watch events, if there is a watcher.
    fn poll(&self) {
        if let Some(watcher) = &self.watcher {
            watcher.lock().unwrap_or_else(|e| e.into_inner()).poll();
        }
    }

    /// `f` of the entry of `path`, when nothing says it changed (after
    /// [`poll`]).
    ///
    /// [`poll`]: PassportStore::poll
    fn fresh<T>(&self, path: &Path, f: impl FnOnce(&Entry) -> T) -> Option<T> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(path.as_os_str())?;
        let fresh = match &entry.freshness {
            Freshness::Watched { dirty, .. } => !dirty.load(Ordering::Acquire),
            Freshness::Stat { stamp: Some(stamp), settled: true } => {
                self.stat(path).is_ok_and(|meta| Stamp::of(&meta) == *stamp)
            }
            Freshness::Stat { .. } => false,
        };
        fresh.then(|| f(entry))
    }

    /// Reads `path` again, and watches it anew.
    fn reload(&self, path: &Path) -> Result<Arc<Passport>, PassportError> {
        let mut watcher = self.watcher.as_ref().map(|w| w.lock().unwrap_or_else(|e| e.into_inner()));
        let previous = self.entries.read().unwrap_or_else(|e| e.into_inner()).get(path.as_os_str()).cloned();
        if let (Some(watcher), Some(entry)) = (watcher.as_mut(), &previous) {
            // Another call may have re-read it meanwhile.
            watcher.poll();
            if let Freshness::Watched { dirty, .. } = &entry.freshness {
                if !dirty.load(Ordering::Acquire) {
                    return entry.loaded.clone();
                }
            }
        }
        // The same `stat` as before watches existed, for the same errors.
        let meta = self.stat(path);
        let stamp_now = meta.as_ref().ok().map(Stamp::of);
        // Watch before reading: a change after the watch is an event, so
        // the next call reads again. A path that could not be watched is
        // tried again when its file changes, not on every call.
        let dirty = Arc::new(AtomicBool::new(false));
        let retry = match previous.as_deref().map(|e| &e.freshness) {
            Some(Freshness::Stat { stamp, .. }) => *stamp != stamp_now,
            _ => true,
        };
        let watched = watcher.as_mut().filter(|_| retry).and_then(|w| w.watch(path, &dirty));
        let (stamp, loaded) = match &meta {
            Ok(_) => read(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (None, Err(PassportError::NotFound(path.to_path_buf())))
            }
            Err(e) => (
                None,
                Err(PassportError::Invalid {
                    path: path.to_path_buf(),
                    message: format!("cannot stat it: {e}"),
                }),
            ),
        };
        let loaded = loaded.map(Arc::new);
        let freshness = match watched {
            Some(watched) => Freshness::Watched { dirty, watched },
            None => {
                let settled = stamp
                    .as_ref()
                    .and_then(|s| s.modified)
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|age| age >= SETTLE);
                Freshness::Stat { stamp, settled }
            }
        };
        let reads = previous.as_ref().map_or(0, |e| e.reads) + 1;
        let is_file = meta.as_ref().is_ok_and(std::fs::Metadata::is_file);
        let entry = Arc::new(Entry { freshness, loaded: loaded.clone(), is_file, reads });
        let replaced = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.as_os_str().to_owned(), entry);
        if let (Some(watcher), Some(old)) = (watcher.as_mut(), replaced) {
            if let Freshness::Watched { dirty, watched } = &old.freshness {
                watcher.unwatch(watched, dirty);
            }
        }
        loaded
    }
}

#[cfg(test)]
mod tests;
