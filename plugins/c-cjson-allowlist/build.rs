//! Compiles c/allowlist_cjson.c into the cdylib when pkg-config finds the
//! system's cJSON (`libcjson`) for the target being built; otherwise builds
//! the crate without it and says so through `BUILT_WITH_CJSON`.
include!("../../build-support/c_provider.rs");

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cjson)");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=GUARDHOST_NO_CJSON");
    // CI sets it once cJSON is installed, after its first builds ran this
    // script (perhaps before pkg-config itself was there): look again.
    println!("cargo:rerun-if-env-changed=GUARDHOST_REQUIRE_CJSON");
    let (host, target) =
        (std::env::var("HOST").unwrap_or_default(), std::env::var("TARGET").unwrap_or_default());
    // A cross build (Windows, say) would need cJSON built for that target:
    // not looked for. GUARDHOST_NO_CJSON=1 builds without it on purpose.
    if host != target || std::env::var_os("GUARDHOST_NO_CJSON").is_some() {
        return;
    }
    // Installing cJSON later (CI installs it while the first phases build)
    // adds its `.pc` file to one of these folders: look again then.
    for dir in pkg_config(&["--variable", "pc_path", "pkg-config"]).unwrap_or_default().split(':') {
        if std::path::Path::new(dir).is_dir() {
            println!("cargo:rerun-if-changed={dir}");
        }
    }
    let (Some(cflags), Some(libs)) =
        (pkg_config(&["--cflags", "libcjson"]), pkg_config(&["--libs", "libcjson"]))
    else {
        return;
    };
    // Where `cJSON.h` is (`-I/usr/include/cjson` on Debian), for `cc`.
    let mut flags = std::env::var("CFLAGS").unwrap_or_default();
    flags.push(' ');
    flags.push_str(&cflags);
    std::env::set_var("CFLAGS", flags.trim());
    build_provider("c_cjson_allowlist", &["c/allowlist_cjson.c"], &["CJsonAllowlistProvider"], Language::C);
    // After the archive that needs them, so the linker keeps them.
    for flag in libs.split_whitespace() {
        println!("cargo:rustc-cdylib-link-arg={flag}");
    }
    println!("cargo:rustc-cfg=cjson");
}

/// pkg-config's answer, or `None` when it is missing or knows no such package.
fn pkg_config(args: &[&str]) -> Option<String> {
    let output = std::process::Command::new("pkg-config").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
