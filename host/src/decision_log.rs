//! The decision log (`guardrails.decision_log`): every decided call, allowed
//! ones too, as one JSON line each, written by a thread of its own.
//!
//! On the call path an entry's fields are copied into an owned
//! [`Entry`] and handed to a bounded queue; the writer thread serialises
//! the entries that have queued and appends them to the file as whole
//! lines in one write, rotating the file when it passes its size. When the
//! queue is full, `when_full` decides: `drop` counts the entry as dropped
//! ([`DecisionLog::dropped`], `guardhost_decision_log_dropped_total`) and
//! the call goes on; `wait` makes the call wait for room. Nothing queued is
//! lost at a clean exit ([`DecisionLog::flush`], and the drop of the last
//! handle); a crash loses what was queued (at most `buffer` entries, the
//! writer keeps up within milliseconds).
//!
//! Argument values are logged only with `args: true`, and then every value
//! a `mask` pattern reaches (`password` at any depth, `headers.authorization`,
//! `list[*].token`: see [`mask`]) is written as `"***"`. Reason messages are
//! never logged (a provider's message can quote the arguments): only the
//! codes.

pub mod mask;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use std::borrow::Cow;

use self::mask::MaskPattern;
use crate::audit::AuditProvider;
use crate::config::Mode;
pub use crate::config::{DecisionLogConfig, WhenFull};
use crate::request::{CallView, GuardrailDecision};

/// One decided call, as the log writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique per decision (the audit log's id scheme).
    pub decision_id: String,
    /// When the call was decided (the request's timestamp).
    pub time: String,
    /// From the runtime context.
    pub run_id: Option<String>,
    /// From the runtime context.
    pub thread_id: Option<String>,
    /// The call's id.
    pub tool_call_id: Option<String>,
    /// The tool.
    pub tool: String,
    /// `allow`, `deny`, `ask` (held until a human approves it), `rewrite`
    /// (allowed, with other arguments), `interrupt`, or `error` (the
    /// provider failed and the decision was the caller's: a DeerFlow
    /// provider).
    pub outcome: String,
    /// `enforce`, `warn` or `observe`.
    pub mode: String,
    /// In `warn` or `observe` mode: the call was allowed, but would have
    /// been denied.
    pub would_deny: bool,
    /// Every reason's code (with `would_deny`: those of the denial it
    /// would have been).
    pub reason_codes: Vec<String>,
    /// The deciding policy.
    pub policy_id: Option<String>,
    /// The provider failed (the middleware decided by `fail_closed`).
    pub provider_error: bool,
    /// The provider's name.
    pub provider: String,
    /// The SHA-256 of its library (`None` for a built-in provider).
    pub provider_sha256: Option<String>,
    /// How long deciding took, in microseconds.
    pub latency_us: f64,
    /// The arguments, masked (only with `args: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// In a chain: the entry whose decision this is (`provider` names its
    /// provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// In a chain: every entry asked, in order, with its outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainStep>,
}

/// One step of a chain's decision, as the decision log shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChainStep {
    /// The guard's name.
    pub entry: String,
    /// `allow`, `deny`, `ask`, `rewrite`, `approved` (its ask was
    /// approved), `would_deny` / `would_ask` / `would_rewrite` (in `warn`
    /// or `observe` mode), `error_allow` (its provider failed, and it fails
    /// open) or `error_deny` (failed, and it fails closed).
    pub outcome: String,
    /// The first reason's code.
    pub code: String,
}

/// How a call ended, as [`DecisionLog::record_call`] takes it.
#[derive(Debug, Clone, Copy)]
pub enum Decided<'a> {
    /// A decision (and whether the provider failed, so that `fail_closed`
    /// made it).
    Decision(&'a GuardrailDecision, bool),
    /// The provider raised an interrupt.
    Interrupt,
    /// The provider failed and the decision is someone else's to make (a
    /// DeerFlow provider: DeerFlow's `fail_closed` decides).
    ProviderError,
}

enum Message {
    Entry(Box<Entry>),
    Flush(SyncSender<()>),
}

/// An open decision log: the queue and its writer thread.
pub struct DecisionLog {
    queue: SyncSender<Message>,
    when_full: WhenFull,
    args: bool,
    mask: Vec<MaskPattern>,
    dropped: Arc<AtomicU64>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLog").field("dropped", &self.dropped()).finish_non_exhaustive()
    }
}

impl DecisionLog {
    /// Opens (appends to) the log `config` describes, its relative path
    /// taken from `base_dir`, and starts its writer thread. A `mask`
    /// pattern that cannot be read is an [`std::io::ErrorKind::InvalidInput`]
    /// error saying why.
    pub fn open(config: &DecisionLogConfig, base_dir: &Path) -> std::io::Result<DecisionLog> {
        let mask = config
            .mask
            .iter()
            .enumerate()
            .map(|(n, pattern)| {
                MaskPattern::parse(pattern).map_err(|error| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("`mask` pattern {} (counting from 1): {error}", n + 1),
                    )
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let path = crate::paths::join_relative(base_dir, &config.path);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let written = file.metadata()?.len();
        let (queue, receiver) = mpsc::sync_channel(config.buffer.max(1));
        let rotation = Rotation { path, max_bytes: config.max_bytes.max(1), keep: config.keep };
        let writer = std::thread::Builder::new()
            .name("guardhost-decision-log".into())
            .spawn(move || write_entries(receiver, file, written, rotation))?;
        Ok(DecisionLog {
            queue,
            when_full: config.when_full,
            args: config.args,
            mask,
            dropped: Arc::new(AtomicU64::new(0)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The arguments as the log writes them: masked where `mask` says.
    pub fn masked(&self, args: &Map<String, Value>) -> Value {
        let mut args = Value::Object(args.clone());
        for pattern in &self.mask {
            pattern.apply(&mut args);
        }
        args
    }

    /// Records the call `view` shows, decided as `decided` in `mode` by
    /// `provider`, in `took`.
    pub fn record_call(
        &self,
        view: &CallView<'_>,
        decided: Decided<'_>,
        mode: Mode,
        provider: &AuditProvider,
        took: Duration,
    ) {
        self.record(self.entry(view, decided, mode, provider, took));
    }

    /// [`Self::record_call`] for a chain's decision: the deciding entry
    /// (`decided_by`, the name its step has) and every entry asked.
    pub fn record_chain_call(
        &self,
        view: &CallView<'_>,
        decided: Decided<'_>,
        mode: Mode,
        provider: &AuditProvider,
        took: Duration,
        chain: Vec<ChainStep>,
    ) {
        let mut entry = self.entry(view, decided, mode, provider, took);
        entry.decided_by = match decided {
            Decided::Decision(decision, _) => {
                decision.metadata.get("decided_by").and_then(Value::as_str).map(str::to_owned)
            }
            _ => None,
        };
        entry.chain = chain;
        self.record(entry);
    }

    fn entry(
        &self,
        view: &CallView<'_>,
        decided: Decided<'_>,
        mode: Mode,
        provider: &AuditProvider,
        took: Duration,
    ) -> Entry {
        let owned = |text: &Option<Cow<'_, str>>| text.as_deref().map(str::to_owned);
        let (outcome, decision, provider_error) = match decided {
            Decided::Decision(decision, provider_error) => {
                (crate::outcome::outcome_of(decision), Some(decision), provider_error)
            }
            Decided::Interrupt => ("interrupt", None, false),
            Decided::ProviderError => ("error", None, true),
        };
        Entry {
            decision_id: crate::audit::decision_id(),
            // Empty when no provider reads the call's time: then it is now.
            time: match view.timestamp {
                "" => crate::request::Timestamp::now().as_str().to_owned(),
                time => time.to_owned(),
            },
            run_id: owned(&view.attribution.run_id),
            thread_id: owned(&view.attribution.thread_id),
            tool_call_id: view.tool_call_id.map(str::to_owned),
            tool: view.tool_name.to_owned(),
            outcome: outcome.to_owned(),
            mode: mode.as_str().to_owned(),
            would_deny: decision.is_some_and(|d| d.allow && d.metadata.contains_key("would_deny")),
            reason_codes: decision.map(reason_codes).unwrap_or_default(),
            policy_id: decision.and_then(|d| d.policy_id.clone()),
            provider_error,
            provider: provider.name.clone(),
            provider_sha256: provider.sha256.clone(),
            latency_us: took.as_secs_f64() * 1e6,
            args: self.args.then(|| self.masked(view.tool_input)),
            decided_by: None,
            chain: Vec::new(),
        }
    }

    /// Queues `entry` (see `when_full`).
    pub fn record(&self, entry: Entry) {
        let message = Message::Entry(Box::new(entry));
        match self.when_full {
            WhenFull::Wait => {
                let _ = self.queue.send(message);
            }
            WhenFull::Drop => match self.queue.try_send(message) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::warn!("the decision log's queue is full: entries are dropped (and counted)");
                    }
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }

    /// Entries dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Returns once every entry recorded before it is in the file.
    pub fn flush(&self) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(30));
        }
    }
}

impl Drop for DecisionLog {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has written the rest.
        let (queue, _) = mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.queue, queue));
        if let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

/// A decision's reason codes; for one that shadow mode let through, the
/// codes of the denial it would have been (the decision's own reason is
/// only `guardhost.shadow`).
fn reason_codes(decision: &GuardrailDecision) -> Vec<String> {
    let would_deny =
        decision.metadata.get("would_deny").and_then(|w| w.get("reasons")).and_then(Value::as_array);
    match would_deny {
        Some(reasons) if decision.allow => {
            reasons.iter().filter_map(|r| r.get("code").and_then(Value::as_str).map(str::to_owned)).collect()
        }
        _ => decision.reasons.iter().map(|r| r.code.to_string()).collect(),
    }
}

struct Rotation {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
}

impl Rotation {
    /// `path.{keep-1}` → `path.{keep}`, ..., `path` → `path.1`; a new file.
    fn rotate(&self) -> std::io::Result<File> {
        let numbered = |n: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(numbered(n), numbered(n + 1));
            }
            std::fs::rename(&self.path, numbered(1))?;
        }
        OpenOptions::new().create(true).append(true).open(&self.path)
    }
}

/// The writer thread: everything queued, a batch at a time, as whole lines.
fn write_entries(receiver: Receiver<Message>, mut file: File, mut written: u64, rotation: Rotation) {
    let mut batch = Vec::with_capacity(64 << 10);
    let mut flushes = Vec::new();
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Entry(entry) => {
                    if serde_json::to_writer(&mut batch, &entry).is_ok() {
                        batch.push(b'\n');
                    }
                }
                Message::Flush(done) => flushes.push(done),
            }
            if batch.len() < 1 << 20 {
                next = receiver.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            if written > 0 && written + batch.len() as u64 > rotation.max_bytes {
                match rotation.rotate() {
                    Ok(new) => {
                        file = new;
                        written = 0;
                    }
                    Err(error) => tracing::error!("cannot rotate the decision log: {error}"),
                }
            }
            match file.write_all(&batch) {
                Ok(()) => written += batch.len() as u64,
                Err(error) => tracing::error!("cannot write the decision log: {error}"),
            }
            batch.clear();
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> DecisionLogConfig {
        DecisionLogConfig {
            path: dir.join("decisions.jsonl"),
            args: true,
            mask: vec!["password".into(), "headers.authorization".into(), "env.*".into()],
            when_full: WhenFull::Wait,
            buffer: 16,
            max_bytes: 1 << 20,
            keep: 2,
        }
    }

    fn entry(n: usize) -> Entry {
        Entry {
            decision_id: format!("id-{n}"),
            time: "2026-12-02T00:00:00+00:00".into(),
            run_id: None,
            thread_id: Some("t".into()),
            tool_call_id: Some(format!("c{n}")),
            tool: "bash".into(),
            outcome: "deny".into(),
            mode: "enforce".into(),
            would_deny: false,
            reason_codes: vec!["oap.tool_not_allowed".into()],
            policy_id: None,
            provider_error: false,
            provider: "allowlist".into(),
            provider_sha256: None,
            latency_us: 1.5,
            args: None,
            decided_by: None,
            chain: Vec::new(),
        }
    }

    fn lines(path: &Path) -> Vec<Entry> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn masked_values_are_stars_and_nothing_else_changes() {
        let dir = tempfile::tempdir().unwrap();
        let log = DecisionLog::open(&config(dir.path()), dir.path()).unwrap();
        let args = serde_json::json!({
            "password": "hunter2", "user": "ann",
            "headers": {"authorization": "Bearer x", "accept": "*/*"},
            "env": {"A": "1", "B": {"c": 2}}, "nested": {"Password": {"deep": "a bare key, at any depth"}}
        });
        let masked = log.masked(args.as_object().unwrap());
        assert_eq!(
            masked,
            serde_json::json!({
                "password": "***", "user": "ann",
                "headers": {"authorization": "***", "accept": "*/*"},
                "env": {"A": "***", "B": "***"}, "nested": {"Password": "***"}
            })
        );
    }

    #[test]
    fn every_entry_is_written_once_in_order_from_many_threads_and_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let log = Arc::new(DecisionLog::open(&config, dir.path()).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        log.record(Entry { decision_id: format!("t{t}-{i}"), ..entry(i) });
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        log.flush();
        let written = lines(&config.path);
        assert_eq!(written.len(), 2000);
        for t in 0..4 {
            let prefix = format!("t{t}-");
            let ids: Vec<String> = written
                .iter()
                .filter(|e| e.decision_id.starts_with(&prefix))
                .map(|e| e.decision_id.clone())
                .collect();
            let expected: Vec<String> = (0..500).map(|i| format!("t{t}-{i}")).collect();
            assert_eq!(ids, expected, "thread {t}'s entries in its order");
        }
        assert_eq!(log.dropped(), 0, "`wait` drops nothing");
    }

    #[cfg(unix)] // a FIFO stands in for a reader that stops reading
    #[test]
    fn a_full_queue_drops_and_counts_with_drop_and_a_drop_of_the_log_writes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        // A FIFO read only later: once its 64 KiB are full, the writer
        // blocks, the queue of 4 fills, and entries are dropped.
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut pipe = File::open(&fifo).unwrap();
                std::thread::sleep(Duration::from_millis(500));
                let mut text = String::new();
                std::io::Read::read_to_string(&mut pipe, &mut text).unwrap();
                text
            })
        };
        let config =
            DecisionLogConfig { path: fifo, when_full: WhenFull::Drop, buffer: 4, ..config(dir.path()) };
        let log = DecisionLog::open(&config, dir.path()).unwrap();
        for i in 0..2000 {
            log.record(entry(i));
        }
        let dropped = log.dropped();
        assert!(dropped > 0 && dropped < 2000, "{dropped}");
        drop(log);
        let text = reader.join().unwrap();
        assert_eq!(text.lines().count() as u64, 2000 - dropped, "every entry queued was written, whole");
    }

    #[test]
    fn the_file_is_rotated_past_its_size_keeping_that_many() {
        let dir = tempfile::tempdir().unwrap();
        let config = DecisionLogConfig { max_bytes: 2_000, keep: 2, ..config(dir.path()) };
        let log = DecisionLog::open(&config, dir.path()).unwrap();
        for i in 0..100 {
            log.record(entry(i));
            if i % 10 == 9 {
                log.flush();
            }
        }
        log.flush();
        let path = &config.path;
        let rotated = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
        assert!(rotated(1).is_file() && rotated(2).is_file() && !rotated(3).exists());
        for file in [path.clone(), rotated(1), rotated(2)] {
            let size = std::fs::metadata(&file).unwrap().len();
            assert!(size <= 2_000 + 4_000, "{}: {size}", file.display());
            assert!(!lines(&file).is_empty(), "whole lines in {}", file.display());
        }
        // The newest entries are in the current file.
        assert_eq!(lines(path).last().unwrap().decision_id, "id-99");
    }
}
