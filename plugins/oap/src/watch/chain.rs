//! What a passport path depends on: the chain of directory entries the
//! kernel looks up to reach the file (symlinks and `..` included), and
//! whether each is on a file system whose changes inotify reports.

// Without inotify, the chain and the mount table are used by tests only.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::path::{Component, Path, PathBuf};

/// File systems on which every change to a file is made through this
/// kernel, so that inotify reports it (the `fstype` column of
/// `/proc/self/mountinfo`). Changes to an overlay's lower layers from
/// outside are not reported, but container images do not change.
pub const LOCAL_FILE_SYSTEMS: &[&str] = &[
    "ext2", "ext3", "ext4", "xfs", "btrfs", "bcachefs", "f2fs", "jfs", "reiserfs", "zfs", "tmpfs", "ramfs",
    "overlay", "vfat", "exfat", "ntfs3",
];

/// The most symlinks followed while resolving one path (the kernel's
/// limit, `ELOOP`).
const MAX_LINKS: usize = 40;

/// What a path's resolution depends on: the `(directory, entry name)`
/// pairs looked up, in order, and the file reached, when every entry
/// exists. Directories are physical (no symlink in them), as the kernel
/// resolves: a symlink's target continues from the link's directory, and
/// `..` goes up from where the resolution is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) entries: Vec<(PathBuf, std::ffi::OsString)>,
    pub(crate) file: Option<PathBuf>,
}

impl Chain {
    /// Resolves `path` (relative paths from the current directory), one
    /// `lstat` per entry and a `readlink` per symlink; `None` past
    /// [`MAX_LINKS`] symlinks.
    pub(crate) fn of(path: &Path) -> Option<Chain> {
        let absolute = std::path::absolute(path).ok()?;
        let mut entries = Vec::new();
        let mut current = PathBuf::from("/");
        let mut links = 0;
        // Names still to resolve, the next one last.
        let mut pending: Vec<std::ffi::OsString> = Vec::new();
        let push = |pending: &mut Vec<std::ffi::OsString>, path: &Path| {
            for component in path.components().rev() {
                pending.push(match component {
                    Component::RootDir | Component::Prefix(_) => "/".into(),
                    Component::CurDir => ".".into(),
                    Component::ParentDir => "..".into(),
                    Component::Normal(name) => name.to_owned(),
                });
            }
        };
        push(&mut pending, &absolute);
        while let Some(name) = pending.pop() {
            match name.to_str() {
                Some("/") => {
                    current = PathBuf::from("/");
                    continue;
                }
                Some(".") => continue,
                Some("..") => {
                    current.pop();
                    continue;
                }
                _ => {}
            }
            entries.push((current.clone(), name.clone()));
            let next = current.join(&name);
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return None;
                    }
                    let target = std::fs::read_link(&next).ok()?;
                    push(&mut pending, &target);
                }
                Ok(_) => current = next,
                // Missing (or unreadable): watching this directory for the
                // entry is what can tell when it appears.
                Err(_) => return Some(Chain { entries, file: None }),
            }
        }
        Some(Chain { entries, file: Some(current) })
    }
}

/// Whether `path` is on a file system of [`LOCAL_FILE_SYSTEMS`], by the
/// longest mount point of `mountinfo` (its text) above it.
pub(crate) fn is_local(mountinfo: &str, path: &Path) -> bool {
    let mut best: Option<(usize, &str)> = None;
    for line in mountinfo.lines() {
        let mut fields = line.split(' ');
        let Some(mount_point) = fields.nth(4) else { continue };
        let Some(fstype) = line.split(" - ").nth(1).and_then(|rest| rest.split(' ').next()) else {
            continue;
        };
        let mount_point = unescape(mount_point);
        if path.starts_with(&mount_point) {
            let depth = Path::new(&mount_point).components().count();
            if best.is_none_or(|(d, _)| depth >= d) {
                best = Some((depth, fstype));
            }
        }
    }
    best.is_some_and(|(_, fstype)| LOCAL_FILE_SYSTEMS.contains(&fstype))
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_chain_has_every_entry_the_kernel_looks_up_symlinks_and_dot_dot_included() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("v1/sub")).unwrap();
        std::fs::write(root.join("v1/p.json"), "{}").unwrap();
        symlink("v1/sub", root.join("data")).unwrap();
        symlink("data/../p.json", root.join("link")).unwrap();
        let chain = Chain::of(&root.join("link")).unwrap();
        let tail: Vec<(PathBuf, &str)> = chain.entries[chain.entries.len() - 5..]
            .iter()
            .map(|(d, n)| (d.clone(), n.to_str().unwrap()))
            .collect();
        // link -> data/../p.json; data -> v1/sub; `..` from v1/sub is v1.
        assert_eq!(
            tail,
            [
                (root.clone(), "link"),
                (root.clone(), "data"),
                (root.clone(), "v1"),
                (root.join("v1"), "sub"),
                (root.join("v1"), "p.json"),
            ]
        );
        assert_eq!(chain.file, Some(root.join("v1/p.json")));
        // The entries above the directory are there too, from `/`.
        assert_eq!(chain.entries[0].0, Path::new("/"));
        // A missing entry ends the chain there.
        let chain = Chain::of(&root.join("nope/p.json")).unwrap();
        assert_eq!(chain.entries.last().unwrap(), &(root.clone(), "nope".into()));
        assert_eq!(chain.file, None);
        // A loop gives no chain.
        symlink("loop", root.join("loop")).unwrap();
        assert_eq!(Chain::of(&root.join("loop")), None);
    }

    #[test]
    fn only_local_file_systems_are_watched() {
        let mountinfo = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:40 / /mnt/share rw,relatime - nfs4 server:/export rw
31 30 0:41 / /mnt/share/local\\040disk rw - tmpfs tmpfs rw
32 22 0:42 / /home/u/fuse rw - fuse.sshfs host: rw";
        let local = |p: &str| is_local(mountinfo, Path::new(p));
        assert!(local("/etc/agent"));
        assert!(!local("/mnt/share/agent"));
        assert!(local("/mnt/share/local disk/agent"));
        assert!(!local("/home/u/fuse/x"));
        assert!(local("/home/u/fusex"));
        assert!(!is_local("", Path::new("/etc")));
    }
}
