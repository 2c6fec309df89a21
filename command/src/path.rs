//! Paths normalised once, lexically, for every check: repeated slashes and
//! `.` removed, `..` taken against the folder before it (or the known
//! working folder), `/proc/self/root` and `/proc/<pid>/root` read as `/`,
//! the descriptors of `/dev/fd/N` and `/proc/*/fd/N` named as such.
//! Symbolic links are not followed (nothing is read from the disk): a
//! `..` after a name that may be a link is taken lexically, as the shell's
//! `cd` takes it, and the result says so.

/// A path after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normal {
    /// The normalised path: absolute when the input was, or was relative
    /// to a known working folder; `~` kept at the start.
    pub path: String,
    /// The path names a descriptor (`/dev/stdin`, `/dev/fd/0`,
    /// `/proc/self/fd/3`): its content is whatever the descriptor holds.
    pub descriptor: bool,
    /// A `..` climbed above the start of a relative path with no known
    /// working folder: where it lands cannot be said.
    pub escapes: bool,
}

/// Normalises `path`; `cwd` is the working folder when known (an
/// absolute, normalised path).
pub fn normalize(path: &str, cwd: Option<&str>) -> Normal {
    let home = path == "~" || path.starts_with("~/");
    let joined;
    let (rest, absolute) = if let Some(rest) = path.strip_prefix('/') {
        (rest, true)
    } else if home {
        (&path[1..], false)
    } else if let Some(cwd) = cwd.filter(|c| c.starts_with('/')) {
        joined = format!("{cwd}/{path}");
        (&joined[1..], true)
    } else {
        (path, false)
    };
    let mut parts: Vec<&str> = Vec::new();
    let mut escapes = false;
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() && !absolute && !home {
                    escapes = true;
                }
            }
            p => parts.push(p),
        }
        // `/proc/self/root`, `/proc/1/root`, `/proc/thread-self/root`: `/`.
        if absolute && parts.len() == 3 && parts[0] == "proc" && parts[2] == "root" && is_process(parts[1]) {
            parts.clear();
        }
    }
    let descriptor = absolute
        && match parts.as_slice() {
            ["dev", "stdin" | "stdout" | "stderr" | "tty"] => true,
            ["dev", "fd", _] => true,
            ["proc", process, "fd", _] => is_process(process),
            _ => false,
        };
    let body = parts.join("/");
    let path = if absolute {
        format!("/{body}")
    } else if home {
        if body.is_empty() {
            "~".to_owned()
        } else {
            format!("~/{body}")
        }
    } else if escapes {
        // Keep the climb visible: `../x` stays `../x`.
        let ups = path
            .split('/')
            .take_while(|p| *p == ".." || *p == "." || p.is_empty())
            .filter(|p| *p == "..")
            .count();
        let mut out = "../".repeat(ups.max(1));
        out.push_str(&body);
        out
    } else if body.is_empty() {
        ".".to_owned()
    } else {
        body
    };
    Normal { path, descriptor, escapes }
}

/// `self`, `thread-self` or a process number.
fn is_process(part: &str) -> bool {
    matches!(part, "self" | "thread-self") || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `path` (normalised or not) is a network connection bash opens
/// itself (`/dev/tcp/host/port`, `/dev/udp/...`).
pub fn is_network(path: &str) -> bool {
    let normal = normalize(path, None);
    normal.path.starts_with("/dev/tcp/") || normal.path.starts_with("/dev/udp/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(path: &str) -> String {
        normalize(path, None).path
    }

    #[test]
    fn spellings_of_one_path_are_one_path() {
        assert_eq!(n("//dev/sda"), "/dev/sda");
        assert_eq!(n("/dev/./sda"), "/dev/sda");
        assert_eq!(n("/mnt/../etc/"), "/etc");
        assert_eq!(n("/proc/self/root/etc"), "/etc");
        assert_eq!(n("/proc/1/root/"), "/");
        assert_eq!(n("/proc/self/root/proc/self/root/x"), "/x");
        assert_eq!(n("/proc/self/cwd/x"), "/proc/self/cwd/x", "the working folder is not known here");
        assert_eq!(n("/.."), "/");
        assert_eq!(n("~/a/../.ssh"), "~/.ssh");
        assert_eq!(n("~/.."), "~");
        assert_eq!(n("a/./b//c"), "a/b/c");
        assert_eq!(n("."), ".");
    }

    #[test]
    fn climbs_and_descriptors_are_marked() {
        let up = normalize("x/../../../../*", None);
        assert!(up.escapes);
        assert_eq!(up.path, "../*");
        assert!(!normalize("x/../y", None).escapes);
        let known = normalize("x/../../../../*", Some("/home/agent/work"));
        assert_eq!((known.path.as_str(), known.escapes), ("/*", false));
        assert_eq!(normalize("../etc", Some("/mnt")).path, "/etc");
        for fd in ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/42/fd/3", "//dev//stdin"] {
            assert!(normalize(fd, None).descriptor, "{fd}");
        }
        assert!(!normalize("/dev/sda", None).descriptor);
        assert!(is_network("/dev/tcp/example.com/80"));
        assert!(is_network("/dev//./tcp/h/1"));
    }
}
