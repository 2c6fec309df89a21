//! The allowlist provider written in C (`c/allowlist.c`) against guardhost's
//! C ABI (`provider-abi/include/guardhost.h`). This crate holds no Rust
//! code: its build script compiles the C source and links it, whole, into
//! the `cdylib`, exporting the descriptor `CAllowlistProvider`.
