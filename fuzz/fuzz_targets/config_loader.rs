//! Config text: loading never panics; an error always has a message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let origin = guardhost::ConfigOrigin::File("fuzz.yaml".into());
    match guardhost::LoadedConfig::from_yaml(text, "/base".into(), origin, |name| {
        (name.len() % 2 == 0).then(|| "v".into())
    }) {
        Ok(config) => {
            let _ = config.guardrails.is_active();
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
});
