//! The OAP provider's shape, as `scripts/house` measures it: no module of
//! `guardhost-oap` or `guardhost-oap-generic` reaches itself through the
//! modules it imports (a parent module is a table of contents, a piece two
//! modules share lives below both), and neither crate holds more than its
//! share of the workspace's Rust source. Skipped, saying so, without
//! `python3`.

use std::path::Path;
use std::process::Command;

/// The crates this test answers for (`circle in guardhost-oap` also
/// begins the generic crate's circle lines).
const CRATES: [&str; 2] = ["guardhost-oap", "guardhost-oap-generic"];

#[test]
fn the_oap_crates_have_no_module_circles_and_keep_to_their_share() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("scripts/house");
    let output = match Command::new("python3").arg(&script).current_dir(&root).output() {
        Ok(output) => output,
        Err(e) => {
            eprintln!("skipped: cannot run python3 for {} ({e})", script.display());
            return;
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    // Other crates' findings make the script exit 1; it must have run to the end.
    assert!(
        text.lines().any(|l| l.starts_with("workspace ")),
        "scripts/house did not print its table: {}{}",
        text,
        String::from_utf8_lossy(&output.stderr)
    );
    let circles: Vec<&str> = text.lines().filter(|l| l.starts_with("circle in guardhost-oap")).collect();
    assert!(circles.is_empty(), "module circles ({}):\n{text}", circles.join("; "));
    for name in CRATES {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("scripts/house lists no crate {name}:\n{text}"));
        assert!(!row.contains("over 30%"), "{name} holds more than its share:\n{row}");
    }
}
