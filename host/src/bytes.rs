//! What the readers of library files ([`crate::elf`], [`crate::pe`])
//! share: fixed-size fields read from bytes, and why bytes cannot be mapped.

/// Why bytes cannot be mapped as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotWhole {
    /// Shorter than a part they declare: which part, and the size it needs.
    Short(String),
    /// A header field no file of the format has.
    Damaged(String),
}

/// The fixed-size fields of a file, in its byte order.
pub(crate) struct Fields<'a> {
    /// The file's bytes.
    pub(crate) bytes: &'a [u8],
    /// Big-endian (ELF's `EI_DATA` 2); PE files are little-endian.
    pub(crate) big: bool,
}

impl Fields<'_> {
    /// The field of `len` bytes at `at`; `None` past the end of the bytes.
    pub(crate) fn get(&self, at: u64, len: usize) -> Option<u64> {
        let start = usize::try_from(at).ok()?;
        let raw = self.bytes.get(start..start.checked_add(len)?)?;
        let mut value = 0u64;
        for i in 0..len {
            let byte = if self.big { raw[i] } else { raw[len - 1 - i] };
            value = value << 8 | u64::from(byte);
        }
        Some(value)
    }
}

/// The NUL-terminated name at `at` in `bytes` (to their end if no NUL
/// follows), when it is non-empty UTF-8: how both formats store symbol
/// names.
pub(crate) fn name_at(bytes: &[u8], at: usize) -> Option<&str> {
    let rest = bytes.get(at..)?;
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok().filter(|name| !name.is_empty())
}
