//! A passport file read: the passport and the stamp of the very file
//! read, or why it cannot be used.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::validate::Passport;

/// Why a passport cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassportError {
    /// No file at the path.
    NotFound(PathBuf),
    /// The file exists but cannot be used (unreadable, not JSON, a field
    /// missing or of the wrong type); the message names the field.
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for PassportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassportError::NotFound(path) => write!(f, "no passport at {}", full(path).display()),
            PassportError::Invalid { path, message } => {
                write!(f, "passport {} is invalid: {message}", full(path).display())
            }
        }
    }
}

/// The full path tried for `path` (a relative one joined to the current
/// directory, without touching the file system), for error messages.
pub fn full(path: &Path) -> std::borrow::Cow<'_, Path> {
    match std::path::absolute(path) {
        Ok(absolute) if absolute != path => absolute.into(),
        _ => path.into(),
    }
}

impl Passport {
    /// Reads and validates a passport file.
    pub fn from_path(path: &Path) -> Result<Passport, PassportError> {
        read(path).1
    }
}

/// What identifies one version of a file on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    pub(super) modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: (u64, i64, i64),
}

impl Stamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            // A replaced file (rename over it) has a new inode; an edit in
            // place changes ctime even within one mtime tick.
            #[cfg(unix)]
            inode: (meta.ino(), meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Reads a passport file: the stamp of the very file read (taken from the
/// open handle, so it matches the text even if the path is replaced
/// meanwhile), and the passport.
pub(super) fn read(path: &Path) -> (Option<Stamp>, Result<Passport, PassportError>) {
    use std::io::Read;
    let invalid = |message: String| PassportError::Invalid { path: path.to_path_buf(), message };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (None, Err(PassportError::NotFound(path.to_path_buf())))
        }
        Err(e) => return (None, Err(invalid(format!("cannot open it: {e}")))),
    };
    let stamp = match file.metadata() {
        Ok(meta) if meta.is_file() => Stamp::of(&meta),
        Ok(_) => return (None, Err(invalid("it is not a file".into()))),
        Err(e) => return (None, Err(invalid(format!("cannot stat it: {e}")))),
    };
    let mut text = String::new();
    if let Err(e) = file.read_to_string(&mut text) {
        return (Some(stamp), Err(invalid(format!("cannot read it: {e}"))));
    }
    let passport = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("it is not valid JSON: {e}")))
        .and_then(|document| Passport::from_value(document).map_err(invalid));
    (Some(stamp), passport)
}
