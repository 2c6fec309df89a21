//! Asks in the 2026-07-28 form: a `tools/call` (or `resources/read`,
//! `prompts/get`) a guard asks about is answered with an
//! `InputRequiredResult` whose one input request is the approval's
//! `elicitation/create`, and whose `requestState` carries the ask. The
//! client puts the question to its user and sends the same request again
//! with the answer (`inputResponses`) and the state; the proxy takes both
//! out before the request goes on, and decides the call again with the
//! approval.
//!
//! The state is the ask, the server's name and the first request's id (the
//! ask's digest covers it), signed with HMAC-SHA-256 under a key this
//! process draws at random: a state this process did not issue, or one
//! changed on the way, is refused, and a retry after a restart is asked
//! again.

use std::sync::OnceLock;

use guardhost::Ask;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The key of the approval among a request's input requests and responses.
pub const INPUT_KEY: &str = "guardhost/approval";

/// How the proxy's states start (a server's own are passed on untouched).
const PREFIX: &str = "guardhost.1.";

/// What a state says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    /// The ask.
    pub ask: Ask,
    /// The server the call goes to.
    pub server: String,
    /// The id of the request that was asked about.
    pub first_id: String,
}

/// Why a state is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadState {
    /// Not signed by this process (another one's, changed, or made up).
    #[error("its requestState is not one this guardhost process issued (or it was changed on the way)")]
    Forged,
    /// Issued for a call to another server.
    #[error("its requestState was issued for a call to another server")]
    OtherServer,
}

/// Whether `state` is one of the proxy's (else it is the server's).
pub fn is_ours(state: &str) -> bool {
    state.starts_with(PREFIX)
}

/// The state for `issued`.
pub fn issue(issued: &Issued) -> String {
    let payload = hex(&serde_json::to_vec(issued).expect("an ask serialises"));
    format!("{PREFIX}{payload}.{}", hex(&mac(payload.as_bytes())))
}

/// What `state` says, when this process issued it for a call to `server`.
pub fn verify(state: &str, server: &str) -> Result<Issued, BadState> {
    let rest = state.strip_prefix(PREFIX).ok_or(BadState::Forged)?;
    let (payload, tag) = rest.rsplit_once('.').ok_or(BadState::Forged)?;
    let expected = hex(&mac(payload.as_bytes()));
    // Every byte compared, whatever the first difference.
    let same = expected.len() == tag.len()
        && expected.bytes().zip(tag.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if !same {
        return Err(BadState::Forged);
    }
    let bytes = unhex(payload).ok_or(BadState::Forged)?;
    let issued: Issued = serde_json::from_slice(&bytes).map_err(|_| BadState::Forged)?;
    if issued.server != server {
        return Err(BadState::OtherServer);
    }
    Ok(issued)
}

/// The 2026-07-28 form's request metadata: whether `params` come from a
/// client of that form which can elicit (it says so in each request's
/// `_meta`).
pub fn can_elicit(params: &Value) -> bool {
    let Some(meta) = params.get("_meta") else { return false };
    meta.get("io.modelcontextprotocol/protocolVersion").and_then(Value::as_str).is_some()
        && meta
            .pointer("/io.modelcontextprotocol~1clientCapabilities/elicitation")
            .is_some_and(Value::is_object)
}

/// The name a client of the 2026-07-28 form gives itself in a request's
/// `_meta` (there is no `initialize` to give it in).
pub fn client_name(params: &Value) -> Option<String> {
    params
        .pointer("/_meta/io.modelcontextprotocol~1clientInfo/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The proxy's part of a retried request: its state, and the user's
/// answer (`accept`, `decline`, `cancel`; `None` when none came). Both are
/// taken out of `params`.
pub fn take(params: &mut Map<String, Value>) -> Option<(String, Option<String>)> {
    let state = match params.get("requestState") {
        Some(Value::String(state)) if is_ours(state) => state.clone(),
        _ => return None,
    };
    params.remove("requestState");
    let mut action = None;
    if let Some(Value::Object(responses)) = params.get_mut("inputResponses") {
        let answer = responses.remove(INPUT_KEY);
        action = answer.as_ref().and_then(|a| a.get("action")).and_then(Value::as_str).map(str::to_owned);
        if responses.is_empty() {
            params.remove("inputResponses");
        }
    }
    Some((state, action))
}

/// The `InputRequiredResult` that asks the client's user `question`.
pub fn input_required(question: &str, state: String) -> Value {
    let elicit = serde_json::json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": question, "requestedSchema": {"type": "object", "properties": {}}},
    });
    serde_json::json!({
        "resultType": "input_required",
        "inputRequests": {INPUT_KEY: elicit},
        "requestState": state,
    })
}

fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0; 32];
        getrandom::fill(&mut key).expect("the operating system's random source works");
        key
    })
}

/// HMAC-SHA-256 of `message` under the process's key.
fn mac(message: &[u8]) -> [u8; 32] {
    hmac(key(), message)
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key` (at most SHA-256's
/// block, 64 bytes, as here).
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    assert!(key.len() <= 64, "a key longer than the block is hashed first, which is not needed here");
    let mut inner = Sha256::new();
    let mut outer = Sha256::new();
    for byte in key.iter().chain(std::iter::repeat_n(&0, 64 - key.len())) {
        inner.update([byte ^ 0x36]);
        outer.update([byte ^ 0x5c]);
    }
    inner.update(message);
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued() -> Issued {
        let ask = Ask { entry: "approve".into(), digest: "sha256:ab".into(), deadline: 9, approvers: vec![] };
        Issued { ask, server: "files".into(), first_id: "7".into() }
    }

    #[test]
    fn a_state_verifies_only_unchanged_and_for_its_server() {
        let state = issue(&issued());
        assert!(is_ours(&state));
        assert_eq!(verify(&state, "files"), Ok(issued()));
        assert_eq!(verify(&state, "other"), Err(BadState::OtherServer));
        // Any byte changed, the tag cut, another prefix: refused.
        let mut changed = state.clone().into_bytes();
        let at = PREFIX.len() + 3;
        changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
        assert_eq!(verify(&String::from_utf8(changed).unwrap(), "files"), Err(BadState::Forged));
        assert_eq!(verify(&state[..state.len() - 2], "files"), Err(BadState::Forged));
        assert_eq!(verify("guardhost.1.7b7d.00", "files"), Err(BadState::Forged));
        assert!(!is_ours("a server's own state"));
    }

    #[test]
    fn the_mac_is_hmac_sha_256_by_rfc_4231s_vectors() {
        // Test cases 1 and 2.
        let case_1 = hmac(&[0x0b; 20], b"Hi There");
        assert_eq!(hex(&case_1), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        let case_2 = hmac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&case_2), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn the_proxys_part_is_taken_out_of_a_retried_request_and_a_servers_is_left() {
        let mut params = serde_json::json!({
            "name": "write_file",
            "requestState": issue(&issued()),
            "inputResponses": {INPUT_KEY: {"action": "accept", "content": {}}, "server-key": {"action": "decline"}},
        });
        let params = params.as_object_mut().unwrap();
        let (state, action) = take(params).unwrap();
        assert!(is_ours(&state) && action.as_deref() == Some("accept"));
        assert_eq!(
            Value::Object(params.clone()),
            serde_json::json!({
                "name": "write_file", "inputResponses": {"server-key": {"action": "decline"}}
            })
        );
        let mut servers =
            serde_json::json!({"name": "x", "requestState": "theirs", "inputResponses": {"k": {}}});
        assert!(take(servers.as_object_mut().unwrap()).is_none());
        assert_eq!(servers["requestState"], "theirs");
    }

    #[test]
    fn a_client_of_the_2026_form_that_can_elicit_says_so_in_each_request() {
        let meta = |capabilities: Value| {
            serde_json::json!({"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            }})
        };
        assert!(can_elicit(&meta(serde_json::json!({"elicitation": {}}))));
        let named = serde_json::json!({"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "ada", "version": "1"}}});
        assert_eq!(client_name(&named).as_deref(), Some("ada"));
        assert_eq!(client_name(&serde_json::json!({})), None);
        assert!(!can_elicit(&meta(serde_json::json!({"sampling": {}}))));
        assert!(!can_elicit(&serde_json::json!({"name": "x"})));
    }
}
