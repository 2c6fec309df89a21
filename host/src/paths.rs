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
