//! The blocked-prefixes provider written in C++20 (`cpp/blocked_prefixes.cpp`)
//! against guardhost's C ABI (`provider-abi/include/guardhost.h`). No Rust
//! code: the build script compiles the C++ source and links it, whole, into
//! the `cdylib`, exporting the descriptor `CppBlockedPrefixes`.
