//! `use:` — where a provider is: `path/to/libfoo.so:Symbol` or a built-in.
//!
//! The twin of DeerFlow's `resolve_variable("package.module:Class")`: split
//! at the **last** colon (so `C:\plugins\foo.dll:Symbol` works), resolve a
//! relative path against the config file's directory, and accept a path
//! without a platform suffix (`plugins/foo:Symbol` tries `libfoo.so`,
//! `foo.dll` or `libfoo.dylib`, whichever this platform uses).

use std::path::{Path, PathBuf};

/// The module parts that name the built-in providers: guardhost's own
/// spelling, DeerFlow's modules, and DeerFlow's package exports
/// (`deerflow.guardrails` re-exports `AllowlistProvider`, `deerflow.authz`
/// `RbacAuthorizationProvider`).
const BUILTIN_MODULES: [&str; 5] = [
    "builtin",
    "deerflow.guardrails.builtin",
    "deerflow.guardrails",
    "deerflow.authz.rbac",
    "deerflow.authz",
];

/// What a `use:` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UseTarget {
    /// A provider built into guardhost.
    Builtin {
        /// The symbol, e.g. `AllowlistProvider`.
        symbol: String,
    },
    /// A provider in a dynamic library.
    Library {
        /// The path as written.
        path: PathBuf,
        /// The exported descriptor's symbol.
        symbol: String,
    },
}

/// A `use:` value that is not of the form `path:Symbol`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed `use: {value}`: {problem}; expected `path/to/libfoo.so:Symbol` (or `builtin:AllowlistProvider`)")]
pub struct MalformedUse {
    /// The value.
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Parses a `use:` value.
pub fn parse_use(value: &str) -> Result<UseTarget, MalformedUse> {
    let malformed = |problem: &str| MalformedUse { value: value.to_owned(), problem: problem.to_owned() };
    let value_trimmed = value.trim();
    let Some((module, symbol)) = value_trimmed.rsplit_once(':') else {
        return Err(malformed("there is no `:Symbol` after the path"));
    };
    if module.is_empty() {
        return Err(malformed("the path before the colon is empty"));
    }
    if symbol.is_empty() {
        return Err(malformed("the symbol after the last colon is empty"));
    }
    if !is_identifier(symbol) {
        return Err(malformed(&format!(
            "`{symbol}` is not a symbol name (letters, digits and `_`, not starting with a digit)"
        )));
    }
    if BUILTIN_MODULES.contains(&module) {
        return Ok(UseTarget::Builtin { symbol: symbol.to_owned() });
    }
    Ok(UseTarget::Library { path: PathBuf::from(module), symbol: symbol.to_owned() })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Library file suffixes, by platform.
const SUFFIXES: [&str; 3] = [".so", ".dll", ".dylib"];

/// The files to try for a library path, in order: the path itself when it
/// already ends in a library suffix; otherwise this platform's spellings of
/// it (`libfoo.so` and `foo.so` on Linux, `foo.dll` on Windows,
/// `libfoo.dylib` and `foo.dylib` on macOS), then the path as written.
/// Relative paths are joined to `base_dir`, never left to the OS loader's
/// search path.
pub fn library_candidates(path: &Path, base_dir: &Path) -> Vec<PathBuf> {
    let full =
        if path.is_absolute() || has_drive_letter(path) { path.to_path_buf() } else { base_dir.join(path) };
    // Windows takes `/` and `\` alike: rebuilt from its components, the path
    // has one separator throughout, as messages show it.
    let full = if cfg!(windows) { full.components().collect() } else { full };
    let file_name = full.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if SUFFIXES.iter().any(|s| file_name.ends_with(s)) || file_name.contains(".so.") {
        return vec![full];
    }
    let (prefix, suffix) = (std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let mut names = vec![format!("{prefix}{file_name}{suffix}")];
    if !prefix.is_empty() {
        names.push(format!("{file_name}{suffix}"));
    }
    let mut candidates: Vec<PathBuf> = names.into_iter().map(|n| full.with_file_name(n)).collect();
    candidates.push(full);
    candidates
}

/// Whether a path is more likely a Python module (`package.module`) than a
/// file: dotted, no directory separator, no library suffix.
pub fn looks_like_python_module(path: &Path) -> bool {
    let s = path.to_string_lossy();
    s.contains('.')
        && !s.contains(['/', '\\'])
        && !SUFFIXES.iter().any(|suffix| s.ends_with(suffix))
        && s.split('.').all(is_identifier)
}

/// `C:\...` or `C:/...`: absolute on Windows, even when this host is not.
fn has_drive_letter(path: &Path) -> bool {
    let s = path.to_string_lossy();
    let b = s.as_bytes();
    b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(path: &str, symbol: &str) -> UseTarget {
        UseTarget::Library { path: PathBuf::from(path), symbol: symbol.to_owned() }
    }

    #[test]
    fn paths_split_at_the_last_colon() {
        assert_eq!(
            parse_use("plugins/libfoo.so:MyProvider").unwrap(),
            lib("plugins/libfoo.so", "MyProvider")
        );
        assert_eq!(parse_use("/opt/g/libfoo.so:P").unwrap(), lib("/opt/g/libfoo.so", "P"));
        assert_eq!(parse_use(r"C:\plugins\foo.dll:Symbol").unwrap(), lib(r"C:\plugins\foo.dll", "Symbol"));
        assert_eq!(parse_use("D:/p/foo.dll:_S1").unwrap(), lib("D:/p/foo.dll", "_S1"));
    }

    #[test]
    fn both_builtin_spellings_name_the_builtin() {
        for v in [
            "builtin:AllowlistProvider",
            "deerflow.guardrails.builtin:AllowlistProvider",
            "deerflow.guardrails:AllowlistProvider",
        ] {
            assert_eq!(parse_use(v).unwrap(), UseTarget::Builtin { symbol: "AllowlistProvider".into() });
        }
        for v in [
            "builtin:RbacAuthorizationProvider",
            "deerflow.authz.rbac:RbacAuthorizationProvider",
            "deerflow.authz:RbacAuthorizationProvider",
        ] {
            assert_eq!(
                parse_use(v).unwrap(),
                UseTarget::Builtin { symbol: "RbacAuthorizationProvider".into() }
            );
        }
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        for (value, problem) in [
            ("plugins/libfoo.so", "no `:Symbol`"),
            (":Sym", "path before the colon is empty"),
            ("libfoo.so:", "symbol after the last colon is empty"),
            (r"C:\plugins\foo.dll", "`\\plugins\\foo.dll` is not a symbol name"),
            ("libfoo.so:My-Provider", "`My-Provider` is not a symbol name"),
            ("libfoo.so:9lives", "`9lives` is not a symbol name"),
        ] {
            let err = parse_use(value).unwrap_err().to_string();
            assert!(err.contains(problem) && err.contains(value), "{value}: {err}");
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_config_dir() {
        let c = library_candidates(Path::new("plugins/libfoo.so"), Path::new("/etc/guardhost"));
        assert_eq!(c, [PathBuf::from("/etc/guardhost/plugins/libfoo.so")]);
        let c = library_candidates(Path::new("/abs/libfoo.so"), Path::new("/etc/guardhost"));
        assert_eq!(c, [PathBuf::from("/abs/libfoo.so")]);
        // A bare file name is still relative to the config, not the loader's search path.
        let c = library_candidates(Path::new("libfoo.so"), Path::new("/etc/guardhost"));
        assert_eq!(c, [PathBuf::from("/etc/guardhost/libfoo.so")]);
    }

    #[test]
    fn a_path_without_suffix_tries_the_platform_names() {
        let c = library_candidates(Path::new("plugins/foo"), Path::new("/cfg"));
        if cfg!(target_os = "linux") {
            assert_eq!(
                c,
                [
                    PathBuf::from("/cfg/plugins/libfoo.so"),
                    PathBuf::from("/cfg/plugins/foo.so"),
                    PathBuf::from("/cfg/plugins/foo")
                ]
            );
        }
        assert_eq!(c.last().unwrap(), &PathBuf::from("/cfg/plugins/foo"));
    }

    #[test]
    fn python_module_paths_are_recognised() {
        assert!(looks_like_python_module(Path::new("aport_guardrails.providers.generic")));
        assert!(looks_like_python_module(Path::new("my_package.guardrail")));
        for not in ["plugins/foo", "libfoo.so", "foo", "./foo.bar", "a..b", "1x.y"] {
            assert!(!looks_like_python_module(Path::new(not)), "{not}");
        }
    }

    /// The spellings a Windows operator writes, resolved on Windows.
    #[cfg(windows)]
    #[test]
    fn windows_spellings_resolve_with_one_separator() {
        let base = Path::new(r"C:\guardhost\conf");
        let one = |written: &str| library_candidates(Path::new(written), base);
        assert_eq!(one(r"C:\providers\foo.dll"), [PathBuf::from(r"C:\providers\foo.dll")]);
        assert_eq!(one("C:/providers/foo.dll"), [PathBuf::from(r"C:\providers\foo.dll")]);
        assert_eq!(one(r"\\server\share\foo.dll"), [PathBuf::from(r"\\server\share\foo.dll")]);
        assert_eq!(
            one(r".\foo"),
            [PathBuf::from(r"C:\guardhost\conf\foo.dll"), PathBuf::from(r"C:\guardhost\conf\foo")]
        );
        assert_eq!(one("plugins/sub\\foo.dll"), [PathBuf::from(r"C:\guardhost\conf\plugins\sub\foo.dll")]);
        for candidate in one("plugins/sub/foo") {
            assert!(!candidate.to_string_lossy().contains('/'), "{}", candidate.display());
        }
        let parsed = parse_use(r"C:\providers\foo.dll:Sym").unwrap();
        assert_eq!(parsed, lib(r"C:\providers\foo.dll", "Sym"));
    }

    #[test]
    fn windows_drive_paths_are_absolute() {
        let c = library_candidates(Path::new(r"C:\plugins\foo.dll"), Path::new("/cfg"));
        assert_eq!(c, [PathBuf::from(r"C:\plugins\foo.dll")]);
    }
}
