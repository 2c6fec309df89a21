//! The shared test helpers (`guardhost-test-support`), and the ones that run
//! this crate's `guardhost` binary.
#![allow(dead_code, unused_imports)]

pub mod cli;

pub use guardhost_test_support::*;
