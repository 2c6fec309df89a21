//! `use:` values: parsing never panics, and a parsed library target always
//! yields at least one candidate path.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(guardhost::resolve::UseTarget::Library { path, symbol }) = guardhost::resolve::parse_use(text) {
        assert!(!symbol.is_empty());
        assert!(!guardhost::resolve::library_candidates(&path, std::path::Path::new("/base")).is_empty());
    }
});
