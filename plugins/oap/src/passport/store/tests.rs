//! The store's promise, case by case: a passport replaced, edited in place,
//! deleted, moved with its directory or swapped through symlinks is seen
//! by the next call, under inotify and under the `stat` fallback; an
//! unchanged one costs no `stat` and no read; dropping the store gives its
//! watches back.

use super::*;
use crate::passport::validate::tests::valid;
use crate::passport::Status;
use serde_json::json;

#[test]
fn the_store_rereads_a_changed_file_and_reports_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let store = PassportStore::default();
    assert_eq!(store.get(&path).unwrap_err(), PassportError::NotFound(path.clone()));
    std::fs::write(&path, valid().to_string()).unwrap();
    assert_eq!(store.get(&path).unwrap().status, Status::Active);
    let mut suspended = valid();
    suspended["status"] = json!("suspended");
    std::fs::write(&path, suspended.to_string()).unwrap();
    assert_eq!(store.get(&path).unwrap().status, Status::Suspended);
    std::fs::write(&path, "{").unwrap();
    assert!(store.get(&path).unwrap_err().to_string().contains("is not valid JSON"));
}

/// `doc` with `status`, written aside and renamed over `path`, as
/// editors and deploy tools do.
fn replace(path: &Path, status: &str) {
    let mut doc = valid();
    doc["status"] = json!(status);
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, doc.to_string()).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// The text of a passport with `status`, padded to `len` bytes, so
/// that two versions have the same size.
fn padded(status: &str, len: usize) -> String {
    let mut doc = valid();
    doc["status"] = json!(status);
    let text = doc.to_string();
    format!("{text}{}", " ".repeat(len.saturating_sub(text.len())))
}

fn status(store: &PassportStore, path: &Path) -> Result<Status, PassportError> {
    store.get(path).map(|p| p.status)
}

/// The mode a real store gets here: inotify on Linux (the temporary
/// directory is on a local file system), `stat` elsewhere.
fn expected_mode() -> WatchMode {
    if cfg!(target_os = "linux") {
        WatchMode::Inotify
    } else {
        WatchMode::Stat
    }
}

#[test]
fn a_passport_replaced_by_rename_is_seen_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    replace(&path, "active");
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    for (round, next) in ["suspended", "active", "revoked", "active"].into_iter().enumerate() {
        replace(&path, next);
        assert_eq!(status(&store, &path).unwrap().as_str(), next, "round {round}");
        assert_eq!(store.reads(&path), round as u64 + 2);
    }
}

#[test]
fn every_change_is_seen_by_the_call_right_after_it_while_other_threads_call_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    replace(&path, "active");
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                // (A call between an in-place edit's truncation and its
                // write may find a partial file: any answer will do.)
                while !done.load(Ordering::Relaxed) {
                    let _ = status(&store, &path);
                }
            });
        }
        for round in 0..300 {
            let next = ["suspended", "active", "revoked"][round % 3];
            if round % 2 == 0 {
                replace(&path, next);
            } else {
                let mut doc = valid();
                doc["status"] = json!(next);
                std::fs::write(&path, doc.to_string()).unwrap();
            }
            assert_eq!(status(&store, &path).map(Status::as_str), Ok(next), "round {round}");
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
}

#[test]
fn an_edit_in_place_of_the_same_size_is_seen_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let len = padded("suspended", 0).len();
    std::fs::write(&path, padded("active", len)).unwrap();
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    // Same inode, same size, most likely the same mtime tick.
    std::fs::write(&path, padded("suspended", len)).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    std::fs::write(&path, padded("active", len)).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // Through an open handle, without closing it.
    use std::io::{Seek, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.seek(std::io::SeekFrom::Start(0)).unwrap();
    file.write_all(padded("revoked", len).as_bytes()).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Revoked));
    drop(file);
    // Unreadable: a permission change is an event too (root reads
    // anything, so this only checks that the passport is read again).
    let reads = store.reads(&path);
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&path, permissions).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Revoked));
    assert_eq!(store.reads(&path), reads + 1);
}

#[test]
fn a_deleted_passport_is_not_found_by_the_next_call_and_a_recreated_one_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let store = PassportStore::default();
    // Missing from the start: watched all the same.
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    replace(&path, "active");
    assert_eq!(status(&store, &path), Ok(Status::Active));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    std::fs::write(&path, valid().to_string()).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    std::fs::write(&path, "{").unwrap();
    assert!(store.get(&path).unwrap_err().to_string().contains("is not valid JSON"));
    replace(&path, "suspended");
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
}

#[test]
fn a_passport_whose_directory_is_moved_away_or_deleted_is_not_found_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("etc").join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    let path = agent.join("passport.json");
    replace(&path, "active");
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // The passport's directory moved away.
    std::fs::rename(&agent, dir.path().join("etc").join("agent.old")).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    // Another moved in, with a suspended passport.
    let new = dir.path().join("etc").join("agent.new");
    std::fs::create_dir(&new).unwrap();
    replace(&new.join("passport.json"), "suspended");
    std::fs::rename(&new, &agent).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    // A directory above it replaced.
    let etc = dir.path().join("etc");
    let other = dir.path().join("etc.new");
    std::fs::create_dir_all(other.join("agent")).unwrap();
    replace(&other.join("agent").join("passport.json"), "active");
    std::fs::rename(&etc, dir.path().join("etc.old")).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    std::fs::rename(&other, &etc).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // The directory deleted.
    std::fs::remove_dir_all(&etc).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    std::fs::create_dir_all(&agent).unwrap();
    replace(&path, "revoked");
    assert_eq!(status(&store, &path), Ok(Status::Revoked));
}

#[cfg(unix)]
#[test]
fn a_symlinked_passport_follows_its_links_being_swapped_as_kubernetes_does() {
    use std::os::unix::fs::symlink;
    // A ConfigMap volume: passport.json -> ..data/passport.json,
    // ..data -> ..v1; an update writes ..v2, then renames a new
    // ..data link over the old one.
    let dir = tempfile::tempdir().unwrap();
    for (version, status) in [("..v1", "active"), ("..v2", "suspended")] {
        std::fs::create_dir(dir.path().join(version)).unwrap();
        replace(&dir.path().join(version).join("passport.json"), status);
    }
    symlink("..v1", dir.path().join("..data")).unwrap();
    let path = dir.path().join("passport.json");
    symlink("..data/passport.json", &path).unwrap();
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    assert_eq!(store.watch_mode(&path), Some(expected_mode()));
    symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    // The file the links lead to, edited in place.
    std::fs::write(dir.path().join("..v2").join("passport.json"), valid().to_string()).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // The old version deleted: nothing changes for this path.
    let reads = store.reads(&path);
    std::fs::remove_dir_all(dir.path().join("..v1")).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // The link itself removed.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    assert!(store.reads(&path) > reads);
}

#[test]
fn unchanged_passports_cost_no_stat_and_no_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let missing = dir.path().join("missing.json");
    replace(&path, "active");
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    assert!(status(&store, &missing).is_err());
    if store.watch_mode(&path) != Some(WatchMode::Inotify) {
        return; // not Linux: the fallback is tested below
    }
    // Other files in the directory change meanwhile.
    std::fs::write(dir.path().join("other.json"), "{}").unwrap();
    std::fs::rename(dir.path().join("other.json"), dir.path().join("other2.json")).unwrap();
    let stats = store.stats.load(Ordering::Relaxed);
    for _ in 0..10_000 {
        assert_eq!(status(&store, &path), Ok(Status::Active));
        assert!(status(&store, &missing).is_err());
    }
    assert_eq!(store.stats.load(Ordering::Relaxed), stats, "a stat on the call path");
    assert_eq!((store.reads(&path), store.reads(&missing)), (1, 1), "a passport read again");
    // And the counters do count.
    replace(&path, "suspended");
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    assert_eq!(store.reads(&path), 2);
    assert_eq!(store.stats.load(Ordering::Relaxed), stats + 1);
}

#[test]
fn is_file_answers_as_path_is_file_does_without_a_stat_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let not_a_path = Path::new("ap_hosted_agent_123");
    for store in [PassportStore::default(), PassportStore::without_watches()] {
        let _ = std::fs::remove_file(&path);
        assert!(!store.is_file(&path));
        assert!(!store.is_file(not_a_path));
        assert!(!store.is_file(dir.path()));
        replace(&path, "active");
        assert!(store.is_file(&path), "{:?}", store.watch_mode(&path));
        // (The directory changed: it is read again once.)
        assert!(!store.is_file(dir.path()));
        let reads = store.reads(&path);
        let stats = store.stats.load(Ordering::Relaxed);
        for _ in 0..100 {
            assert!(store.is_file(&path) && !store.is_file(not_a_path) && !store.is_file(dir.path()));
            assert_eq!(status(&store, &path), Ok(Status::Active));
        }
        let per_call = store.stats.load(Ordering::Relaxed) - stats;
        if store.watch_mode(&path) == Some(WatchMode::Inotify) {
            assert_eq!(per_call, 0);
            assert_eq!(store.reads(&path), reads);
        }
        std::fs::remove_file(&path).unwrap();
        assert!(!store.is_file(&path));
        std::fs::create_dir(&path).unwrap();
        assert!(!store.is_file(&path));
        std::fs::remove_dir(&path).unwrap();
    }
}

#[test]
fn the_stat_fallback_notices_every_change_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    let store = PassportStore::without_watches();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    assert_eq!(store.watch_mode(&path), Some(WatchMode::Stat));
    replace(&path, "active");
    assert_eq!(status(&store, &path), Ok(Status::Active));
    replace(&path, "suspended");
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    // In place, same size: caught because a fresh file is not trusted.
    let len = padded("suspended", 0).len();
    std::fs::write(&path, padded("active", len)).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    std::fs::write(&path, padded("suspended", len)).unwrap();
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(status(&store, &path), Err(PassportError::NotFound(path.clone())));
    replace(&path, "active");
    assert_eq!(status(&store, &path), Ok(Status::Active));
    // One stat per call.
    let stats = store.stats.load(Ordering::Relaxed);
    for _ in 0..100 {
        assert_eq!(status(&store, &path), Ok(Status::Active));
    }
    assert!(store.stats.load(Ordering::Relaxed) >= stats + 100);
    assert_eq!(store.watch_mode(&path), Some(WatchMode::Stat));
}

/// The inotify descriptor's watches, as `/proc/self/fdinfo` lists them:
/// `(inode, device)` pairs.
#[cfg(target_os = "linux")]
fn watched_inodes(fd: i32) -> Vec<(u64, u64)> {
    let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else { return Vec::new() };
    let field = |line: &str, key: &str| {
        line.split(' ').find_map(|f| f.strip_prefix(key)).and_then(|v| u64::from_str_radix(v, 16).ok())
    };
    info.lines()
        .filter(|l| l.starts_with("inotify "))
        .filter_map(|l| Some((field(l, "ino:")?, field(l, "sdev:")?)))
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn dropping_the_store_closes_its_inotify_descriptor_and_its_watches() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("passport.json");
    replace(&path, "active");
    let store = PassportStore::default();
    assert_eq!(status(&store, &path), Ok(Status::Active));
    let fd = store.inotify_fd().unwrap();
    let meta = std::fs::metadata(dir.path()).unwrap();
    // fdinfo shows the device as the kernel's dev_t (major << 20 | minor).
    let dev = |m: &std::fs::Metadata| {
        let (major, minor) = ((m.dev() >> 8) & 0xfff, (m.dev() & 0xff) | ((m.dev() >> 12) & 0xfff00));
        (major << 20) | minor
    };
    let ours = (meta.ino(), dev(&meta));
    assert!(watched_inodes(fd).contains(&ours), "{ours:?} not in {:?}", watched_inodes(fd));
    // Watches given back when the path's chain changes.
    let file = (std::fs::metadata(&path).unwrap().ino(), dev(&meta));
    assert!(watched_inodes(fd).contains(&file));
    replace(&path, "suspended");
    assert_eq!(status(&store, &path), Ok(Status::Suspended));
    assert!(!watched_inodes(fd).contains(&file), "the replaced file is still watched");
    drop(store);
    // The descriptor is closed (or, reused by another test meanwhile,
    // does not watch this directory).
    assert!(!watched_inodes(fd).contains(&ours), "the watch outlived the store");
}
