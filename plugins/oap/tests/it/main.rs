//! The OAP provider's integration tests, one test program with a module
//! per subject.

mod common;
mod conformance;
mod packs;
mod redis_state;

// The provider as the host runs it: the real cdylib, loaded by guardhost,
// with passports written here and DeerFlow's tool calls.
mod aport;
mod config;
mod deerflow;
mod limits;
mod messages;
mod modes;
mod passport;
mod required_context;
mod setup;
