//! The host's conformance kit against the OAP provider. In a test binary of
//! its own: cargo runs test binaries one after another, so the kit's latency
//! measurement does not share the two cores with the other tests' threads.

use std::path::Path;

#[test]
fn the_plugin_passes_the_conformance_kit() {
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json");
    let use_ = format!("{}:OAPGuardrailProvider", guardhost_kit::cdylib("guardhost_oap").display());
    let config = serde_json::json!({ "passport_path": passport }).as_object().cloned().unwrap();
    let report = guardhost_kit::assert_conforms(&use_, &config);
    assert_eq!(report.count(guardhost_kit::Status::Warn), 0, "{}", report.to_text());
}
