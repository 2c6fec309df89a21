//! No inotify on this system: nothing is watched, and the store falls back
//! to a `stat` per call.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// No watches on this system: [`Watcher::new`] gives none.
pub(crate) enum Watcher {}

/// Nothing is ever watched.
#[derive(Debug, Default)]
pub(crate) struct Watched;

impl Watcher {
    pub(crate) fn new() -> Option<Watcher> {
        None
    }
    pub(crate) fn poll(&mut self) {
        match *self {}
    }
    pub(crate) fn watch(&mut self, _: &Path, _: &Arc<AtomicBool>) -> Option<Watched> {
        match *self {}
    }
    pub(crate) fn unwatch(&mut self, _: &Watched, _: &Arc<AtomicBool>) {
        match *self {}
    }
}
