//! Passports: reading and validating them, and a store that reloads a
//! passport when its file changes, so a suspension takes effect on the next
//! call (the kill switch).
//!
//! - `validate`: a passport document checked field by field, [`Passport`];
//! - `read`: a passport file read, and why one cannot be used,
//!   [`PassportError`];
//! - `store`: passports by path, each re-read when its file changes,
//!   [`PassportStore`].

mod read;
mod store;
mod validate;

pub use crate::watch::WatchMode;
pub use read::{full, PassportError};
pub use store::PassportStore;
pub use validate::{Passport, Status, FLAT_LIMITS, SPEC_VERSION};
