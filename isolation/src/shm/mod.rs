//! The shared-memory transport of `isolation: process` (Linux): calls and
//! answers pass through a memory region both processes map, instead of the
//! pipes, and each side spins briefly before it sleeps on a futex
//! (`spin`). The pipes stay: they carry the handshake, any request or
//! answer too large for a slot, and the end of the connection (the host
//! learns of the provider process's death when its output closes, the
//! process of the host's when its input does).
//!
//! - `region`: the region's layout and mapping (the `unsafe` part);
//! - `spin`: spinning, then sleeping;
//! - `message`: what a slot holds;
//! - `host`: the host's side, used by
//!   [`ProcessProvider`](super::ProcessProvider);
//! - `server`: the provider process's side.
//!
//! A call takes a free slot (host-side bookkeeping: the provider process
//! cannot touch it), writes its request there, marks the slot posted and
//! rings the server's bell; a server thread takes it, evaluates it, writes
//! the answer over the request and marks the slot answered. A caller on
//! the sync path waits on its own slot's state word; answers to async
//! calls are collected by one host thread, which wakes their tasks.

pub(crate) mod host;
pub(crate) mod message;
pub(crate) mod region;
pub(crate) mod server;
pub(crate) mod spin;

pub use region::{REGION_BYTES, SLOTS, SLOT_BYTES};
pub use spin::{MAX_SPIN, MIN_SPIN};

/// A slot's state word: the phase in the low byte, flags above.
pub(crate) mod state {
    /// Free: the host's to fill.
    pub const FREE: u32 = 0;
    /// A request is in the slot, waiting for a server thread or being
    /// evaluated (the `posted` bitmap tells which: a server thread clears
    /// the slot's bit as it takes the request).
    pub const POSTED: u32 = 1;
    /// The answer is in the slot.
    pub const ANSWERED: u32 = 2;
    /// The answer did not fit and went over the pipe.
    pub const PIPED: u32 = 3;
    /// Written by the host when the provider process is gone: nothing more
    /// will come.
    pub const ABANDONED: u32 = 4;
    /// The phase bits.
    pub const PHASE: u32 = 0xff;
    /// The caller is on the async path: the answer is announced in the
    /// `answered` bitmap and on the host's bell.
    pub const ASYNC: u32 = 1 << 30;
    /// A sync caller sleeps on this word: the server wakes it.
    pub const WAITING: u32 = 1 << 31;
}
