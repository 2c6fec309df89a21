// Build-script helper shared by the providers written in C and C++
// (`include!`d by their `build.rs`): compiles the sources with the `cc`
// crate against `provider-abi/include/guardhost.h` and links them, whole,
// into the crate's `cdylib`, exporting only the named descriptor symbols.
//
// Rust exports none of a static library's symbols from a `cdylib` on its
// own, so the archive goes in with `--whole-archive` and a version script
// adds the descriptors to the exported set. Linux and other ELF targets
// use GNU ld's options; macOS uses `-force_load` and `-exported_symbol`.
// Windows (MinGW) takes the archive whole too; `GUARDHOST_EXPORT` is
// `__declspec(dllexport)` there, which exports each descriptor on its own.

/// The language of the sources.
#[allow(dead_code)]
enum Language {
    C,
    Cxx,
}

/// Compiles `sources` (paths relative to the crate) into `lib<archive>.a`
/// and links it into the `cdylib`, exporting `symbols`.
fn build_provider(archive: &str, sources: &[&str], symbols: &[&str], language: Language) {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = workspace_root(&manifest).join("provider-abi/include");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", include.join("guardhost.h").display());
    let mut build = cc::Build::new();
    build.include(&include).warnings(true).extra_warnings(true).warnings_into_errors(true).cargo_metadata(false).pic(true);
    match language {
        Language::C => {
            build.flag_if_supported("-std=c11");
        }
        Language::Cxx => {
            build.cpp(true).flag_if_supported("-std=c++20");
        }
    }
    for source in sources {
        println!("cargo:rerun-if-changed={source}");
        build.file(manifest.join(source));
    }
    build.compile(archive);
    let library = out.join(format!("lib{archive}.a"));
    let link = |arg: &str| println!("cargo:rustc-cdylib-link-arg={arg}");
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target == "macos" || target == "ios" {
        link(&format!("-Wl,-force_load,{}", library.display()));
        for symbol in symbols {
            link(&format!("-Wl,-exported_symbol,_{symbol}"));
        }
    } else if target == "windows" {
        link("-Wl,--whole-archive");
        link(&library.display().to_string());
        link("-Wl,--no-whole-archive");
        if let Language::Cxx = language {
            // Static, so the DLL needs no libstdc++-6.dll beside it.
            link("-Wl,-Bstatic");
            link("-lstdc++");
            link("-Wl,-Bdynamic");
        }
        // rustc names the C runtime before these arguments, and the linker
        // reads each library once: name it again after the archive.
        for runtime in ["-lgcc", "-lgcc_eh", "-lmingw32", "-lmingwex", "-lmsvcrt", "-lkernel32"] {
            link(runtime);
        }
    } else {
        let script = out.join(format!("{archive}.version"));
        let globals: String = symbols.iter().map(|s| format!("{s}; ")).collect();
        std::fs::write(&script, format!("{{ global: {globals}}};\n")).expect("write the version script");
        link("-Wl,--whole-archive");
        link(&library.display().to_string());
        link("-Wl,--no-whole-archive");
        link(&format!("-Wl,--version-script={}", script.display()));
    }
    if let Language::Cxx = language {
        if target != "windows" {
            link(if target == "macos" || target == "ios" { "-lc++" } else { "-lstdc++" });
        }
    }
}

/// The workspace root: the first ancestor of `dir` holding `provider-abi`.
fn workspace_root(dir: &std::path::Path) -> std::path::PathBuf {
    dir.ancestors()
        .find(|d| d.join("provider-abi/include/guardhost.h").is_file())
        .expect("the crate lies inside the guardhost workspace")
        .to_path_buf()
}
