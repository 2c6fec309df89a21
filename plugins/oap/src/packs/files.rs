//! `data.file.read.v1` and `data.file.write.v1`: reading, listing and
//! writing files.
//!
//! The path is taken from `file_path`, `path` or `image_path` (and every
//! entry of `filepaths`, for DeerFlow's `present_files`) and resolved as the
//! OS would open it ([`resolve`]: symlinks followed component by component,
//! dangling ones included, before `..` applies). Relative paths start at
//! the working directory of the process that hosts the provider.
//!
//! Reading, in APort's order: a path is given (`oap.missing_file_path`); it
//! is not a directory (`oap.metadata_enumeration_unsupported`; listing with
//! `ls` is the exception); it is not a secret file (`.env*`, `.ssh`, `.aws`,
//! `*credentials*`, `id_rsa*`, `*.pem`, `*.key`: `oap.blocked_pattern`); it
//! is no larger than `max_file_size_mb` (`oap.file_too_large`); it is under
//! one of `allowed_paths` (`oap.path_not_allowed`); it matches none of the
//! passport's `blocked_patterns` globs (`oap.blocked_pattern`).
//!
//! Writing: the same, then the size of what is written within
//! `max_file_size_mb` (`oap.file_too_large`): DeerFlow sends no
//! `content_length`, so it is taken from `content` (for `str_replace`, the
//! file's size plus `new_str`, an upper bound); without either,
//! `oap.missing_required_context`. Then `blocked_paths`
//! (`oap.path_blocked`) and `allowed_extensions`
//! (`oap.extension_not_allowed`).

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::{arg, deny, number_arg, Checked, Limits};

/// What the call does with the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads a file.
    Read,
    /// Lists a directory (or reads a file's metadata).
    List,
    /// Writes a file.
    Write,
}

/// Resolves a path named in the passport's limits (cached by the caller).
pub type LimitPaths<'a> = &'a dyn Fn(&str) -> PathBuf;

/// Checks a file call; `limit_paths` resolves `allowed_paths` and
/// `blocked_paths` entries.
pub fn check(
    args: &Map<String, Value>,
    limits: Limits<'_>,
    access: Access,
    limit_paths: LimitPaths<'_>,
) -> Checked {
    let paths = paths_of(args);
    if paths.is_empty() {
        return Err(deny(
            "oap.missing_file_path",
            match access {
                Access::Write => "File write context must include file_path",
                _ => "File read context must include file_path",
            },
        ));
    }
    for path in paths {
        exact(path)?;
        check_one(args, &resolve(path), limits, access, limit_paths)?;
    }
    Ok(())
}

/// The longest path checked, in bytes: the kernel's `PATH_MAX`, past which
/// no file can be opened by that name.
pub const MAX_PATH_BYTES: usize = 4096;

/// A path is checked exactly as given, so one the OS would read otherwise
/// is denied: white space at either end (`" /mnt/a"` opens `./ /mnt/a`), a
/// NUL (the OS stops there: `a.pem\0.txt` opens `a.pem`) or another control
/// character; and one longer than [`MAX_PATH_BYTES`].
fn exact(path: &str) -> Checked {
    if path.len() > MAX_PATH_BYTES {
        return Err(deny(
            "oap.path_too_long",
            format!("File path is longer than {MAX_PATH_BYTES} bytes, the most a file can be opened by"),
        ));
    }
    if path.trim() != path {
        return Err(deny(
            "oap.path_malformed",
            "File path starts or ends with white space; paths are checked exactly as given",
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(deny(
            "oap.path_malformed",
            "File path holds a NUL or another control character; paths are checked exactly as given",
        ));
    }
    Ok(())
}

fn paths_of(args: &Map<String, Value>) -> Vec<&str> {
    let mut paths: Vec<&str> = ["file_path", "path", "image_path"]
        .iter()
        .filter_map(|k| arg(args, k))
        .filter(|p| !p.is_empty())
        .collect();
    if let Some(list) = args.get("filepaths").and_then(Value::as_array) {
        paths.extend(list.iter().filter_map(Value::as_str).filter(|p| !p.is_empty()));
    }
    paths
}

fn check_one(
    args: &Map<String, Value>,
    path: &Path,
    limits: Limits<'_>,
    access: Access,
    limit_paths: LimitPaths<'_>,
) -> Checked {
    let shown = path.display();
    let meta = std::fs::metadata(path).ok();
    if access != Access::List && meta.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(deny(
            "oap.metadata_enumeration_unsupported",
            "Directory reads cannot be safely authorized by the local file-read policy",
        ));
    }
    if secret_file(path).is_some() {
        return Err(deny("oap.blocked_pattern", "File path matches default sensitive read pattern"));
    }
    let max_bytes = limits.number("max_file_size_mb").map(|mb| mb * 1024.0 * 1024.0);
    if access == Access::Read {
        if let (Some(max), Some(meta)) = (max_bytes, &meta) {
            if meta.len() as f64 > max {
                return Err(too_large(access));
            }
        }
    }
    let allowed = limits.strings("allowed_paths").unwrap_or_default();
    if !allowed.iter().any(|a| matches!(a.trim(), "*" | "**") || path.starts_with(limit_paths(a))) {
        return Err(deny("oap.path_not_allowed", format!("File path '{shown}' is not in allowed list")));
    }
    let text = path.to_string_lossy();
    if let Some(pattern) =
        limits.strings("blocked_patterns").unwrap_or_default().into_iter().find(|p| glob(p, &text))
    {
        return Err(deny("oap.blocked_pattern", format!("File path matches blocked pattern: {pattern}")));
    }
    if access != Access::Write {
        return Ok(());
    }
    if let Some(max) = max_bytes {
        let Some(length) = written_length(args, meta.as_ref()) else {
            return Err(deny(
                "oap.missing_required_context",
                "File write context must include content_length when max_file_size is configured",
            ));
        };
        if length > max {
            return Err(too_large(access));
        }
    }
    if let Some(blocked) = limits
        .strings("blocked_paths")
        .unwrap_or_default()
        .into_iter()
        .find(|b| path.starts_with(limit_paths(b)))
    {
        return Err(deny(
            "oap.path_blocked",
            format!("Writing to system directory is not allowed: {blocked}"),
        ));
    }
    if let Some(extensions) = limits.strings("allowed_extensions").filter(|e| !e.is_empty()) {
        let extension = path.extension().map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
        let ok = extension.as_deref().is_some_and(|ext| {
            extensions.iter().any(|a| {
                let a = a.trim().to_lowercase();
                a == ext || format!(".{a}") == ext || a == "*"
            })
        });
        if !ok {
            return Err(deny(
                "oap.extension_not_allowed",
                format!("File extension {} is not allowed", extension.as_deref().unwrap_or("")),
            ));
        }
    }
    Ok(())
}

fn too_large(access: Access) -> super::Denial {
    deny(
        "oap.file_too_large",
        match access {
            Access::Write => "File write content exceeds max_file_size",
            _ => "File read target exceeds max_file_size",
        },
    )
}

/// The bytes a write produces: the larger of `content_length` and
/// `content`'s length (a stated length cannot hide the content), else (for
/// an edit) the file's size plus the new text.
fn written_length(args: &Map<String, Value>, meta: Option<&std::fs::Metadata>) -> Option<f64> {
    let stated = number_arg(args, "content_length");
    let content = arg(args, "content").map(|c| c.len() as f64);
    match (stated, content) {
        (Some(a), Some(b)) => return Some(a.max(b)),
        (Some(a), None) | (None, Some(a)) => return Some(a),
        (None, None) => {}
    }
    let new = arg(args, "new_str")?;
    Some(meta.map_or(0, |m| m.len()) as f64 + new.len() as f64)
}

/// Which built-in secret-file rule `path` hits, if any.
fn secret_file(path: &Path) -> Option<&'static str> {
    for component in path.components() {
        let Component::Normal(name) = component else { continue };
        let name = name.to_string_lossy().to_lowercase();
        if name.starts_with(".env") {
            return Some(".env*");
        }
        if name == ".ssh" || name == ".aws" {
            return Some(if name == ".ssh" { ".ssh" } else { ".aws" });
        }
    }
    let name = path.file_name()?.to_string_lossy().to_lowercase();
    if name.contains("credentials") {
        Some("credentials")
    } else if name.starts_with("id_rsa") {
        Some("id_rsa")
    } else if name.ends_with(".pem") {
        Some("*.pem")
    } else if name.ends_with(".key") {
        Some("*.key")
    } else {
        None
    }
}

/// Symlinks followed at most while resolving one path (as the kernel's
/// own limit, after which opening fails anyway).
const MAX_LINKS: usize = 40;

/// One piece of a path still to resolve.
enum Part {
    Root(PathBuf),
    Parent,
    Name(std::ffi::OsString),
}

fn parts(path: &Path) -> Vec<Part> {
    path.components()
        .filter_map(|c| match c {
            Component::Prefix(_) | Component::RootDir => Some(Part::Root(PathBuf::from(c.as_os_str()))),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(name) => Some(Part::Name(name.to_owned())),
        })
        .collect()
}

/// The path the OS would open, as `realpath -m` gives it: relative paths
/// start at the working directory; each component is looked at in turn, a
/// symlink replaced by its target (also a dangling one, which a write would
/// create), and `..` applied to what the path really is at that point.
/// Components that do not exist are kept as written.
pub fn resolve(path: &str) -> PathBuf {
    let path = Path::new(path);
    let mut out = PathBuf::new();
    let mut pending: Vec<Part> = parts(path);
    if !path.has_root() {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        out = cwd.canonicalize().unwrap_or(cwd);
    }
    pending.reverse(); // a stack: the next part is last
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match part {
            Part::Root(root) => out = root,
            Part::Parent => {
                out.pop();
            }
            Part::Name(name) => {
                let candidate = out.join(&name);
                let link = std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink());
                match std::fs::read_link(&candidate) {
                    Ok(target) if link && links < MAX_LINKS => {
                        links += 1;
                        // The target replaces the link, relative to the
                        // link's directory unless it is absolute.
                        pending.extend(parts(&target).into_iter().rev());
                    }
                    _ => out = candidate,
                }
            }
        }
    }
    out
}

/// Glob matching on `/`-separated paths: `**` is any number of segments,
/// `*` any run of characters within a segment, `?` one character. A
/// pattern without `/` matches any single segment (a file or directory
/// name).
pub fn glob(pattern: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let pattern = pattern.trim();
    if !pattern.contains('/') {
        return segments.iter().any(|s| segment(pattern, s));
    }
    let parts: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    segments_match(&parts, &segments)
}

/// Segment-wise matching, `**` standing for any number of segments.
fn segments_match(pattern: &[&str], path: &[&str]) -> bool {
    wildcard(pattern, path, |p| *p == "**", |p, s| segment(p, s))
}

/// Character-wise matching within a segment: `*` any run, `?` one.
fn segment(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    wildcard(&p, &t, |c| *c == '*', |c, x| *c == '?' || c == x)
}

/// Wildcard matching with backtracking to the last star: `star` says a
/// pattern item matches any run of items (none included), `one` that it
/// matches a single item. The time is at most the product of the two
/// lengths, whatever the number of stars.
fn wildcard<P, T>(
    pattern: &[P],
    text: &[T],
    star: impl Fn(&P) -> bool,
    one: impl Fn(&P, &T) -> bool,
) -> bool {
    let (mut i, mut j, mut last, mut mark) = (0, 0, None, 0);
    while j < text.len() {
        if i < pattern.len() && star(&pattern[i]) {
            last = Some(i);
            mark = j;
            i += 1;
        } else if i < pattern.len() && one(&pattern[i], &text[j]) {
            i += 1;
            j += 1;
        } else if let Some(s) = last {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    pattern[i..].iter().all(star)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(args: Value, limits: Value, access: Access) -> Result<(), String> {
        check(args.as_object().unwrap(), Limits(limits.as_object()), access, &|p| resolve(p))
            .map_err(|d| d.code)
    }

    #[test]
    fn globs() {
        assert!(glob("**/.ssh/**", "/home/u/.ssh/id_ed25519"));
        assert!(glob("**/.env", "/srv/app/.env"));
        assert!(!glob("**/.env", "/srv/app/.env.example"));
        assert!(glob("**/id_rsa*", "/home/u/id_rsa.pub"));
        assert!(glob("*.pem", "/etc/ssl/cert.pem"));
        assert!(glob("/tmp/*.txt", "/tmp/a.txt"));
        assert!(!glob("/tmp/*.txt", "/tmp/sub/a.txt"));
        assert!(glob("a?c", "/x/abc"));
    }

    /// The backtracking match agrees with the recursive definition of
    /// `**` on every small pattern and path.
    #[test]
    fn segment_globs_agree_with_the_recursive_definition() {
        fn reference(pattern: &[&str], path: &[&str]) -> bool {
            match pattern.split_first() {
                None => path.is_empty(),
                Some((&"**", rest)) => (0..=path.len()).any(|skip| reference(rest, &path[skip..])),
                Some((first, rest)) => {
                    path.split_first().is_some_and(|(p, tail)| segment(first, p) && reference(rest, tail))
                }
            }
        }
        let tokens = ["**", "a", "*", "b", "a*"];
        let names = ["a", "b", "ab"];
        let mut patterns = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<&str>> = patterns
                .iter()
                .flat_map(|p: &Vec<&str>| tokens.iter().map(move |t| [p.clone(), vec![*t]].concat()))
                .collect();
            patterns.extend(longer.into_iter().filter(|p| p.len() <= 4));
            patterns.dedup();
        }
        let mut paths = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<&str>> = paths
                .iter()
                .flat_map(|p: &Vec<&str>| names.iter().map(move |n| [p.clone(), vec![*n]].concat()))
                .collect();
            paths.extend(longer.into_iter().filter(|p| p.len() <= 4));
            paths.dedup();
        }
        for pattern in &patterns {
            for path in &paths {
                assert_eq!(segments_match(pattern, path), reference(pattern, path), "{pattern:?} {path:?}");
            }
        }
    }

    /// A path the OS would read otherwise than the check does is denied.
    #[test]
    fn paths_are_checked_exactly_as_given() {
        let limits = json!({"allowed_paths": ["/mnt/user-data/"], "blocked_patterns": ["*.pem"]});
        let code = |path: &str| run(json!({"path": path}), limits.clone(), Access::Read);
        assert_eq!(code("/mnt/user-data/a.txt"), Ok(()));
        for path in [" /mnt/user-data/a", "\t/mnt/user-data/a", "/mnt/user-data/a ", "/mnt/user-data/a\n"] {
            assert_eq!(code(path), Err("oap.path_malformed".into()), "{path:?}");
        }
        assert_eq!(code("/mnt/user-data/server.pem\u{0}.txt"), Err("oap.path_malformed".into()));
        assert_eq!(code("/mnt/user-data/a\u{1b}b"), Err("oap.path_malformed".into()));
        assert_eq!(code(&format!("/mnt/user-data/{}", "a/".repeat(4096))), Err("oap.path_too_long".into()));
        let listed = json!({"filepaths": ["/mnt/user-data/a", " /mnt/user-data/b"]});
        assert_eq!(run(listed, limits.clone(), Access::List), Err("oap.path_malformed".into()));
    }

    #[test]
    fn paths_are_normalised_before_they_are_compared() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let allowed = root.join("allowed");
        std::fs::create_dir(&allowed).unwrap();
        let limits = json!({"allowed_paths": [format!("{}/", allowed.display())]});
        let inside = format!("{}/a.txt", allowed.display());
        let escape = format!("{}/../secret.txt", allowed.display());
        assert_eq!(run(json!({"path": inside}), limits.clone(), Access::Read), Ok(()));
        assert_eq!(
            run(json!({"path": escape}), limits.clone(), Access::Read),
            Err("oap.path_not_allowed".into())
        );
        #[cfg(unix)]
        {
            let link = allowed.join("link");
            std::os::unix::fs::symlink(&root, &link).unwrap();
            let through = format!("{}/x.txt", link.display());
            assert_eq!(
                run(json!({"path": through}), limits.clone(), Access::Read),
                Err("oap.path_not_allowed".into())
            );
        }
        assert_eq!(
            run(json!({"path": allowed.display().to_string()}), limits.clone(), Access::Read),
            Err("oap.metadata_enumeration_unsupported".into())
        );
        assert_eq!(run(json!({"path": allowed.display().to_string()}), limits, Access::List), Ok(()));
    }

    #[test]
    fn reads_follow_aports_order() {
        let limits = json!({"allowed_paths": ["/data/"], "blocked_patterns": ["**/private/**"]});
        assert_eq!(run(json!({}), limits.clone(), Access::Read), Err("oap.missing_file_path".into()));
        for secret in
            ["/data/.env", "/data/.envrc", "/data/.env-prod", "/data/x/.aws/config", "/data/id_rsa.pub"]
        {
            let got = run(json!({ "path": secret }), limits.clone(), Access::Read);
            assert_eq!(got, Err("oap.blocked_pattern".into()), "{secret}");
        }
        assert_eq!(
            run(json!({"file_path": "/data/x/server.key"}), limits.clone(), Access::Read),
            Err("oap.blocked_pattern".into())
        );
        assert_eq!(
            run(json!({"path": "/etc/passwd"}), limits.clone(), Access::Read),
            Err("oap.path_not_allowed".into())
        );
        assert_eq!(
            run(json!({"path": "/data/private/a"}), limits.clone(), Access::Read),
            Err("oap.blocked_pattern".into())
        );
        assert_eq!(run(json!({"path": "/data/a.csv"}), limits.clone(), Access::Read), Ok(()));
        assert_eq!(
            run(json!({"filepaths": ["/data/a.csv", "/etc/shadow"]}), limits.clone(), Access::Read),
            Err("oap.path_not_allowed".into())
        );
        assert_eq!(
            run(json!({"path": "/data/a"}), json!({}), Access::Read),
            Err("oap.path_not_allowed".into())
        );
        assert_eq!(run(json!({"path": "/anything"}), json!({"allowed_paths": ["*"]}), Access::Read), Ok(()));
    }

    #[test]
    fn writes_take_their_size_from_the_content() {
        let limits = json!({
            "allowed_paths": ["/out/"], "blocked_paths": ["/out/locked/"], "allowed_extensions": [".md", "txt"],
            "max_file_size_mb": 0.001
        });
        let write = |args: Value| run(args, limits.clone(), Access::Write);
        assert_eq!(write(json!({"path": "/out/a.md", "content": "hello"})), Ok(()));
        assert_eq!(write(json!({"path": "/out/a.TXT", "content": "hello"})), Ok(()));
        assert_eq!(
            write(json!({"path": "/out/a.md", "content": "x".repeat(2000)})),
            Err("oap.file_too_large".into())
        );
        assert_eq!(write(json!({"path": "/out/a.md", "content_length": 10})), Ok(()));
        assert_eq!(write(json!({"path": "/out/a.md"})), Err("oap.missing_required_context".into()));
        assert_eq!(write(json!({"path": "/out/a.md", "old_str": "a", "new_str": "b"})), Ok(()));
        assert_eq!(write(json!({"path": "/out/locked/a.md", "content": ""})), Err("oap.path_blocked".into()));
        assert_eq!(
            write(json!({"path": "/out/a.sh", "content": ""})),
            Err("oap.extension_not_allowed".into())
        );
        assert_eq!(
            write(json!({"path": "/out/noext", "content": ""})),
            Err("oap.extension_not_allowed".into())
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_as_the_os_opens_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let allowed = root.join("allowed");
        let outside = root.join("outside/deep");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let limits = json!({"allowed_paths": [allowed.display().to_string()]});
        // `..` after a symlink applies to the link's target.
        std::os::unix::fs::symlink(&outside, allowed.join("l")).unwrap();
        let dotdot = format!("{}/l/../secret.txt", allowed.display());
        assert_eq!(resolve(&dotdot), root.join("outside/secret.txt"));
        assert_eq!(
            run(json!({"path": dotdot}), limits.clone(), Access::Read),
            Err("oap.path_not_allowed".into())
        );
        // A dangling link is followed: writing through it would create its target.
        std::os::unix::fs::symlink(root.join("outside/authorized_keys"), allowed.join("notes.txt")).unwrap();
        let dangling = format!("{}/notes.txt", allowed.display());
        let write = run(json!({"path": dangling, "content": "x"}), limits.clone(), Access::Write);
        assert_eq!(write, Err("oap.path_not_allowed".into()));
        // A relative link resolves against its own directory.
        std::os::unix::fs::symlink("../outside", allowed.join("rel")).unwrap();
        assert_eq!(resolve(&format!("{}/rel/x", allowed.display())), root.join("outside/x"));
        // A loop of links ends.
        std::os::unix::fs::symlink(allowed.join("loop"), allowed.join("loop")).unwrap();
        assert!(resolve(&format!("{}/loop", allowed.display())).starts_with(&allowed));
        assert_eq!(run(json!({"path": allowed.join("ok.txt")}), limits, Access::Read), Ok(()));
    }

    #[test]
    fn a_stated_length_cannot_hide_the_content() {
        let limits = json!({"allowed_paths": ["/out/"], "max_file_size_mb": 0.001});
        let write = |args: Value| run(args, limits.clone(), Access::Write);
        let big = "x".repeat(2000);
        assert_eq!(
            write(json!({"path": "/out/a", "content_length": 1, "content": big})),
            Err("oap.file_too_large".into())
        );
        for bad in [json!("NaN"), json!(-1), json!("inf")] {
            let got = write(json!({"path": "/out/a", "content_length": bad}));
            assert_eq!(got, Err("oap.missing_required_context".into()), "{bad}");
        }
    }
}
