//! Opening provider libraries and finding their descriptors.
//!
//! Most of the host's `unsafe` lives here (the rest is the C ABI boundary in
//! [`crate::c_provider`]). The checks run in this order, and each failure has
//! its own [`LoadErrorKind`]: the file exists; its bytes hold every part
//! their ELF headers declare (not truncated); the OS loader accepts it; the
//! symbol exists; it starts with one of the two descriptor magics. For a
//! Rust descriptor: its ABI major matches; it was built with
//! `panic = "unwind"`; `abi_stable` accepts its factory's type layout. For a
//! C descriptor (`guardhost.h`): its C ABI major matches; its declared size
//! covers every field of that major; its name, keys and function pointers
//! are present and valid. Only then is the factory touched.
//!
//! # Libraries are never unloaded
//!
//! Once opened, a library stays mapped until the process exits, and opening
//! the same file (or, for a private copy, the same bytes) again reuses it.
//! A private copy is removed from disk as soon as it is mapped. A provider, a decision being dropped, a
//! future still polled, and `abi_stable`'s own layout cache may all point into
//! the library; unmapping it under any of them would crash the host. Leaking
//! a few megabytes per distinct library is the price, as in `abi_stable`'s
//! own loader.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::bytes::NotWhole;
use crate::c_provider::CFactory;
use crate::load_error::{LoadError, LoadErrorKind};
use crate::permissions::Subject;
use abi_stable::abi_stability::abi_checking::AbiInstabilityErrors;
use guardhost_abi::c_abi::{CDescriptor, CDescriptorHeader, C_ABI_MAJOR, C_DESCRIPTOR_MIN_SIZE, C_MAGIC};
use guardhost_abi::{
    compat, flags, DescriptorHeader, ProviderDescriptor, ABI_MAJOR, ABI_MINOR, FACTORY_LAYOUT, MAGIC,
};

/// What identifies an opened library: the file it was mapped from, or, for
/// a library loaded from a private copy, the digest of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Origin {
    Path(PathBuf),
    Digest(String),
}

/// The process-wide set of opened libraries.
fn libraries() -> &'static Mutex<HashMap<Origin, &'static libloading::Library>> {
    static LIBRARIES: OnceLock<Mutex<HashMap<Origin, &'static libloading::Library>>> = OnceLock::new();
    LIBRARIES.get_or_init(Default::default)
}

/// A library found and checked.
#[derive(Clone)]
pub struct Loaded {
    /// The library file (canonical).
    pub path: PathBuf,
    /// Its descriptor, valid for the rest of the process.
    pub descriptor: LibraryDescriptor,
    /// The SHA-256 of the bytes loaded (lower-case hex), when they were read
    /// (`None` only when the file could not be read again).
    pub sha256: Option<String>,
}

/// A checked descriptor of either ABI, valid for the rest of the process.
#[derive(Clone, Copy)]
pub enum LibraryDescriptor {
    /// A Rust provider (`guardhost_abi::export_provider!`).
    Rust(&'static ProviderDescriptor),
    /// A C provider (`guardhost.h`).
    C(&'static CFactory),
}

impl std::fmt::Debug for LibraryDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LibraryDescriptor::Rust(_) => f.write_str("LibraryDescriptor::Rust"),
            LibraryDescriptor::C(factory) => f.debug_tuple("LibraryDescriptor::C").field(factory).finish(),
        }
    }
}

/// What is checked about a library file before it is opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileChecks {
    /// The expected SHA-256 (hex), if any.
    pub sha256: Option<String>,
    /// Skip the permission check.
    pub allow_insecure_permissions: bool,
    /// Load a private copy of the checked bytes, named by their digest, so
    /// the original may be replaced, even overwritten in place, while the
    /// loaded copy keeps serving (always done when `sha256` is set).
    pub content_addressed: bool,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

/// Opens the first existing candidate and validates `symbol` in it. `checks`
/// run on the file before anything of it is loaded.
pub fn load(candidates: &[PathBuf], symbol: &str, checks: &FileChecks) -> Result<Loaded, LoadError> {
    let Some(path) = candidates.iter().find(|p| p.exists()) else {
        let shown = candidates.first().cloned().unwrap_or_default();
        return Err(LoadError {
            path: shown,
            symbol: symbol.to_owned(),
            kind: LoadErrorKind::NotFound { tried: candidates.to_vec() },
        });
    };
    let canonical = crate::paths::canonical(path);
    let fail = |kind| LoadError { path: canonical.clone(), symbol: symbol.to_owned(), kind };
    if !canonical.is_file() {
        return Err(fail(LoadErrorKind::NotLoadable {
            reason: "it is a directory, not a library file".into(),
        }));
    }
    if !checks.allow_insecure_permissions {
        // The path as written, not the canonical one: a link on the way is
        // as much a part of what gets loaded as the file it points to.
        crate::permissions::check(path, Subject::Library).map_err(|e| fail(e.into()))?;
    }
    // With a pinned digest, or for hot reload, the file is read once and a
    // private copy of exactly the bytes checked is what gets mapped: the file
    // cannot change between the check and the load.
    let (origin, bytes) = if checks.sha256.is_some() || checks.content_addressed {
        let bytes = std::fs::read(&canonical)
            .map_err(|e| fail(LoadErrorKind::NotLoadable { reason: format!("cannot read it: {e}") }))?;
        let digest = sha256_hex(&bytes);
        if let Some(expected) = &checks.sha256 {
            check_digest(expected, &digest).map_err(fail)?;
        }
        (Origin::Digest(digest), Some(bytes))
    } else {
        (Origin::Path(canonical.clone()), None)
    };
    // The digest identifies the library in audit events and `check`; a
    // library mapped from its path is read once more for it, and those bytes
    // are the ones checked below.
    let path_bytes = match &origin {
        Origin::Path(path) => std::fs::read(path).ok(),
        Origin::Digest(_) => None,
    };
    let sha256 = match &origin {
        Origin::Digest(digest) => Some(digest.clone()),
        Origin::Path(_) => path_bytes.as_deref().map(sha256_hex),
    };
    // The bytes about to be mapped must hold every segment they declare:
    // the OS loader maps a cut-short file without complaint, and the first
    // touch of a page past its end kills the process with SIGBUS.
    if let Some(mapped) = bytes.as_deref().or(path_bytes.as_deref()) {
        check_whole(mapped).map_err(|problem| {
            fail(match problem {
                NotWhole::Short(detail) => LoadErrorKind::Truncated { detail, size: mapped.len() as u64 },
                NotWhole::Damaged(reason) => LoadErrorKind::NotLoadable { reason },
            })
        })?;
    }
    drop(path_bytes);
    let key = (origin.clone(), symbol.to_owned());
    if let Some(descriptor) = validated().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Loaded { path: canonical, descriptor: *descriptor, sha256 });
    }
    let library = open(origin, |origin| match (origin, &bytes) {
        (Origin::Digest(digest), Some(bytes)) => open_private_copy(&canonical, bytes, digest),
        _ => open_library(&canonical).map_err(|e| os_reason(&e)),
    })
    .map_err(|reason| fail(LoadErrorKind::NotLoadable { reason }))?;
    let descriptor = find_descriptor(library, symbol).map_err(|kind| match kind {
        LoadErrorKind::SymbolMissing { symbol, reason, .. } => {
            let exported = provider_symbols(library, &canonical).map(Vec::into_boxed_slice);
            fail(LoadErrorKind::SymbolMissing { symbol, reason, exported })
        }
        kind => fail(kind),
    })?;
    validated().lock().unwrap_or_else(|e| e.into_inner()).insert(key, descriptor);
    Ok(Loaded { path: canonical, descriptor, sha256 })
}

/// Checks that the bytes of a library file hold every part their headers
/// declare, by their format: ELF ([`crate::elf`]) or PE ([`crate::pe`]).
/// Bytes of another format (Mach-O) are left to the OS loader, which names
/// its reason. Every format is read on every system, so a `.dll` copied to
/// a Linux host is judged as it would be on Windows.
pub(crate) fn check_whole(bytes: &[u8]) -> Result<(), NotWhole> {
    if bytes.starts_with(crate::elf::MAGIC) {
        crate::elf::check_whole(bytes)
    } else if crate::pe::is_pe(bytes) {
        crate::pe::check_whole(bytes)
    } else {
        Ok(())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Maps a private copy of `bytes` (the file at `path`, whose SHA-256 is
/// `digest`): written to a new directory of mode 0700 that no one else can
/// have created (creation fails if it exists), opened, then removed. The
/// mapping outlives the file, so nothing is left on disk, and the original
/// may be replaced, even overwritten in place (which would crash a process
/// that maps it), without touching the loaded provider.
///
/// Windows cannot remove a file while it is mapped: there the copy stays
/// until no process maps it, and each new copy first removes the earlier
/// ones that can be removed (see [`remove_unmapped_copies`]).
fn open_private_copy(path: &Path, bytes: &[u8], digest: &str) -> Result<libloading::Library, String> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| "it has no file name".to_owned())?.to_string_lossy();
    let base = std::env::temp_dir();
    if cfg!(windows) {
        remove_unmapped_copies(&base, std::time::Duration::from_secs(60));
    }
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let mut last = String::new();
    for _ in 0..16 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = base.join(format!("guardhost-library-{}-{stamp:x}-{n}", std::process::id()));
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        if let Err(e) = builder.create(&dir) {
            last = format!("cannot create {}: {e}", dir.display());
            continue;
        }
        let copy = dir.join(format!("{digest}-{name}"));
        let opened = write_read_only(&copy, bytes).and_then(|()| {
            open_library(&copy).map_err(|e| {
                let reason = os_reason(&e);
                if reason.contains("failed to map segment") {
                    // The usual cause: a temporary directory mounted noexec.
                    format!(
                        "{reason} (the checked copy was in {}; if that file system is mounted noexec, set \
                         TMPDIR to a directory where libraries may be mapped)",
                        base.display()
                    )
                } else {
                    reason
                }
            })
        });
        let removed = std::fs::remove_file(&copy).and_then(|()| std::fs::remove_dir(&dir));
        match removed {
            Err(e) if cfg!(windows) && opened.is_ok() => tracing::debug!(
                "{} stays while the library is mapped (Windows cannot remove a mapped file); a later load \
                 removes it: {e}",
                dir.display()
            ),
            Err(e) => tracing::warn!("cannot remove {}: {e}", dir.display()),
            Ok(()) => {}
        }
        return opened;
    }
    Err(last)
}

/// Removes the private copies in `base` (`guardhost-library-*`, of any
/// process) that no process maps any more: Windows refuses to remove a
/// mapped file, so what can be removed is unused, and what cannot is left.
/// A copy younger than `min_age` is left alone: another load (in this
/// process or another) may be between writing it and mapping it.
fn remove_unmapped_copies(base: &Path, min_age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("guardhost-library-") {
            continue;
        }
        let age = entry.metadata().and_then(|meta| meta.modified()).ok().and_then(|at| at.elapsed().ok());
        if age.is_none_or(|age| age < min_age) {
            continue;
        }
        let dir = entry.path();
        let mut files = std::fs::read_dir(&dir).into_iter().flatten().flatten();
        let all_removed = files.all(|file| std::fs::remove_file(file.path()).is_ok());
        if all_removed && std::fs::remove_dir(&dir).is_ok() {
            tracing::debug!("removed {}, a copy no process maps any more", dir.display());
        }
    }
}

/// Writes a new file, readable only by its owner.
fn write_read_only(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o500);
    let mut file = options.open(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Compares a file's SHA-256 (`found`, lower-case hex) with `expected` (hex,
/// any case).
fn check_digest(expected: &str, found: &str) -> Result<(), LoadErrorKind> {
    let expected_lower = expected.trim().to_ascii_lowercase();
    if expected_lower.len() != 64 || !expected_lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(LoadErrorKind::InvalidDigest { value: expected.to_owned() });
    }
    if found == expected_lower {
        Ok(())
    } else {
        Err(LoadErrorKind::DigestMismatch { expected: expected_lower, found: found.to_owned() })
    }
}

/// Descriptors already checked, by library and symbol. The layout check
/// costs about 0.1 ms and its answer cannot change: the library stays
/// mapped, as it was checked, for the rest of the process.
fn validated() -> &'static Mutex<HashMap<(Origin, String), LibraryDescriptor>> {
    static VALIDATED: OnceLock<Mutex<HashMap<(Origin, String), LibraryDescriptor>>> = OnceLock::new();
    VALIDATED.get_or_init(Default::default)
}

/// Reuses the library opened from `origin`, or opens it with `opening`.
fn open(
    origin: Origin,
    opening: impl FnOnce(&Origin) -> Result<libloading::Library, String>,
) -> Result<&'static libloading::Library, String> {
    let mut libraries = libraries().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(library) = libraries.get(&origin) {
        return Ok(library);
    }
    let library: &'static libloading::Library = Box::leak(Box::new(opening(&origin)?));
    libraries.insert(origin, library);
    Ok(library)
}

#[cfg(unix)]
fn open_library(path: &Path) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading a library runs its initialisers (ELF constructors).
    // Running code from the library the operator configured is the purpose of
    // this host; the path is absolute, so the loader's search path is not used
    // to find the library itself (only, as always, its own dependencies).
    // RTLD_NOW resolves every symbol now, so a library with missing
    // dependencies fails here with the loader's reason rather than later in a
    // call; RTLD_LOCAL keeps its symbols out of other libraries' way.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }?;
    Ok(library.into())
}

#[cfg(not(unix))]
fn open_library(path: &Path) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: as for unix: running the configured library's initialisers is
    // intended, and the path is absolute.
    unsafe { libloading::Library::new(path) }
}

/// libloading's `Display` says only "dlopen failed"; the loader's reason is
/// in `source()`.
fn os_reason(error: &libloading::Error) -> String {
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    reason
}

/// The exported data symbols of the library file at `path` that start with
/// a descriptor magic (Rust or C): what a `use:` could name. Read from the
/// file's dynamic symbol table (ELF) or export table (PE; nothing for
/// Mach-O), then each looked up
/// in the mapped `library`.
fn provider_symbols(library: &'static libloading::Library, path: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
    let magic_size = std::mem::size_of_val(&MAGIC) as u64;
    let names = crate::elf::exported_objects(&bytes, magic_size)
        .or_else(|| crate::pe::exported_objects(&bytes, magic_size))?;
    let providers = names
        .into_iter()
        .filter(|name| {
            // SAFETY: we ask for the symbol's address only (a raw pointer,
            // never called), as in `find_descriptor`.
            let Ok(address) = (unsafe { library.get::<*const u8>(name.as_bytes()) }) else { return false };
            let address: *const u8 = *address;
            if address.is_null() {
                return false;
            }
            // SAFETY: the symbol table says this is a defined data object of
            // at least `magic_size` bytes in the mapped library, so that many
            // bytes at its address are mapped; they are read unaligned, as
            // plain bytes.
            let first: [u8; 8] = unsafe { std::ptr::read_unaligned(address.cast::<[u8; 8]>()) };
            first == MAGIC || first == C_MAGIC
        })
        .collect();
    Some(providers)
}

fn find_descriptor(
    library: &'static libloading::Library,
    symbol: &str,
) -> Result<LibraryDescriptor, LoadErrorKind> {
    // SAFETY: we ask for the symbol's address only (the type is a raw
    // pointer, never a function we would call), so no type confusion can
    // happen in `get` itself.
    let address = unsafe { library.get::<*const u8>(symbol.as_bytes()) }.map_err(|e| {
        LoadErrorKind::SymbolMissing { symbol: symbol.to_owned(), reason: os_reason(&e), exported: None }
    })?;
    let address: *const u8 = *address;
    if address.is_null() {
        return Err(LoadErrorKind::SymbolMissing {
            symbol: symbol.to_owned(),
            reason: "its address is null".into(),
            exported: None,
        });
    }
    // SAFETY: the symbol is exported by a mapped library, so its first bytes
    // are mapped memory (code or data). We read only the fixed-size header,
    // byte-wise and unaligned, and trust nothing else until the magic matches.
    // (A symbol smaller than the header at the very end of a mapping would be
    // the one case this read could fault on; exported objects and functions
    // do not end a mapping in practice.)
    let header: DescriptorHeader = unsafe { std::ptr::read_unaligned(address.cast::<DescriptorHeader>()) };
    if header.magic == C_MAGIC {
        return find_c_descriptor(address, symbol);
    }
    if header.magic != MAGIC {
        return Err(LoadErrorKind::NotADescriptor { symbol: symbol.to_owned() });
    }
    if header.abi_major != ABI_MAJOR {
        return Err(LoadErrorKind::AbiMajorMismatch {
            found_major: header.abi_major,
            found_minor: header.abi_minor,
            expected: ABI_MAJOR,
        });
    }
    if header.flags & flags::PANIC_UNWIND == 0 {
        return Err(LoadErrorKind::PanicAbort);
    }
    if address.align_offset(std::mem::align_of::<ProviderDescriptor>()) != 0 {
        return Err(LoadErrorKind::NotADescriptor { symbol: symbol.to_owned() });
    }
    // SAFETY: the magic and major version match, so the library was built
    // against this ABI major, whose `ProviderDescriptor` starts with the
    // header followed by `&'static TypeLayout`; the address is aligned for
    // it. The library is never unloaded (see the module docs), so `'static`
    // holds. The factory itself is not used until its layout is checked below.
    let descriptor: &'static ProviderDescriptor = unsafe { &*address.cast::<ProviderDescriptor>() };
    // abi_stable accepts a factory with more fields than expected, not fewer:
    // check an older library against the shape of its own minor version.
    // (Each new minor adds its predecessor's shape to `compat` and an arm here.)
    const _: () = assert!(ABI_MINOR == 4, "add the previous minor's factory shape to the match below");
    let expected = match header.abi_minor {
        0 => compat::v1_0::FACTORY_LAYOUT,
        1 => compat::v1_1::FACTORY_LAYOUT,
        2 => compat::v1_2::FACTORY_LAYOUT,
        3 => compat::v1_3::FACTORY_LAYOUT,
        _ => FACTORY_LAYOUT,
    };
    abi_stable::abi_stability::abi_checking::check_layout_compatibility(expected, descriptor.layout)
        .map_err(|errors| {
            // Format now: the report borrows strings from the library.
            tracing::debug!("abi_stable layout report for `{symbol}`:\n{errors}");
            LoadErrorKind::LayoutMismatch { summary: describe_layout_errors(&errors) }
        })?;
    Ok(LibraryDescriptor::Rust(descriptor))
}

/// Checks a descriptor that starts with the C magic: its major, its size,
/// its alignment, then (in [`CFactory::validate`]) its fields.
fn find_c_descriptor(address: *const u8, symbol: &str) -> Result<LibraryDescriptor, LoadErrorKind> {
    // SAFETY: as for the Rust header: the first bytes of an exported symbol
    // are mapped, and the C header (16 bytes) is no longer than the Rust one
    // read before this, so reading it cannot fault where that read did not.
    let header: CDescriptorHeader = unsafe { std::ptr::read_unaligned(address.cast::<CDescriptorHeader>()) };
    if header.abi_major != C_ABI_MAJOR {
        return Err(LoadErrorKind::CAbiMajorMismatch {
            found_major: header.abi_major,
            found_minor: header.abi_minor,
            expected: C_ABI_MAJOR,
        });
    }
    if (header.size as usize) < C_DESCRIPTOR_MIN_SIZE {
        return Err(LoadErrorKind::CDescriptorTooSmall {
            size: header.size,
            needed: C_DESCRIPTOR_MIN_SIZE,
            major: C_ABI_MAJOR,
        });
    }
    if address.align_offset(std::mem::align_of::<CDescriptor>()) != 0 {
        return Err(LoadErrorKind::NotADescriptor { symbol: symbol.to_owned() });
    }
    // SAFETY: the magic and major match, the descriptor declares itself at
    // least as large as `CDescriptor` (version 1.0 of guardhost.h, which it
    // mirrors field by field, `#[repr(C)]`), and the address is aligned for
    // it. Its function pointers are `Option`s, so a NULL one is a valid
    // value, checked before use. The library is never unloaded.
    let raw: &'static CDescriptor = unsafe { &*address.cast::<CDescriptor>() };
    let factory = CFactory::validate(raw)?;
    Ok(LibraryDescriptor::C(Box::leak(Box::new(factory))))
}

/// `abi_stable` explains a mismatch in hundreds of lines; say what an
/// author can act on: which type differs, reached through which fields, and
/// how ("`ProviderFactory` → field `evaluate` → ...: 3 fields here, 4 in the
/// provider"), at most three differences. A provider built against another
/// major version of guardhost-abi is named as such, with the fix.
fn describe_layout_errors(errors: &AbiInstabilityErrors) -> String {
    use abi_stable::abi_stability::abi_checking::AbiInstability as Ai;
    let mut found: Vec<String> = Vec::new();
    for error in errors.errors.iter() {
        let place = place(errors.interface, &error.stack_trace);
        for difference in error.errs.iter() {
            let what = match difference {
                Ai::PackageVersion(v) => {
                    return format!(
                        "the provider was built against guardhost-abi {}, this host against guardhost-abi {}; \
                         rebuild the provider against guardhost-abi {}.x (the crate's major version is the ABI's)",
                        v.found, v.expected, ABI_MAJOR
                    )
                }
                Ai::Package(v) => format!("the type comes from crate `{}` here, `{}` in the provider", v.expected, v.found),
                Ai::Name(v) => format!("the type is `{}` here, `{}` in the provider", v.expected, v.found),
                Ai::Size(v) => format!("{} bytes here, {} in the provider", v.expected, v.found),
                Ai::Alignment(v) => format!("aligned to {} here, {} in the provider", v.expected, v.found),
                Ai::FieldCountMismatch(v) => format!("{} fields here, {} in the provider", v.expected, v.found),
                Ai::UnexpectedField(v) => format!(
                    "field `{}: {}` here, `{}: {}` in the provider",
                    v.expected.name(),
                    v.expected.full_type(),
                    v.found.name(),
                    v.found.full_type()
                ),
                Ai::TooManyVariants(v) => format!("{} variants here, {} in the provider", v.expected, v.found),
                Ai::UnexpectedVariant(v) => format!("variant `{}` here, `{}` in the provider", v.expected, v.found),
                Ai::MismatchedPrimitive(v) => format!("{:?} here, {:?} in the provider", v.expected, v.found),
                Ai::MismatchedPrefixSize(v) => {
                    format!("a prefix of {} fields here, {} in the provider", v.expected, v.found)
                }
                other => {
                    let debug = format!("{other:?}");
                    let variant = debug.split(['(', ' ', '{']).next().unwrap_or("a difference").to_owned();
                    format!("{variant} (GUARDHOST_LOG=debug prints abi_stable's full report)")
                }
            };
            let item = format!("{place}: {what}");
            if !found.contains(&item) {
                found.push(item);
            }
        }
    }
    if found.is_empty() {
        return "abi_stable found a difference it did not describe (GUARDHOST_LOG=debug prints its full report)"
            .to_owned();
    }
    let shown = found.len().min(3);
    let mut summary = found[..shown].join("; ");
    if found.len() > shown {
        summary.push_str(&format!("; and {} more", found.len() - shown));
    }
    summary
}

/// Where a difference is: the type that differs, and the names of the
/// fields and functions that lead to it from the factory, leaving out
/// `abi_stable`'s own plumbing (`__returns`, `field_0`, `vtable` ...):
/// "`Reason` (via `construct` → `evaluate` → `reasons`)".
fn place(
    root: &'static abi_stable::type_layout::TypeLayout,
    trace: &[abi_stable::abi_stability::abi_checking::ExpectedFound<
        abi_stable::type_layout::TLFieldOrFunction,
    >],
) -> String {
    use abi_stable::type_layout::TLFieldOrFunction;
    let plumbing = |name: &str| {
        name.starts_with("__")
            || name.starts_with("field_")
            || name.parse::<usize>().is_ok()
            || matches!(name, "obj" | "vtable" | "buffer" | "ptr" | "inner")
    };
    let mut target = root.name();
    let mut via: Vec<String> = Vec::new();
    for step in trace {
        let name = match &step.expected {
            TLFieldOrFunction::Field(field) => {
                target = field.layout().name();
                field.name().to_owned()
            }
            TLFieldOrFunction::Function(function) => function.name.as_str().to_owned(),
        };
        if !plumbing(&name) && via.last() != Some(&name) {
            via.push(name);
        }
    }
    if via.is_empty() {
        format!("`{target}`")
    } else {
        format!("`{target}` (via `{}`)", via.join("` → `"))
    }
}

#[cfg(test)]
mod tests {
    use super::remove_unmapped_copies;
    use std::time::Duration;

    /// Neither ELF nor PE: left to the OS loader, which names its reason.
    #[test]
    fn bytes_of_another_format_are_left_to_the_os_loader() {
        assert_eq!(super::check_whole(b"this is not a shared object"), Ok(()));
    }

    #[test]
    fn unmapped_copies_are_removed_and_nothing_else() {
        let base = tempfile::tempdir().unwrap();
        let copy = base.path().join("guardhost-library-1-2-3");
        std::fs::create_dir(&copy).unwrap();
        std::fs::write(copy.join("digest-lib.dll"), b"bytes").unwrap();
        let other = base.path().join("something-else");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("file"), b"kept").unwrap();
        remove_unmapped_copies(base.path(), Duration::from_secs(3600));
        assert!(copy.exists(), "a copy younger than the age given is left");
        remove_unmapped_copies(base.path(), Duration::ZERO);
        assert!(!copy.exists(), "an unused copy is removed");
        assert!(other.join("file").exists(), "what is not a copy is left");
    }

    /// Windows: a copy that is mapped cannot be removed, so it stays.
    #[cfg(windows)]
    #[test]
    fn a_mapped_copy_stays() {
        let base = tempfile::tempdir().unwrap();
        let copy = base.path().join("guardhost-library-4-5-6");
        std::fs::create_dir(&copy).unwrap();
        let file = copy.join("allowlist.dll");
        let library = built_cdylib("guardhost_allowlist");
        std::fs::copy(library, &file).unwrap();
        // SAFETY: the workspace's allowlist provider, whose initialisers
        // are Rust's own; nothing is called.
        let mapped = unsafe { libloading::Library::new(&file) }.unwrap();
        remove_unmapped_copies(base.path(), Duration::ZERO);
        assert!(file.exists(), "a mapped copy stays");
        drop(mapped);
        remove_unmapped_copies(base.path(), Duration::ZERO);
        assert!(!copy.exists(), "and goes once it is unmapped");
    }

    /// The workspace's `cdylib` `name`, beside the test program or one up.
    #[cfg(windows)]
    fn built_cdylib(name: &str) -> std::path::PathBuf {
        let exe = std::env::current_exe().unwrap();
        let file = format!("{name}{}", std::env::consts::DLL_SUFFIX);
        let deps = exe.parent().unwrap();
        [deps.join(&file), deps.parent().unwrap().join(&file)]
            .into_iter()
            .find(|path| path.exists())
            .unwrap_or_else(|| panic!("{file} is not built beside {}", deps.display()))
    }
}
