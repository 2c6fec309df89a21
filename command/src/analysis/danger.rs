//! The built-in dangerous operations, on one program and its arguments:
//! recursive deletion of what holds everything, disk writes, filesystem
//! creation, world-writable modes and owner changes of top-level paths.

use super::programs::basename;
use super::{DANGEROUS, UNRESOLVED};
use crate::argv;
use crate::finding::Finding;
use crate::grammar::grammar;
use crate::path;
use crate::shell::Word;

/// Whether `path` is `/`, a top-level directory (`/etc`, `/mnt/`), the
/// home directory (`~`, `$HOME`), a glob over one of them (`/*`, `/e*`,
/// `/{a,b}`), or only `..` steps; after `.`, `..` and repeated slashes are
/// resolved as the kernel would on names.
pub fn top_level(path: &str) -> bool {
    let normal;
    let path = if path.starts_with('/') {
        // `/proc/self/root/*` is `/*`; `//`, `/./` and `..` resolved.
        let glob = path.ends_with("/*") || path.ends_with("/.*");
        normal = format!("{}{}", path::normalize(path, None).path, if glob { "/*" } else { "" });
        normal.as_str()
    } else {
        path
    };
    let rooted = path.starts_with('/');
    let path = path.trim_end_matches("/*").trim_end_matches("/.*");
    if path.is_empty() {
        return rooted;
    }
    let home = path == "~" || path.starts_with("~/") || (path.starts_with('~') && !path.contains('/'));
    let absolute = path.starts_with('/') || home;
    if !absolute {
        // Relative: a path that climbs out of the working directory, to
        // the folder above or a glob there (`..`, `../*`, and
        // `x/../../../../*`, which climbs through a real folder first).
        let normal = path::normalize(path, None);
        if !normal.escapes {
            return false;
        }
        let below = normal.path.trim_start_matches("../");
        return below.is_empty()
            || below == ".."
            || below.split('/').next().is_some_and(|p| p.contains(['*', '?', '[', '{']));
    }
    let rest = if home { path.split_once('/').map_or("", |(_, r)| r) } else { path };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let glob_first = parts.first().is_some_and(|p| p.contains(['*', '?', '[', '{']));
    if home {
        return parts.is_empty() || glob_first;
    }
    parts.len() <= 1 || glob_first
}

/// Whether `path` names a disk (`/dev/sda`, `/dev/nvme0n1`, `/dev/mmcblk0`
/// and their partitions, device-mapper and RAID devices).
pub fn block_device(path: &str) -> bool {
    let normal = path::normalize(path, None).path;
    let Some(device) = normal.strip_prefix("/dev/") else { return false };
    const DISKS: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "mapper/", "nbd", "zd",
        "rbd", "bcache",
    ];
    DISKS.iter().any(|d| device.starts_with(d)) || device.starts_with("disk/by-")
}

/// The built-in dangerous operations, on one program and its arguments:
/// recursive deletion of `/`, a top-level directory or the home directory
/// (or of what is known only when it runs); disk writes and filesystem
/// creation; recursive or root-wide world-writable modes and recursive
/// owner changes of top-level directories. `cd_away` says the command
/// changes to a directory that is top-level or unknown.
pub fn dangerous(words: &[Word], cd_away: bool) -> Option<Finding> {
    let name = basename(words.first()?.lit()?);
    let args = &words[1..];
    let lits = || args.iter().filter_map(Word::lit);
    let (flags, operands) = split_flags(args);
    match name {
        "rm" => {
            // Read as `rm` reads its options: `--recur`, `--r`, `-Rf`.
            let reading = argv::read(grammar("rm")?, args);
            let no_preserve_root = reading.has("no-preserve-root");
            if !reading.has("recursive") && !no_preserve_root {
                return None;
            }
            let destructive = || Finding::new(DANGEROUS, "Destructive file operation: rm -rf / or rm -rf /*");
            if no_preserve_root {
                return Some(destructive());
            }
            for (operand, _) in &reading.operands {
                match operand {
                    Word::Lit(target) => {
                        if top_level(target) || cd_away && relative_everything(target) {
                            return Some(destructive());
                        }
                    }
                    Word::Dyn(d) => {
                        return Some(if top_level(&d.without) && !d.without.is_empty() {
                            destructive()
                        } else {
                            Finding::new(
                                UNRESOLVED,
                                "Recursive deletion of a path that is known only when it runs",
                            )
                        })
                    }
                }
            }
            None
        }
        "find" => {
            let deletes = lits().any(|w| w == "-delete");
            if !deletes {
                return None;
            }
            // The starting paths, after `-P`, `-L`, `-H` and `-D`.
            let reading = argv::read(grammar("find")?, args);
            let starts: Vec<&Word> = reading.operands.iter().map(|(w, _)| *w).collect();
            let root = starts.iter().any(|w| match w {
                Word::Lit(p) => top_level(p) || cd_away && relative_everything(p),
                Word::Dyn(_) => true,
            }) || (starts.is_empty() && cd_away);
            root.then(|| {
                Finding::new(
                    DANGEROUS,
                    "Destructive file operation: find -delete on / or a top-level directory",
                )
            })
        }
        "dd" => {
            let reads_device = lits().any(|w| w.starts_with("if=/dev/"));
            let writes_disk = lits().any(|w| w.strip_prefix("of=").is_some_and(block_device))
                || args.iter().any(|w| matches!(w, Word::Dyn(d) if d.without.starts_with("of=")));
            (reads_device || writes_disk)
                .then(|| Finding::new(DANGEROUS, "Dangerous disk operation: dd if=/dev/"))
        }
        n if n.starts_with("mkfs")
            || matches!(
                n,
                "mke2fs" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "mkfatfs" | "mformat" | "mkudffs"
            )
            || n == "mkswap" && operands.iter().any(|w| w.lit().is_some_and(block_device)) =>
        {
            Some(Finding::new(DANGEROUS, "Filesystem creation: mkfs"))
        }
        // Encryption headers written or erased make a disk unreadable.
        "cryptsetup"
            if lits()
                .any(|w| matches!(w.to_ascii_lowercase().as_str(), "luksformat" | "erase" | "lukserase")) =>
        {
            Some(Finding::new(DANGEROUS, "Dangerous disk operation: cryptsetup formats or erases a device"))
        }
        // `dd`'s forensic forks read `if=` and `of=` as `dd` does.
        "dcfldd" | "dc3dd" => dangerous(&[&[Word::Lit("dd".into())], args].concat(), cd_away),
        "setfacl" => {
            // An ACL entry giving others (`o::`, `other::`) write, recursive
            // or on a top-level path.
            let recursive = lits().any(|w| w == "-R" || w == "--recursive" || short(w, 'R'));
            let world = lits().any(|w| {
                w.split(',').any(|entry| {
                    let entry = entry.trim_start_matches("d:").trim_start_matches("default:");
                    (entry.starts_with("o:") || entry.starts_with("other:"))
                        && entry.rsplit(':').next().is_some_and(|p| p.contains('w'))
                })
            });
            let top = operands.iter().any(|w| w.lit().is_some_and(top_level));
            (world && (recursive || top))
                .then(|| Finding::new(DANGEROUS, "Recursive world-writable permissions (setfacl o::rwx)"))
        }
        "shred" | "wipefs" | "blkdiscard" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "sgdisk" | "gdisk"
        | "tee" | "cp" | "mv" | "cat" | "badblocks" | "hdparm" | "pv" => {
            let write_target: Vec<&Word> = match name {
                "tee" => operands.clone(),
                "cp" | "mv" | "cat" => {
                    operands.last().copied().into_iter().filter(|_| name != "cat").collect()
                }
                _ => operands.clone(),
            };
            write_target
                .iter()
                .any(|w| w.lit().is_some_and(block_device))
                .then(|| Finding::new(DANGEROUS, "Dangerous disk operation: write to a block device"))
        }
        "chmod" | "chown" | "chgrp" => {
            // Read as the program reads its options (`--recur`, `-R`).
            let reading = argv::read(grammar(name)?, args);
            let recursive = reading.has("recursive");
            // `--reference` copies another file's mode, which the command
            // does not show: every operand is then a target.
            let reference = reading.has("reference");
            let operands: Vec<&Word> = reading.operands.iter().map(|(w, _)| *w).collect();
            let (mode, targets) = if name == "chmod" && !reference {
                (
                    operands.first().and_then(|w| w.lit()).unwrap_or_default(),
                    operands.get(1..).unwrap_or_default(),
                )
            } else {
                ("", operands.get(usize::from(name != "chmod")..).unwrap_or_default())
            };
            let world_writable = name == "chmod"
                && (reference || world_writable(mode) || flags.iter().any(|f| world_writable(f)));
            let top = targets.iter().any(|w| match w {
                Word::Lit(p) => top_level(p),
                Word::Dyn(d) => top_level(&d.without),
            });
            if world_writable && (recursive || top) {
                return Some(Finding::new(DANGEROUS, "Recursive world-writable permissions (chmod -R 777)"));
            }
            (recursive && top)
                .then(|| Finding::new(DANGEROUS, format!("Recursive {name} of / or a top-level directory")))
        }
        _ => None,
    }
}

/// `*`, `.`, `./*`, `.*`, or a glob over the entries (`[a-z]*`): what a
/// recursive deletion takes from the working directory.
fn relative_everything(path: &str) -> bool {
    matches!(path, "." | "./" | "./*" | ".*" | "*/" | "./.*")
        // Any glob over the folder's entries: `*`, `[a-z]*`, `?*`.
        || path.trim_start_matches("./").split('/').next().is_some_and(|p| p.contains(['*', '?', '[']))
}

/// A short flag cluster holding `letter` (`-rf` holds `r`).
fn short(flag: &str, letter: char) -> bool {
    flag.starts_with('-') && !flag.starts_with("--") && flag[1..].contains(letter)
}

/// The flags and the operands of a program's arguments (flags stop at
/// `--`).
fn split_flags(args: &[Word]) -> (Vec<&str>, Vec<&Word>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut done = false;
    for arg in args {
        match arg.lit() {
            Some("--") if !done => done = true,
            Some(w) if !done && w.starts_with('-') && w.len() > 1 => flags.push(w),
            _ => operands.push(arg),
        }
    }
    (flags, operands)
}

/// Whether a `chmod` mode lets everyone write: octal with the others'
/// write bit (`777`, `0666`), or a symbolic clause giving `o` or `a` the
/// `w` permission or a copy of another class's (`a+rwx`, `o=w`, `ugo+w`,
/// `go=u`).
fn world_writable(mode: &str) -> bool {
    let mode = mode.trim_start_matches('-');
    if !mode.is_empty() && mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return mode.as_bytes().last().is_some_and(|d| (d - b'0') & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let op = clause.find(['+', '=']);
        let Some(op) = op else { return false };
        let who = &clause[..op];
        let perms = &clause[op + 1..];
        // `o=u`, `go+g`: others get the owner's or the group's
        // permissions, which may include write.
        (who.contains('o') || who.contains('a')) && perms.contains(['w', 'u', 'g'])
    })
}
