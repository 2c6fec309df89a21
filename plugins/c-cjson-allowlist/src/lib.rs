//! The allowlist provider written in C (`c/allowlist_cjson.c`) against
//! guardhost's C ABI, reading its JSON with [cJSON](https://github.com/DaveGamble/cJSON)
//! instead of a reader of its own (compare `plugins/c-allowlist/`).
//!
//! cJSON is not part of this repository and is not fetched by the build:
//! the build script compiles the C source, and exports the descriptor
//! `CJsonAllowlistProvider`, only when `pkg-config` finds the system's
//! `libcjson` (Debian: `libcjson-dev`). Otherwise the library is built
//! without it and exports nothing; the test says it was skipped.

/// Whether the build found cJSON and the library exports
/// `CJsonAllowlistProvider`.
pub const BUILT_WITH_CJSON: bool = cfg!(cjson);
