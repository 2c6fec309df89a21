//! What a run of test files exercised of the guardrail under test
//! (`guardhost test --coverage`): each chain entry (was it asked, did it
//! decide), and the policies each entry's decisions named. For an entry
//! whose provider can list its policies and say which decided a request
//! (a [`PolicyLister`]: the command gives one for Cedar entries), also the
//! policies no test reached.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

use guardhost::{Explained, StepAnswer};
use guardhost::{Guardrail, GuardrailRequest};
use serde::Serialize;

/// What an entry's provider says of the policies behind one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    /// The policies that decided the request.
    pub deciding: Vec<String>,
}

/// Lists an entry's policies and says which decided a request (the
/// request the entry saw, after the rewrites before it).
pub trait PolicyLister {
    /// Every policy of the entry, by id.
    fn all(&self) -> Vec<String>;
    /// The policies that decided `request`; why not, when it cannot say.
    fn deciding(&self, request: &GuardrailRequest) -> Result<Policies, String>;
}

/// One chain entry's coverage.
#[derive(Debug, Clone, Serialize)]
pub struct EntryCoverage {
    /// The entry's name (`decided_by`).
    pub entry: String,
    /// Its provider's name.
    pub provider: String,
    /// How many cases it was asked about.
    pub asked: usize,
    /// How many cases it decided (the call's decision was its answer).
    pub decided: usize,
    /// Each policy that decided a case this entry was asked about, with
    /// how many cases.
    pub policies: BTreeMap<String, usize>,
    /// The entry's policies no case reached; `None` when its provider
    /// cannot list its policies (only those its decisions named are known).
    pub never_reached: Option<Vec<String>>,
    /// Cases whose policies the provider could not name (why, the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unexplained: Option<String>,
}

/// The coverage of one config's guardrail.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// The config.
    pub config: PathBuf,
    /// How many cases were decided with it.
    pub tests: usize,
    /// Each entry, in the order they are asked (the `authorization:`
    /// provider first).
    pub entries: Vec<EntryCoverage>,
}

/// Gathers a [`Coverage`] while cases are decided.
pub struct Recorder {
    coverage: Coverage,
    listers: Vec<Option<Box<dyn PolicyLister>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("coverage", &self.coverage).finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder for `guardrail`, built from `config`; `listers` holds,
    /// for each entry in the middleware's order, what lists its policies
    /// (`None` for providers that cannot).
    pub fn new(
        config: PathBuf,
        guardrail: &Guardrail,
        mut listers: Vec<Option<Box<dyn PolicyLister>>>,
    ) -> Self {
        let guards = guardrail.middleware.guards();
        listers.resize_with(guards.len(), || None);
        let entries = guards
            .iter()
            .zip(&guardrail.entries)
            .zip(&listers)
            .map(|((guard, info), lister)| EntryCoverage {
                entry: guard.name().to_owned(),
                provider: info.name.clone(),
                asked: 0,
                decided: 0,
                policies: BTreeMap::new(),
                never_reached: lister.as_ref().map(|l| l.all()),
                unexplained: None,
            })
            .collect();
        Recorder { coverage: Coverage { config, tests: 0, entries }, listers }
    }

    /// Records what each entry made of one case.
    pub fn record(&mut self, explained: &Explained) {
        self.coverage.tests += 1;
        let decided_by = explained.decision.metadata.get("decided_by").and_then(|v| v.as_str());
        let single = self.coverage.entries.len() == 1;
        for ((step, entry), lister) in
            explained.steps.iter().zip(&mut self.coverage.entries).zip(&self.listers)
        {
            let StepAnswer::Asked { decision, provider_error, request, .. } = &step.answer else { continue };
            entry.asked += 1;
            if single || decided_by == Some(entry.entry.as_str()) {
                entry.decided += 1;
            }
            let named = match lister {
                Some(lister) if !provider_error => match lister.deciding(request) {
                    Ok(policies) => policies.deciding,
                    Err(why) => {
                        entry.unexplained.get_or_insert(why);
                        Vec::new()
                    }
                },
                _ => decision.policy_id.iter().cloned().collect(),
            };
            for policy in named {
                if let Some(never) = entry.never_reached.as_mut() {
                    never.retain(|p| *p != policy);
                }
                *entry.policies.entry(policy).or_default() += 1;
            }
        }
    }

    /// The coverage gathered.
    pub fn finish(self) -> Coverage {
        self.coverage
    }
}

impl Coverage {
    /// As text: an entry a paragraph.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let reached = self.entries.iter().filter(|e| e.asked > 0).count();
        let _ = writeln!(
            out,
            "coverage of {} ({} tests): {reached} of {} entries asked",
            self.config.display(),
            self.tests,
            self.entries.len()
        );
        for entry in &self.entries {
            let _ = write!(out, "  entry {} ({} provider): ", entry.entry, entry.provider);
            if entry.asked == 0 {
                let _ = writeln!(out, "never asked");
                continue;
            }
            let _ = writeln!(out, "asked by {} tests, decided {}", entry.asked, entry.decided);
            let used: Vec<String> = entry.policies.iter().map(|(p, n)| format!("{p} ({n})")).collect();
            match &entry.never_reached {
                Some(never) => {
                    let total = used.len() + never.len();
                    let _ =
                        writeln!(out, "    policies reached ({} of {total}): {}", used.len(), list(&used));
                    let _ = writeln!(out, "    policies never reached ({}): {}", never.len(), list(never));
                }
                None => {
                    let _ = writeln!(
                        out,
                        "    policies its decisions named: {} (its provider does not list its policies)",
                        list(&used)
                    );
                }
            }
            if let Some(why) = &entry.unexplained {
                let _ = writeln!(out, "    some tests' policies could not be named: {why}");
            }
        }
        out
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}
