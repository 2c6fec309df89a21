//! The policy packs: APort's five tool-call packs, checked natively
//! ([`command`], [`files`], [`web`], [`mcp`]), and every other pack, either
//! from its `policy.json` in `policies_dir` (the generic engine) or, without
//! one, by its required capabilities alone.

pub mod command;
pub mod files;
pub mod mcp;
pub mod messaging;
pub mod web;

use serde_json::{Map, Value};

/// A failed check: the reason code and message of the denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The OAP reason code, e.g. `oap.command_not_allowed`.
    pub code: String,
    /// What was wrong, for the agent and the operator.
    pub message: String,
}

/// Denies with `code` and `message`.
pub fn deny(code: &str, message: impl Into<String>) -> Denial {
    Denial { code: code.to_owned(), message: message.into() }
}

/// The outcome of a pack's checks.
pub type Checked = Result<(), Denial>;

/// A pack's limits in the passport (`limits[<capability>]`); empty when the
/// passport sets none.
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a>(pub Option<&'a Map<String, Value>>);

impl<'a> Limits<'a> {
    /// A limit's raw value.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    /// A list of strings (non-strings in it are ignored).
    pub fn strings(&self, key: &str) -> Option<Vec<&'a str>> {
        self.get(key)?.as_array().map(|a| a.iter().filter_map(Value::as_str).collect())
    }

    /// A number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }
}

/// A string argument of the call.
pub fn arg<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A numeric argument of the call (a number, or a string holding one):
/// finite and not negative, or absent (a `NaN` or `-1` cannot slip under a
/// limit).
pub fn number_arg(args: &Map<String, Value>, key: &str) -> Option<f64> {
    let number = match args.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    (number.is_finite() && number >= 0.0).then_some(number)
}

/// The packs APort publishes, with the capabilities each requires (from
/// their `policy.json`). A pack named by `tool_mapping` must be one of these
/// or be loaded from `policies_dir`.
pub const KNOWN_PACKS: &[(&str, &[&str])] = &[
    ("agent.session.create.v1", &["agent.session.create"]),
    ("agent.tool.register.v1", &["agent.tool.register"]),
    ("code.release.publish.v1", &["repo.release"]),
    ("code.repository.merge.v1", &["repo.pr.create", "repo.merge"]),
    ("data.export.create.v1", &["data.export"]),
    ("data.file.read.v1", &["data.file.read"]),
    ("data.file.write.v1", &["data.file.write"]),
    ("data.report.ingest.v1", &["data.report.ingest"]),
    ("deliverable.task.complete.v1", &["deliverable.task.complete"]),
    ("finance.crypto.trade.v1", &["finance.crypto.trade"]),
    ("finance.payment.charge.v1", &["payments.charge"]),
    ("finance.payment.payout.v1", &["payments.payout"]),
    ("finance.payment.refund.v1", &["finance.payment.refund"]),
    ("finance.transaction.execute.v1", &["finance.transaction"]),
    ("governance.data.access.v1", &["data.access"]),
    ("legal.contract.review.v1", &["legal.contract.review"]),
    ("media.image.generate.v1", &["media.image.generate"]),
    ("mcp.tool.execute.v1", &["mcp.tool.execute"]),
    ("messaging.message.send.v1", &["messaging.send"]),
    ("system.command.execute.v1", &["system.command.execute"]),
    ("web.browser.v1", &["web.browser"]),
    ("web.fetch.v1", &["web.fetch"]),
];

/// The capabilities a known pack requires.
pub fn known_capabilities(pack: &str) -> Option<&'static [&'static str]> {
    KNOWN_PACKS.iter().find(|(id, _)| *id == pack).map(|(_, caps)| *caps)
}

/// The limits key of a pack: its id without the `.vN` suffix
/// (`system.command.execute.v1` → `system.command.execute`).
pub fn limits_key(pack: &str) -> &str {
    match pack.rsplit_once('.') {
        Some((base, version))
            if version.len() > 1
                && version.starts_with('v')
                && version[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => pack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_keys_drop_the_version() {
        assert_eq!(limits_key("system.command.execute.v1"), "system.command.execute");
        assert_eq!(limits_key("web.fetch.v12"), "web.fetch");
        assert_eq!(limits_key("custom"), "custom");
        assert_eq!(limits_key("a.vx"), "a.vx");
    }

    /// Known packs that APort's published data does not hold (the pack
    /// ships only in the `aport-agent-guardrails` bundle).
    const NOT_IN_THE_DATA: &[&str] = &["media.image.generate.v1"];

    #[test]
    fn known_packs_match_the_published_policies() {
        let Some(data) = crate::testdata::root("packs::tests::known_packs_match_the_published_policies")
        else {
            return;
        };
        let mut compared = 0;
        for (id, caps) in KNOWN_PACKS {
            let file = ["policies-repo", "policies"]
                .iter()
                .map(|root| crate::testdata::path(&data, root).join(id).join("policy.json"))
                .find(|file| file.is_file());
            let Some(file) = file else {
                assert!(
                    NOT_IN_THE_DATA.contains(id),
                    "{}: no policies-repo/{id}/policy.json or policies/{id}/policy.json",
                    data.display()
                );
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let policy: Value = serde_json::from_str(&text).unwrap();
            let theirs: Vec<&str> = policy["requires_capabilities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(&theirs, caps, "{id}");
            compared += 1;
        }
        assert_eq!(compared, KNOWN_PACKS.len() - NOT_IN_THE_DATA.len());
    }
}
