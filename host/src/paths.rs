//! Paths named in a config, relative to the config file's folder.

use std::path::{Path, PathBuf};

/// `path` joined to `base_dir` when it is relative (without the `./`
/// steps, so a message names `/cfg/passport.json`, not `/cfg/./passport.json`);
/// an absolute path as it is.
pub fn join_relative(base_dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let mut joined = base_dir.to_path_buf();
    joined.extend(path.components().filter(|c| !matches!(c, std::path::Component::CurDir)));
    joined
}

/// `path` made canonical (absolute, links resolved), spelt as an operator
/// writes it: on Windows `canonicalize` answers with a verbatim path
/// (`\\?\C:\...`, `\\?\UNC\server\share\...`), which names the same file
/// as `C:\...` and `\\server\share\...` and is shown as those. `path` as it
/// is when it cannot be resolved.
pub fn canonical(path: &Path) -> PathBuf {
    let resolved = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if cfg!(windows) {
        if let Some(text) = resolved.to_str() {
            if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
                return PathBuf::from(format!(r"\\{rest}"));
            }
            if let Some(rest) = text.strip_prefix(r"\\?\") {
                if rest.as_bytes().get(1) == Some(&b':') {
                    return PathBuf::from(rest);
                }
            }
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn a_canonical_path_is_absolute_and_never_verbatim() {
        let exe = std::env::current_exe().unwrap();
        let path = canonical(&exe);
        assert!(path.is_absolute(), "{}", path.display());
        assert!(!path.to_string_lossy().starts_with(r"\\?\"), "{}", path.display());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), std::fs::metadata(&exe).unwrap().len());
        let missing = std::path::Path::new("no/such/file.dll");
        assert_eq!(canonical(missing), missing);
    }
}
