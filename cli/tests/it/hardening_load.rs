//! A library that is not whole (truncated, or still being written) is never
//! mapped: `check` says so and exits 2 instead of dying by SIGBUS, and
//! under `run --watch` the old guardrail keeps answering.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::cli::{guardhost, stderr, Watched};
use crate::support::{library, write};
use guardhost::{LoadErrorKind, ReloadError, Reloader, ToolStatus};

/// A private copy of the allowlist library, and a config that uses it to
/// deny `bash`.
fn allowlist_copy(dir: &Path) -> (PathBuf, Vec<u8>, PathBuf) {
    let lib = dir.join("libpolicy.so");
    let bytes = std::fs::read(library("guardhost_allowlist")).unwrap();
    std::fs::write(&lib, &bytes).unwrap();
    let yaml = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n",
        lib.display()
    );
    let config = write(dir, "config.yaml", &yaml);
    (lib, bytes, config)
}

/// Half of what the library maps: a debug build's file is mostly debug
/// information past its last loadable segment, so half the file would
/// still hold every segment; half of this never does.
fn half(bytes: &[u8]) -> usize {
    last_load_segment_end(bytes) as usize / 2
}

/// Cuts the file short in place (same inode), as a writer truncating it
/// would.
fn truncate_in_place(path: &Path, len: u64) {
    std::thread::sleep(Duration::from_millis(20));
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn assert_check_refuses(config: &Path, lib: &Path) {
    let out = guardhost(&["check", "--config", config.to_str().unwrap()], None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "no exit code means a signal: {:?}; {err}", out.status);
    assert!(err.starts_with("guardhost: error: "), "{err}");
    assert!(err.contains("the library is truncated or still being written"), "{err}");
    assert!(err.contains(&lib.display().to_string()), "the path is named: {err}");
    assert!(err.contains("loadable segment") || err.contains("program header"), "{err}");
    assert!(err.contains("but the file has"), "expected and actual sizes: {err}");
}

#[test]
fn check_refuses_a_library_truncated_to_half_its_mapped_size() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, bytes, config) = allowlist_copy(dir.path());
    truncate_in_place(&lib, half(&bytes) as u64);
    assert_check_refuses(&config, &lib);
}

#[test]
fn check_refuses_a_library_still_being_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, bytes, config) = allowlist_copy(dir.path());
    // A writer that has written the first half so far, to the same inode.
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(&lib).unwrap();
    file.write_all(&bytes[..half(&bytes)]).unwrap();
    file.flush().unwrap();
    assert_check_refuses(&config, &lib);
    // And once the writer is done, the same file loads.
    file.write_all(&bytes[half(&bytes)..]).unwrap();
    drop(file);
    let out = guardhost(&["check", "--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_library_cut_short_anywhere_in_its_headers_is_refused_not_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, bytes, config) = allowlist_copy(dir.path());
    // Within the ELF header, within the program header table, and just one
    // byte short of the end of the last loadable segment.
    for len in [10, 40, 100, 300] {
        std::fs::write(&lib, &bytes[..len]).unwrap();
        let error = Reloader::open(&config).unwrap_err();
        let ReloadError::Build(guardhost::BuildError::Load(load)) = &error else { panic!("{error:?}") };
        assert!(matches!(load.kind, LoadErrorKind::Truncated { .. }), "{len} bytes: {error}");
    }
    let last_segment_end = last_load_segment_end(&bytes);
    std::fs::write(&lib, &bytes[..last_segment_end as usize - 1]).unwrap();
    let text = Reloader::open(&config).unwrap_err().to_string();
    assert!(
        text.contains(&format!("needs {last_segment_end} bytes, but the file has {}", last_segment_end - 1)),
        "{text}"
    );
    std::fs::write(&lib, &bytes).unwrap();
    Reloader::open(&config).unwrap();
}

/// Where the last `PT_LOAD` segment of a 64-bit little-endian ELF file ends
/// (the platform the tests run on), read independently of the host's parser.
fn last_load_segment_end(bytes: &[u8]) -> u64 {
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as u64;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(&bytes[..6], b"\x7fELF\x02\x01", "a 64-bit little-endian ELF file");
    let (phoff, phnum) = (u64_at(32) as usize, u16_at(56) as usize);
    (0..phnum)
        .map(|i| phoff + i * 56)
        .filter(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == 1)
        .map(|entry| u64_at(entry + 8) + u64_at(entry + 32))
        .max()
        .unwrap()
}

#[test]
fn run_watch_keeps_the_old_guardrail_when_the_library_is_truncated_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, bytes, config) = allowlist_copy(dir.path());
    let log = dir.path().join("stderr.log");
    let mut host = Watched::start(&config, std::fs::File::create(&log).unwrap().into());
    assert_eq!(host.ask("bash").status, ToolStatus::Error);
    assert_eq!(host.ask("ls").status, ToolStatus::Success);

    truncate_in_place(&lib, half(&bytes) as u64);
    // The watcher looks every 200 ms and waits for the file to settle; it
    // then tries the truncated file and refuses it, at most 10 s from now.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log).unwrap().contains("truncated or still being written") {
        assert!(host.child.try_wait().unwrap().is_none(), "the host died: {:?}", host.child.try_wait());
        assert!(Instant::now() < deadline, "the truncated library was never tried");
        std::thread::sleep(Duration::from_millis(50));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("reload failed, still serving the previous guardrail"), "{logged}");
    assert_eq!(host.ask("bash").status, ToolStatus::Error, "the old guardrail keeps answering");
    assert_eq!(host.ask("ls").status, ToolStatus::Success);

    // Restored in place: reloaded (or not), it answers as before, and lives.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&lib, &bytes).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(host.ask("bash").status, ToolStatus::Error);
    assert_eq!(host.ask("ls").status, ToolStatus::Success);
    assert!(host.child.try_wait().unwrap().is_none(), "the host is alive");
    host.stop();
}

#[test]
fn run_watch_waits_for_a_library_written_slowly_in_place_to_settle() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, bytes, config) = allowlist_copy(dir.path());
    let log = dir.path().join("stderr.log");
    let mut host = Watched::start(&config, std::fs::File::create(&log).unwrap().into());
    assert_eq!(host.ask("bash").status, ToolStatus::Error);

    // A writer rewriting the library in place, in 30 pieces 20 ms apart
    // (over half a second, several of the watcher's 200 ms polls): the
    // watcher sees a file that keeps changing and never tries it
    // half-written.
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(&lib).unwrap();
    for piece in bytes.chunks(bytes.len().div_ceil(30)) {
        file.write_all(piece).unwrap();
        file.flush().unwrap();
        assert_eq!(host.ask("bash").status, ToolStatus::Error, "the old guardrail answers meanwhile");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(file);
    // Settled and reloaded (the same policy), or not yet: either way it
    // answers as before, and nothing half-written was ever tried.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(host.ask("bash").status, ToolStatus::Error);
    assert_eq!(host.ask("ls").status, ToolStatus::Success);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("reload failed"), "a half-written library was tried: {logged}");
    assert!(host.child.try_wait().unwrap().is_none(), "the host is alive");
    host.stop();
}

/// The reason the current guardrail gives for `tool`, `None` when allowed.
fn reason(reloader: &Reloader, tool: &str) -> Option<String> {
    let guardrail = reloader.current().expect("a guardrail");
    let call = guardhost::ToolCallRequest::new(tool, serde_json::Map::new()).with_id("c");
    let verdict = guardrail.middleware.check(&call).unwrap();
    (!verdict.allowed()).then(|| verdict.decision.reasons[0].message.to_string())
}

#[cfg(unix)]
#[test]
fn watch_follows_a_repointed_symlink_without_the_config_being_touched() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(library("guardhost_allowlist")).unwrap();
    std::fs::write(dir.path().join("v1.so"), &bytes).unwrap();
    // v2 is the same allowlist, saying its denials in capitals (a same-length
    // patch of the message in its read-only data).
    let needle = b"' is denied";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the allowlist's message");
    let mut v2 = bytes.clone();
    v2[at..at + needle.len()].copy_from_slice(b"' IS DENIED");
    std::fs::write(dir.path().join("v2.so"), &v2).unwrap();
    let current = dir.path().join("current.so");
    std::os::unix::fs::symlink("v1.so", &current).unwrap();
    let yaml = "guardrails:\n  enabled: true\n  provider:\n    use: current.so:AllowlistProvider\n    config: {denied_tools: [bash]}\n";
    let config = write(dir.path(), "config.yaml", yaml);

    let reloader = std::sync::Arc::new(Reloader::open(&config).unwrap());
    assert_eq!(reason(&reloader, "bash").as_deref(), Some("tool 'bash' is denied"));
    let _watcher = std::sync::Arc::clone(&reloader).watch(Duration::from_millis(50)).unwrap();

    // A rollout: repoint the link atomically (a new link renamed over it).
    let repoint = |to: &str| {
        let next = dir.path().join("next.so");
        std::os::unix::fs::symlink(to, &next).unwrap();
        std::fs::rename(&next, &current).unwrap();
    };
    let wait_for = |expected: &str, path: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while reason(&reloader, "bash").as_deref() != Some(expected) {
            assert!(Instant::now() < deadline, "the repointed link was never followed to {path}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let guardhost::ProviderSource::Library { path: loaded, .. } =
            &reloader.current().unwrap().info.source
        else {
            panic!("a library")
        };
        assert_eq!(loaded.file_name().unwrap(), path);
    };
    repoint("v2.so");
    wait_for("tool 'bash' IS DENIED", "v2.so");
    repoint("v1.so");
    wait_for("tool 'bash' is denied", "v1.so");
    assert_eq!(reason(&reloader, "ls"), None);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), yaml, "the config was never touched");
}
