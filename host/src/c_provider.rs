//! Providers behind the C ABI (`guardhost.h`): the FFI boundary.
//!
//! The loader finds a descriptor that starts with [`C_MAGIC`](guardhost_abi::c_abi::C_MAGIC), checks its
//! major and size, and hands it to `CFactory::validate`, which reads its
//! name and keys and checks that every function it needs is there. A
//! [`CProvider`] owns one handle made by `create`: it sends each request as
//! JSON text, reads the decision back as JSON text, frees every buffer the
//! library returned with the library's own `free_buffer`, and calls
//! `destroy` when dropped.
//!
//! Apart from the loader, this is the only module with `unsafe` code. Each
//! block relies on the contract `guardhost.h` states for the function it
//! calls; the library is never unloaded (see [`crate::loader`]), so its
//! descriptor, strings and functions live for the rest of the process.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use guardhost_abi::c_abi::{c_flags, c_status, CDescriptor, FreeBufferFn, C_DESCRIPTOR_MIN_SIZE};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::load_error::LoadErrorKind;
use crate::provider::{Evaluation, GuardrailProvider, Interrupt, ProviderFailure};
use crate::request::{GuardrailDecision, GuardrailReason, GuardrailRequest};

/// At most this many accepted keys are read: a list without its NULL
/// terminator is found out rather than read past.
const MAX_KEYS: usize = 4096;

/// A C descriptor, checked: what `use:` named, ready to construct.
#[derive(Debug)]
pub struct CFactory {
    raw: Static,
    name: String,
    accepted_keys: Vec<String>,
}

impl CFactory {
    /// Checks what the loader cannot: a usable name, readable keys, and
    /// the functions `create`, `evaluate` and `free_buffer`.
    ///
    /// The magic, the major version and the size (at least
    /// [`C_DESCRIPTOR_MIN_SIZE`]) must have been checked, and `raw` must
    /// point into a library that stays mapped.
    pub(crate) fn validate(raw: &'static CDescriptor) -> Result<CFactory, LoadErrorKind> {
        debug_assert!(raw.header.size as usize >= C_DESCRIPTOR_MIN_SIZE);
        let invalid = |field: &str, problem: &str| LoadErrorKind::CDescriptorInvalid {
            field: field.to_owned(),
            problem: problem.to_owned(),
        };
        for (field, present) in [
            ("create", raw.create.is_some()),
            ("evaluate", raw.evaluate.is_some()),
            ("free_buffer", raw.free_buffer.is_some()),
        ] {
            if !present {
                return Err(invalid(field, "is NULL; every provider needs it"));
            }
        }
        if raw.name.is_null() {
            return Err(invalid("name", "is NULL; give the provider a name"));
        }
        // SAFETY: `name` is not NULL, and guardhost.h requires a static,
        // NUL-terminated string there; the library stays mapped.
        let name = unsafe { CStr::from_ptr(raw.name) }
            .to_str()
            .map_err(|_| invalid("name", "is not valid UTF-8"))?
            .to_owned();
        if name.trim().is_empty() {
            return Err(invalid("name", "is empty; give the provider a name"));
        }
        let mut accepted_keys = Vec::new();
        if !raw.accepted_keys.is_null() {
            for index in 0.. {
                if index == MAX_KEYS {
                    return Err(invalid(
                        "accepted_keys",
                        &format!("has no NULL entry among its first {MAX_KEYS}; end the array with NULL"),
                    ));
                }
                // SAFETY: guardhost.h requires a NULL-terminated array;
                // every entry before the terminator is read, one at a time,
                // and the count is bounded above.
                let entry = unsafe { *raw.accepted_keys.add(index) };
                if entry.is_null() {
                    break;
                }
                // SAFETY: a non-NULL entry is a static NUL-terminated string
                // (guardhost.h).
                let key = unsafe { CStr::from_ptr(entry) }
                    .to_str()
                    .map_err(|_| invalid(&format!("accepted_keys[{index}]"), "is not valid UTF-8"))?;
                accepted_keys.push(key.to_owned());
            }
        }
        if raw.flags & c_flags::TAKES_FRAMEWORK != 0
            && !accepted_keys.iter().any(|k| k == crate::built::FRAMEWORK_KEY)
        {
            accepted_keys.push(crate::built::FRAMEWORK_KEY.to_owned());
        }
        Ok(CFactory { raw: Static(raw), name, accepted_keys })
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor's (major, minor).
    pub fn abi_version(&self) -> (u16, u16) {
        (self.raw.header.abi_major, self.raw.header.abi_minor)
    }

    /// The keys `create` accepts by name (`framework` included when the
    /// descriptor sets `GUARDHOST_TAKES_FRAMEWORK`).
    pub fn accepted_keys(&self) -> &[String] {
        &self.accepted_keys
    }

    /// Whether `create` accepts any key.
    pub fn accepts_extra_keys(&self) -> bool {
        self.raw.flags & c_flags::ACCEPTS_ANY_KEY != 0
    }

    /// Calls `create` with `config` as JSON text.
    pub(crate) fn create(&'static self, config: &Map<String, Value>) -> Result<CProvider, ProviderFailure> {
        let text = nul_terminated(&Value::Object(config.clone()));
        let Some(create) = self.raw.create else {
            return Err(ProviderFailure::error("the descriptor has no `create`"));
        };
        let mut handle: *mut c_void = ptr::null_mut();
        let (mut error, mut error_len): (*mut c_char, usize) = (ptr::null_mut(), 0);
        // SAFETY: `create` is the library's, with the signature guardhost.h
        // gives; the config is valid for the call and NUL-terminated after
        // `text.len() - 1` bytes; the three out-pointers point to locals.
        let status =
            unsafe { create(text.as_ptr().cast(), text.len() - 1, &mut handle, &mut error, &mut error_len) };
        // SAFETY: `error` is NULL or a buffer of `error_len` bytes the
        // library returned for the host to free (guardhost.h).
        let message = unsafe { self.take(error, error_len) };
        match status {
            c_status::OK => Ok(CProvider { factory: self, handle: Handle(handle) }),
            c_status::ERROR => Err(ProviderFailure::error(text_or(message, "`create` failed without a message"))),
            other => Err(ProviderFailure::error(format!(
                "`create` returned status {other}, which guardhost.h does not define (GUARDHOST_OK is 0, GUARDHOST_ERROR 1)"
            ))),
        }
    }

    /// Copies a buffer the library returned and frees it with the
    /// library's `free_buffer`.
    ///
    /// # Safety
    ///
    /// `buffer` is NULL or points to `len` readable bytes that the library
    /// handed over to the host (guardhost.h), not freed yet.
    unsafe fn take(&self, buffer: *mut c_char, len: usize) -> Option<Vec<u8>> {
        if buffer.is_null() {
            return None;
        }
        // SAFETY: the caller's contract: `len` readable bytes at `buffer`.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) }.to_vec();
        let free: Option<FreeBufferFn> = self.raw.free_buffer;
        if let Some(free) = free {
            // SAFETY: the buffer came from this library and is freed once,
            // with the length it came with.
            unsafe { free(buffer, len) };
        }
        Some(bytes)
    }
}

/// A value's JSON text followed by a NUL byte (not counted in the length
/// passed along).
fn nul_terminated<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Serialising the host's own request and config types cannot fail.
    let mut text = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    text.push(0);
    text
}

fn text_or(bytes: Option<Vec<u8>>, otherwise: &str) -> String {
    match bytes {
        Some(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).into_owned(),
        _ => otherwise.to_owned(),
    }
}

/// A descriptor in a library that stays mapped.
#[derive(Debug, Clone, Copy)]
struct Static(&'static CDescriptor);

impl std::ops::Deref for Static {
    type Target = CDescriptor;
    fn deref(&self) -> &CDescriptor {
        self.0
    }
}

// SAFETY: the descriptor is a constant the library exports and nobody
// writes (guardhost.h has it `const`); its pointers lead to static strings
// and to functions whose threading guardhost.h states and the host obeys.
unsafe impl Send for Static {}
// SAFETY: as above: shared reads of immutable data.
unsafe impl Sync for Static {}

/// The handle `create` returned.
struct Handle(*mut c_void);

// SAFETY: guardhost.h states the threading contract of a provider handle:
// `evaluate` may be called on it from many threads at once, and `destroy`
// from any thread once no call is running. The host never touches the
// pointee itself.
unsafe impl Send for Handle {}
// SAFETY: as above: shared use is only concurrent `evaluate` calls, which
// the contract requires to be thread-safe.
unsafe impl Sync for Handle {}

/// A provider made by a C library's `create`.
pub struct CProvider {
    factory: &'static CFactory,
    handle: Handle,
}

impl std::fmt::Debug for CProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CProvider").field("name", &self.factory.name).finish_non_exhaustive()
    }
}

impl Drop for CProvider {
    fn drop(&mut self) {
        if let Some(destroy) = self.factory.raw.destroy {
            // SAFETY: the handle came from this library's `create` and is
            // destroyed once; `&mut self` means no `evaluate` is running.
            unsafe { destroy(self.handle.0) };
        }
    }
}

/// A decision as guardhost.h describes it.
#[derive(Deserialize)]
struct WireDecision {
    allow: bool,
    #[serde(default)]
    reasons: Vec<WireReason>,
    #[serde(default)]
    policy_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct WireReason {
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct WireInterrupt {
    #[serde(default)]
    message: String,
    #[serde(default)]
    payload: Value,
}

impl CProvider {
    fn decide(&self, request: &GuardrailRequest) -> Evaluation {
        let name = &self.factory.name;
        let text = nul_terminated(request);
        let Some(evaluate) = self.factory.raw.evaluate else {
            return Err(ProviderFailure::error("the descriptor has no `evaluate`"));
        };
        let (mut output, mut output_len): (*mut c_char, usize) = (ptr::null_mut(), 0);
        // SAFETY: `evaluate` is the library's, with guardhost.h's signature;
        // the handle came from its `create` and is alive (`&self`); calls
        // from several threads at once are allowed by the contract; the
        // request is valid for the call and NUL-terminated; the
        // out-pointers point to locals.
        let status = unsafe {
            evaluate(self.handle.0, text.as_ptr().cast(), text.len() - 1, &mut output, &mut output_len)
        };
        // SAFETY: `output` is NULL or a buffer of `output_len` bytes handed
        // to the host (guardhost.h).
        let output = unsafe { self.factory.take(output, output_len) };
        match status {
            c_status::OK => {
                let Some(bytes) = output else {
                    return Err(ProviderFailure::error(format!(
                        "provider '{name}' returned GUARDHOST_OK without a decision"
                    )));
                };
                let decision: WireDecision = serde_json::from_slice(&bytes).map_err(|e| {
                    ProviderFailure::error(format!(
                        "provider '{name}' returned a decision that is not the JSON guardhost.h describes \
                         ({{\"allow\": bool, \"reasons\": [...]}}): {e}"
                    ))
                })?;
                Ok(GuardrailDecision {
                    allow: decision.allow,
                    reasons: decision
                        .reasons
                        .into_iter()
                        .map(|r| GuardrailReason::new(r.code, r.message))
                        .collect(),
                    policy_id: decision.policy_id,
                    metadata: decision.metadata.unwrap_or_default(),
                })
            }
            c_status::ERROR => Err(ProviderFailure::error(text_or(
                output,
                &format!("provider '{name}' failed without a message"),
            ))),
            c_status::INTERRUPT => {
                let interrupt = match output.as_deref().map(serde_json::from_slice::<WireInterrupt>) {
                    Some(Ok(wire)) => Interrupt { message: wire.message, payload: wire.payload },
                    // Not the JSON object: the text is the message.
                    Some(Err(_)) => Interrupt { message: text_or(output, ""), payload: Value::Null },
                    None => Interrupt { message: String::new(), payload: Value::Null },
                };
                Err(ProviderFailure::Interrupt(interrupt))
            }
            other => Err(ProviderFailure::error(format!(
                "provider '{name}' returned status {other}, which guardhost.h does not define \
                 (GUARDHOST_OK 0, GUARDHOST_ERROR 1, GUARDHOST_INTERRUPT 2)"
            ))),
        }
    }
}

impl GuardrailProvider for CProvider {
    fn name(&self) -> &str {
        &self.factory.name
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        self.decide(request)
    }

    // `aevaluate` is the default: the C ABI is synchronous, and the call
    // is made when the future is first polled.
}
