//! The conformance kit on this crate's own `cdylib`, exactly as an
//! operator's host would load it: `cargo test` fails when a check fails.

use serde_json::json;

#[test]
fn the_library_passes_the_conformance_kit() {
    // The library cargo built for this package (its name with `-` as `_`).
    let library = guardhost_kit::cdylib(&env!("CARGO_PKG_NAME").replace('-', "_"));
    let use_ = format!("{}:TemplateProvider", library.display());
    for config in [json!({}), json!({"denied_tools": ["write_file"], "blocked_patterns": ["rm -rf"]})] {
        let serde_json::Value::Object(config) = config else { unreachable!() };
        guardhost_kit::assert_conforms(&use_, &config);
    }
}
