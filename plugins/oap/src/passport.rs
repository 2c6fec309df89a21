//! Passports: reading and validating them, and a store that reloads a
//! passport when its file changes, so a suspension takes effect on the next
//! call (the kill switch).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use serde_json::{Map, Value};

pub use crate::watch::WatchMode;
use crate::watch::{Watched, Watcher};

/// The spec version this provider evaluates.
pub const SPEC_VERSION: &str = "oap/1.0";

/// A passport's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not yet in force.
    Draft,
    /// In force.
    Active,
    /// Stopped for now (the kill switch).
    Suspended,
    /// Stopped for good.
    Revoked,
}

impl Status {
    fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "draft" => Status::Draft,
            "active" => Status::Active,
            "suspended" => Status::Suspended,
            "revoked" => Status::Revoked,
            _ => return None,
        })
    }

    /// Its name in the passport.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Draft => "draft",
            Status::Active => "active",
            Status::Suspended => "suspended",
            Status::Revoked => "revoked",
        }
    }
}

/// A validated passport. The fields the checks use are typed; the whole
/// document stays available for generic policy packs.
#[derive(Debug)]
pub struct Passport {
    /// `passport_id`.
    pub id: String,
    /// `owner_id`.
    pub owner_id: String,
    /// `spec_version` (checked at evaluation, not at load: an unsupported
    /// version is a denial, `oap.passport_version_mismatch`, not a broken
    /// file).
    pub spec_version: String,
    /// `status`.
    pub status: Status,
    /// `assurance_level`.
    pub assurance_level: String,
    /// `capabilities[].id`.
    pub capabilities: Vec<String>,
    /// `limits`, keyed by capability id (values of any type: APort's
    /// generator also writes flat keys here, see [`FLAT_LIMITS`]).
    pub limits: Map<String, Value>,
    /// The limits of each pack in [`FLAT_LIMITS`] that has no object of its
    /// own in `limits`, gathered from the flat keys (built once per version
    /// of the passport).
    flat_limits: HashMap<&'static str, Map<String, Value>>,
    /// The whole document.
    pub document: Value,
    /// Paths named in the limits (`allowed_paths`, `blocked_paths`),
    /// resolved once per passport version: resolving follows symlinks,
    /// which costs system calls.
    resolved_paths: RwLock<HashMap<String, PathBuf>>,
}

/// Why a passport cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassportError {
    /// No file at the path.
    NotFound(PathBuf),
    /// The file exists but cannot be used (unreadable, not JSON, a field
    /// missing or of the wrong type); the message names the field.
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for PassportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassportError::NotFound(path) => write!(f, "no passport at {}", full(path).display()),
            PassportError::Invalid { path, message } => {
                write!(f, "passport {} is invalid: {message}", full(path).display())
            }
        }
    }
}

/// The full path tried for `path` (a relative one joined to the current
/// directory, without touching the file system), for error messages.
pub fn full(path: &Path) -> std::borrow::Cow<'_, Path> {
    match std::path::absolute(path) {
        Ok(absolute) if absolute != path => absolute.into(),
        _ => path.into(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The fields evaluation needs: a passport without one is unusable.
const REQUIRED: &[(&str, &str)] =
    &[("spec_version", "string"), ("status", "string"), ("capabilities", "list"), ("limits", "object")];

/// The schema's other required fields. APort's own test passports leave
/// some out (`regions`, `created_at`, `updated_at`, `version`) and its
/// evaluator accepts them, so these are type-checked only when present.
const TYPED: &[(&str, &str)] = &[
    ("passport_id", "string"),
    ("kind", "string"),
    ("owner_id", "string"),
    ("owner_type", "string"),
    ("assurance_level", "string"),
    ("regions", "list"),
    ("created_at", "string"),
    ("updated_at", "string"),
    ("version", "string"),
];

/// Packs whose limits APort's evaluator also reads from flat keys at the top
/// of `limits` when the passport has no `limits[<pack>]` object: its
/// generator (`aport setup`, `aport-create-passport.sh`) writes messaging
/// limits that way (`"msgs_per_min": 5, "allowed_recipients": ["*"]`), and
/// its API accepts the others so. Per pack, the keys it gathers.
pub const FLAT_LIMITS: &[(&str, &[&str])] = &[
    ("messaging.message.send", &["msgs_per_min", "msgs_per_day", "allowed_recipients", "approval_required"]),
    (
        "code.repository.merge",
        &[
            "max_prs_per_day",
            "max_merges_per_day",
            "max_pr_size_kb",
            "allowed_repos",
            "allowed_base_branches",
            "allowed_paths",
            "require_review",
            "daily_repo_pushes",
        ],
    ),
    ("code.release.publish", &["allowed_repos", "allowed_extensions"]),
    ("mcp.tool.execute", &["allowed_servers", "allowed_tools", "allowed_tool_prefixes", "max_timeout"]),
    (
        "media.image.generate",
        &[
            "allowed_providers",
            "max_prompt_length",
            "max_referenced_images",
            "max_output_images",
            "allowed_output_formats",
        ],
    ),
    (
        "web.fetch",
        &[
            "allowed_domains",
            "blocked_domains",
            "allowed_methods",
            "max_requests_per_min",
            "max_requests_per_minute",
        ],
    ),
    (
        "web.browser",
        &[
            "allowed_domains",
            "blocked_domains",
            "allowed_actions",
            "max_screenshots_per_hour",
            "allow_form_submission",
        ],
    ),
];

/// Capabilities APort's evaluator accepts for another: a pack requiring the
/// first is satisfied by a passport listing the second.
const CAPABILITY_ALIASES: &[(&str, &str)] =
    &[("messaging.send", "messaging.message.send"), ("repo.release", "release")];

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "string" => value.is_string(),
        "list" => value.is_array(),
        _ => value.is_object(),
    }
}

impl Passport {
    /// Validates a passport document. Fields the schema does not list
    /// (`agent_id`, `never_expires`, `expires_at`, `metadata` ...) are
    /// accepted. The error names the first field that is wrong.
    pub fn from_value(document: Value) -> Result<Passport, String> {
        let Value::Object(map) = &document else {
            return Err(format!("the document must be a JSON object, found {}", json_type(&document)));
        };
        if let Some((field, _)) = REQUIRED.iter().find(|(field, _)| !map.contains_key(*field)) {
            return Err(format!("required field `{field}` is missing"));
        }
        for (field, expected) in REQUIRED.iter().chain(TYPED) {
            if let Some(value) = map.get(*field).filter(|v| !has_type(v, expected)) {
                let article = if expected.starts_with('o') { "an" } else { "a" };
                return Err(format!(
                    "field `{field}` must be {article} {expected}, found {}",
                    json_type(value)
                ));
            }
        }
        let text = |field: &str| map.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let status = Status::parse(&text("status")).ok_or_else(|| {
            format!(
                "field `status` is {:?}; it must be one of draft, active, suspended, revoked",
                text("status")
            )
        })?;
        let mut capabilities = Vec::new();
        for (i, capability) in map["capabilities"].as_array().into_iter().flatten().enumerate() {
            match capability.get("id") {
                Some(Value::String(id)) if !id.is_empty() => capabilities.push(id.clone()),
                Some(other) => {
                    return Err(format!(
                        "field `capabilities[{i}].id` must be a non-empty string, found {}",
                        json_type(other)
                    ))
                }
                None => return Err(format!("field `capabilities[{i}].id` is missing")),
            }
            if let Some(params) = capability.get("params") {
                if !params.is_object() {
                    return Err(format!(
                        "field `capabilities[{i}].params` must be an object, found {}",
                        json_type(params)
                    ));
                }
            }
        }
        // As in APort's evaluator, an entry of `limits` may be of any type:
        // its generator writes flat keys (a number, a list) next to the
        // per-capability objects. A pack reads `limits[<pack>]` when it is
        // an object, else its flat keys ([`FLAT_LIMITS`]), else nothing.
        let limits = map["limits"].as_object().cloned().unwrap_or_default();
        let flat_limits = FLAT_LIMITS
            .iter()
            .filter(|(pack, _)| !limits.get(*pack).is_some_and(Value::is_object))
            .filter_map(|(pack, keys)| {
                let found: Map<String, Value> = keys
                    .iter()
                    .filter_map(|k| {
                        limits.get(*k).filter(|v| !v.is_null()).map(|v| ((*k).to_owned(), v.clone()))
                    })
                    .collect();
                (!found.is_empty()).then_some((*pack, found))
            })
            .collect();
        if let Some((i, region)) = map
            .get("regions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, r)| !r.is_string())
        {
            return Err(format!("field `regions[{i}]` must be a string, found {}", json_type(region)));
        }
        let id = text("passport_id");
        Ok(Passport {
            id: if id.is_empty() { "(no passport_id)".to_owned() } else { id },
            owner_id: text("owner_id"),
            spec_version: text("spec_version"),
            status,
            assurance_level: text("assurance_level"),
            capabilities,
            limits,
            flat_limits,
            document,
            resolved_paths: RwLock::default(),
        })
    }

    /// `path` (from this passport's limits) resolved with `resolve`, cached
    /// for as long as this version of the passport is in use.
    pub fn resolved_path(&self, path: &str, resolve: impl FnOnce(&str) -> PathBuf) -> PathBuf {
        if let Some(found) = self.resolved_paths.read().unwrap_or_else(|e| e.into_inner()).get(path) {
            return found.clone();
        }
        let resolved = resolve(path);
        self.resolved_paths
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_owned(), resolved.clone());
        resolved
    }

    /// Reads and validates a passport file.
    pub fn from_path(path: &Path) -> Result<Passport, PassportError> {
        read(path).1
    }

    /// Whether the passport lists a capability, or one APort accepts for it
    /// (`messaging.message.send` for `messaging.send`, `release` for
    /// `repo.release`).
    pub fn has_capability(&self, id: &str) -> bool {
        let alias = CAPABILITY_ALIASES.iter().find(|(wanted, _)| *wanted == id).map(|(_, alias)| *alias);
        self.capabilities.iter().any(|c| c == id || Some(c.as_str()) == alias)
    }

    /// The limits of one capability: `limits[<id>]` when it is an object,
    /// else, for the packs of [`FLAT_LIMITS`], the flat keys at the top of
    /// `limits`; `None` when the passport sets neither.
    pub fn limits_of(&self, capability: &str) -> Option<&Map<String, Value>> {
        self.limits.get(capability).and_then(Value::as_object).or_else(|| self.flat_limits.get(capability))
    }
}

/// What identifies one version of a file on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: (u64, i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            // A replaced file (rename over it) has a new inode; an edit in
            // place changes ctime even within one mtime tick.
            #[cfg(unix)]
            inode: (meta.ino(), meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Reads a passport file: the stamp of the very file read (taken from the
/// open handle, so it matches the text even if the path is replaced
/// meanwhile), and the passport.
fn read(path: &Path) -> (Option<Stamp>, Result<Passport, PassportError>) {
    use std::io::Read;
    let invalid = |message: String| PassportError::Invalid { path: path.to_path_buf(), message };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (None, Err(PassportError::NotFound(path.to_path_buf())))
        }
        Err(e) => return (None, Err(invalid(format!("cannot open it: {e}")))),
    };
    let stamp = match file.metadata() {
        Ok(meta) if meta.is_file() => Stamp::of(&meta),
        Ok(_) => return (None, Err(invalid("it is not a file".into()))),
        Err(e) => return (None, Err(invalid(format!("cannot stat it: {e}")))),
    };
    let mut text = String::new();
    if let Err(e) = file.read_to_string(&mut text) {
        return (Some(stamp), Err(invalid(format!("cannot read it: {e}"))));
    }
    let passport = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("it is not valid JSON: {e}")))
        .and_then(|document| Passport::from_value(document).map_err(invalid));
    (Some(stamp), passport)
}

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
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn valid() -> Value {
        json!({
            "passport_id": "p-1", "kind": "template", "spec_version": "oap/1.0", "owner_id": "o",
            "owner_type": "org", "status": "active", "assurance_level": "L2",
            "capabilities": [{"id": "system.command.execute", "params": {}}],
            "limits": {"system.command.execute": {"allowed_commands": ["ls"]}},
            "regions": ["US"], "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "version": "1.0.0", "never_expires": true
        })
    }

    #[test]
    fn a_valid_passport_with_extra_fields_loads() {
        let p = Passport::from_value(valid()).unwrap();
        assert_eq!(p.status, Status::Active);
        assert!(p.has_capability("system.command.execute"));
        assert_eq!(p.limits_of("system.command.execute").unwrap()["allowed_commands"], json!(["ls"]));
    }

    #[test]
    fn errors_name_the_field() {
        let cases: &[(&str, Value, &str)] = &[
            ("status", Value::Null, "field `status` must be a string, found null"),
            ("status", json!("paused"), "field `status` is \"paused\"; it must be one of"),
            ("capabilities", json!([{"x": 1}]), "field `capabilities[0].id` is missing"),
            (
                "capabilities",
                json!([{"id": "a", "params": 3}]),
                "field `capabilities[0].params` must be an object",
            ),
            ("limits", json!([]), "field `limits` must be an object, found a list"),
            ("regions", json!(["US", 1]), "field `regions[1]` must be a string, found a number"),
        ];
        for (field, value, expected) in cases {
            let mut doc = valid();
            doc[*field] = value.clone();
            let error = Passport::from_value(doc).unwrap_err();
            assert!(error.starts_with(expected), "{field}: {error}");
        }
        let mut doc = valid();
        doc.as_object_mut().unwrap().remove("limits");
        assert_eq!(Passport::from_value(doc).unwrap_err(), "required field `limits` is missing");
        let mut doc = valid();
        for field in ["regions", "created_at", "updated_at", "version", "passport_id"] {
            doc.as_object_mut().unwrap().remove(field);
        }
        assert_eq!(Passport::from_value(doc).unwrap().id, "(no passport_id)");
        assert!(Passport::from_value(json!([1])).unwrap_err().contains("must be a JSON object"));
    }

    /// A passport as APort's generator writes it for DeerFlow (`aport setup
    /// --framework deerflow`): messaging limits as flat keys, a number and a
    /// list among the per-capability objects, an empty object for sessions.
    pub(crate) fn generated() -> Value {
        json!({
            "passport_id": "0b6c2a8e-generated", "agent_id": "0b6c2a8e-generated", "kind": "template",
            "spec_version": "oap/1.0", "owner_id": "dev@example.com", "owner_type": "user",
            "assurance_level": "L0", "status": "active",
            "capabilities": [{"id": "repo.pr.create"}, {"id": "repo.merge"}, {"id": "system.command.execute"},
                             {"id": "messaging.send"}, {"id": "data.file.read"}, {"id": "data.file.write"},
                             {"id": "web.fetch"}, {"id": "agent.session.create"}, {"id": "mcp.tool.execute"}],
            "limits": {
                "code.repository.merge": {"max_prs_per_day": 10, "max_merges_per_day": 5, "max_pr_size_kb": 500,
                                          "allowed_repos": ["*"], "allowed_base_branches": ["*"], "require_review": false},
                "system.command.execute": {"allowed_commands": ["*"],
                                           "blocked_patterns": ["rm -rf", "sudo", "chmod 777", "dd if=", "mkfs"]},
                "msgs_per_min": 5, "msgs_per_day": 100, "allowed_recipients": ["*"], "approval_required": false,
                "data.file.read": {"allowed_paths": ["*"], "max_file_size_mb": 100},
                "data.file.write": {"allowed_paths": ["*"], "max_file_size_mb": 50},
                "web.fetch": {"allowed_domains": ["*"], "blocked_domains": [], "max_requests_per_min": 60},
                "agent.session.create": {},
                "mcp.tool.execute": {"allowed_servers": ["*"]}
            },
            "regions": ["US", "CA"],
            "metadata": {"name": "DeerFlow Agent", "created_by": "aport-create-passport.sh"},
            "never_expires": true, "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
            "version": "1.0.0"
        })
    }

    #[test]
    fn a_generated_passport_loads_with_flat_limits_as_aport_reads_them() {
        let p = Passport::from_value(generated()).unwrap();
        let messaging = p.limits_of("messaging.message.send").unwrap();
        assert_eq!(messaging["msgs_per_min"], json!(5));
        assert_eq!(messaging["allowed_recipients"], json!(["*"]));
        assert_eq!(messaging.len(), 4);
        // A pack with an object of its own reads only that object.
        assert_eq!(p.limits_of("web.fetch").unwrap()["max_requests_per_min"], json!(60));
        assert!(!p.limits_of("web.fetch").unwrap().contains_key("allowed_recipients"));
        // Flat keys serve only the packs APort gathers them for.
        assert!(p.limits_of("msgs_per_min").is_none());
        assert!(p.limits_of("system.command.execute").unwrap().contains_key("blocked_patterns"));
        assert!(p.limits_of("web.browser").is_none());
        assert!(p.limits_of("agent.session.create").unwrap().is_empty());
        // APort's capability aliases.
        assert!(p.has_capability("messaging.send"));
        let mut doc = generated();
        doc["capabilities"] = json!([{"id": "messaging.message.send"}, {"id": "release"}]);
        let p = Passport::from_value(doc).unwrap();
        assert!(p.has_capability("messaging.send") && p.has_capability("repo.release"));
        assert!(!p.has_capability("messaging.message") && !p.has_capability("web.fetch"));
        // A nested object wins over flat keys.
        let mut doc = generated();
        doc["limits"]["messaging.message.send"] = json!({"allowed_recipients": ["ops"]});
        let p = Passport::from_value(doc).unwrap();
        assert_eq!(p.limits_of("messaging.message.send").unwrap().len(), 1);
    }

    #[test]
    fn the_store_rereads_a_changed_file_and_reports_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let store = PassportStore::default();
        assert_eq!(store.get(&path).unwrap_err(), PassportError::NotFound(path.clone()));
        std::fs::write(&path, valid().to_string()).unwrap();
        assert_eq!(store.get(&path).unwrap().status, Status::Active);
        let mut suspended = valid();
        suspended["status"] = json!("suspended");
        std::fs::write(&path, suspended.to_string()).unwrap();
        assert_eq!(store.get(&path).unwrap().status, Status::Suspended);
        std::fs::write(&path, "{").unwrap();
        assert!(store.get(&path).unwrap_err().to_string().contains("is not valid JSON"));
    }

    /// `doc` with `status`, written aside and renamed over `path`, as
    /// editors and deploy tools do.
    fn replace(path: &Path, status: &str) {
        let mut doc = valid();
        doc["status"] = json!(status);
        let aside = path.with_extension("tmp");
        std::fs::write(&aside, doc.to_string()).unwrap();
        std::fs::rename(&aside, path).unwrap();
    }

    /// The text of a passport with `status`, padded to `len` bytes, so
    /// that two versions have the same size.
    fn padded(status: &str, len: usize) -> String {
        let mut doc = valid();
        doc["status"] = json!(status);
        let text = doc.to_string();
        format!("{text}{}", " ".repeat(len.saturating_sub(text.len())))
    }

    fn status(store: &PassportStore, path: &Path) -> Result<Status, PassportError> {
        store.get(path).map(|p| p.status)
    }

    /// The mode a real store gets here: inotify on Linux (the temporary
    /// directory is on a local file system), `stat` elsewhere.
    fn expected_mode() -> WatchMode {
        if cfg!(target_os = "linux") {
            WatchMode::Inotify
        } else {
            WatchMode::Stat
        }
    }

    #[test]
    fn a_passport_replaced_by_rename_is_seen_by_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        replace(&path, "active");
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
        for (round, next) in ["suspended", "active", "revoked", "active"].into_iter().enumerate() {
            replace(&path, next);
            assert_eq!(status(&store, &path).unwrap().as_str(), next, "round {round}");
            assert_eq!(store.reads(&path), round as u64 + 2);
        }
    }

    #[test]
    fn every_change_is_seen_by_the_call_right_after_it_while_other_threads_call_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        replace(&path, "active");
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    // (A call between an in-place edit's truncation and its
                    // write may find a partial file: any answer will do.)
                    while !done.load(Ordering::Relaxed) {
                        let _ = status(&store, &path);
                    }
                });
            }
            for round in 0..300 {
                let next = ["suspended", "active", "revoked"][round % 3];
                if round % 2 == 0 {
                    replace(&path, next);
                } else {
                    let mut doc = valid();
                    doc["status"] = json!(next);
                    std::fs::write(&path, doc.to_string()).unwrap();
                }
                assert_eq!(status(&store, &path).map(Status::as_str), Ok(next), "round {round}");
            }
            done.store(true, Ordering::Relaxed);
        });
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    }

    #[test]
    fn an_edit_in_place_of_the_same_size_is_seen_by_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let len = padded("suspended", 0).len();
        std::fs::write(&path, padded("active", len)).unwrap();
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
        // Same inode, same size, most likely the same mtime tick.
        std::fs::write(&path, padded("suspended", len)).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        std::fs::write(&path, padded("active", len)).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // Through an open handle, without closing it.
        use std::io::{Seek, Write};
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.seek(std::io::SeekFrom::Start(0)).unwrap();
        file.write_all(padded("revoked", len).as_bytes()).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Revoked));
        drop(file);
        // Unreadable: a permission change is an event too (root reads
        // anything, so this only checks that the passport is read again).
        let reads = store.reads(&path);
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&path, permissions).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Revoked));
        assert_eq!(store.reads(&path), reads + 1);
    }

    #[test]
    fn a_deleted_passport_is_not_found_by_the_next_call_and_a_recreated_one_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let store = PassportStore::default();
        // Missing from the start: watched all the same.
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
        replace(&path, "active");
        assert_eq!(status(&store, &path), Ok(Status::Active));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        std::fs::write(&path, valid().to_string()).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        std::fs::write(&path, "{").unwrap();
        assert!(store.get(&path).unwrap_err().to_string().contains("is not valid JSON"));
        replace(&path, "suspended");
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
    }

    #[test]
    fn a_passport_whose_directory_is_moved_away_or_deleted_is_not_found_by_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("etc").join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        let path = agent.join("passport.json");
        replace(&path, "active");
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // The passport's directory moved away.
        std::fs::rename(&agent, dir.path().join("etc").join("agent.old")).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        // Another moved in, with a suspended passport.
        let new = dir.path().join("etc").join("agent.new");
        std::fs::create_dir(&new).unwrap();
        replace(&new.join("passport.json"), "suspended");
        std::fs::rename(&new, &agent).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
        // A directory above it replaced.
        let etc = dir.path().join("etc");
        let other = dir.path().join("etc.new");
        std::fs::create_dir_all(other.join("agent")).unwrap();
        replace(&other.join("agent").join("passport.json"), "active");
        std::fs::rename(&etc, dir.path().join("etc.old")).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        std::fs::rename(&other, &etc).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // The directory deleted.
        std::fs::remove_dir_all(&etc).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        std::fs::create_dir_all(&agent).unwrap();
        replace(&path, "revoked");
        assert_eq!(status(&store, &path), Ok(Status::Revoked));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_passport_follows_its_links_being_swapped_as_kubernetes_does() {
        use std::os::unix::fs::symlink;
        // A ConfigMap volume: passport.json -> ..data/passport.json,
        // ..data -> ..v1; an update writes ..v2, then renames a new
        // ..data link over the old one.
        let dir = tempfile::tempdir().unwrap();
        for (version, status) in [("..v1", "active"), ("..v2", "suspended")] {
            std::fs::create_dir(dir.path().join(version)).unwrap();
            replace(&dir.path().join(version).join("passport.json"), status);
        }
        symlink("..v1", dir.path().join("..data")).unwrap();
        let path = dir.path().join("passport.json");
        symlink("..data/passport.json", &path).unwrap();
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        assert_eq!(store.watch_mode(&path), Some(expected_mode()));
        symlink("..v2", dir.path().join("..data_tmp")).unwrap();
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        // The file the links lead to, edited in place.
        std::fs::write(dir.path().join("..v2").join("passport.json"), valid().to_string()).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // The old version deleted: nothing changes for this path.
        let reads = store.reads(&path);
        std::fs::remove_dir_all(dir.path().join("..v1")).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // The link itself removed.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        assert!(store.reads(&path) > reads);
    }

    #[test]
    fn unchanged_passports_cost_no_stat_and_no_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let missing = dir.path().join("missing.json");
        replace(&path, "active");
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        assert!(status(&store, &missing).is_err());
        if store.watch_mode(&path) != Some(WatchMode::Inotify) {
            return; // not Linux: the fallback is tested below
        }
        // Other files in the directory change meanwhile.
        std::fs::write(dir.path().join("other.json"), "{}").unwrap();
        std::fs::rename(dir.path().join("other.json"), dir.path().join("other2.json")).unwrap();
        let stats = store.stats.load(Ordering::Relaxed);
        for _ in 0..10_000 {
            assert_eq!(status(&store, &path), Ok(Status::Active));
            assert!(status(&store, &missing).is_err());
        }
        assert_eq!(store.stats.load(Ordering::Relaxed), stats, "a stat on the call path");
        assert_eq!((store.reads(&path), store.reads(&missing)), (1, 1), "a passport read again");
        // And the counters do count.
        replace(&path, "suspended");
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        assert_eq!(store.reads(&path), 2);
        assert_eq!(store.stats.load(Ordering::Relaxed), stats + 1);
    }

    #[test]
    fn is_file_answers_as_path_is_file_does_without_a_stat_per_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let not_a_path = Path::new("ap_hosted_agent_123");
        for store in [PassportStore::default(), PassportStore::without_watches()] {
            let _ = std::fs::remove_file(&path);
            assert!(!store.is_file(&path));
            assert!(!store.is_file(not_a_path));
            assert!(!store.is_file(dir.path()));
            replace(&path, "active");
            assert!(store.is_file(&path), "{:?}", store.watch_mode(&path));
            // (The directory changed: it is read again once.)
            assert!(!store.is_file(dir.path()));
            let reads = store.reads(&path);
            let stats = store.stats.load(Ordering::Relaxed);
            for _ in 0..100 {
                assert!(store.is_file(&path) && !store.is_file(not_a_path) && !store.is_file(dir.path()));
                assert_eq!(status(&store, &path), Ok(Status::Active));
            }
            let per_call = store.stats.load(Ordering::Relaxed) - stats;
            if store.watch_mode(&path) == Some(WatchMode::Inotify) {
                assert_eq!(per_call, 0);
                assert_eq!(store.reads(&path), reads);
            }
            std::fs::remove_file(&path).unwrap();
            assert!(!store.is_file(&path));
            std::fs::create_dir(&path).unwrap();
            assert!(!store.is_file(&path));
            std::fs::remove_dir(&path).unwrap();
        }
    }

    #[test]
    fn the_stat_fallback_notices_every_change_on_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        let store = PassportStore::without_watches();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        assert_eq!(store.watch_mode(&path), Some(WatchMode::Stat));
        replace(&path, "active");
        assert_eq!(status(&store, &path), Ok(Status::Active));
        replace(&path, "suspended");
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        // In place, same size: caught because a fresh file is not trusted.
        let len = padded("suspended", 0).len();
        std::fs::write(&path, padded("active", len)).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        std::fs::write(&path, padded("suspended", len)).unwrap();
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
        replace(&path, "active");
        assert_eq!(status(&store, &path), Ok(Status::Active));
        // One stat per call.
        let stats = store.stats.load(Ordering::Relaxed);
        for _ in 0..100 {
            assert_eq!(status(&store, &path), Ok(Status::Active));
        }
        assert!(store.stats.load(Ordering::Relaxed) >= stats + 100);
        assert_eq!(store.watch_mode(&path), Some(WatchMode::Stat));
    }

    /// The inotify descriptor's watches, as `/proc/self/fdinfo` lists them:
    /// `(inode, device)` pairs.
    #[cfg(target_os = "linux")]
    fn watched_inodes(fd: i32) -> Vec<(u64, u64)> {
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else { return Vec::new() };
        let field = |line: &str, key: &str| {
            line.split(' ').find_map(|f| f.strip_prefix(key)).and_then(|v| u64::from_str_radix(v, 16).ok())
        };
        info.lines()
            .filter(|l| l.starts_with("inotify "))
            .filter_map(|l| Some((field(l, "ino:")?, field(l, "sdev:")?)))
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn dropping_the_store_closes_its_inotify_descriptor_and_its_watches() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passport.json");
        replace(&path, "active");
        let store = PassportStore::default();
        assert_eq!(status(&store, &path), Ok(Status::Active));
        let fd = store.inotify_fd().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        // fdinfo shows the device as the kernel's dev_t (major << 20 | minor).
        let dev = |m: &std::fs::Metadata| {
            let (major, minor) = ((m.dev() >> 8) & 0xfff, (m.dev() & 0xff) | ((m.dev() >> 12) & 0xfff00));
            (major << 20) | minor
        };
        let ours = (meta.ino(), dev(&meta));
        assert!(watched_inodes(fd).contains(&ours), "{ours:?} not in {:?}", watched_inodes(fd));
        // Watches given back when the path's chain changes.
        let file = (std::fs::metadata(&path).unwrap().ino(), dev(&meta));
        assert!(watched_inodes(fd).contains(&file));
        replace(&path, "suspended");
        assert_eq!(status(&store, &path), Ok(Status::Suspended));
        assert!(!watched_inodes(fd).contains(&file), "the replaced file is still watched");
        drop(store);
        // The descriptor is closed (or, reused by another test meanwhile,
        // does not watch this directory).
        assert!(!watched_inodes(fd).contains(&ours), "the watch outlived the store");
    }
}
