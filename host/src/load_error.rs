//! Why a library could not serve as a provider: [`LoadError`] and its
//! [`LoadErrorKind`], with the hints each message carries.

use std::path::PathBuf;

/// Why a library could not serve as a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadErrorKind {
    /// No file at any candidate path.
    #[error("no such file; tried {}", list_paths(.tried))]
    NotFound {
        /// Every path tried.
        tried: Vec<PathBuf>,
    },
    /// The OS loader refused the file.
    #[error("not a loadable library: {reason}")]
    NotLoadable {
        /// The OS loader's own reason (e.g. `invalid ELF header`).
        reason: String,
    },
    /// The library has no such symbol.
    #[error("the library exports no symbol `{symbol}` ({reason}); {}", exported_hint(.exported))]
    SymbolMissing {
        /// The symbol.
        symbol: String,
        /// The OS loader's message.
        reason: String,
        /// The provider descriptors the library does export; `None` where
        /// they cannot be listed (not an ELF file).
        exported: Option<Box<[String]>>,
    },
    /// The symbol is not a guardhost provider descriptor.
    #[error("symbol `{symbol}` is not a guardhost provider descriptor (its first bytes are neither the Rust nor the C descriptor magic); export a Rust provider with `guardhost_abi::export_provider!`, a C one as a `guardhost_descriptor` initialised with GUARDHOST_DESCRIPTOR_INIT (guardhost.h)")]
    NotADescriptor {
        /// The symbol.
        symbol: String,
    },
    /// Built against another ABI major version.
    #[error("the provider was built for guardhost provider ABI {found_major}.{found_minor}, but this host speaks ABI {expected}.x; rebuild the provider against guardhost-abi {expected}.x")]
    AbiMajorMismatch {
        /// The library's major.
        found_major: u16,
        /// The library's minor.
        found_minor: u16,
        /// The host's major.
        expected: u16,
    },
    /// A C descriptor of another major version of `guardhost.h`.
    #[error("the provider was built with guardhost.h for C ABI {found_major}.{found_minor}, but this host speaks C ABI {expected}.x; rebuild it with a guardhost.h of C ABI {expected}.x")]
    CAbiMajorMismatch {
        /// The library's major.
        found_major: u16,
        /// The library's minor.
        found_minor: u16,
        /// The host's major.
        expected: u16,
    },
    /// A C descriptor smaller than the ABI's first version.
    #[error("the C descriptor says it is {size} bytes, but C ABI {major}.0 needs at least {needed}; set `size` with GUARDHOST_DESCRIPTOR_INIT from guardhost.h")]
    CDescriptorTooSmall {
        /// Its `size` field.
        size: u32,
        /// The smallest size accepted.
        needed: usize,
        /// The major version.
        major: u16,
    },
    /// A C descriptor with a missing or unusable field.
    #[error("the C descriptor's `{field}` {problem}")]
    CDescriptorInvalid {
        /// The field (`name`, `evaluate`, `accepted_keys[2]` ...).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Built with `panic = "abort"`.
    #[error("the library was built with panic = \"abort\": a panic in the provider would abort the whole host instead of becoming a provider error; rebuild it with panic = \"unwind\" (the default)")]
    PanicAbort,
    /// `provider.sha256` is not 64 hexadecimal digits.
    #[error("`provider.sha256` must be 64 hexadecimal digits (the output of `sha256sum`), got {value:?}")]
    InvalidDigest {
        /// The configured value.
        value: String,
    },
    /// The library's digest is not the configured one.
    #[error("the library's SHA-256 is {found}, but `provider.sha256` says {expected}; nothing was loaded. If the new library is the one you meant, update `provider.sha256`")]
    DigestMismatch {
        /// The configured digest.
        expected: String,
        /// The file's digest.
        found: String,
    },
    /// The library, or an entry on its path as written or resolved, could
    /// be changed by another user.
    #[error("{}{}", .0, .0.accept_hint("set `provider.allow_insecure_permissions: true`"))]
    Permissions(#[from] crate::permissions::PermissionError),
    /// The file is shorter than its own ELF headers say: it was cut short,
    /// or is still being written. Mapping it would kill the process with
    /// SIGBUS, so it is not opened.
    #[error("the library is truncated or still being written ({detail}, but the file has {size} bytes); nothing was loaded. Wait until it is written completely (or copy it aside and rename it into place)")]
    Truncated {
        /// Which part of the file is missing, and the size it needs.
        detail: String,
        /// The file's size as read.
        size: u64,
    },
    /// `abi_stable` rejected the factory's layout.
    #[error("the provider's types do not match this host's ABI layout (built against a different guardhost-abi?): {summary}")]
    LayoutMismatch {
        /// The useful lines of `abi_stable`'s report.
        summary: String,
    },
}

/// What to write after the colon instead, for [`LoadErrorKind::SymbolMissing`].
fn exported_hint(exported: &Option<Box<[String]>>) -> String {
    let Some(exported) = exported else {
        return "check the name after the colon (it is case-sensitive) and that the provider is exported \
                (`guardhost_abi::export_provider!`, or GUARDHOST_EXPORT in C)"
            .to_owned();
    };
    match &exported[..] {
        [] => "it exports no guardhost provider descriptor at all; export a Rust provider with \
               `guardhost_abi::export_provider!`, a C one with GUARDHOST_EXPORT (guardhost.h)"
            .to_owned(),
        [one] => format!("it exports one provider descriptor, `{one}`: write that after the colon"),
        many => format!(
            "it exports these provider descriptors: {}; write one of them after the colon (names are case-sensitive)",
            many.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Paths as a comma-separated list, for messages.
pub fn list_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// A library that could not be loaded as a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot load provider `{symbol}` from {}: {kind}", path.display())]
pub struct LoadError {
    /// The library path (resolved).
    pub path: PathBuf,
    /// The symbol.
    pub symbol: String,
    /// What went wrong.
    pub kind: LoadErrorKind,
}
