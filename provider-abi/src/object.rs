//! The provider as an FFI-safe trait object.
// `#[derive(StableAbi)]` and `#[sabi_trait]` expand to `unsafe impl`s and
// `unsafe` blocks (layout constants, vtables); this module writes none itself.
#![allow(unsafe_code)]

use abi_stable::sabi_trait;
use abi_stable::std_types::{RBox, RResult, RStr};
use async_ffi::BorrowingFfiFuture;

use crate::{Decision, ProviderError, Request, Verdict};

/// The result of one evaluation, as it crosses the boundary.
pub type EvalResult = RResult<Decision, ProviderError>;

/// The result of one [`crate::ProviderFactory::decide`], as it crosses the
/// boundary.
pub type VerdictResult = RResult<Verdict, ProviderError>;

/// The interface of a constructed provider, as the host sees it.
///
/// Authors do not implement this trait: they implement [`crate::Provider`]
/// and [`crate::export_provider!`] generates the implementation, which
/// catches panics on the provider's side of the boundary.
#[sabi_trait]
pub trait ProviderObject: Send + Sync {
    /// The provider's name (for example `allowlist`).
    fn name(&self) -> RStr<'_>;

    /// Decides one tool call synchronously.
    fn evaluate(&self, request: &Request<'_>) -> EvalResult;

    /// Decides one tool call asynchronously. The future must not need the
    /// host's async runtime: a provider library has its own copy of every
    /// runtime's thread-locals.
    #[sabi(last_prefix_field)]
    fn aevaluate<'a>(&'a self, request: Request<'a>) -> BorrowingFfiFuture<'a, EvalResult>;
}

/// A constructed provider, owned by the host.
pub type ProviderBox = ProviderObject_TO<'static, RBox<()>>;
