//! Where the integration tests find APort's published OAP data: the very
//! module the unit tests use (`src/testdata.rs`), compiled into each test
//! crate.

#![allow(dead_code)] // each test crate uses its own part of it

#[path = "../../../src/testdata.rs"]
mod testdata;

pub(crate) use testdata::{path, root};
