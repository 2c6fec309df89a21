//! The OAP provider's integration tests, one test program with a module
//! per subject.

mod common;
mod conformance;
mod packs;
mod provider;
mod redis_state;
