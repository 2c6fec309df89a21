//! The wire between the host and its provider server.
//!
//! Each message is one frame: the two bytes `GH`, the length of the body as
//! a big-endian `u32`, and the body, one JSON object with a `type`. Anything
//! else on the stream (a provider printing to stdout, a crash mid-write) is
//! recognised at the next frame boundary and ends the connection.
//!
//! A session: the server says [`FromServer::Hello`] with its protocol
//! version; the host sends [`ToServer::Init`] (the provider spec); the
//! server answers [`FromServer::Ready`] or [`FromServer::Failed`]. Then the
//! host sends [`ToServer::Evaluate`] frames, each with an id of its own, as
//! many at a time as it likes, and the server answers each with one
//! [`FromServer::Answer`] carrying the same id, in any order.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use guardhost::ProviderSpec;
use guardhost::{CallView, GuardrailDecision, GuardrailRequest};
use guardhost::{Evaluation, Interrupt, ProviderFailure};

/// The protocol version this build speaks. Host and server must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// The bytes every frame starts with.
const MAGIC: [u8; 2] = *b"GH";

/// The length of a frame's header: the magic and the body's length.
pub const HEADER: usize = 6;

/// The largest body accepted (64 MiB).
pub const MAX_FRAME: u32 = 64 << 20;

/// The most threads of a provider process that read and evaluate calls
/// (over the pipes and shared memory together): as many calls as this are
/// evaluated at once, and more wait their turn (their wait counts against
/// the host's limit). A call that hangs holds one until the host gives up
/// on it and kills the process.
pub const MAX_SERVER_THREADS: usize = 256;

/// From the host to the server.
// One message lives only while its frame is encoded or decoded: its size
// does not matter, a box per call would.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToServer {
    /// Load and construct this provider.
    Init {
        /// The host's protocol version.
        protocol: u32,
        /// The provider to run in process (no timeout: the host keeps time).
        spec: ProviderSpec,
        /// Where relative library paths resolve from.
        base_dir: PathBuf,
        /// On a restart: the SHA-256 of the library bytes loaded at the
        /// first start; a library that changed since is refused.
        pinned_sha256: Option<String>,
        /// To a provider program: the framework the host serves
        /// (`"deerflow"`), for a provider that behaves differently per
        /// framework. Not sent to `guardhost provider-server`, which
        /// injects it into the config where the provider takes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        framework: Option<String>,
        /// The shared-memory region offered for calls (`guardhost
        /// provider-server` only, on Linux): its file descriptor, inherited
        /// by the server. Without it, or when the server cannot map it,
        /// calls go over the pipes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shared_memory: Option<SharedMemoryOffer>,
    },
    /// Decide one call.
    Evaluate {
        /// The call's id, echoed in the answer.
        id: u64,
        /// Ask the provider's async path (`aevaluate`) rather than `evaluate`.
        asynchronous: bool,
        /// The request.
        request: GuardrailRequest,
    },
}

/// [`ToServer::Evaluate`] as the host writes it: the request borrowed from
/// the call (the same JSON).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "evaluate")]
pub struct EvaluateRef<'a> {
    /// The call's id, echoed in the answer.
    pub id: u64,
    /// Ask the provider's async path.
    pub asynchronous: bool,
    /// The request.
    pub request: &'a CallView<'a>,
}

/// From the server to the host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromServer {
    /// The first frame: who is speaking.
    Hello {
        /// The server's protocol version.
        protocol: u32,
        /// The server's guardhost version (a provider program's own
        /// version text; optional).
        #[serde(default)]
        version: String,
    },
    /// The provider is constructed.
    Ready {
        /// What the server knows about it: a whole [`ProviderInfo`](guardhost::ProviderInfo) from
        /// `guardhost provider-server`; at least `{"name": ...}` from a
        /// provider program.
        info: Value,
        /// What became of the shared-memory region offered in `init`.
        #[serde(default, skip_serializing_if = "SharedMemory::not_offered")]
        shared_memory: SharedMemory,
    },
    /// The provider could not be built; the server exits.
    Failed {
        /// Why, as the host would have said it in process.
        error: String,
        /// Whether the constructor panicked rather than returning an error.
        #[serde(default)]
        panicked: bool,
    },
    /// The answer to one [`ToServer::Evaluate`].
    Answer {
        /// The call's id.
        id: u64,
        /// What the provider said.
        outcome: Outcome,
    },
}

/// The shared-memory region the host offers its provider server.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SharedMemoryOffer {
    /// The region's file descriptor in the server's process.
    pub fd: i32,
}

/// The server's answer to a [`SharedMemoryOffer`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SharedMemory {
    /// No region was offered.
    #[default]
    NotOffered,
    /// The server mapped the region and serves calls posted there.
    Mapped,
    /// The server could not map the region: calls go over the pipes.
    Refused {
        /// Why.
        reason: String,
    },
}

impl SharedMemory {
    fn not_offered(&self) -> bool {
        *self == SharedMemory::NotOffered
    }
}

/// An [`Evaluation`] on the wire.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A decision.
    Decision {
        /// It.
        decision: GuardrailDecision,
    },
    /// A provider error (or a caught panic).
    Error {
        /// What went wrong.
        message: String,
        /// Whether it was a panic.
        panicked: bool,
    },
    /// A control-flow signal.
    Interrupt {
        /// What the provider said.
        message: String,
        /// Its payload.
        payload: Value,
    },
}

impl From<Evaluation> for Outcome {
    fn from(evaluation: Evaluation) -> Self {
        match evaluation {
            Ok(decision) => Outcome::Decision { decision },
            Err(ProviderFailure::Error { message, panicked }) => Outcome::Error { message, panicked },
            Err(ProviderFailure::Interrupt(Interrupt { message, payload })) => {
                Outcome::Interrupt { message, payload }
            }
            // A failure of a kind this build does not know crosses as an
            // error: `fail_closed` decides it.
            Err(other) => Outcome::Error { message: other.to_string(), panicked: false },
        }
    }
}

impl From<Outcome> for Evaluation {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Decision { decision } => Ok(decision),
            Outcome::Error { message, panicked } => Err(ProviderFailure::Error { message, panicked }),
            Outcome::Interrupt { message, payload } => {
                Err(ProviderFailure::Interrupt(Interrupt { message, payload }))
            }
        }
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream ended at a frame boundary.
    #[error("closed its output")]
    Closed,
    /// Reading failed, or the stream ended inside a frame.
    #[error("broke off mid-frame: {0}")]
    Io(#[from] io::Error),
    /// The bytes at a frame boundary are not a frame.
    #[error("wrote something that is not a protocol frame: {0}")]
    NotAFrame(String),
    /// The announced body is larger than [`MAX_FRAME`].
    #[error("announced a frame of {0} bytes, more than the {MAX_FRAME} allowed")]
    TooLarge(u32),
    /// The body is not a message of this protocol.
    #[error("sent a frame that is not a valid message: {0}")]
    BadMessage(serde_json::Error),
}

/// Encodes `message` as one frame.
pub fn encode(message: &impl Serialize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(256);
    encode_into(&mut frame, message);
    frame
}

/// Encodes `message` as one frame in `frame`, replacing what it held (the
/// body is `frame[HEADER..]`).
pub fn encode_into(frame: &mut Vec<u8>, message: &impl Serialize) {
    frame.clear();
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&[0; 4]);
    // Serialising these messages (strings, maps of JSON values) cannot fail.
    serde_json::to_writer(&mut *frame, message).expect("a protocol message serialises");
    let length = u32::try_from(frame.len() - HEADER).unwrap_or(u32::MAX);
    frame[2..HEADER].copy_from_slice(&length.to_be_bytes());
}

/// Writes `message` as one frame and flushes.
pub fn write_message(out: &mut impl Write, message: &impl Serialize) -> io::Result<()> {
    out.write_all(&encode(message))?;
    out.flush()
}

/// Frames from many threads onto one output. A sender that finds the
/// output free writes every queued frame with one flush; one that finds it
/// busy queues its frame for the writer at work, which looks again before
/// it leaves. So no thread waits for another's write, and frames sent at
/// the same time share a system call.
pub struct FrameWriter<W: Write> {
    queue: Mutex<Vec<Vec<u8>>>,
    output: Mutex<W>,
}

impl<W: Write> FrameWriter<W> {
    /// Writes to `output` (buffer it: frames are written one by one, then flushed).
    pub fn new(output: W) -> Self {
        FrameWriter { queue: Mutex::new(Vec::new()), output: Mutex::new(output) }
    }

    /// Queues `frame` and writes what is queued unless another thread is
    /// writing already. An error means the output is broken.
    pub fn send(&self, frame: Vec<u8>) -> io::Result<()> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).push(frame);
        loop {
            let mut output = match self.output.try_lock() {
                Ok(output) => output,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                // The thread writing will take this frame too.
                Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
            };
            let frames = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()));
            for frame in &frames {
                output.write_all(frame)?;
            }
            output.flush()?;
            drop(output);
            // A frame queued while this thread wrote, by a sender that found
            // the output busy, is this thread's to write.
            if self.queue.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                return Ok(());
            }
        }
    }
}

/// Reads one frame's message.
pub fn read_message<T: serde::de::DeserializeOwned>(input: &mut impl BufRead) -> Result<T, FrameError> {
    let available = input.fill_buf()?;
    if available.is_empty() {
        return Err(FrameError::Closed);
    }
    if !available.starts_with(&MAGIC[..available.len().min(2)]) {
        return Err(FrameError::NotAFrame(preview(available)));
    }
    let mut header = [0u8; 6];
    input.read_exact(&mut header)?;
    if header[..2] != MAGIC {
        return Err(FrameError::NotAFrame(preview(&header)));
    }
    let length = u32::from_be_bytes([header[2], header[3], header[4], header[5]]);
    if length > MAX_FRAME {
        return Err(FrameError::TooLarge(length));
    }
    let mut body = vec![0; length as usize];
    input.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(FrameError::BadMessage)
}

/// The start of unexpected bytes, quoted, for an error message: up to the
/// next frame, at most 60 bytes.
pub(crate) fn preview(bytes: &[u8]) -> String {
    let end = bytes.windows(2).skip(1).position(|w| w == MAGIC).map_or(bytes.len(), |at| at + 1);
    let shown = &bytes[..end.min(60)];
    let text = String::from_utf8_lossy(shown);
    let more = if end > shown.len() { "..." } else { "" };
    format!("{text:?}{more}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<FromServer, FrameError> {
        read_message(&mut io::BufReader::new(bytes))
    }

    #[test]
    fn a_frame_round_trips() {
        let frame = encode(&FromServer::Failed { error: "no\nsuch file".into(), panicked: false });
        assert_eq!(&frame[..2], b"GH");
        match read(&frame).unwrap() {
            FromServer::Failed { error, .. } => assert_eq!(error, "no\nsuch file"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn frames_follow_each_other() {
        let mut stream = encode(&FromServer::Failed { error: "one".into(), panicked: false });
        stream.extend(encode(&FromServer::Failed { error: "two".into(), panicked: false }));
        let mut input = io::BufReader::new(&stream[..]);
        for expected in ["one", "two"] {
            match read_message::<FromServer>(&mut input).unwrap() {
                FromServer::Failed { error, .. } => assert_eq!(error, expected),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(read_message::<FromServer>(&mut input), Err(FrameError::Closed)));
    }

    #[test]
    fn text_on_the_stream_is_not_a_frame_and_is_quoted() {
        let error = read(b"hello from a provider\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"wrote something that is not a protocol frame: "hello from a provider\n""#
        );
    }

    #[test]
    fn the_quoted_text_stops_at_the_next_frame_or_after_60_bytes() {
        let mut stream = b"debug line\n".to_vec();
        stream.extend(encode(&FromServer::Failed { error: "x".into(), panicked: false }));
        assert!(read(&stream).unwrap_err().to_string().ends_with(r#": "debug line\n""#));
        let long = [b'x'; 100];
        assert!(read(&long).unwrap_err().to_string().ends_with(&format!("{:?}...", "x".repeat(60))));
    }

    #[test]
    fn a_cut_frame_an_oversized_one_and_a_bad_body_are_errors() {
        let frame = encode(&FromServer::Failed { error: "x".into(), panicked: false });
        assert!(matches!(read(&frame[..frame.len() - 1]), Err(FrameError::Io(_))));
        assert!(matches!(read(b"GH\xff\xff\xff\xff"), Err(FrameError::TooLarge(_))));
        assert!(matches!(read(b"GH\x00\x00\x00\x02{}"), Err(FrameError::BadMessage(_))));
        assert!(matches!(read(b"G"), Err(FrameError::Io(_))));
    }
}
