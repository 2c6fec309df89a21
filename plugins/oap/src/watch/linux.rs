//! The inotify watches on a passport path's chain (Linux).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use super::chain::{is_local, Chain};

/// What a directory of a chain is watched for: its entries changing,
/// and itself going away.
fn directory_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
        | WatchMask::MASK_ADD
}

/// What the file itself is watched for.
fn file_mask() -> WatchMask {
    WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
        | WatchMask::MASK_ADD
}

/// One path's interest in a watch: events naming `name` (any event when
/// `None`: the watch is on the file itself) set `dirty`.
struct Interest {
    name: Option<OsString>,
    dirty: Arc<AtomicBool>,
}

/// An inotify instance and the interests of its watches.
pub(crate) struct Watcher {
    inotify: Inotify,
    buffer: Vec<u8>,
    interests: HashMap<WatchDescriptor, Vec<Interest>>,
}

/// The watches one path holds (to give back with
/// [`Watcher::unwatch`]).
#[derive(Debug, Default)]
pub(crate) struct Watched(Vec<WatchDescriptor>);

impl Watcher {
    /// A new inotify instance; `None` when the kernel gives none.
    pub(crate) fn new() -> Option<Watcher> {
        let inotify = Inotify::init().ok()?;
        Some(Watcher { inotify, buffer: vec![0; 4096], interests: HashMap::new() })
    }

    /// Reads every queued event without blocking, marking the paths
    /// they concern dirty.
    pub(crate) fn poll(&mut self) {
        loop {
            let events = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // `WouldBlock`: nothing queued. Any other error cannot
                // happen on a valid descriptor; it is treated the same.
                Err(_) => return,
            };
            for event in events {
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    // Events were lost: every path is suspect.
                    for interest in self.interests.values().flatten() {
                        interest.dirty.store(true, Ordering::Release);
                    }
                    continue;
                }
                // An event on the watched inode itself, or the watch
                // gone (its inode deleted, its file system unmounted):
                // every path through it is suspect. Otherwise, the
                // paths using the entry the event names.
                let whole = event.name.is_none()
                    || event.mask.intersects(
                        EventMask::IGNORED
                            | EventMask::DELETE_SELF
                            | EventMask::MOVE_SELF
                            | EventMask::UNMOUNT,
                    );
                let interests = self.interests.get(&event.wd).into_iter().flatten();
                for interest in
                    interests.filter(|i| whole || i.name.is_none() || i.name.as_deref() == event.name)
                {
                    interest.dirty.store(true, Ordering::Release);
                }
                if event.mask.contains(EventMask::IGNORED) {
                    self.interests.remove(&event.wd);
                }
            }
        }
    }

    /// Watches what `path` depends on; events set `dirty`. `None` when
    /// a watch cannot be added (the limit, a permission) or the chain
    /// is on a file system that is not local: the caller falls back to
    /// a `stat` per call.
    pub(crate) fn watch(&mut self, path: &Path, dirty: &Arc<AtomicBool>) -> Option<Watched> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        // The chain is resolved, then watched, then resolved again: a
        // change between a look-up and its directory's watch would go
        // unreported, so the chain must not have changed meanwhile.
        // (It can, while an update swaps links: then once more.)
        for _ in 0..3 {
            let chain = Chain::of(path)?;
            let mut watched = Watched::default();
            let done = self.watch_chain(&chain, &mountinfo, dirty, &mut watched);
            if done.is_some() && Chain::of(path).as_ref() == Some(&chain) {
                return Some(watched);
            }
            self.unwatch(&watched, dirty);
            done?;
        }
        None
    }

    /// Watches every directory of `chain` and its file; `None` at the
    /// first that cannot be (what was watched is in `watched`).
    fn watch_chain(
        &mut self,
        chain: &Chain,
        mountinfo: &str,
        dirty: &Arc<AtomicBool>,
        watched: &mut Watched,
    ) -> Option<()> {
        for (directory, name) in &chain.entries {
            if !is_local(mountinfo, directory) {
                return None;
            }
            let wd = self.inotify.watches().add(directory, directory_mask()).ok()?;
            self.add(wd, Some(name.clone()), dirty, watched);
        }
        if let Some(file) = &chain.file {
            // The file may be a mount of its own (a bind mount).
            if !is_local(mountinfo, file) {
                return None;
            }
            let wd = self.inotify.watches().add(file, file_mask()).ok()?;
            self.add(wd, None, dirty, watched);
        }
        Some(())
    }

    fn add(
        &mut self,
        wd: WatchDescriptor,
        name: Option<OsString>,
        dirty: &Arc<AtomicBool>,
        watched: &mut Watched,
    ) {
        self.interests.entry(wd.clone()).or_default().push(Interest { name, dirty: dirty.clone() });
        if !watched.0.contains(&wd) {
            watched.0.push(wd);
        }
    }

    /// Gives back what [`Watcher::watch`] took for `dirty`: its
    /// interests, and each watch no path is interested in any more.
    pub(crate) fn unwatch(&mut self, watched: &Watched, dirty: &Arc<AtomicBool>) {
        for wd in &watched.0 {
            let Some(list) = self.interests.get_mut(wd) else { continue };
            list.retain(|interest| !Arc::ptr_eq(&interest.dirty, dirty));
            if list.is_empty() {
                self.interests.remove(wd);
                // Fails when the kernel already removed it.
                let _ = self.inotify.watches().remove(wd.clone());
            }
        }
    }

    /// The inotify descriptor (tests).
    #[cfg(test)]
    pub(crate) fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.inotify.as_raw_fd()
    }
}
