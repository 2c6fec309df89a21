//! A provider (name `cedar`) that decides tool calls with
//! [Cedar](https://www.cedarpolicy.com) policies: operators write policies,
//! validate them against a schema, and test them, without compiling
//! anything.
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: plugins/libguardhost_cedar.so:CedarGuardrailProvider
//!     config:
//!       policies: policies/            # `.cedar` files: a file, a folder, or a list of them
//!       schema: tools.cedarschema      # optional: policies validated in strict mode
//!       entities: entities.json        # optional: tool families, users and their groups
//! ```
//!
//! Relative paths start at the config file's folder. Everything is read and
//! checked when the provider is built: a syntax error, a policy the schema
//! rejects (an unknown entity type, attribute or action), a broken entities
//! file is an error naming the file, line and column, never a surprise on
//! the first call.
//!
//! # The request
//!
//! | Cedar | from the tool call |
//! |---|---|
//! | `principal` | `User::"<user_id>"` when the context names a user, else `Agent::"<agent_id>"` (the passport), else `Agent::"anonymous"` |
//! | `action` | `Action::"call"` |
//! | `resource` | `Tool::"<tool name>"` (its groups from the entities: `Tool::"bash" in ToolGroup::"shell"`) |
//! | `context.tool` | the tool's name |
//! | `context.args` | the arguments (a number that is not an integer becomes its text; `null`s are left out) |
//! | `context.user_id`, `user_role`, `oauth_provider`, `oauth_id`, `channel_user_id`, `agent_id`, `thread_id`, `run_id`, `tool_call_id` | the attribution, each when the call has it |
//! | `context.is_subagent`, `context.is_internal` | booleans |
//! | `context.time` | when the call was decided (RFC 3339 text; a `datetime` where the schema says so) |
//! | `context.authz` | the authorization attributes, when there are any |
//! | `context.command` | with `derive: [command]`, when the call has a string `command` argument: `{programs, names, unknown, dangerous, writes_outside, unverified, environment, runtime_code}`, the command read by the command model (`guardhost-command`) as the shell and each program read it: every program that runs, wrappers, code handed to shells and exec vectors included |
//! | `context.path` | with `derive: [path]`, when the call has a string `path` (else `image_path`) argument: `{normal, lower, escapes, descriptor}`, the path normalised once (`//`, `/./`, `..`, `/proc/self/root`), in lower case too |
//! | `context.url` | with `derive: [url]`, when the call has a string `url` argument: `{host, private, unknown, ambiguous}` (`unknown`: not an `http(s)` URL whose host can be read without doubt, `host` then empty; `ambiguous`: because URL parsers read it differently, with `unknown`; `private`: some reading reaches a private address) |
//!
//! # The decision
//!
//! Cedar decides: a call is allowed when a `permit` policy matches and no
//! `forbid` does. The reasons are the determining policies: `cedar.permit`
//! or `cedar.forbid`, each with the policy's `@reason("...")` annotation
//! (else `permitted by policy <id>` / `forbidden by policy <id>`), and
//! `policy_id` is the first of them. No matching `permit` denies with
//! `cedar.no_permit`. A policy that fails to evaluate (an attribute the
//! call does not have, a type error) is a provider error, so `fail_closed`
//! decides: never a silent allow. A policy's id is its `@id("...")`
//! annotation, else `<file name>#<n>` (its place in the file, from 1).
//!
//! This crate is both a provider library exporting the symbol
//! `CedarGuardrailProvider` and a Rust library ([`Cedar`]).
//!
//! # Map
//!
//! - this file: the provider, [`Cedar`], and its decision;
//! - `policies`: reading and checking the policies, the schema and the
//!   entities ([`Compiled`]);
//! - `request`: a tool call as a Cedar request, and what it [`Derive`]s;
//! - `need`: what of the context the policies can read, so only that is
//!   built;
//! - `guard`: policies a call cannot satisfy, left out before Cedar
//!   evaluates;
//! - `shape`: a call's shape, so the schema checks each shape once.
#![forbid(unsafe_code)]

mod guard;
mod need;
mod policies;
mod request;
mod shape;

use std::path::PathBuf;

use cedar_policy::{AuthorizationError, Authorizer, Decision as CedarDecision, PolicyId};
use guardhost_abi::{Decision, Provider, ProviderError, Request};
use serde::Deserialize;

pub use policies::{policy_files, Compiled};
pub use request::Derive;

/// One path or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Paths {
    /// One file or folder.
    One(PathBuf),
    /// Several.
    Many(Vec<PathBuf>),
}

impl Paths {
    fn to_vec(&self) -> Vec<PathBuf> {
        match self {
            Paths::One(path) => vec![path.clone()],
            Paths::Many(paths) => paths.clone(),
        }
    }
}

/// The provider's config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `.cedar` files, or folders of them.
    pub policies: Paths,
    /// A `.cedarschema` file (or a JSON schema, `.json`).
    #[serde(default)]
    pub schema: Option<PathBuf>,
    /// A JSON entities file.
    #[serde(default)]
    pub entities: Option<PathBuf>,
    /// What to read from the arguments into the context, beyond the
    /// arguments themselves: `command` (`context.command`, what a shell
    /// command runs), `url` (`context.url`, where a URL goes).
    #[serde(default)]
    pub derive: Vec<Derive>,
    /// Injected by hosts that say which framework they serve; unused.
    #[serde(default)]
    pub framework: Option<String>,
}

/// The provider: see the crate documentation.
#[derive(Debug)]
pub struct Cedar {
    compiled: Compiled,
    names: request::Names,
    authorizer: Authorizer,
}

/// How one call fared with the policies, for [`Cedar::explain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Whether Cedar allows the call.
    pub allow: bool,
    /// The determining policies (the `permit`s that allowed it, or the
    /// `forbid`s that denied it).
    pub determining: Vec<String>,
    /// The policies that could not be evaluated, with why.
    pub errors: Vec<(String, String)>,
    /// Every other policy: it did not match this call.
    pub not_matching: Vec<String>,
}

impl Cedar {
    /// Reads and checks the policies, the schema and the entities.
    pub fn compile(config: &Config) -> Result<Self, String> {
        let compiled = policies::compile(
            &config.policies.to_vec(),
            config.schema.as_deref(),
            config.entities.as_deref(),
        )?;
        let names = request::Names::new(&config.derive)?;
        if config.derive.contains(&Derive::Command) {
            // The programs' grammars are read once, here, not on the first
            // command decided.
            guardhost_command::grammar::grammars();
        }
        Ok(Cedar { compiled, names, authorizer: Authorizer::new() })
    }

    /// The policies, by id.
    pub fn policy_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.compiled.policies.policies().map(|p| p.id().to_string()).collect();
        ids.sort();
        ids
    }

    /// What Cedar says of `request`, policy by policy.
    pub fn explain(&self, request: &Request<'_>) -> Result<Explanation, String> {
        let (cedar, _) = self.names.request(request, self.compiled.schema.as_ref(), None)?;
        let response =
            self.authorizer.is_authorized(&cedar, &self.compiled.policies, &self.compiled.entities);
        let mut determining: Vec<String> = response.diagnostics().reason().map(ToString::to_string).collect();
        determining.sort();
        let errors: Vec<(String, String)> = response
            .diagnostics()
            .errors()
            .map(|e| match e {
                AuthorizationError::PolicyEvaluationError(e) => {
                    (e.policy_id().to_string(), e.inner().to_string())
                }
            })
            .collect();
        let not_matching = self
            .policy_ids()
            .into_iter()
            .filter(|id| !determining.contains(id) && !errors.iter().any(|(e, _)| e == id))
            .collect();
        Ok(Explanation {
            allow: response.decision() == CedarDecision::Allow,
            determining,
            errors,
            not_matching,
        })
    }

    /// A determining policy's id and the reason it gives.
    fn reason(&self, id: &PolicyId, verb: &str) -> (String, String) {
        match self.compiled.named.get(id) {
            Some((name, Some(reason))) => (name.clone(), reason.clone()),
            Some((name, None)) => (name.clone(), format!("{verb} by policy {name}")),
            None => (id.to_string(), format!("{verb} by policy {id}")),
        }
    }
}

impl Provider for Cedar {
    const NAME: &'static str = "cedar";
    const PATH_KEYS: &'static [&'static str] = &["policies", "schema", "entities"];
    type Config = Config;

    fn new(config: Config) -> Result<Self, ProviderError> {
        Cedar::compile(&config).map_err(ProviderError::error)
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        // The policies that can match a call of the tool; of them, those
        // the call's context can satisfy; of the context, what they read.
        let slice = self.compiled.for_tool(request.tool_name());
        let (cedar, policies) = self
            .names
            .request(request, self.compiled.schema.as_ref(), Some(slice))
            .map_err(ProviderError::error)?;
        let policies = policies.unwrap_or_else(|| slice.guarded.policies.clone());
        let response = self.authorizer.is_authorized(&cedar, &policies, &self.compiled.entities);
        let diagnostics = response.diagnostics();
        let failed: Vec<String> = diagnostics.errors().map(ToString::to_string).collect();
        if !failed.is_empty() {
            return Err(ProviderError::error(format!(
                "{} of the policies could not be evaluated for tool '{}': {}",
                failed.len(),
                request.tool_name(),
                failed.join("; ")
            )));
        }
        let (mut decision, code, verb) = match response.decision() {
            CedarDecision::Allow => (Decision::allow(), "cedar.permit", "permitted"),
            CedarDecision::Deny => (Decision::deny(), "cedar.forbid", "forbidden"),
        };
        let mut determining: Vec<(String, String)> =
            diagnostics.reason().map(|id| self.reason(id, verb)).collect();
        determining.sort_unstable();
        let first = determining.first().map(|(id, _)| id.clone());
        for (_, reason) in determining {
            decision = decision.with_reason(code, reason);
        }
        match first {
            Some(first) => Ok(decision.with_policy_id(first)),
            None => Ok(decision.with_reason(
                "cedar.no_permit",
                format!("no policy permits tool '{}' for this caller", request.tool_name()),
            )),
        }
    }
}

guardhost_abi::export_provider!(CedarGuardrailProvider, Cedar);
