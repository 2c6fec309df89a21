//! The shared region itself: its layout, creating and mapping it, futex
//! waits and wakes on its words, and handing its file to the child. The
//! only module of the isolation code with `unsafe`.
//!
//! The region is one `memfd` file, mapped `MAP_SHARED` by the host and by
//! its provider process. It starts with a control block of atomics (bells,
//! bitmaps, one state word and one length per slot), followed by the slots'
//! data, [`SLOT_BYTES`] each.
//!
//! The provider process may write anything anywhere in the region at any
//! time (it is the side not trusted). So the whole region is atomics: the
//! control block's words, and the slots' data, which both sides copy in
//! and out as atomic 8-byte words. Whatever the other side stores, and
//! whenever, the host reads some value of the right type (never undefined
//! behaviour), checks every length against the slot's size, and validates
//! what it copied out as a protocol message.
// Mapping the region, reading and writing it, futexes: each block says why
// it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::Command;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use rustix::fs::MemfdFlags;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::thread::futex;

/// The slots: calls in flight at once over shared memory. A call that
/// finds none free goes over the pipe.
pub const SLOTS: usize = 1024;

/// The bytes a slot holds: a request (or an answer) larger than this goes
/// over the pipe.
pub const SLOT_BYTES: usize = 16 << 10;

/// Words of a slot bitmap.
pub(crate) const WORDS: usize = SLOTS / 64;

/// "GHSHM" and the layout's version: the first word of the region.
const MAGIC: u64 = u64::from_le_bytes(*b"GHSHM\0\0\x01");

/// A cache line of its own, so the two processes' hot words do not share one.
#[repr(C, align(64))]
pub(crate) struct Line<T>(pub(crate) T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Where one side waits and how the other knows whether to wake it.
#[repr(C)]
pub(crate) struct Bell {
    /// Bumped by the other side after it posts work; the futex word.
    pub(crate) rings: AtomicU32,
    /// Threads of this side asleep on `rings` (or about to be).
    pub(crate) sleepers: AtomicU32,
    /// Threads of this side spinning: they see new work without a wake.
    pub(crate) spinning: AtomicU32,
    /// Threads of this side at work (the server's evaluating threads): one
    /// of them looks for new work when it is done.
    pub(crate) busy: AtomicU32,
}

/// The server's watcher of waiting requests (see `super::server`).
#[repr(C)]
pub(crate) struct Watch {
    /// Set while the watcher watches; whoever sets it wakes the watcher.
    pub(crate) watching: AtomicU32,
    /// The watcher's futex word, bumped to wake it.
    pub(crate) rings: AtomicU32,
}

impl Watch {
    /// Has the watcher watch, if it does not already: one wake-up, at
    /// most once per watch.
    pub(crate) fn arm(&self) {
        if self.watching.swap(1, Ordering::SeqCst) == 0 {
            self.rings.fetch_add(1, Ordering::SeqCst);
            wake(&self.rings, 1);
        }
    }
}

/// The start of the region. Atomics only (see the module's notes).
#[repr(C)]
pub(crate) struct Control {
    magic: Line<AtomicU64>,
    slots: AtomicU32,
    slot_bytes: AtomicU32,
    /// The server's bell: rung by the host when it posts a request.
    pub(crate) server: Line<Bell>,
    /// The host's bell: rung by the server when it answers an async call.
    pub(crate) host: Line<Bell>,
    /// Armed by the host when it posts to a busy pool with no spinner, and
    /// by a server thread that takes a request and leaves others waiting.
    pub(crate) watch: Line<Watch>,
    /// Slots whose request is posted and not yet taken (bit `i` of word
    /// `i / 64`): set by the host, cleared by the server thread taking it.
    pub(crate) posted: Line<[AtomicU64; WORDS]>,
    /// Async slots answered and not yet collected: set by the server,
    /// cleared by the host's collector.
    pub(crate) answered: Line<[AtomicU64; WORDS]>,
    /// Each slot's state word (see `super::state`).
    pub(crate) states: Line<[AtomicU32; SLOTS]>,
    /// The length of the bytes in each slot.
    pub(crate) lengths: Line<[AtomicU32; SLOTS]>,
}

/// Where the slots' data starts: after the control block, on a page.
const DATA: usize = std::mem::size_of::<Control>().next_multiple_of(4096);

/// The region's whole size.
pub const REGION_BYTES: usize = DATA + SLOTS * SLOT_BYTES;

/// One mapping of the region.
pub(crate) struct Region {
    base: NonNull<u8>,
}

// SAFETY: the mapping is plain shared memory: the control block is atomics
// and the data area is only reached through copies (`write`, `read`), so
// any thread may use it; the mapping lives until `drop`.
unsafe impl Send for Region {}
// SAFETY: as for `Send`: no method hands out anything but atomics or copies.
unsafe impl Sync for Region {}

impl Region {
    /// Creates a new region (the host's side): an anonymous file sized and
    /// mapped, its control block initialised. The file is close-on-exec:
    /// [`inherit`] hands it to one child.
    pub(crate) fn create() -> io::Result<(Region, OwnedFd)> {
        let fd = rustix::fs::memfd_create("guardhost-provider", MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, REGION_BYTES as u64)?;
        let region = Region::map(&fd)?;
        let control = region.control();
        control.slots.store(SLOTS as u32, Ordering::Relaxed);
        control.slot_bytes.store(SLOT_BYTES as u32, Ordering::Relaxed);
        control.magic.store(MAGIC, Ordering::Release);
        Ok((region, fd))
    }

    /// Maps the region the host created (the provider process's side), from
    /// the file descriptor it inherited, checks that its layout is this
    /// build's, and closes the descriptor (the mapping stays), so that no
    /// process the provider starts inherits it.
    pub(crate) fn open(fd: RawFd) -> Result<Region, String> {
        if fd < 0 {
            return Err(format!("{fd} is not a file descriptor"));
        }
        // SAFETY: a borrow for the size check only, not kept past it. The
        // host made this process inherit `fd` and named it in its init
        // message; if it named a number that is not open here, `fstat`
        // fails (EBADF) and nothing else touches it.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let size =
            rustix::fs::fstat(borrowed).map_err(|e| format!("cannot read the region's size: {e}"))?.st_size;
        if size != REGION_BYTES as i64 {
            // Not the region: whatever `fd` is, it is left open.
            return Err(format!(
                "the region is {size} bytes, this build's layout {REGION_BYTES}: run the host and the \
                 provider process from the same guardhost build"
            ));
        }
        // SAFETY: `fd` is open and is the region the host handed over
        // (checked above); nothing else in this process uses it, and the
        // `OwnedFd` closes it at the end of this function (the mapping
        // stays).
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let region = Region::map(&fd).map_err(|e| format!("cannot map the region: {e}"))?;
        let control = region.control();
        let layout = (
            control.magic.load(Ordering::Acquire),
            control.slots.load(Ordering::Relaxed),
            control.slot_bytes.load(Ordering::Relaxed),
        );
        if layout != (MAGIC, SLOTS as u32, SLOT_BYTES as u32) {
            return Err("the region's layout is not this build's: run the host and the provider process \
                        from the same guardhost build"
                .into());
        }
        Ok(region)
    }

    fn map(fd: &OwnedFd) -> io::Result<Region> {
        // SAFETY: a new mapping chosen by the kernel (null hint) of the
        // file's whole size, which `ftruncate` set or `open` checked; it is
        // unmapped only in `drop`. No reference into it exists yet.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                REGION_BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }?;
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Region { base })
    }

    /// The control block.
    pub(crate) fn control(&self) -> &Control {
        // SAFETY: the mapping starts on a page (aligned for `Control`) and
        // is longer than `Control`; `Control` is atomics only, so a shared
        // reference to it allows the other process's concurrent stores; it
        // lives as long as `self`, which keeps the mapping.
        unsafe { self.base.cast::<Control>().as_ref() }
    }

    fn data(&self, slot: usize) -> *mut u8 {
        assert!(slot < SLOTS, "slot {slot} out of range");
        // SAFETY: `slot < SLOTS`, so the offset is inside the mapping.
        unsafe { self.base.as_ptr().add(DATA + slot * SLOT_BYTES) }
    }

    /// The slot's data as atomic words. Both processes touch these bytes
    /// only through them, so a process that breaks the protocol by writing
    /// while the other reads makes the reader see some bytes, never
    /// undefined behaviour.
    fn words(&self, slot: usize) -> &[AtomicU64] {
        // SAFETY: `data` checks `slot < SLOTS`; a slot's data is
        // `SLOT_BYTES` bytes (a multiple of 8) from a page-aligned start
        // plus a multiple of `SLOT_BYTES`, so 8-aligned, inside the mapping,
        // which lives as long as `self`. `AtomicU64` has `u64`'s size and
        // alignment, and every access to these bytes, in either process, is
        // atomic.
        unsafe { std::slice::from_raw_parts(self.data(slot).cast::<AtomicU64>(), SLOT_BYTES / 8) }
    }

    /// Copies `bytes` into the start of `slot`; false when they do not fit.
    pub(crate) fn write(&self, slot: usize, bytes: &[u8]) -> bool {
        if bytes.len() > SLOT_BYTES {
            return false;
        }
        for (word, chunk) in self.words(slot).iter().zip(bytes.chunks(8)) {
            let mut padded = [0u8; 8];
            padded[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_ne_bytes(padded), Ordering::Relaxed);
        }
        true
    }

    /// Appends the first `length` bytes of `slot` to `into`; false when
    /// `length` is more than a slot holds.
    pub(crate) fn read(&self, slot: usize, length: usize, into: &mut Vec<u8>) -> bool {
        if length > SLOT_BYTES {
            return false;
        }
        let end = into.len() + length;
        into.reserve(length.next_multiple_of(8));
        for word in &self.words(slot)[..length.div_ceil(8)] {
            into.extend_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        into.truncate(end);
        true
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of that size; every reference
        // into it borrows `self`, so none outlives this.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), REGION_BYTES) };
    }
}

/// Makes the child that `command` starts inherit `fd` (the region's file)
/// under the same number; no other child does, since it stays
/// close-on-exec in this process.
pub(crate) fn inherit(command: &mut Command, fd: BorrowedFd<'_>) {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe work is allowed: it makes one `fcntl` system
    // call (rustix calls the kernel directly, without allocating or
    // locking). `raw` is open there, since the fork copied this process's
    // descriptors and the caller keeps `fd` open until the spawn returns.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            let fd = BorrowedFd::borrow_raw(raw);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).map_err(io::Error::from)
        });
    }
}

/// Sleeps while `word` holds `expected`, at most `timeout` (forever with
/// `None`), unless woken. Returns early on a wake, a changed word, a
/// signal, or spuriously: the caller looks again.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let timeout = timeout.map(|t| rustix::thread::futex::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    // Shared (not PRIVATE): the other process waits and wakes on the same
    // word through its own mapping.
    let _ = futex::wait(word, futex::Flags::empty(), expected, timeout.as_ref());
}

/// Wakes up to `count` threads (of either process) asleep on `word`.
pub(crate) fn wake(word: &AtomicU32, count: u32) {
    let _ = futex::wake(word, futex::Flags::empty(), count);
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, IntoRawFd};

    use super::*;

    #[test]
    fn a_second_mapping_of_the_file_sees_the_same_memory() {
        let (host, fd) = Region::create().unwrap();
        let copy = rustix::io::dup(fd.as_fd()).unwrap().into_raw_fd();
        let server = Region::open(copy).unwrap();
        assert!(host.write(3, b"0123456789hello"));
        let mut read = b"x".to_vec();
        assert!(server.read(3, 15, &mut read));
        assert_eq!(&read[..], b"x0123456789hello");
        server.control().states[3].store(7, Ordering::SeqCst);
        assert_eq!(host.control().states[3].load(Ordering::SeqCst), 7);
        // Nothing outside a slot is reachable.
        assert!(!host.write(3, &vec![7; SLOT_BYTES + 1]));
        assert!(!server.read(3, SLOT_BYTES + 1, &mut read));
        assert!(host.write(4, &vec![7; SLOT_BYTES]));
        let mut whole = Vec::new();
        assert!(server.read(4, SLOT_BYTES, &mut whole) && whole == vec![7; SLOT_BYTES]);
    }

    #[test]
    fn what_is_not_this_builds_region_is_refused_and_said_why() {
        assert!(Region::open(-1).err().expect("refused").contains("not a file descriptor"));
        let small = rustix::fs::memfd_create("small", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&small, 4096).unwrap();
        let error = Region::open(small.into_raw_fd()).err().expect("too small");
        assert!(
            error.contains("the region is 4096 bytes") && error.contains("same guardhost build"),
            "{error}"
        );
        let blank = rustix::fs::memfd_create("blank", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&blank, REGION_BYTES as u64).unwrap();
        let error = Region::open(blank.into_raw_fd()).err().expect("no magic");
        assert!(error.contains("layout is not this build's"), "{error}");
    }
}
