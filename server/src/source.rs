//! Where each request's guardrail comes from: one built at start, or the
//! current one of a [`Reloader`] (`--watch`, `SIGHUP`), swapped in only once
//! the new one works, while calls in flight finish on the old.

use std::sync::Arc;

use guardhost::{Guardrail, ReloadStatus, Reloader};

/// The guardrail requests are decided by.
#[derive(Debug, Clone)]
pub enum Source {
    /// Built once (`None`: the config installs no guardrail, and every
    /// call is allowed undecided, as `guardhost run` does).
    Fixed(Option<Arc<Guardrail>>),
    /// The reloader's current one.
    Reloading(Arc<Reloader>),
}

impl Source {
    /// The guardrail to decide the next call with.
    pub fn current(&self) -> Option<Arc<Guardrail>> {
        match self {
            Source::Fixed(guardrail) => guardrail.clone(),
            Source::Reloading(reloader) => reloader.current(),
        }
    }

    /// How reloads have gone (`None` for a fixed guardrail).
    pub fn reload_status(&self) -> Option<ReloadStatus> {
        match self {
            Source::Fixed(_) => None,
            Source::Reloading(reloader) => Some(reloader.status()),
        }
    }

    /// Reloads the config (`SIGHUP`) and logs what changed: a no-op for a
    /// fixed guardrail.
    pub fn reload(&self) -> Result<(), guardhost::ReloadError> {
        match self {
            Source::Fixed(_) => Ok(()),
            Source::Reloading(reloader) => {
                reloader.reload()?;
                reloader.log_reloaded();
                Ok(())
            }
        }
    }
}
