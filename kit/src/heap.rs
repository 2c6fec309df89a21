//! Handing the allocator's free pages back to the OS before this process's
//! resident memory is read, so that memory freed by earlier work cannot
//! absorb a leak unseen: a page the allocator gave back only counts again
//! when the provider writes to it. glibc only; elsewhere this does nothing.
//!
//! The one `unsafe` block of the conformance kit (a call into glibc).
#![allow(unsafe_code)]

/// Returns the free pages of every malloc arena to the OS.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn release_free_pages() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: `malloc_trim` is glibc's, which this target links; it takes a
    // byte count by value, returns an int, and works on the allocator's own
    // free lists under the arenas' locks, so any thread may call it at any
    // time, and no memory in use moves or is released.
    unsafe {
        malloc_trim(0);
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_free_pages() {}
