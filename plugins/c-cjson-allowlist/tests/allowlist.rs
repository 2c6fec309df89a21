//! The cJSON example loaded as guardhost loads it: the decisions of the
//! built-in allowlist, what cJSON cannot read denied or refused, and the
//! conformance kit; and, through the C ABI directly, the text this host
//! never writes (a key twice, a lone surrogate, a `tool_input` that is not
//! an object). Without cJSON on the build machine the library exports
//! nothing, and the tests say they were skipped.

// Calling the library's C functions directly (`Raw`) is what this test
// is for; each `unsafe` block says why it holds.
#![allow(unsafe_code)]

use guardhost_test_support::{load, object, try_load};
use serde_json::{json, Value};

const SYMBOL: &str = "CJsonAllowlistProvider";

/// The `use:` of the library's descriptor, or `None` (and a notice) when
/// the build found no cJSON.
fn use_of_library() -> Option<String> {
    if !c_cjson_allowlist::BUILT_WITH_CJSON {
        assert!(
            !cfg!(target_os = "linux") || std::env::var_os("GUARDHOST_REQUIRE_CJSON").is_none(),
            "GUARDHOST_REQUIRE_CJSON is set, but the build found no cJSON (`pkg-config --libs libcjson`)"
        );
        eprintln!(
            "skipped: the build found no cJSON (`pkg-config --libs libcjson` failed, or \
             GUARDHOST_NO_CJSON was set; on Debian, `apt install libcjson-dev` and build again), so the \
             library exports no {SYMBOL}"
        );
        return None;
    }
    Some(format!("{}:{SYMBOL}", guardhost_kit::cdylib("c_cjson_allowlist").display()))
}

/// A request as the host writes it for a C provider, with `tool_input` as given.
fn request(tool: &str, input: Value) -> guardhost::GuardrailRequest {
    serde_json::from_value(json!({
        "tool_name": tool, "tool_input": input, "agent_id": null, "thread_id": null,
        "is_subagent": false, "timestamp": "2026-12-05T00:00:00Z", "user_id": null, "user_role": null,
        "oauth_provider": null, "oauth_id": null, "run_id": null, "tool_call_id": "call-1",
        "channel_user_id": null, "is_internal": false, "authz_attributes": {}
    }))
    .expect("a request as guardhost.h describes it")
}

#[test]
fn it_decides_as_the_built_in_allowlist_does() {
    let Some(use_) = use_of_library() else { return };
    let config = json!({"allowed_tools": ["ls", "bash", " read_file", "write_file"], "denied_tools": ["bash", " write_file "]});
    let c = load(&use_, object(config.clone()));
    assert_eq!(c.info.name, "c-cjson-allowlist");
    assert_eq!(c.info.accepted_keys, ["allowed_tools", "denied_tools"]);
    let rust = load("builtin:AllowlistProvider", object(config));
    for tool in
        ["ls", "bash", "write_file", " read_file", "read_file", "", "lş", "a\"b\\c", "unlisted", "a\u{7}b"]
    {
        let from_c = c.provider.evaluate(&request(tool, json!({"path": "/tmp"}))).unwrap();
        let from_rust = rust.provider.evaluate(&request(tool, json!({"path": "/tmp"}))).unwrap();
        assert_eq!(
            (from_c.allow, &from_c.reasons[0].code),
            (from_rust.allow, &from_rust.reasons[0].code),
            "{tool:?}"
        );
        if tool != "a\u{7}b" {
            assert_eq!(from_c.reasons, from_rust.reasons, "{tool:?}");
        }
    }
}

#[test]
fn what_cjson_cannot_hold_is_denied_or_refused() {
    let Some(use_) = use_of_library() else { return };
    let c = load(&use_, object(json!({"allowed_tools": ["bash"]})));
    // cJSON would read "bash\u0000x" as "bash": denied, whatever the lists say.
    for (tool, input) in [("bash\u{0}x", json!({})), ("bash", json!({"command": "ls\u{0}; rm -rf /"}))] {
        let decision = c.provider.evaluate(&request(tool, input)).unwrap();
        assert!(!decision.allow, "{tool:?}");
        assert_eq!(decision.reasons[0].code, "cjson.unreadable");
    }
    // A backslash before `u0000` is text, not a NUL.
    let decision = c.provider.evaluate(&request("bash", json!({"command": "printf '\\u0000'"}))).unwrap();
    assert!(decision.allow, "{decision:?}");
    // The config: a NUL, a wrong type; the errors name the key, never the
    // value.
    let error = try_load(&use_, object(json!({"denied_tools": ["ba\u{0}sh"]}))).unwrap_err().to_string();
    assert!(error.ends_with("the config holds a NUL character (\\u0000); no tool name has one"), "{error}");
    assert!(!error.contains("ba"), "{error}");
    let error = try_load(&use_, object(json!({"denied_tools": ["bash", 3]}))).unwrap_err().to_string();
    assert!(error.ends_with("`denied_tools[1]` must be a string (a tool name)"), "{error}");
    let error = try_load(&use_, object(json!({"denied_tools": "secret-value"}))).unwrap_err().to_string();
    assert!(
        error.ends_with("`denied_tools` must be a list of tool names or null") && !error.contains("secret"),
        "{error}"
    );
}

#[test]
fn the_library_passes_the_conformance_kit() {
    let Some(use_) = use_of_library() else { return };
    for config in
        [json!({}), json!({"denied_tools": ["bash"]}), json!({"allowed_tools": ["ls", "read_file"]})]
    {
        let Value::Object(config) = config else { unreachable!() };
        guardhost_kit::assert_conforms(&use_, &config);
    }
}

/// The library's own functions, called with raw text, as another host (or
/// a later version of this one) could write it.
struct Raw {
    descriptor: guardhost_abi::c_abi::CDescriptor,
    provider: *mut std::ffi::c_void,
}

impl Raw {
    fn open(library: &std::path::Path, config: &str) -> Raw {
        // SAFETY: the workspace's own library, whose initialisers
        // are plain C; the symbol is a `guardhost_descriptor` (guardhost.h),
        // which `CDescriptor` lays out; the library is never unloaded, so
        // the descriptor and its functions stay valid.
        let descriptor = unsafe {
            let library = libloading::Library::new(library).unwrap();
            let symbol: libloading::Symbol<*const guardhost_abi::c_abi::CDescriptor> =
                library.get(SYMBOL.as_bytes()).unwrap();
            let descriptor = **symbol;
            std::mem::forget(library);
            descriptor
        };
        let (mut provider, mut error, mut error_len) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        // SAFETY: `create` as guardhost.h describes it: the config
        // is valid for the call, the out-pointers point to locals.
        let status = unsafe {
            (descriptor.create.unwrap())(
                config.as_ptr().cast(),
                config.len(),
                &mut provider,
                &mut error,
                &mut error_len,
            )
        };
        assert_eq!(status, 0, "create: {}", take(&descriptor, error, error_len));
        Raw { descriptor, provider }
    }

    /// `evaluate` on `request`: the status and the text handed back.
    fn evaluate(&self, request: &str) -> (i32, String) {
        let (mut output, mut output_len) = (std::ptr::null_mut(), 0);
        // SAFETY: `evaluate` as guardhost.h describes it, on a
        // provider `create` made; the request is valid for the call.
        let status = unsafe {
            (self.descriptor.evaluate.unwrap())(
                self.provider,
                request.as_ptr().cast(),
                request.len(),
                &mut output,
                &mut output_len,
            )
        };
        (status, take(&self.descriptor, output, output_len))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: the provider `create` made, destroyed once, with
        // no call running.
        unsafe { (self.descriptor.destroy.unwrap())(self.provider) }
    }
}

/// A buffer the library handed over, copied and given back to it.
fn take(descriptor: &guardhost_abi::c_abi::CDescriptor, buffer: *mut std::ffi::c_char, len: usize) -> String {
    if buffer.is_null() {
        return String::new();
    }
    // SAFETY: the library handed over `len` bytes at `buffer`, to be
    // freed with its `free_buffer`, once.
    unsafe {
        let text = String::from_utf8_lossy(std::slice::from_raw_parts(buffer.cast::<u8>(), len)).into_owned();
        (descriptor.free_buffer.unwrap())(buffer, len);
        text
    }
}

#[test]
fn text_this_host_never_writes_is_an_error_not_a_decision() {
    let Some(_) = use_of_library() else { return };
    let raw = Raw::open(&guardhost_kit::cdylib("c_cjson_allowlist"), r#"{"allowed_tools": ["bash"]}"#);
    assert_eq!(raw.evaluate(r#"{"tool_name": "bash", "tool_input": {}}"#).0, 0);
    for (request, why) in [
        (
            r#"{"tool_name": "ls", "tool_name": "bash", "tool_input": {}}"#,
            "the request holds a key twice in one object",
        ),
        (
            r#"{"tool_name": "bash", "tool_input": {"a": {"b": 1, "b": 2}}}"#,
            "the request holds a key twice in one object",
        ),
        (
            r#"{"tool_name": "bash", "tool_input": {"a": "\ud800"}}"#,
            "the request is not a JSON object cJSON can read",
        ),
        (
            r#"{"tool_name": "bash", "tool_input": []}"#,
            "the request's `tool_input` is missing or not an object",
        ),
        (r#"{"tool_name": "bash"}"#, "the request's `tool_input` is missing or not an object"),
        (r#"{"tool_name": 7, "tool_input": {}}"#, "the request's `tool_name` is missing or not a string"),
    ] {
        let (status, text) = raw.evaluate(request);
        assert_eq!(status, 1, "{request}: {text}");
        assert!(text.starts_with(why), "{request}: {text}");
    }
    // A key twice in the config is refused when the library is built.
    let (mut provider, mut error, mut error_len) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
    let config = r#"{"denied_tools": [], "denied_tools": ["bash"]}"#;
    // SAFETY: as in `Raw::open`.
    let status = unsafe {
        (raw.descriptor.create.unwrap())(
            config.as_ptr().cast(),
            config.len(),
            &mut provider,
            &mut error,
            &mut error_len,
        )
    };
    assert_eq!(
        (status, take(&raw.descriptor, error, error_len).as_str()),
        (1, "the config holds a key twice in one object")
    );
}
