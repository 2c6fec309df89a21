//! Compiles the C allowlist provider into this crate's `cdylib`
//! (`build-support/c_provider.rs`).

include!("../../build-support/c_provider.rs");

fn main() {
    build_provider("c_allowlist", &["c/allowlist.c"], &["CAllowlistProvider"], Language::C);
}
