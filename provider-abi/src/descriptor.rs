//! The exported descriptor: what the host finds under a provider's symbol.
// `#[derive(StableAbi)]` and `#[sabi_trait]` expand to `unsafe impl`s and
// `unsafe` blocks (layout constants, vtables); this module writes none itself.
#![allow(unsafe_code)]

use abi_stable::std_types::{RResult, RStr, RString, RVec};
use abi_stable::type_layout::TypeLayout;
use abi_stable::StableAbi;

use crate::{ProviderBox, ProviderError, Request, VerdictResult};

/// The first eight bytes of every descriptor.
pub const MAGIC: [u8; 8] = *b"GHPROV\x00\x01";

/// The ABI major version. A host loads only descriptors with its own major.
pub const ABI_MAJOR: u16 = 1;

/// The ABI minor version. Minor versions only append fields to
/// [`ProviderFactory`] after its last prefix field.
///
/// - 1.0: `name`, `accepts_extra_keys`, `accepted_keys`, `construct`.
/// - 1.1: `volatile_metadata_keys`.
/// - 1.2: `path_keys`.
/// - 1.3: `declarations`.
/// - 1.4: `decide`.
pub const ABI_MINOR: u16 = 4;

/// Bits of [`DescriptorHeader::flags`].
pub mod flags {
    /// The library was built with `panic = "unwind"`, so the export macro's
    /// `catch_unwind` can turn a panic into a [`crate::ProviderError`].
    /// Without it a panic aborts the whole process; the host refuses such
    /// libraries.
    pub const PANIC_UNWIND: u32 = 1;
}

/// Bits of [`ProviderFactory::declarations`]: what a provider declares
/// about its evaluations, so the host need not prepare what it never reads,
/// nor guard against waits it never makes. `0` (an older library) declares
/// nothing: it reads everything and may block.
pub mod declarations {
    /// It never reads the tool's arguments
    /// ([`crate::Request::tool_input_json`] is then `""`).
    pub const NO_TOOL_INPUT: u32 = 1;
    /// It never reads the authorization attributes
    /// ([`crate::Request::authz_attributes_json`] is then `""`).
    pub const NO_AUTHZ_ATTRIBUTES: u32 = 2;
    /// It never reads who, where and when: `agent_id`, `thread_id`,
    /// `is_subagent`, `timestamp`, `user_id`, `user_role`,
    /// `oauth_provider`, `oauth_id`, `run_id`, `tool_call_id`,
    /// `channel_user_id`, `is_internal` (each then `None`, `false` or
    /// `""`).
    pub const NO_ATTRIBUTION: u32 = 4;
    /// Every evaluation decides from memory and returns at once: no file,
    /// network or database access, no sleeping, no lock held for long by
    /// another call. A host may then call it where it would not call code
    /// that can wait (the Python package keeps the interpreter's lock).
    pub const NEVER_BLOCKS: u32 = 8;
    /// Its reason messages never quote what a call carries beyond the
    /// tool's name and the caller's role: no argument value, command, path
    /// or URL. A host may then record them in audit events as written
    /// (DeerFlow's own audit does), where it otherwise records a fixed
    /// text per code. Older hosts ignore the bit.
    pub const MESSAGES_QUOTE_NO_INPUT: u32 = 16;
}

/// The fixed header the host reads before anything else.
///
/// Its layout never changes, so any host can read any descriptor's header
/// and report a version mismatch instead of misreading memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DescriptorHeader {
    /// Always [`MAGIC`].
    pub magic: [u8; 8],
    /// The [`ABI_MAJOR`] the library was built against.
    pub abi_major: u16,
    /// The [`ABI_MINOR`] the library was built against.
    pub abi_minor: u16,
    /// Bits from [`flags`].
    pub flags: u32,
}

/// What a provider library exports, once per provider, under a symbol its
/// author names (`#[no_mangle]`). Made by [`crate::export_provider!`].
#[repr(C)]
pub struct ProviderDescriptor {
    /// Magic, versions, flags.
    pub header: DescriptorHeader,
    /// The layout of [`ProviderFactoryRef`] as the library sees it; the host
    /// checks it against its own before touching `factory`.
    pub layout: &'static TypeLayout,
    /// The factory.
    pub factory: ProviderFactoryRef,
}

/// Everything the host needs to know about a provider before constructing it,
/// and the constructor.
///
/// This is a prefix type: minor versions append fields **below**
/// `construct`, never above it, and never change existing ones. A new field
/// is read by a newer host only when the library is new enough to have it.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ProviderFactoryRef)))]
#[sabi(missing_field(panic))]
pub struct ProviderFactory {
    /// The provider's name.
    pub name: RStr<'static>,
    /// Whether the constructor accepts keys beyond `accepted_keys` (the
    /// twin of Python's `**kwargs`).
    pub accepts_extra_keys: bool,
    /// The config keys the constructor accepts by name.
    pub accepted_keys: extern "C" fn() -> RResult<RVec<RString>, ProviderError>,
    /// Builds a provider from its config, a JSON object as text.
    #[sabi(last_prefix_field)]
    pub construct: extern "C" fn(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError>,
    /// Since 1.1: the top-level decision-metadata keys whose values may
    /// differ between two evaluations of the same request (a timestamp, a
    /// counter). Conformance checks ignore them when comparing decisions.
    /// Empty for a 1.0 library.
    #[sabi(missing_field(with = no_keys))]
    pub volatile_metadata_keys: extern "C" fn() -> RVec<RString>,
    /// Since 1.2: the config keys whose string values are file or directory
    /// paths. The host joins a relative one to the config file's directory
    /// before constructing the provider, so every relative path in a config
    /// file has one base. Empty for an older library.
    #[sabi(missing_field(with = no_keys))]
    pub path_keys: extern "C" fn() -> RVec<RString>,
    /// Since 1.3: bits from [`declarations`]: the parts of a request the
    /// provider never reads (the host then hands it an empty text, `""`
    /// and not `{}`, for the arguments and the attributes, and the
    /// defaults, `None`, `false` and `""`, for the attribution: nothing is
    /// prepared for a provider that decides by the tool's name alone), and
    /// whether it never blocks. An older library declares nothing (`0`).
    #[sabi(missing_field(default))]
    pub declarations: u32,
    /// Decides one tool call through [`crate::Provider::decide`] (ABI 1.4):
    /// `provider` must be one that this factory's `construct` made (another
    /// is answered with an error). A host calls this instead of the
    /// provider's `evaluate` when the library has it; absent in a library
    /// built against an earlier 1.x.
    #[sabi(missing_field(option))]
    pub decide: extern "C" fn(provider: &ProviderBox, request: &Request<'_>) -> VerdictResult,
}

/// What an older library, which lacks a list of keys, declares: none.
fn no_keys() -> extern "C" fn() -> RVec<RString> {
    extern "C" fn none() -> RVec<RString> {
        RVec::new()
    }
    none
}

/// The layout the host expects for [`ProviderDescriptor::layout`].
pub const FACTORY_LAYOUT: &TypeLayout = <ProviderFactoryRef as StableAbi>::LAYOUT;

/// Earlier shapes of the factory, exactly as older libraries export them.
///
/// `abi_stable` accepts a library whose prefix type has *more* fields than
/// the host expects, not fewer. So a host checks a library's factory against
/// the shape of the minor version the library's header names (or its own,
/// when the library is newer), and then reads a newer field only when the
/// library has it. The loader's tests build a library that exports a 1.0
/// descriptor to prove that a 1.1 host loads it.
#[doc(hidden)]
pub mod compat {
    /// ABI 1.0.
    pub mod v1_0 {
        use abi_stable::std_types::{RResult, RStr, RString, RVec};
        use abi_stable::type_layout::TypeLayout;
        use abi_stable::StableAbi;

        use crate::{DescriptorHeader, ProviderBox, ProviderError};

        /// [`crate::ProviderFactory`] as of 1.0.
        #[repr(C)]
        #[derive(StableAbi)]
        #[sabi(kind(Prefix(prefix_ref = ProviderFactoryRef)))]
        #[sabi(missing_field(panic))]
        pub struct ProviderFactory {
            /// As in 1.4.
            pub name: RStr<'static>,
            /// As in 1.4.
            pub accepts_extra_keys: bool,
            /// As in 1.4.
            pub accepted_keys: extern "C" fn() -> RResult<RVec<RString>, ProviderError>,
            /// As in 1.4.
            #[sabi(last_prefix_field)]
            pub construct: extern "C" fn(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError>,
        }

        /// The layout a host checks a 1.0 library's factory against.
        pub const FACTORY_LAYOUT: &TypeLayout = <ProviderFactoryRef as StableAbi>::LAYOUT;

        /// [`crate::ProviderDescriptor`] as of 1.0.
        #[repr(C)]
        pub struct ProviderDescriptor {
            /// As in 1.4.
            pub header: DescriptorHeader,
            /// As in 1.4.
            pub layout: &'static TypeLayout,
            /// The 1.0 factory.
            pub factory: ProviderFactoryRef,
        }
    }
    /// ABI 1.1.
    pub mod v1_1 {
        use abi_stable::std_types::{RResult, RStr, RString, RVec};
        use abi_stable::type_layout::TypeLayout;
        use abi_stable::StableAbi;

        use crate::{DescriptorHeader, ProviderBox, ProviderError};

        /// [`crate::ProviderFactory`] as of 1.1.
        #[repr(C)]
        #[derive(StableAbi)]
        #[sabi(kind(Prefix(prefix_ref = ProviderFactoryRef)))]
        #[sabi(missing_field(panic))]
        pub struct ProviderFactory {
            /// As in 1.4.
            pub name: RStr<'static>,
            /// As in 1.4.
            pub accepts_extra_keys: bool,
            /// As in 1.4.
            pub accepted_keys: extern "C" fn() -> RResult<RVec<RString>, ProviderError>,
            /// As in 1.4.
            #[sabi(last_prefix_field)]
            pub construct: extern "C" fn(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError>,
            /// As in 1.4.
            pub volatile_metadata_keys: extern "C" fn() -> RVec<RString>,
        }

        /// The layout a host checks a 1.1 library's factory against.
        pub const FACTORY_LAYOUT: &TypeLayout = <ProviderFactoryRef as StableAbi>::LAYOUT;

        /// [`crate::ProviderDescriptor`] as of 1.1.
        #[repr(C)]
        pub struct ProviderDescriptor {
            /// As in 1.4.
            pub header: DescriptorHeader,
            /// As in 1.4.
            pub layout: &'static TypeLayout,
            /// The 1.1 factory.
            pub factory: ProviderFactoryRef,
        }
    }
    /// ABI 1.2.
    pub mod v1_2 {
        use abi_stable::std_types::{RResult, RStr, RString, RVec};
        use abi_stable::type_layout::TypeLayout;
        use abi_stable::StableAbi;

        use crate::{DescriptorHeader, ProviderBox, ProviderError};

        /// [`crate::ProviderFactory`] as of 1.2.
        #[repr(C)]
        #[derive(StableAbi)]
        #[sabi(kind(Prefix(prefix_ref = ProviderFactoryRef)))]
        #[sabi(missing_field(panic))]
        pub struct ProviderFactory {
            /// As in 1.4.
            pub name: RStr<'static>,
            /// As in 1.4.
            pub accepts_extra_keys: bool,
            /// As in 1.4.
            pub accepted_keys: extern "C" fn() -> RResult<RVec<RString>, ProviderError>,
            /// As in 1.4.
            #[sabi(last_prefix_field)]
            pub construct: extern "C" fn(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError>,
            /// As in 1.4.
            pub volatile_metadata_keys: extern "C" fn() -> RVec<RString>,
            /// As in 1.4.
            pub path_keys: extern "C" fn() -> RVec<RString>,
        }

        /// The layout a host checks a 1.2 library's factory against.
        pub const FACTORY_LAYOUT: &TypeLayout = <ProviderFactoryRef as StableAbi>::LAYOUT;

        /// [`crate::ProviderDescriptor`] as of 1.2.
        #[repr(C)]
        pub struct ProviderDescriptor {
            /// As in 1.4.
            pub header: DescriptorHeader,
            /// As in 1.4.
            pub layout: &'static TypeLayout,
            /// The 1.2 factory.
            pub factory: ProviderFactoryRef,
        }
    }
    /// ABI 1.3.
    pub mod v1_3 {
        use abi_stable::std_types::{RResult, RStr, RString, RVec};
        use abi_stable::type_layout::TypeLayout;
        use abi_stable::StableAbi;

        use crate::{DescriptorHeader, ProviderBox, ProviderError};

        /// [`crate::ProviderFactory`] as of 1.3.
        #[repr(C)]
        #[derive(StableAbi)]
        #[sabi(kind(Prefix(prefix_ref = ProviderFactoryRef)))]
        #[sabi(missing_field(panic))]
        pub struct ProviderFactory {
            /// As in 1.4.
            pub name: RStr<'static>,
            /// As in 1.4.
            pub accepts_extra_keys: bool,
            /// As in 1.4.
            pub accepted_keys: extern "C" fn() -> RResult<RVec<RString>, ProviderError>,
            /// As in 1.4.
            #[sabi(last_prefix_field)]
            pub construct: extern "C" fn(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError>,
            /// As in 1.4.
            pub volatile_metadata_keys: extern "C" fn() -> RVec<RString>,
            /// As in 1.4.
            pub path_keys: extern "C" fn() -> RVec<RString>,
            /// As in 1.4.
            pub declarations: u32,
        }

        /// The layout a host checks a 1.3 library's factory against.
        pub const FACTORY_LAYOUT: &TypeLayout = <ProviderFactoryRef as StableAbi>::LAYOUT;

        /// [`crate::ProviderDescriptor`] as of 1.3.
        #[repr(C)]
        pub struct ProviderDescriptor {
            /// As in 1.4.
            pub header: DescriptorHeader,
            /// As in 1.4.
            pub layout: &'static TypeLayout,
            /// The 1.3 factory.
            pub factory: ProviderFactoryRef,
        }
    }
}
