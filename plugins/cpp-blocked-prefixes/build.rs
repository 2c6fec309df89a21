//! Compiles the C++ blocked-prefixes provider into this crate's `cdylib`
//! (`build-support/c_provider.rs`).

include!("../../build-support/c_provider.rs");

fn main() {
    build_provider(
        "cpp_blocked_prefixes",
        &["cpp/blocked_prefixes.cpp"],
        &["CppBlockedPrefixes"],
        Language::Cxx,
    );
}
