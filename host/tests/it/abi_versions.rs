//! The compatibility policy of `guardhost-abi`, with real builds: the crate
//! is packaged as it would be published, its version is set to another 1.x
//! and to 2.0.0, a provider is built against each, and this host (built
//! against the workspace's version) loads the first and refuses the second,
//! saying which versions differ and what to do. They build with cargo, so
//! the Windows test run (under wine, without cargo) skips them; the same
//! refusals on prebuilt descriptors are in `loading.rs`.

use guardhost_test_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;

use guardhost::{BuildError, LoadErrorKind};
use serde_json::Map;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    // The target directory the nested builds of the tests share (the test
    // run holds the normal one; the panic=abort build in loading.rs uses it
    // too, so the registry dependencies are built once for both).
    command.arg("--offline").env("CARGO_TARGET_DIR", root().join("target").join("nested"));
    command
}

/// `cargo package`s guardhost-abi (the manifest as crates.io would get it)
/// and unpacks it into `dir/guardhost-abi` with its version set to `version`.
fn packaged_abi(dir: &Path, version: &str) -> PathBuf {
    // The tests run in parallel and `cargo package` rewrites the same
    // .crate file: one at a time, or one test unpacks a half-written file.
    static PACKAGING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = PACKAGING.lock().unwrap_or_else(|e| e.into_inner());
    let output = cargo()
        .current_dir(root())
        .args(["package", "-q", "--no-verify", "--allow-dirty", "-p", "guardhost-abi"])
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "cargo package: {}", String::from_utf8_lossy(&output.stderr));
    let current = env!("CARGO_PKG_VERSION_MAJOR");
    let packages = root().join("target/nested/package");
    let crate_file = std::fs::read_dir(&packages)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("guardhost-abi-") && name.ends_with(".crate")
        })
        .unwrap_or_else(|| {
            panic!("no guardhost-abi .crate in {} (host major {current})", packages.display())
        });
    let unpacked = dir.join(version);
    std::fs::create_dir_all(&unpacked).unwrap();
    let status = Command::new("tar").arg("xzf").arg(&crate_file).arg("-C").arg(&unpacked).status().unwrap();
    assert!(status.success(), "tar could not unpack {}", crate_file.display());
    let source = std::fs::read_dir(&unpacked).unwrap().next().unwrap().unwrap().path();
    let manifest = source.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let original = text.lines().find(|l| l.starts_with("version = ")).expect("a version line").to_owned();
    std::fs::write(&manifest, text.replacen(&original, &format!("version = \"{version}\""), 1)).unwrap();
    source
}

/// Builds the workspace's template provider against `abi` (a packaged
/// guardhost-abi) and returns its `use:` value.
fn provider_against(dir: &Path, abi: &Path, version: &str) -> String {
    let crate_dir = dir.join(format!("provider-{version}"));
    std::fs::create_dir_all(crate_dir.join("src")).unwrap();
    std::fs::copy(root().join("plugins/template/src/lib.rs"), crate_dir.join("src/lib.rs")).unwrap();
    let name = format!("compat_provider_{}", version.replace('.', "_"));
    std::fs::write(
        crate_dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\nguardhost-abi = {{ path = {abi:?} }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\
             serde_json = \"1\"\n\n[workspace]\n"
        ),
    )
    .unwrap();
    // The workspace's lock file, so the build uses the dependencies it uses.
    std::fs::copy(root().join("Cargo.lock"), crate_dir.join("Cargo.lock")).unwrap();
    let output = cargo().current_dir(&crate_dir).args(["build", "-q", "--lib"]).output().expect("cargo runs");
    assert!(
        output.status.success(),
        "building against {version}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = format!("{}{name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    format!("{}:TemplateProvider", root().join("target/nested/debug").join(file).display())
}

#[test]
#[cfg_attr(windows, ignore = "builds with cargo, which the Windows test run does not have")]
fn a_provider_built_against_another_1_x_loads_and_a_2_0_one_is_refused_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let host = env!("CARGO_PKG_VERSION");
    let abi_version = guardhost_abi_version();
    assert!(abi_version.starts_with("1."), "the policy ties the crate's major to ABI_MAJOR 1: {abi_version}");

    // Another minor of the same major: loads, decides, conforms.
    let other_minor = "1.9.0";
    let abi = packaged_abi(dir.path(), other_minor);
    let use_ = provider_against(dir.path(), &abi, other_minor);
    let loaded = support::load(&use_, Map::new());
    assert_eq!(loaded.info.name, "template");
    let report = guardhost_kit::run(&use_, &Map::new(), &guardhost_kit::Options::quick());
    assert!(
        report.passed(),
        "host {host}, provider built against guardhost-abi {other_minor}:\n{}",
        report.to_text()
    );

    // Another major: refused, naming both versions and the fix.
    let next_major = "2.0.0";
    let abi = packaged_abi(dir.path(), next_major);
    let use_ = provider_against(dir.path(), &abi, next_major);
    let error = support::try_load(&use_, Map::new()).unwrap_err();
    let BuildError::Load(error) = &error else { panic!("expected a load error, got {error}") };
    assert!(matches!(error.kind, LoadErrorKind::LayoutMismatch { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("guardhost-abi {next_major}"))
            && message.contains(&format!("guardhost-abi {abi_version}")),
        "{message}"
    );
    assert!(message.contains("rebuild the provider against guardhost-abi 1.x"), "{message}");
}

/// The workspace's guardhost-abi version, from its manifest.
fn guardhost_abi_version() -> String {
    let manifest = std::fs::read_to_string(root().join("provider-abi/Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("version = ")).unwrap();
    line.trim_start_matches("version = ").trim_matches('"').to_owned()
}

#[test]
#[cfg_attr(windows, ignore = "builds with cargo, which the Windows test run does not have")]
fn a_provider_whose_types_differ_is_refused_naming_the_type_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let version = guardhost_abi_version();
    let abi = packaged_abi(dir.path(), &version);
    // The same version, but `Reason`'s two fields in the other order: a
    // copy of the crate changed without a version change.
    let types = abi.join("src/types.rs");
    let text = std::fs::read_to_string(&types).unwrap();
    let code = "    /// A namespaced code such as `oap.tool_not_allowed`.\n    pub code: RString,\n";
    let message = "    /// A human-readable explanation; may be empty.\n    pub message: RString,\n";
    assert!(text.contains(&format!("{code}{message}")), "Reason's fields moved; update this test");
    std::fs::write(&types, text.replacen(&format!("{code}{message}"), &format!("{message}{code}"), 1))
        .unwrap();
    let use_ = provider_against(dir.path(), &abi, "swapped");
    let error = support::try_load(&use_, Map::new()).unwrap_err().to_string();
    assert!(error.contains("do not match this host's ABI layout"), "{error}");
    assert!(
        error.contains("`Reason` (via `construct` → `evaluate` → `reasons`): field `code: RString` here, `message: RString` in the provider"),
        "{error}"
    );
}
