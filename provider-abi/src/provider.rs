//! The trait provider authors implement, and the glue that exports it.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use abi_stable::sabi_trait::TD_CanDowncast;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use async_ffi::{BorrowingFfiFuture, FutureExt};
use serde::de::DeserializeOwned;

use crate::descriptor::{flags, DescriptorHeader, ProviderDescriptor, ProviderFactory, ProviderFactoryRef};
use crate::descriptor::{ABI_MAJOR, ABI_MINOR, FACTORY_LAYOUT, MAGIC};
use crate::object::{EvalResult, ProviderObject, ProviderObject_TO, VerdictResult};
use crate::{config_keys, Decision, ProviderBox, ProviderError, Request, Verdict};

/// A guardrail provider.
///
/// Implement this, then export it with [`crate::export_provider!`]. The host
/// constructs it from the YAML `provider.config` (deserialized into
/// [`Provider::Config`]) and calls [`Provider::evaluate`] before every tool
/// call (or [`Provider::aevaluate`] on the async path).
///
/// Panics anywhere in here are caught on the provider's side and reach the
/// host as a [`ProviderError`] (so the host's `fail_closed` applies).
pub trait Provider: Sized + Send + Sync + 'static {
    /// The provider's name, for logs and `guardhost check`.
    const NAME: &'static str;

    /// Whether the constructor accepts config keys that [`Provider::Config`]
    /// does not name (Python's `**kwargs`). Such keys are ignored by serde
    /// unless the config type captures them (`#[serde(flatten)]`). When this
    /// is true, the host also injects `framework: "deerflow"`.
    const ACCEPTS_EXTRA_KEYS: bool = false;

    /// Top-level keys of [`Decision::metadata_json`] whose values may differ
    /// between two evaluations of the same request (a timestamp, a request
    /// counter). `guardhost conformance` ignores them when it checks that
    /// decisions are deterministic; every other part of a decision must be.
    const VOLATILE_METADATA: &'static [&'static str] = &[];

    /// Config keys whose string values are file or directory paths (a
    /// string, or a list of strings). The host joins a relative one to the
    /// config file's directory before
    /// [`Provider::new`] sees it (an absolute one, or one starting with
    /// `~`, is left alone), so operators have one base for every relative
    /// path in a config file. Name only top-level keys of
    /// [`Provider::Config`].
    const PATH_KEYS: &'static [&'static str] = &[];

    /// Whether [`Provider::evaluate`] reads the tool's arguments. A
    /// provider that decides by the tool's name (and the caller) alone
    /// says `false`: the host then does not prepare them, and
    /// [`Request::tool_input`] returns an error that says so. `guardhost
    /// conformance` checks the claim (the same calls, with and without
    /// arguments, must be decided alike).
    const READS_TOOL_INPUT: bool = true;

    /// Whether [`Provider::evaluate`] reads the authorization attributes;
    /// as [`Provider::READS_TOOL_INPUT`].
    const READS_AUTHZ_ATTRIBUTES: bool = true;

    /// Whether [`Provider::evaluate`] reads who, where and when (the
    /// request's other fields: [`crate::declarations::NO_ATTRIBUTION`]);
    /// when `false`, the host hands it their defaults (`None`, `false`,
    /// `""`).
    const READS_ATTRIBUTION: bool = true;

    /// Whether every evaluation decides from memory and returns at once
    /// (no file, network or database access, no sleeping, no lock another
    /// call may hold for long). The Python package then calls it without
    /// releasing the interpreter's lock, which costs about as much as such a
    /// decision, and the host decides its async calls through
    /// [`Provider::decide`] (or `evaluate`) too: [`Provider::aevaluate`] is
    /// not called. `guardhost conformance` checks that its p99 stays under
    /// 1 ms. Say `true` only when it holds for every config.
    const NEVER_BLOCKS: bool = false;

    /// Whether its reason messages may quote what a call carries beyond
    /// the tool's name and the caller's role (an argument value, a command,
    /// a path, a URL). When `false`
    /// ([`crate::declarations::MESSAGES_QUOTE_NO_INPUT`]), a host records
    /// its messages in audit events as written; otherwise it records a
    /// fixed text per reason code, since an audit log must not hold the
    /// call's arguments. Say `false` only when it holds for every config.
    const MESSAGES_QUOTE_INPUT: bool = true;

    /// The constructor's keyword arguments. Its field names are the config
    /// keys the provider accepts; a field named `framework` makes the host
    /// inject `framework: "deerflow"`.
    type Config: DeserializeOwned;

    /// Builds the provider; an `Err` is shown to the operator verbatim.
    fn new(config: Self::Config) -> Result<Self, ProviderError>;

    /// Decides one tool call.
    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError>;

    /// Decides one tool call where a host can read the decision in place
    /// (ABI 1.4): a host calls this instead of [`Provider::evaluate`]. By
    /// default it is [`Provider::evaluate`]'s decision.
    ///
    /// Override it when most decisions are one reason with a static code
    /// ([`Verdict::allow`], [`Verdict::deny`]): nothing is then allocated
    /// for the reason, on either side. Keep `evaluate` deciding alike, most
    /// simply as `self.decide(request).map(Decision::from)`; `guardhost
    /// conformance` checks that the two agree.
    ///
    /// ```
    /// use guardhost_abi::{Decision, Provider, ProviderError, Request, Verdict};
    ///
    /// pub struct NoShell;
    ///
    /// impl Provider for NoShell {
    ///     const NAME: &'static str = "no-shell";
    ///     type Config = serde_json::Map<String, serde_json::Value>;
    ///     fn new(_: Self::Config) -> Result<Self, ProviderError> {
    ///         Ok(NoShell)
    ///     }
    ///     fn decide(&self, request: &Request<'_>) -> Result<Verdict, ProviderError> {
    ///         Ok(match request.tool_name() {
    ///             "bash" => Verdict::deny("custom.no_shell", "no shell here"),
    ///             _ => Verdict::allow("custom.allowed"),
    ///         })
    ///     }
    ///     fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
    ///         self.decide(request).map(Decision::from)
    ///     }
    /// }
    /// # assert!(!NoShell.evaluate(&Request::for_tool("bash")).unwrap().allow);
    /// ```
    fn decide(&self, request: &Request<'_>) -> Result<Verdict, ProviderError> {
        self.evaluate(request).map(Verdict::Full)
    }

    /// Decides one tool call on the async path; by default the same as
    /// [`Provider::decide`] (which, by default, is [`Provider::evaluate`]).
    /// The future must not rely on the host's runtime (no `tokio::time`, no
    /// `tokio::spawn`): bring your own if you need one.
    fn aevaluate<'a>(
        &'a self,
        request: Request<'a>,
    ) -> impl Future<Output = Result<Decision, ProviderError>> + Send + 'a {
        std::future::ready(self.decide(&request).map(Decision::from))
    }

    /// The config keys the constructor accepts by name; derived from
    /// [`Provider::Config`]. Override only when the config type cannot say
    /// (it uses `#[serde(flatten)]` or is a map).
    fn accepted_keys() -> Vec<&'static str> {
        config_keys::<Self::Config>().map(<[_]>::to_vec).unwrap_or_default()
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// The error for a panic caught in `what`.
fn caught(what: &str, payload: &(dyn Any + Send)) -> ProviderError {
    ProviderError::panic(format!("{what}: {}", panic_message(payload)))
}

/// Runs `f`, turning a panic into a [`ProviderError`] that names `what`.
fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, ProviderError>) -> RResult<T, ProviderError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.into(),
        Err(payload) => RResult::RErr(caught(what, &*payload)),
    }
}

/// An author's evaluation future, boxed.
type AuthorFuture<'a> = Pin<Box<dyn Future<Output = Result<Decision, ProviderError>> + Send + 'a>>;

/// A future that turns a panic in `poll` into a [`ProviderError`].
struct CatchUnwind<'a> {
    inner: Option<AuthorFuture<'a>>,
}

/// Drops `value`, swallowing a panic in its `Drop` (the panic hook has
/// already reported it): unwinding out of a drop here would cross the
/// boundary.
fn drop_contained<T>(value: T) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(value)));
}

impl Future for CatchUnwind<'_> {
    type Output = EvalResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<EvalResult> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(RResult::RErr(ProviderError::error(
                "provider future polled after completion",
            )));
        };
        let result = match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(result)) => result.into(),
            Err(payload) => RResult::RErr(caught("aevaluate", &*payload)),
        };
        drop_contained(self.inner.take());
        Poll::Ready(result)
    }
}

impl Drop for CatchUnwind<'_> {
    /// A future dropped before completion (a cancelled call).
    fn drop(&mut self) {
        drop_contained(self.inner.take());
    }
}

/// The [`ProviderObject`] implementation the export macro installs around a
/// [`Provider`]. The provider is only `None` while being dropped.
struct Exported<P>(Option<P>);

impl<P> Exported<P> {
    fn provider(&self) -> Result<&P, ProviderError> {
        self.0.as_ref().ok_or_else(|| ProviderError::error("provider used while being dropped"))
    }
}

impl<P> Drop for Exported<P> {
    fn drop(&mut self) {
        drop_contained(self.0.take());
    }
}

impl<P: Provider> ProviderObject for Exported<P> {
    fn name(&self) -> RStr<'_> {
        RStr::from_str(P::NAME)
    }

    fn evaluate(&self, request: &Request<'_>) -> EvalResult {
        guard("evaluate", || self.provider()?.evaluate(request))
    }

    fn aevaluate<'a>(&'a self, request: Request<'a>) -> BorrowingFfiFuture<'a, EvalResult> {
        let started = catch_unwind(AssertUnwindSafe(|| self.provider().map(|p| p.aevaluate(request))));
        let error = match started {
            Ok(Ok(future)) => return CatchUnwind { inner: Some(Box::pin(future)) }.into_ffi(),
            Ok(Err(error)) => error,
            Err(payload) => caught("aevaluate", &*payload),
        };
        std::future::ready(RResult::RErr(error)).into_ffi()
    }
}

/// Constructs `P` from config JSON text, with panics caught.
extern "C" fn construct_shim<P: Provider>(config_json: RStr<'_>) -> RResult<ProviderBox, ProviderError> {
    guard("constructor", || {
        // Never serde_json's message for the text: it would quote the value.
        let config: serde_json::Value = serde_json::from_str(config_json.as_str()).map_err(|e| {
            ProviderError::error(format!(
                "config is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        // The host names the provider when it reports this.
        let config: P::Config =
            deserialize_config(config).map_err(|e| ProviderError::error(format!("invalid config: {e}")))?;
        let provider = P::new(config)?;
        Ok(ProviderObject_TO::from_value(Exported(Some(provider)), TD_CanDowncast))
    })
}

/// Decides through `P::decide`, for a provider this library's
/// `construct_shim::<P>` made: the object is downcast to that type, which
/// fails (with an error, not undefined behaviour) for any other.
extern "C" fn decide_shim<P: Provider>(provider: &ProviderBox, request: &Request<'_>) -> VerdictResult {
    // Named as the sync evaluation, whichever of `decide` and `evaluate`
    // the author wrote (by default `decide` calls `evaluate`).
    guard("evaluate", || {
        let exported = provider.obj.downcast_as::<Exported<P>>().map_err(|_| {
            ProviderError::error("`decide` was handed a provider that another factory constructed")
        })?;
        exported.provider()?.decide(request)
    })
}

extern "C" fn accepted_keys_shim<P: Provider>() -> RResult<RVec<RString>, ProviderError> {
    guard("accepted_keys", || Ok(P::accepted_keys().into_iter().map(RString::from).collect()))
}

extern "C" fn volatile_metadata_keys_shim<P: Provider>() -> RVec<RString> {
    // Copying a static list of strings cannot panic.
    P::VOLATILE_METADATA.iter().map(|k| RString::from(*k)).collect()
}

extern "C" fn path_keys_shim<P: Provider>() -> RVec<RString> {
    // Copying a static list of strings cannot panic.
    P::PATH_KEYS.iter().map(|k| RString::from(*k)).collect()
}

/// The [`crate::declarations`] bits of what `P` declares.
const fn declarations<P: Provider>() -> u32 {
    use crate::declarations::{
        MESSAGES_QUOTE_NO_INPUT, NEVER_BLOCKS, NO_ATTRIBUTION, NO_AUTHZ_ATTRIBUTES, NO_TOOL_INPUT,
    };
    let mut bits = 0;
    if !P::READS_TOOL_INPUT {
        bits |= NO_TOOL_INPUT;
    }
    if !P::READS_AUTHZ_ATTRIBUTES {
        bits |= NO_AUTHZ_ATTRIBUTES;
    }
    if !P::READS_ATTRIBUTION {
        bits |= NO_ATTRIBUTION;
    }
    if P::NEVER_BLOCKS {
        bits |= NEVER_BLOCKS;
    }
    if !P::MESSAGES_QUOTE_INPUT {
        bits |= MESSAGES_QUOTE_NO_INPUT;
    }
    bits
}

/// Holds the static factory of `P`.
struct FactoryOf<P>(PhantomData<P>);

impl<P: Provider> FactoryOf<P> {
    abi_stable::staticref! {
        const FACTORY: abi_stable::prefix_type::WithMetadata<ProviderFactory> =
            abi_stable::prefix_type::WithMetadata::new(ProviderFactory {
                name: RStr::from_str(P::NAME),
                accepts_extra_keys: P::ACCEPTS_EXTRA_KEYS,
                accepted_keys: accepted_keys_shim::<P>,
                construct: construct_shim::<P>,
                volatile_metadata_keys: volatile_metadata_keys_shim::<P>,
                path_keys: path_keys_shim::<P>,
                declarations: declarations::<P>(),
                decide: decide_shim::<P>,
            })
    }
}

impl ProviderDescriptor {
    /// The descriptor of `P`. `panic_unwind` must be `cfg!(panic = "unwind")`
    /// evaluated in the provider's crate, which is what
    /// [`crate::export_provider!`] passes.
    #[doc(hidden)]
    pub const fn new<P: Provider>(panic_unwind: bool) -> Self {
        ProviderDescriptor {
            header: DescriptorHeader {
                magic: MAGIC,
                abi_major: ABI_MAJOR,
                abi_minor: ABI_MINOR,
                flags: if panic_unwind { flags::PANIC_UNWIND } else { 0 },
            },
            layout: FACTORY_LAYOUT,
            factory: ProviderFactoryRef(FactoryOf::<P>::FACTORY.as_prefix()),
        }
    }
}

/// Exports a [`Provider`] under a symbol, in one line.
///
/// ```text
/// guardhost_abi::export_provider!(MyGuardrailProvider, MyProvider);
/// ```
///
/// The symbol is what operators write after the colon in
/// `use: path/to/libmy_provider.so:MyGuardrailProvider`. One library may
/// export several providers under different symbols. The library must be a
/// `cdylib` built with `panic = "unwind"` (the default).
#[macro_export]
macro_rules! export_provider {
    ($symbol:ident, $provider:ty) => {
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        #[doc = concat!("The guardhost provider descriptor of `", stringify!($provider), "`.")]
        pub static $symbol: $crate::ProviderDescriptor =
            $crate::ProviderDescriptor::new::<$provider>(cfg!(panic = "unwind"));
    };
}

/// Deserializes a config value into `T` with an error that names the key
/// path and the expected type but never the value: a config value may be a
/// secret from the environment (`api_key: $API_KEY`), and an error is shown
/// on stderr, in logs and in reports. The message reads
/// `` `denied_tools`: invalid type: a string, expected a sequence `` or
/// `` `mode`: unknown variant (a string of 12 characters), expected one of
/// `enforce`, `warn` ``.
///
/// Messages that `T`'s own code builds (`serde::de::Error::custom`, e.g. in a
/// `deserialize_with` function) pass through as written: such code must not
/// quote the value either.
pub fn deserialize_config<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(redact::Unquoted(value)).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().0;
        if path == "." {
            message
        } else {
            format!("`{path}`: {message}")
        }
    })
}

/// A [`serde_json::Value`] deserializer whose errors describe a value by its
/// kind, never by its text.
mod redact {
    use std::fmt;

    use serde::de::value::{MapDeserializer, SeqDeserializer};
    use serde::de::{self, Deserializer, Expected, IntoDeserializer, Unexpected, Visitor};
    use serde_json::Value;

    /// A deserialization error without any configured value in it.
    #[derive(Debug)]
    pub(super) struct Redacted(pub(super) String);

    impl fmt::Display for Redacted {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Redacted {}

    /// What a value is, without what it says.
    fn kind(unexpected: &Unexpected<'_>) -> String {
        match unexpected {
            Unexpected::Bool(_) => "a boolean".into(),
            Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => "a number".into(),
            Unexpected::Char(_) => "a character".into(),
            Unexpected::Str(s) => format!("a string of {} characters", s.chars().count()),
            Unexpected::Bytes(b) => format!("{} bytes", b.len()),
            Unexpected::Unit => "null".into(),
            Unexpected::Option => "an optional value".into(),
            Unexpected::NewtypeStruct => "a newtype struct".into(),
            Unexpected::Seq => "a sequence".into(),
            Unexpected::Map => "a map".into(),
            Unexpected::Enum => "an enum".into(),
            Unexpected::UnitVariant => "a unit variant".into(),
            Unexpected::NewtypeVariant => "a newtype variant".into(),
            Unexpected::TupleVariant => "a tuple variant".into(),
            Unexpected::StructVariant => "a struct variant".into(),
            Unexpected::Other(other) => (*other).into(),
        }
    }

    /// serde's `one of `a`, `b``: names the code knows, never values.
    fn one_of(names: &'static [&'static str]) -> String {
        match names {
            [] => "there are no variants".into(),
            [one] => format!("`{one}`"),
            [a, b] => format!("`{a}` or `{b}`"),
            many => {
                format!("one of {}", many.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
            }
        }
    }

    impl de::Error for Redacted {
        fn custom<T: fmt::Display>(msg: T) -> Self {
            Redacted(msg.to_string())
        }

        fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
            let found = match unexpected {
                // The length of a wrongly typed string says nothing useful.
                Unexpected::Str(_) => "a string".into(),
                other => kind(&other),
            };
            Redacted(format!("invalid type: {found}, expected {expected}"))
        }

        fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
            Redacted(format!("invalid value: {}, expected {expected}", kind(&unexpected)))
        }

        fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
            Redacted(format!(
                "unknown variant (a string of {} characters), expected {}",
                variant.chars().count(),
                one_of(expected)
            ))
        }
    }

    /// A value deserialized with [`Redacted`] errors.
    pub(super) struct Unquoted(pub(super) Value);

    impl<'de> IntoDeserializer<'de, Redacted> for Unquoted {
        type Deserializer = Self;

        fn into_deserializer(self) -> Self {
            self
        }
    }

    impl<'de> Deserializer<'de> for Unquoted {
        type Error = Redacted;

        fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Redacted> {
            match self.0 {
                Value::Null => visitor.visit_unit(),
                Value::Bool(b) => visitor.visit_bool(b),
                Value::Number(n) => {
                    if let Some(u) = n.as_u64() {
                        visitor.visit_u64(u)
                    } else if let Some(i) = n.as_i64() {
                        visitor.visit_i64(i)
                    } else {
                        visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                    }
                }
                Value::String(s) => visitor.visit_string(s),
                Value::Array(items) => {
                    let mut seq = SeqDeserializer::new(items.into_iter().map(Unquoted));
                    let value = visitor.visit_seq(&mut seq)?;
                    seq.end()?;
                    Ok(value)
                }
                Value::Object(map) => {
                    let mut entries = MapDeserializer::new(map.into_iter().map(|(k, v)| (k, Unquoted(v))));
                    let value = visitor.visit_map(&mut entries)?;
                    entries.end()?;
                    Ok(value)
                }
            }
        }

        fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Redacted> {
            match self.0 {
                Value::Null => visitor.visit_none(),
                other => visitor.visit_some(Unquoted(other)),
            }
        }

        fn deserialize_newtype_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            visitor: V,
        ) -> Result<V::Value, Redacted> {
            visitor.visit_newtype_struct(self)
        }

        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _name: &'static str,
            _variants: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Redacted> {
            match self.0 {
                Value::String(s) => visitor.visit_enum(s.into_deserializer()),
                Value::Object(map) if map.len() == 1 => {
                    let entries = MapDeserializer::new(map.into_iter().map(|(k, v)| (k, Unquoted(v))));
                    visitor.visit_enum(de::value::MapAccessDeserializer::new(entries))
                }
                other => Err(de::Error::invalid_type(
                    kind_of(&other),
                    &"a variant name, or a map of one variant name to its value",
                )),
            }
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
            identifier ignored_any
        }
    }

    fn kind_of(value: &Value) -> Unexpected<'static> {
        match value {
            Value::Null => Unexpected::Unit,
            Value::Bool(_) => Unexpected::Other("a boolean"),
            Value::Number(_) => Unexpected::Other("a number"),
            Value::String(_) => Unexpected::Other("a string"),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
        }
    }
}
