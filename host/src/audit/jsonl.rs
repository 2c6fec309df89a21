//! [`JsonlAuditSink`]: audit events as JSON lines, written off the call
//! path by a thread of its own.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::{flat, next_decision_number, AuditError, AuditEvent, AuditRecord, AuditSink};

/// Appends events to a file, one JSON object per line, written off the
/// call path by a thread of its own.
///
/// Recording an event copies its fields into a queue: no allocation, no
/// serialisation, no system call while the writer is active. The writer
/// turns what has queued into JSON lines, hands them to the file in one
/// `write_all` (whole lines only: a line is never split between writes),
/// and looks again every [`JsonlAuditSink::TICK`]; after a second with
/// nothing to write it sleeps until the next event wakes it. When
/// [`JsonlAuditSink::CAPACITY`] events (or 8 MiB) are waiting, recording
/// one more waits for the writer: events are never dropped. A write that
/// fails (a full disk) is logged as `Failed to record
/// middleware:guardrail event`, with the size of the batch it was for.
///
/// Nothing is lost on a clean exit: [`JsonlAuditSink::flush`] returns once
/// every event recorded before it is written, and dropping the sink
/// writes what is queued before its thread ends. A process that dies
/// without unwinding (a signal, `abort`, `exit` from a provider in the
/// process) loses the events not yet written: those of its last
/// [`JsonlAuditSink::TICK`] or so, never more than twice
/// [`JsonlAuditSink::CAPACITY`] (a full queue and the batch being
/// written).
pub struct JsonlAuditSink {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for JsonlAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlAuditSink").finish_non_exhaustive()
    }
}

/// The queue between the callers and the writer thread.
struct Shared {
    state: Mutex<Queue>,
    /// The writer waits here for events (or a flush, or the end).
    work: Condvar,
    /// Callers wait here for room, or for a flush to be done.
    done: Condvar,
}

#[derive(Default)]
struct Queue {
    /// The waiting events, encoded by [`flat`].
    bytes: Vec<u8>,
    /// How many events `bytes` holds.
    events: usize,
    /// Events recorded so far.
    recorded: u64,
    /// Events written (or failed to write) so far.
    written: u64,
    /// A caller waits in [`JsonlAuditSink::flush`] or for room.
    waiting: bool,
    /// The writer sleeps without a time limit: the next event wakes it.
    asleep: bool,
    /// The sink is being dropped.
    closed: bool,
    /// The writer thread has ended (after `closed`, or by a panic).
    stopped: bool,
}

impl Queue {
    fn full(&self) -> bool {
        self.events >= JsonlAuditSink::CAPACITY || self.bytes.len() >= JsonlAuditSink::CAPACITY_BYTES
    }
}

impl JsonlAuditSink {
    /// How often an active writer looks for new events.
    pub const TICK: std::time::Duration = std::time::Duration::from_millis(10);

    /// How many events may wait to be written before recording waits.
    pub const CAPACITY: usize = 4096;

    /// How many bytes of events may wait (an event larger than that alone
    /// still goes through).
    const CAPACITY_BYTES: usize = 8 << 20;

    /// Opens `path` for appending, creating it if needed, and starts the
    /// writer thread.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(Queue::default()),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("guardhost-audit".into())
                .spawn(move || write_events(&shared, file))?
        };
        Ok(JsonlAuditSink { shared, writer: Mutex::new(Some(writer)) })
    }

    /// Returns once every event recorded before this call is written (or
    /// the writer thread has stopped, which only a panic in it can do).
    pub fn flush(&self) {
        let mut queue = self.shared.lock();
        let target = queue.recorded;
        while queue.written < target && !queue.stopped {
            queue.waiting = true;
            self.shared.work.notify_one();
            queue = self.shared.done.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queues one event, written into the queue by `encode`.
    fn enqueue(&self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<(), AuditError> {
        let mut queue = self.shared.lock();
        loop {
            if queue.stopped {
                return Err("the audit file's writer thread has stopped; the event is not recorded".into());
            }
            if !queue.full() {
                break;
            }
            queue.waiting = true;
            self.shared.work.notify_one();
            queue = self.shared.done.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
        encode(&mut queue.bytes);
        queue.events += 1;
        queue.recorded += 1;
        // A condition variable's notify is a system call: only when the
        // writer would not look again on its own.
        let wake = queue.asleep;
        drop(queue);
        if wake {
            self.shared.work.notify_one();
        }
        Ok(())
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer thread: takes what has queued, writes it, until the sink is
/// dropped and the queue is empty.
fn write_events(shared: &Shared, mut file: File) {
    /// Ticks with nothing to write before the writer sleeps until woken.
    const IDLE_TICKS: u32 = 100;
    /// Says so when the thread ends, however it ends, so that no caller
    /// waits for it in vain.
    struct Stopped<'a>(&'a Shared);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            self.0.lock().stopped = true;
            self.0.done.notify_all();
        }
    }
    let _stopped = Stopped(shared);
    let mut batch = Vec::new();
    let mut lines = Vec::new();
    let mut idle = 0;
    loop {
        let (count, closed) = {
            let mut queue = shared.lock();
            while queue.events == 0 && !queue.closed && !queue.waiting {
                if idle >= IDLE_TICKS {
                    queue.asleep = true;
                    queue = shared.work.wait(queue).unwrap_or_else(|e| e.into_inner());
                    queue.asleep = false;
                    idle = 0;
                } else {
                    queue = shared
                        .work
                        .wait_timeout(queue, JsonlAuditSink::TICK)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    idle += 1;
                }
            }
            std::mem::swap(&mut batch, &mut queue.bytes);
            let count = std::mem::take(&mut queue.events);
            if queue.waiting {
                // Room again for a caller waiting to record.
                shared.done.notify_all();
            }
            (count, queue.closed)
        };
        if count > 0 {
            idle = 0;
        }
        if let Err(error) = write_batch(&mut file, &batch, &mut lines) {
            tracing::warn!(
                "Failed to record middleware:guardrail event: {error} (in a batch of {count} events, some or all not written)"
            );
        }
        batch.clear();
        let mut queue = shared.lock();
        queue.written += count as u64;
        if queue.waiting {
            queue.waiting = false;
            shared.done.notify_all();
        }
        if closed && queue.events == 0 {
            return;
        }
    }
}

/// Turns queued events into JSON lines, then hands them to the file in
/// one `write_all`: whole lines only, so a line is never split between two
/// writes, and the lines of another process appending to the same file
/// never land inside one.
fn write_batch(file: &mut File, mut batch: &[u8], lines: &mut Vec<u8>) -> Result<(), AuditError> {
    /// A buffer grown past this by one large batch is not kept.
    const KEEP: usize = 1 << 20;
    lines.clear();
    let mut decoded = Ok(());
    while !batch.is_empty() && decoded.is_ok() {
        decoded = flat::write_json_line(&mut batch, lines);
    }
    let written = file.write_all(lines);
    if lines.capacity() > KEEP {
        *lines = Vec::new();
    }
    written?;
    decoded
}

impl AuditSink for JsonlAuditSink {
    /// An event built elsewhere: serialised here, then queued as it is.
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        let line = serde_json::to_vec(event)?;
        self.enqueue(|bytes| flat::put_json(bytes, &line))
    }

    /// The middleware's event: its fields copied into the queue, the JSON
    /// written by the writer thread.
    fn record_call(&self, record: &AuditRecord<'_>) -> Result<(), AuditError> {
        let number = next_decision_number();
        self.enqueue(|bytes| flat::put_record(bytes, record, number))
    }
}

impl Drop for JsonlAuditSink {
    /// Writes what is queued, then ends the writer thread.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
        let writer = self.writer.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditAction, AuditProvider, UNRECORDED_MESSAGE};
    use crate::request::{GuardrailDecision, GuardrailRequest};
    use crate::request::{GuardrailReason, ToolCallRequest};

    fn request(id: &str) -> GuardrailRequest {
        let call = ToolCallRequest::new("bash", Default::default()).with_id(id);
        GuardrailRequest::from_tool_call(&call, None).unwrap()
    }

    fn denial() -> GuardrailDecision {
        GuardrailDecision::with_reason(false, "oap.tool_not_allowed", "tool 'bash' is denied")
    }

    /// `f` of the middleware's record of a denied call `id`.
    fn with_record<R>(id: &str, f: impl FnOnce(&AuditRecord<'_>) -> R) -> R {
        with_denial_record(id, &denial(), f)
    }

    /// `f` of the middleware's record of call `id`, denied by `decision`.
    fn with_denial_record<R>(
        id: &str,
        decision: &GuardrailDecision,
        f: impl FnOnce(&AuditRecord<'_>) -> R,
    ) -> R {
        let (request, provider) = (request(id), AuditProvider::default());
        f(&AuditRecord {
            action: AuditAction::DenyToolCall,
            request: &request,
            decision,
            fail_closed: true,
            provider_error: false,
            provider: &provider,
            verbatim: false,
        })
    }

    /// Records the middleware's event for call `{thread}-{n}`.
    fn record(sink: &dyn AuditSink, thread: usize, n: usize) {
        with_record(&format!("{thread}-{n}"), |record| sink.record_call(record).unwrap());
    }

    fn events(path: &Path) -> Vec<AuditEvent> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The `tool_call_id`s of the events in `path`, in file order.
    fn ids(path: &Path) -> Vec<String> {
        events(path).into_iter().map(|event| event.tool_call_id.unwrap()).collect()
    }

    /// Every event of every thread is there, each thread's in the order it
    /// recorded them.
    fn assert_complete(ids: &[String], threads: usize, per_thread: usize) {
        assert_eq!(ids.len(), threads * per_thread);
        for thread in 0..threads {
            let mine: Vec<&String> = ids.iter().filter(|id| id.starts_with(&format!("{thread}-"))).collect();
            let expected: Vec<String> = (0..per_thread).map(|n| format!("{thread}-{n}")).collect();
            assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "thread {thread}");
        }
    }

    #[test]
    fn the_writer_writes_exactly_the_event_the_record_makes() {
        let call = ToolCallRequest::new("write_file", Default::default()).with_id("call-7").with_context(
            serde_json::json!({"thread_id": "t-1", "run_id": "r-2", "user_role": "admin", "is_subagent": true})
                .as_object()
                .unwrap()
                .clone(),
        );
        let request = GuardrailRequest::from_tool_call(&call, Some("/etc/passport.json")).unwrap();
        let long = "é".repeat(700);
        let decision = GuardrailDecision {
            allow: false,
            reasons: vec![
                GuardrailReason::new("oap.a", ""),
                GuardrailReason::new("", long.clone()),
                GuardrailReason::new(
                    "oap.command_not_allowed",
                    "Command 'rm -rf /srv' is not in allowed list",
                ),
            ],
            policy_id: Some("system.command.execute.v1".into()),
            metadata: Default::default(),
        };
        let provider = AuditProvider { name: "oap".into(), sha256: Some("ab".repeat(32)) };
        for (action, provider_error) in
            [(AuditAction::DenyToolCall, false), (AuditAction::AllowToolCallAfterProviderError, true)]
        {
            let record = AuditRecord {
                action,
                request: &request,
                decision: &decision,
                fail_closed: provider_error,
                provider_error,
                provider: &provider,
                verbatim: false,
            };
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("audit.jsonl");
            let sink = JsonlAuditSink::open(&path).unwrap();
            sink.record_call(&record).unwrap();
            sink.flush();
            let written = events(&path).remove(0);
            let mut expected = record.to_event();
            assert_eq!(expected.changes.reason_codes, ["oap.a", "oap.command_not_allowed"]);
            assert_eq!(
                expected.changes.reason_messages,
                [UNRECORDED_MESSAGE, "command not in allowed_commands"]
            );
            assert_ne!(written.decision_id, expected.decision_id, "each event gets its own id");
            expected.decision_id.clone_from(&written.decision_id);
            assert_eq!(written, expected);
        }
    }

    #[test]
    fn flush_returns_once_every_event_from_every_thread_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonlAuditSink::open(&path).unwrap();
        std::thread::scope(|s| {
            for thread in 0..4 {
                let sink = &sink;
                s.spawn(move || (0..2500).for_each(|n| record(sink, thread, n)));
            }
        });
        sink.flush();
        assert_complete(&ids(&path), 4, 2500);
        // An event built elsewhere is written as it is, after the others.
        let mut own = record_event("9-0");
        own.tag = "custom".into();
        sink.record(&own).unwrap();
        sink.flush();
        assert_eq!(events(&path).last(), Some(&own));
    }

    fn record_event(id: &str) -> AuditEvent {
        with_record(id, |record| record.to_event())
    }

    /// Two sinks (two processes, say) appending to one file, batches far
    /// larger than any buffer: every line arrives whole.
    // POSIX's O_APPEND: each write lands whole at the end. Windows (and wine)
    // make no such promise for two handles on one file.
    #[cfg(unix)]
    #[test]
    fn lines_from_two_sinks_on_one_file_never_mix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sinks = [JsonlAuditSink::open(&path).unwrap(), JsonlAuditSink::open(&path).unwrap()];
        let long = GuardrailDecision {
            policy_id: Some("x".repeat(400)),
            ..GuardrailDecision::with_reason(false, "oap.tool_not_allowed", "tool 'bash' is denied")
        };
        std::thread::scope(|s| {
            for (thread, sink) in sinks.iter().enumerate() {
                let long = &long;
                s.spawn(move || {
                    for n in 0..3000 {
                        with_denial_record(&format!("{thread}-{n}"), long, |record| {
                            sink.record_call(record).unwrap()
                        });
                    }
                });
            }
        });
        sinks.iter().for_each(JsonlAuditSink::flush);
        // `ids` parses every line: a torn or merged one fails here.
        assert_complete(&ids(&path), 2, 3000);
    }

    #[test]
    fn dropping_the_sink_writes_what_is_queued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonlAuditSink::open(&path).unwrap();
        (0..1000).for_each(|n| record(&sink, 0, n));
        drop(sink);
        assert_complete(&ids(&path), 1, 1000);
    }

    #[test]
    fn a_sleeping_writer_is_woken_by_the_next_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonlAuditSink::open(&path).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !sink.shared.lock().asleep {
            assert!(std::time::Instant::now() < deadline, "the idle writer never went to sleep");
            std::thread::sleep(JsonlAuditSink::TICK);
        }
        record(&sink, 0, 0);
        // No flush: the event alone must wake the writer.
        while ids(&path).is_empty() {
            assert!(std::time::Instant::now() < deadline, "the event was never written");
            std::thread::sleep(JsonlAuditSink::TICK);
        }
        assert_eq!(ids(&path), ["0-0"]);
    }

    /// A destination that stops taking data (a FIFO nobody reads) fills
    /// the queue; recording then waits instead of dropping events, and
    /// every one arrives once the reader reads again.
    #[cfg(unix)] // a FIFO stands in for a reader that stops reading
    #[test]
    fn a_full_queue_makes_recording_wait_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("audit.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let total = JsonlAuditSink::CAPACITY * 3;
        let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut file = File::open(&fifo).unwrap();
                // Read nothing until the recording side is stuck.
                wait_for_go.recv().unwrap();
                let mut text = String::new();
                std::io::Read::read_to_string(&mut file, &mut text).unwrap();
                text
            })
        };
        let sink = Arc::new(JsonlAuditSink::open(&fifo).unwrap());
        let recorder = {
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || (0..total).for_each(|n| record(&*sink, 0, n)))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !sink.shared.lock().full() {
            assert!(std::time::Instant::now() < deadline, "the queue never filled");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!recorder.is_finished(), "recording went on past a full queue");
        go.send(()).unwrap();
        recorder.join().unwrap();
        drop(Arc::into_inner(sink).expect("the recorder is done"));
        let text = reader.join().unwrap();
        let ids: Vec<String> = text
            .lines()
            .map(|line| serde_json::from_str::<AuditEvent>(line).unwrap().tool_call_id.unwrap())
            .collect();
        assert_complete(&ids, 1, total);
    }
}
