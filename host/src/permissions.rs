//! Who may change the files that decide a guardrail: the provider library
//! and the config file that names it.
//!
//! The rule is OpenSSH's `StrictModes`, applied to every entry that decides
//! what a path opens: a file or directory that group or others can write,
//! or that belongs to a user other than root and the one running the host,
//! is refused, because that user could swap what the host reads. The walk
//! follows the path **as written**, component by component: each directory,
//! each symbolic link met (a link can be replaced by whoever can write its
//! directory, or, in a sticky directory, by its owner), and then the path
//! the link points to, so a safe target reached through a link in a
//! world-writable directory is refused as well.
//!
//! Two exceptions keep ordinary systems usable:
//! - a directory with the sticky bit (such as `/tmp`): others may add
//!   entries to it but cannot rename or remove what they do not own, and
//!   every entry the walk goes through is checked for its owner;
//! - a group-writable entry whose group is its owner's private group (the
//!   group has no member but the owner, as with `umask 002` on Debian and
//!   Ubuntu), as Debian's OpenSSH accepts it.
//!
//! On Windows the same walk reads each entry's owner and access-control
//! list instead of mode bits (see [`check`]'s Windows rule). Elsewhere,
//! where neither can be read, every path is refused
//! ([`PermissionError::Unchecked`]) unless the operator accepts it, as an
//! unknown is refused.

use std::path::{Path, PathBuf};

/// What a checked path is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// A provider library.
    Library,
    /// A guardrails config file.
    Config,
}

impl Subject {
    /// What another user could do with write access.
    fn consequence(self) -> &'static str {
        match self {
            Subject::Library => "replace the provider",
            Subject::Config => "rewrite the guardrail config (and through it the provider and its policy)",
        }
    }
}

/// An entry on a path that another user could change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PermissionError {
    /// Group or others may write it.
    #[error("{}{} is {what} (mode {mode:o}), so another user could {}; fix it with `chmod go-w {}`", path.display(), through_link(.through), subject.consequence(), path.display())]
    Writable {
        /// The file, directory or link.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// `group-writable`, `world-writable` or both.
        what: &'static str,
        /// The symbolic link through which the walk reached it, if any.
        through: Option<PathBuf>,
        /// What the path leads to.
        subject: Subject,
    },
    /// It belongs to a user other than root and the one running the host.
    #[error("{}{} belongs to user {owner}, neither root nor the user running guardhost, so that user could {}; change its owner", path.display(), through_link(.through), subject.consequence())]
    ForeignOwner {
        /// The file, directory or link.
        path: PathBuf,
        /// Its owner's user id.
        owner: u32,
        /// The symbolic link through which the walk reached it, if any.
        through: Option<PathBuf>,
        /// What the path leads to.
        subject: Subject,
    },
    /// An entry on the path could not be inspected.
    #[error("cannot check who may change {} ({reason}); make it readable", path.display())]
    Uninspectable {
        /// The entry.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// Windows: its access-control list lets an account other than the
    /// user running guardhost, the administrators and the system change it.
    #[error("{} can be changed by {}: its access-control list grants {}, so that account could {}; remove the grant (`icacls \"{}\" /remove:g *{}`)", path.display(), grantee.account, grantee.rights, subject.consequence(), path.display(), grantee.sid)]
    GrantedTo {
        /// The file or directory.
        path: PathBuf,
        /// Who, and what it may do.
        grantee: Box<Grantee>,
        /// What the path leads to.
        subject: Subject,
    },
    /// Windows: it belongs to an account other than the user running
    /// guardhost, the administrators and the system (an owner may always
    /// change its access-control list).
    #[error("{} belongs to {account}, neither the user running guardhost nor the administrators or the system, so that account could {}; take it over (`takeown /f \"{}\"`)", path.display(), subject.consequence(), path.display())]
    OwnedBy {
        /// The file or directory.
        path: PathBuf,
        /// The owner, by name where Windows knows it, and SID.
        account: String,
        /// What the path leads to.
        subject: Subject,
    },
    /// Who may change it cannot be read on this system (neither Unix nor
    /// Windows), so it is refused as a path others could change would be.
    #[error("who may change {} cannot be checked on this system (guardhost reads Unix permissions and Windows access-control lists), and what cannot be checked is refused", path.display())]
    Unchecked {
        /// The path as written.
        path: PathBuf,
    },
    /// The path goes through too many symbolic links (a loop, most likely).
    #[error("{}: more than {MAX_LINKS} symbolic links on the way to the file (a loop?); point the path at the file itself", path.display())]
    TooManyLinks {
        /// The path as written.
        path: PathBuf,
    },
}

/// An account an access-control list lets change an entry (Windows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grantee {
    /// The account, by name where Windows knows it, and SID.
    pub account: String,
    /// Its SID.
    pub sid: String,
    /// The rights granted that let it change the entry.
    pub rights: String,
}

/// " (reached through the symbolic link X)", or nothing.
fn through_link(through: &Option<PathBuf>) -> String {
    match through {
        Some(link) => format!(" (reached through the symbolic link {})", link.display()),
        None => String::new(),
    }
}

/// At most this many symbolic links are followed, as Linux's own limit.
pub const MAX_LINKS: usize = 40;

/// Checks every entry that decides what `path` opens, as written and as
/// resolved through each symbolic link (see the module docs).
#[cfg(unix)]
pub fn check(path: &Path, subject: Subject) -> Result<(), PermissionError> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;

    /// A step of the walk: into a named entry, or up to the parent.
    enum Step {
        Name(OsString),
        Up,
    }
    fn steps(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
        path.components().filter_map(|c| match c {
            Component::Normal(name) => Some(Step::Name(name.to_owned())),
            Component::ParentDir => Some(Step::Up),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
    }

    let inspect = |at: &Path| {
        std::fs::symlink_metadata(at)
            .map_err(|e| PermissionError::Uninspectable { path: at.to_path_buf(), reason: e.to_string() })
    };
    let rules = Rules::of_this_system();
    let absolute = std::path::absolute(path)
        .map_err(|e| PermissionError::Uninspectable { path: path.to_path_buf(), reason: e.to_string() })?;

    // `at` is always a directory reached without links, so `..` is `pop`.
    let mut at = PathBuf::from("/");
    rules.check_entry(&at, &inspect(&at)?, None, subject)?;
    let mut pending: VecDeque<Step> = steps(&absolute).collect();
    let mut links = 0;
    let mut through: Option<PathBuf> = None;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Up => {
                at.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        let next = at.join(&name);
        let meta = inspect(&next)?;
        rules.check_entry(&next, &meta, through.as_deref(), subject)?;
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(PermissionError::TooManyLinks { path: path.to_path_buf() });
        }
        let target = std::fs::read_link(&next)
            .map_err(|e| PermissionError::Uninspectable { path: next.clone(), reason: e.to_string() })?;
        if target.has_root() {
            at = PathBuf::from("/");
            rules.check_entry(&at, &inspect(&at)?, Some(&next), subject)?;
        }
        for step in steps(&target).rev() {
            pending.push_front(step);
        }
        through = Some(next);
    }
    Ok(())
}

/// Windows: every entry on the path as written and on the path it leads to
/// (through links and junctions), from the drive down, must be owned by
/// the user running guardhost, the administrators, the system or
/// TrustedInstaller, and its access-control list must grant no one else a
/// right that changes it: for the file, writing, appending, deleting,
/// changing its permissions or owner; for a directory, deleting or
/// renaming what is in it, itself, or its permissions or owner (adding new
/// entries is left out: it cannot replace one that is there, and drive
/// roots grant it to every user). Denying entries are not read, so the
/// rights read are at most those given; an entry of a kind not read is
/// refused.
#[cfg(windows)]
pub fn check(path: &Path, subject: Subject) -> Result<(), PermissionError> {
    let uninspectable =
        |at: &Path, reason: String| PermissionError::Uninspectable { path: at.to_path_buf(), reason };
    let me = crate::acl::current_user()
        .map_err(|e| uninspectable(path, format!("the user guardhost runs as cannot be read: {e}")))?;
    let absolute = std::path::absolute(path).map_err(|e| uninspectable(path, e.to_string()))?;
    let resolved = crate::paths::canonical(path);
    let mut seen = std::collections::HashSet::new();
    for leaf in [absolute, resolved] {
        let mut entries: Vec<&Path> = leaf.ancestors().collect();
        entries.reverse();
        for entry in entries {
            if !seen.insert(entry.to_path_buf()) {
                continue;
            }
            let is_dir = entry != leaf.as_path() || entry.is_dir();
            check_security(entry, is_dir, &me, subject)?;
        }
    }
    Ok(())
}

#[cfg(windows)]
fn check_security(at: &Path, is_dir: bool, me: &str, subject: Subject) -> Result<(), PermissionError> {
    use crate::access::AccessVerdict;
    let security = crate::acl::read(at)
        .map_err(|e| PermissionError::Uninspectable { path: at.to_path_buf(), reason: e.to_string() })?;
    let path = at.to_path_buf();
    match crate::access::judge(&security, is_dir, me) {
        AccessVerdict::Safe => Ok(()),
        AccessVerdict::Owner(owner) => {
            Err(PermissionError::OwnedBy { path, account: owner.to_string(), subject })
        }
        AccessVerdict::Granted { account, sid, rights } => Err(PermissionError::GrantedTo {
            path,
            grantee: Box::new(Grantee { account, sid, rights }),
            subject,
        }),
        AccessVerdict::Unread(kind) => Err(PermissionError::Uninspectable {
            path,
            reason: format!(
                "its access-control list has an allowing entry of type {kind}, which guardhost does not read"
            ),
        }),
    }
}

/// Neither Unix modes nor Windows access-control lists: refused, as an
/// unknown is (the caller's error says how to accept it).
#[cfg(not(any(unix, windows)))]
pub fn check(path: &Path, _subject: Subject) -> Result<(), PermissionError> {
    Err(PermissionError::Unchecked { path: path.to_path_buf() })
}

impl PermissionError {
    /// How to accept the path anyway, `how` being what does it: the other
    /// way out, for a path others can change (after the fix the message
    /// names); the one way, after the operator's own check, for a path that
    /// cannot be checked.
    pub fn accept_hint(&self, how: &str) -> String {
        match self {
            PermissionError::Unchecked { .. } => {
                format!("; once only you and the administrators can change it and its folders, {how}")
            }
            _ => format!(", or {how}"),
        }
    }
}

/// Who the host runs as, and which groups are private to one user.
#[cfg(unix)]
struct Rules {
    /// The effective user id (`None` where it cannot be read: ownership is
    /// then not checked).
    me: Option<u32>,
    /// `/etc/passwd` and `/etc/group`, read when a group-writable entry is met.
    accounts: std::cell::OnceCell<Option<(String, String)>>,
}

#[cfg(unix)]
impl Rules {
    fn of_this_system() -> Self {
        Rules { me: effective_uid(), accounts: std::cell::OnceCell::new() }
    }

    fn check_entry(
        &self,
        at: &Path,
        meta: &std::fs::Metadata,
        through: Option<&Path>,
        subject: Subject,
    ) -> Result<(), PermissionError> {
        use std::os::unix::fs::MetadataExt;
        let through = through.map(Path::to_path_buf);
        if let Some(me) = self.me {
            if meta.uid() != 0 && meta.uid() != me {
                return Err(PermissionError::ForeignOwner {
                    path: at.to_path_buf(),
                    owner: meta.uid(),
                    through,
                    subject,
                });
            }
        }
        // A link's own mode is meaningless; whoever may write its directory
        // (checked before it) or owns it (checked above) can repoint it.
        if meta.file_type().is_symlink() {
            return Ok(());
        }
        let mode = meta.mode() & 0o7777;
        if meta.is_dir() && mode & 0o1000 != 0 {
            return Ok(());
        }
        let group = mode & 0o020 != 0 && !self.private_group(meta.gid(), meta.uid());
        let what = match (group, mode & 0o002 != 0) {
            (true, true) => "group- and world-writable",
            (true, false) => "group-writable",
            (false, true) => "world-writable",
            (false, false) => return Ok(()),
        };
        Err(PermissionError::Writable { path: at.to_path_buf(), mode, what, through, subject })
    }

    fn private_group(&self, gid: u32, owner: u32) -> bool {
        let accounts = self.accounts.get_or_init(|| {
            let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
            let group = std::fs::read_to_string("/etc/group").ok()?;
            Some((passwd, group))
        });
        match accounts {
            Some((passwd, group)) => is_private_group(gid, owner, passwd, group),
            None => false,
        }
    }
}

/// Whether group `gid` has no member but user `owner`: no other account
/// has it as its primary group, and its member list names no one else.
/// Read from the text of `/etc/passwd` and `/etc/group`; a group not listed
/// there (directory services) is not private.
#[cfg(unix)]
pub(crate) fn is_private_group(gid: u32, owner: u32, passwd: &str, group: &str) -> bool {
    let accounts = passwd.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let uid = fields.get(2)?.parse::<u32>().ok()?;
        let primary = fields.get(3)?.parse::<u32>().ok()?;
        Some((fields[0], uid, primary))
    });
    let mut owner_name = None;
    for (name, uid, primary) in accounts {
        if uid == owner {
            owner_name = Some(name);
        } else if primary == gid {
            return false;
        }
    }
    let Some(owner_name) = owner_name else { return false };
    let entry = group.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.get(2)?.parse::<u32>().ok()? == gid).then(|| fields.get(3).copied().unwrap_or(""))
    });
    match entry {
        Some(members) => members.split(',').map(str::trim).all(|m| m.is_empty() || m == owner_name),
        None => false,
    }
}

/// The effective user id, read from `/proc/self/status` (Linux); `None`
/// elsewhere, where ownership is not checked.
#[cfg(unix)]
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The Windows rule on real files: their access-control lists set as an
/// operator (or an attacker) would, read back by the check. (Under wine,
/// which keeps a file's rights as its Unix mode, only the owner's and
/// Everyone's grants can be set; the rule's other cases are
/// `access`'s tests.)
#[cfg(all(test, windows))]
mod windows_tests {
    use super::{check, PermissionError, Subject};
    use crate::acl::set_for_test as set;

    #[track_caller]
    fn granted(path: &std::path::Path) -> (std::path::PathBuf, String, String, String) {
        match check(path, Subject::Library) {
            Err(error @ PermissionError::GrantedTo { .. }) => {
                let text = error.to_string();
                let PermissionError::GrantedTo { path, grantee, .. } = error else { unreachable!() };
                (path, grantee.sid, grantee.rights, text)
            }
            other => panic!("expected a grant to be refused, got {other:?}"),
        }
    }

    #[test]
    fn a_file_and_folders_only_this_user_can_change_pass() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("provider.dll");
        std::fs::write(&file, b"bytes").unwrap();
        check(&file, Subject::Library).expect("a new file of this user, every folder up to the drive");
        set(&file, "D:(A;;FR;;;WD)(A;;FA;;;SY)(A;;FA;;;BA)").unwrap();
        check(&file, Subject::Library).expect("Everyone reads; the system and administrators write");
    }

    #[test]
    fn everyone_may_write_the_file_or_delete_in_a_folder_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("plugins");
        std::fs::create_dir(&folder).unwrap();
        let file = folder.join("provider.dll");
        std::fs::write(&file, b"bytes").unwrap();

        set(&file, "D:(A;;FA;;;WD)").unwrap();
        let (path, sid, rights, text) = granted(&file);
        assert_eq!((path, sid.as_str()), (file.clone(), "S-1-1-0"), "{text}");
        assert!(rights.starts_with("write"), "{rights}");
        assert!(text.contains("can be changed by Everyone (S-1-1-0)"), "{text}");
        assert!(text.contains("so that account could replace the provider"), "{text}");
        assert!(text.contains("/remove:g *S-1-1-0"), "{text}");

        set(&file, "D:(A;;FR;;;WD)").unwrap();
        check(&file, Subject::Library).expect("reading is fine");
        set(&folder, "D:(A;;FA;;;WD)").unwrap();
        let (path, sid, rights, _) = granted(&file);
        assert_eq!((path, sid.as_str()), (folder.clone(), "S-1-1-0"));
        assert!(rights.contains("delete what it holds"), "{rights}");
        set(&folder, "D:(A;;FA;;;OW)(A;;FR;;;WD)").unwrap();
        check(&file, Subject::Library).expect("the folder is safe again");
    }
}

#[cfg(test)]
mod hint_tests {
    use super::{PermissionError, Subject};

    #[test]
    fn a_path_others_can_change_is_fixed_or_accepted_one_that_cannot_be_checked_only_accepted() {
        let how = "set `provider.allow_insecure_permissions: true`";
        let writable = PermissionError::Writable {
            path: "/p/lib.so".into(),
            mode: 0o646,
            what: "world-writable",
            through: None,
            subject: Subject::Library,
        };
        assert_eq!(writable.accept_hint(how), format!(", or {how}"));
        let unchecked = PermissionError::Unchecked { path: "C:/p/lib.dll".into() };
        assert_eq!(
            unchecked.accept_hint(how),
            format!("; once only you and the administrators can change it and its folders, {how}")
        );
        assert!(unchecked.to_string().starts_with("who may change C:/p/lib.dll cannot be checked"));
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private directory with a safe file in it.
    fn safe_file(dir: &Path) -> PathBuf {
        let safe = dir.join("safe");
        std::fs::create_dir(&safe).unwrap();
        mode(&safe, 0o755);
        let file = safe.join("lib.so");
        std::fs::write(&file, b"x").unwrap();
        mode(&file, 0o644);
        file
    }

    #[test]
    fn a_safe_file_and_a_safe_link_to_it_pass() {
        let dir = tempfile::tempdir().unwrap();
        let file = safe_file(dir.path());
        check(&file, Subject::Library).unwrap();
        let link = dir.path().join("current.so");
        symlink(&file, &link).unwrap();
        check(&link, Subject::Library).unwrap();
        // Relative links, and `..` in the path as written, are walked too.
        let relative = dir.path().join("relative.so");
        symlink("safe/../safe/lib.so", &relative).unwrap();
        check(&relative, Subject::Library).unwrap();
        check(&dir.path().join("safe/../relative.so"), Subject::Library).unwrap();
    }

    #[test]
    fn a_link_in_a_world_writable_directory_is_refused_though_its_target_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let file = safe_file(dir.path());
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let link = open.join("current.so");
        symlink(&file, &link).unwrap();
        mode(&open, 0o757);
        let error = check(&link, Subject::Library).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{} is world-writable (mode 757), so another user could replace the provider; fix it with `chmod go-w {}`",
                open.display(),
                open.display()
            )
        );
        // The canonical path alone is fine: only the path as written shows it.
        check(&file, Subject::Library).unwrap();
        // With the sticky bit, others cannot repoint a link they do not own.
        mode(&open, 0o1777);
        check(&link, Subject::Library).unwrap();
    }

    #[test]
    fn the_directory_a_link_leads_to_is_checked_and_the_link_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = safe_file(dir.path());
        let link = dir.path().join("current.so");
        symlink(&file, &link).unwrap();
        mode(file.parent().unwrap(), 0o757);
        let error = check(&link, Subject::Config).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "{} (reached through the symbolic link {}) is world-writable (mode 757), so another user could rewrite the guardrail config",
                file.parent().unwrap().display(),
                link.display()
            )),
            "{error}"
        );
    }

    #[test]
    fn a_link_loop_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        symlink(&b, &a).unwrap();
        symlink(&a, &b).unwrap();
        let error = check(&a, Subject::Library).unwrap_err();
        assert!(matches!(error, PermissionError::TooManyLinks { .. }), "{error}");
    }

    #[test]
    fn a_missing_entry_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing/here.so");
        let error = check(&missing, Subject::Library).unwrap_err().to_string();
        assert!(error
            .starts_with(&format!("cannot check who may change {}", dir.path().join("nothing").display())));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_link_owned_by_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = safe_file(dir.path());
        let link = dir.path().join("current.so");
        symlink(&file, &link).unwrap();
        // Only root can give a link away; as anyone else there is nothing to test.
        if std::os::unix::fs::lchown(&link, Some(12345), None).is_err() {
            eprintln!("skipped: cannot change a link's owner as this user");
            return;
        }
        let error = check(&link, Subject::Library).unwrap_err().to_string();
        assert!(error.starts_with(&format!("{} belongs to user 12345", link.display())), "{error}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_group_writable_entry_is_refused_unless_the_group_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let file = safe_file(dir.path());
        mode(&file, 0o664);
        // Only root can hand a file to a group it is not in; a group id no
        // account file lists is never private.
        if std::os::unix::fs::chown(&file, None, Some(54321)).is_err() {
            eprintln!("skipped: cannot change a file's group as this user");
            return;
        }
        let error = check(&file, Subject::Library).unwrap_err().to_string();
        assert!(error.starts_with(&format!("{} is group-writable (mode 664)", file.display())), "{error}");
    }

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\nana:x:1000:1000::/home/ana:/bin/sh\nbo:x:1001:100::/home/bo:/bin/sh\ncy:x:1002:100::/home/cy:/bin/sh\n";

    #[test]
    fn a_group_is_private_only_when_its_owner_is_its_only_member() {
        let group = "root:x:0:\nana:x:1000:\nusers:x:100:\ndev:x:2000:ana\nteam:x:2001:ana,bo\n";
        assert!(is_private_group(1000, 1000, PASSWD, group), "ana's own group");
        assert!(is_private_group(2000, 1000, PASSWD, group), "a group of one: ana");
        assert!(!is_private_group(2001, 1000, PASSWD, group), "bo is in it too");
        assert!(!is_private_group(100, 1001, PASSWD, group), "cy has it as primary group");
        assert!(!is_private_group(1000, 1001, PASSWD, group), "not bo's group");
        assert!(!is_private_group(3000, 1000, PASSWD, group), "an unknown group");
        assert!(!is_private_group(1000, 4242, PASSWD, group), "an unknown owner");
        let with_member = "ana:x:1000:bo\n";
        assert!(!is_private_group(1000, 1000, PASSWD, with_member), "bo listed as member");
    }
}
