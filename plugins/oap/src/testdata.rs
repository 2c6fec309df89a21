//! Where the unit tests find APort's published OAP data (policy packs, the
//! spec's conformance cases, APort's test passports, its tool mapping): the
//! directory named by `GUARDHOST_OAP_DATA`, laid out as `policies/`,
//! `policies-repo/`, `spec/`, `aport-test-passports/` and
//! `tool-pack-mapping.json`. The data is APort's (Apache-2.0) and is not in
//! this repository.
//!
//! Unset: a test that needs it says so on stderr (written directly, so the
//! notice shows in a normal `cargo test` run, where the harness captures
//! `println!`) and returns. Set: a missing directory or file fails the test,
//! naming what is missing. The integration tests include this file too
//! (`tests/common/mod.rs`), and so do the unit tests of the generic engine's
//! crate (`generic/src/lib.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the data directory.
pub(crate) const VAR: &str = "GUARDHOST_OAP_DATA";

/// The data directory, or `None` after a notice naming `test` when
/// [`VAR`] is unset.
///
/// # Panics
/// When [`VAR`] is set but names no directory.
pub(crate) fn root(test: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os(VAR) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped {test}: needs APort's OAP conformance data; set {VAR}=/path/to/oap to run it"
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.is_dir(),
        "{VAR} is set to {:?}, which is not a directory: point it at a copy of APort's OAP data \
         (policies/, policies-repo/, spec/, aport-test-passports/, tool-pack-mapping.json), or unset it \
         to skip the tests that need it",
        dir.display()
    );
    Some(dir)
}

/// `root/rel`, which must exist.
///
/// # Panics
/// When it does not: the data directory is incomplete.
pub(crate) fn path(root: &Path, rel: &str) -> PathBuf {
    let path = root.join(rel);
    assert!(
        path.exists(),
        "{VAR} is set, but {} is missing: the directory must hold APort's OAP data as laid out in \
         its README (policies/, policies-repo/, spec/, aport-test-passports/, tool-pack-mapping.json)",
        path.display()
    );
    path
}
