//! The C ABI: the same provider interface for libraries written in C, C++,
//! Zig, or anything that can export a C data symbol.
//!
//! The authoritative description is the header `include/guardhost.h`
//! shipped with this crate; the types here mirror it for the host (and for
//! tests), field by field. Everything crossing this boundary is UTF-8 JSON
//! text with a length: the config, the request, the decision.
//!
//! A host tells the two ABIs apart by the descriptor's first 8 bytes:
//! [`C_MAGIC`] here, [`crate::MAGIC`] for Rust providers.

use std::ffi::{c_char, c_void};

/// The first 8 bytes of a C descriptor: `"GHCPROV"` and a NUL byte.
pub const C_MAGIC: [u8; 8] = *b"GHCPROV\0";

/// The C ABI major version. A host loads only descriptors with its own major.
pub const C_ABI_MAJOR: u16 = 1;

/// The C ABI minor version. Minor versions only append fields to
/// [`CDescriptor`]; its `size` field says which ones a library has.
pub const C_ABI_MINOR: u16 = 0;

/// Bits of [`CDescriptor::flags`].
pub mod c_flags {
    /// `create` accepts config keys beyond `accepted_keys`.
    pub const ACCEPTS_ANY_KEY: u64 = 1 << 0;
    /// `create` accepts the key `framework` (the host injects
    /// `framework: "deerflow"`).
    pub const TAKES_FRAMEWORK: u64 = 1 << 1;
}

/// What `create` and `evaluate` return.
pub mod c_status {
    /// Success: the output holds the result.
    pub const OK: i32 = 0;
    /// An ordinary error: the output, if any, is a UTF-8 message.
    pub const ERROR: i32 = 1;
    /// A control-flow signal: the output, if any, is
    /// `{"message": str, "payload": any}`.
    pub const INTERRUPT: i32 = 2;
}

/// `create(config, config_len, &provider, &error, &error_len)`.
pub type CreateFn = unsafe extern "C" fn(
    config: *const c_char,
    config_len: usize,
    provider: *mut *mut c_void,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> i32;

/// `evaluate(provider, request, request_len, &output, &output_len)`.
pub type EvaluateFn = unsafe extern "C" fn(
    provider: *mut c_void,
    request: *const c_char,
    request_len: usize,
    output: *mut *mut c_char,
    output_len: *mut usize,
) -> i32;

/// `destroy(provider)`.
pub type DestroyFn = unsafe extern "C" fn(provider: *mut c_void);

/// `free_buffer(buffer, len)`.
pub type FreeBufferFn = unsafe extern "C" fn(buffer: *mut c_char, len: usize);

/// The fixed start of every C descriptor, read before anything else.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CDescriptorHeader {
    /// Always [`C_MAGIC`].
    pub magic: [u8; 8],
    /// The [`C_ABI_MAJOR`] the library was built against.
    pub abi_major: u16,
    /// The [`C_ABI_MINOR`] the library was built against.
    pub abi_minor: u16,
    /// The size of the library's descriptor, in bytes.
    pub size: u32,
}

/// `struct guardhost_descriptor`, version 1.0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CDescriptor {
    /// Magic, version and size.
    pub header: CDescriptorHeader,
    /// The provider's name (NUL-terminated UTF-8).
    pub name: *const c_char,
    /// The accepted config keys: NULL-terminated array of NUL-terminated
    /// UTF-8 strings, or NULL.
    pub accepted_keys: *const *const c_char,
    /// Bits from [`c_flags`].
    pub flags: u64,
    /// Builds a provider from its config (JSON).
    pub create: Option<CreateFn>,
    /// Decides one tool call (JSON in, JSON out).
    pub evaluate: Option<EvaluateFn>,
    /// Releases a provider; may be absent.
    pub destroy: Option<DestroyFn>,
    /// Frees a buffer the library returned.
    pub free_buffer: Option<FreeBufferFn>,
}

/// The smallest descriptor a host accepts: version 1.0's.
pub const C_DESCRIPTOR_MIN_SIZE: usize = std::mem::size_of::<CDescriptor>();

#[cfg(test)]
mod tests {
    use super::*;

    /// The header is the authority: its constants must be these.
    #[test]
    fn the_header_defines_the_same_constants() {
        let header = include_str!("../include/guardhost.h");
        let define = |name: &str| -> String {
            let line = header
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("guardhost.h defines {name}"));
            line[format!("#define {name} ").len()..].trim().to_owned()
        };
        assert_eq!(define("GUARDHOST_C_MAGIC"), "\"GHCPROV\"");
        assert_eq!(&C_MAGIC, b"GHCPROV\0");
        assert_eq!(define("GUARDHOST_C_ABI_MAJOR"), C_ABI_MAJOR.to_string());
        assert_eq!(define("GUARDHOST_C_ABI_MINOR"), C_ABI_MINOR.to_string());
        assert_eq!(define("GUARDHOST_ACCEPTS_ANY_KEY"), "((uint64_t)1 << 0)");
        assert_eq!(c_flags::ACCEPTS_ANY_KEY, 1);
        assert_eq!(define("GUARDHOST_TAKES_FRAMEWORK"), "((uint64_t)1 << 1)");
        assert_eq!(c_flags::TAKES_FRAMEWORK, 2);
        assert_eq!(define("GUARDHOST_OK"), format!("((guardhost_status){})", c_status::OK));
        assert_eq!(define("GUARDHOST_ERROR"), format!("((guardhost_status){})", c_status::ERROR));
        assert_eq!(define("GUARDHOST_INTERRUPT"), format!("((guardhost_status){})", c_status::INTERRUPT));
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn version_1_0_is_72_bytes_on_64_bit_targets() {
        assert_eq!(std::mem::size_of::<CDescriptorHeader>(), 16);
        assert_eq!(C_DESCRIPTOR_MIN_SIZE, 72);
    }
}
