//! The evaluation checks: the corpus, sync/async agreement, determinism,
//! panics, decision hygiene; then the measured ones in [`super::measure`].

use std::collections::BTreeSet;
use std::sync::Arc;

use super::call::{with_deadline, NoAnswer};
use super::corpus::{corpus, Probe};
use super::report::shorten;
use super::{fuzz, measure, mix};
use crate::finding::{Finding, Recorder};
use crate::options::Options;
use crate::outcome::Outcome;
use crate::report::CaseId;
use guardhost::LoadedProvider;
use guardhost::{block_on, GuardrailProvider};

/// After this many hung calls in one pass, the rest of the pass is not sent.
const MAX_HUNG_CALLS: usize = 3;

/// How a pass over the corpus asks the provider.
#[derive(Debug, Clone, Copy)]
enum Path {
    Sync,
    Async,
}

/// Evaluates every probe once, each on its own thread within the call
/// timeout; probes in `skip` (known to hang) are not sent again.
fn pass(
    provider: &Arc<dyn GuardrailProvider>,
    probes: &Arc<Vec<Probe>>,
    skip: &BTreeSet<usize>,
    path: Path,
    volatile: &Arc<Vec<String>>,
    options: &Options,
) -> Vec<Outcome> {
    let mut hung = 0;
    (0..probes.len())
        .map(|i| {
            if skip.contains(&i) {
                return Outcome::NotSent("not sent: it hung before".into());
            }
            if hung >= MAX_HUNG_CALLS {
                return Outcome::NotSent(format!("not sent: {MAX_HUNG_CALLS} calls hung already"));
            }
            let (provider, probes, volatile) = (provider.clone(), probes.clone(), volatile.clone());
            let answer = with_deadline(options.call_timeout, move || {
                let request = &probes[i].request;
                let result = match path {
                    Path::Sync => provider.evaluate(request),
                    Path::Async => block_on(provider.aevaluate(request)),
                };
                Outcome::from_result(result, &volatile)
            });
            answer.unwrap_or_else(|no_answer| {
                if matches!(no_answer, NoAnswer::Hung(_)) {
                    hung += 1;
                }
                Outcome::NoAnswer(format!("hung: {no_answer}"))
            })
        })
        .collect()
}

fn no_answers(outcomes: &[Outcome]) -> BTreeSet<usize> {
    outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, Outcome::NoAnswer(_) | Outcome::NotSent(_)))
        .map(|(i, _)| i)
        .collect()
}

/// Other instances of the provider some cases need.
pub(crate) struct Extra {
    /// One for the thread check, where the provider runs in another process.
    pub(crate) concurrent: Option<Result<Arc<dyn GuardrailProvider>, String>>,
    /// One handed every part of each request, when the provider declares
    /// it does not read some ([`CaseId::DeclaredInputs`]).
    pub(crate) reading_everything: Option<Result<Arc<dyn GuardrailProvider>, String>>,
    /// One decided through `evaluate` rather than the library's `decide`
    /// ([`CaseId::DecideAgreement`]).
    pub(crate) through_evaluate: ThroughEvaluate,
}

/// The instance [`CaseId::DecideAgreement`] compares with.
pub(crate) enum ThroughEvaluate {
    /// The library has no `decide` (ABI 1.3 or earlier, or a C library):
    /// the host calls its `evaluate`.
    NoDecide,
    /// The provider runs in another process, where the kit cannot choose
    /// the entry.
    Isolated,
    /// A second instance, or why there is none.
    Instance(Result<Arc<dyn GuardrailProvider>, String>),
}

/// Runs every evaluation case against `loaded`.
pub(crate) fn check(
    recorder: &mut Recorder,
    loaded: &LoadedProvider,
    config: &serde_json::Map<String, serde_json::Value>,
    options: &Options,
    resident: &measure::Resident,
    extra: Extra,
) {
    let Extra { concurrent, reading_everything, through_evaluate } = extra;
    let provider = &loaded.provider;
    let volatile = Arc::new(loaded.info.volatile_metadata_keys.clone());
    let probes = Arc::new(corpus());

    // The measured checks run first (they are reported in their place
    // below): they measure the process as the provider left it, before the
    // corpus's 1 MB arguments leave freed memory behind, which a leak would
    // fill unseen. They send the everyday requests that were answered, and
    // the thread check compares with the answers that were the same twice.
    let everyday_probes: Arc<Vec<Probe>> = Arc::new(probes.iter().filter(|p| p.everyday).cloned().collect());
    let once = pass(provider, &everyday_probes, &BTreeSet::new(), Path::Sync, &volatile, options);
    let twice = pass(provider, &everyday_probes, &no_answers(&once), Path::Sync, &volatile, options);
    // Tools that hung on an everyday call are not asked again below.
    let hung_tools: BTreeSet<String> = no_answers(&once)
        .union(&no_answers(&twice))
        .map(|&i| everyday_probes[i].request.tool_name.clone())
        .collect();
    let everyday: Vec<(Probe, Option<Outcome>)> = everyday_probes
        .iter()
        .zip(once.into_iter().zip(twice))
        .filter(|(_, (a, b))| a.answered() && b.answered())
        .map(|(p, (a, b))| (p.clone(), (!differs(&a, &b)).then_some(a)))
        .collect();
    // Many distinct requests for the thread check: random ones, kept where
    // they were decided alike twice in a row.
    let seed = options.seed.unwrap_or_else(fuzz::fresh_seed);
    let randoms = Arc::new(fuzz::random_probes(seed, RANDOM_THREAD_REQUESTS));
    let (once, twice) = (
        pass(provider, &randoms, &BTreeSet::new(), Path::Sync, &volatile, options),
        pass(provider, &randoms, &BTreeSet::new(), Path::Sync, &volatile, options),
    );
    let random = randoms
        .iter()
        .zip(once.into_iter().zip(twice))
        .filter(|(_, (a, b))| matches!(a, Outcome::Decided(_)) && a.agrees_with(b))
        .map(|(p, (a, _))| (p.clone(), a))
        .collect();
    // The path-, command- and URL-bearing requests (and the tool names),
    // from the corpus, the kit and the config, decided alone twice; each
    // kind's mix holds requests decided differently.
    let (candidates, masks) = mix::candidates(&probes, config);
    let candidate_probes: Arc<Vec<Probe>> = Arc::new(candidates.iter().map(|c| c.probe.clone()).collect());
    let skip: BTreeSet<usize> = (0..candidate_probes.len())
        .filter(|&i| hung_tools.contains(&candidate_probes[i].request.tool_name))
        .collect();
    let alone = pass(provider, &candidate_probes, &skip, Path::Sync, &volatile, options);
    let skip_again: BTreeSet<usize> = skip.union(&no_answers(&alone)).copied().collect();
    let again = pass(provider, &candidate_probes, &skip_again, Path::Sync, &volatile, options);
    let selection = mix::select(&candidates, &alone, &again);
    let mut measured = Recorder { cases: Vec::new() };
    measure::check(
        &mut measured,
        provider,
        measure::Measured { everyday, random, selection, masks, concurrent },
        &volatile,
        options,
        resident,
    );

    let mut first = Vec::new();
    recorder.check(CaseId::EvaluationCorpus, || {
        first = pass(provider, &probes, &BTreeSet::new(), Path::Sync, &volatile, options);
        corpus_finding(&probes, &first)
    });
    let mut hung = no_answers(&first);

    // The corpus twice more: a provider that answers from changing state
    // shows it here.
    let mut again = Vec::new();
    let mut unstable = BTreeSet::new();
    recorder.check(CaseId::Determinism, || {
        let second = pass(provider, &probes, &hung, Path::Sync, &volatile, options);
        let third = pass(provider, &probes, &no_answers(&second), Path::Sync, &volatile, options);
        let mut differences = compare(&probes, &first, &second, "first", "second").unwrap_or_default();
        differences.extend(compare(&probes, &second, &third, "second", "third").unwrap_or_default());
        let compared = (0..probes.len()).filter(|&i| first[i].answered() && second[i].answered()).count();
        unstable = (0..probes.len())
            .filter(|&i| differs(&first[i], &second[i]) || differs(&second[i], &third[i]))
            .collect();
        hung.extend(no_answers(&third));
        again = second;
        let declared = if volatile.is_empty() {
            "declares no volatile metadata".to_owned()
        } else {
            format!("ignoring the declared volatile metadata {}", volatile.join(", "))
        };
        if compared == 0 {
            Finding::skip("no request was answered twice (see evaluation.corpus)")
        } else if differences.is_empty() {
            Finding::pass(format!("{compared} requests decided the same way three times over ({declared})"))
        } else {
            Finding::fail(format!(
                "{} requests got a different decision when asked again ({declared}); decide from the \
                 request alone, or list metadata keys that legitimately vary in \
                 `Provider::VOLATILE_METADATA`",
                unstable.len()
            ))
            .details(differences)
        }
    });
    hung.extend(no_answers(&again));

    let mut asynchronous = Vec::new();
    recorder.check(CaseId::SyncAsyncAgreement, || {
        let skip: BTreeSet<usize> = hung.union(&unstable).copied().collect();
        asynchronous = pass(provider, &probes, &skip, Path::Async, &volatile, options);
        let compared = probes.len() - skip.len();
        if compared == 0 {
            return Finding::skip("no request was answered alike every time on the sync path (see above)");
        }
        compare(&probes, &first, &asynchronous, "evaluate", "aevaluate").map_or_else(
            || Finding::pass(format!("{compared} requests decided alike on both paths")),
            |differences| {
                Finding::fail(format!(
                    "{} of {compared} requests were decided differently by evaluate and aevaluate; both \
                     paths must decide alike (the default aevaluate calls evaluate)",
                    differences.len()
                ))
                .details(differences)
            },
        )
    });
    hung.extend(no_answers(&asynchronous));

    recorder.check(CaseId::DecideAgreement, || {
        let twin = match through_evaluate {
            ThroughEvaluate::NoDecide => {
                return Finding::pass(
                    "the library has no `decide` (ABI 1.3 or earlier): the host calls `evaluate`",
                )
            }
            ThroughEvaluate::Isolated => {
                return Finding::skip("checked when the kit loads the library in process")
            }
            ThroughEvaluate::Instance(Err(why)) => return Finding::fail(why),
            ThroughEvaluate::Instance(Ok(twin)) => twin,
        };
        let skip: BTreeSet<usize> = hung.union(&unstable).copied().collect();
        let compared = probes.len() - skip.len();
        if compared == 0 {
            return Finding::skip("no request was answered alike every time on the sync path (see above)");
        }
        let mut differences = Vec::new();
        for (path, name) in [(Path::Sync, "evaluate"), (Path::Async, "aevaluate")] {
            let given = pass(&twin, &probes, &skip, path, &volatile, options);
            differences.extend(compare(&probes, &first, &given, "decide", name).unwrap_or_default());
        }
        if differences.is_empty() {
            Finding::pass(format!("{compared} requests decided alike by decide, evaluate and aevaluate"))
        } else {
            Finding::fail(format!(
                "{} decisions of evaluate or aevaluate differ from decide's, which is what the host \
                 calls: write evaluate as `self.decide(request).map(Decision::from)`",
                differences.len()
            ))
            .details(differences)
        }
    });

    recorder.check(CaseId::DeclaredInputs, || {
        let skip: BTreeSet<usize> = hung.union(&unstable).copied().collect();
        let unread = &loaded.info.unread_inputs;
        let twin = match reading_everything {
            None if unread.is_empty() => {
                return Finding::pass("declares that it reads every part of a request");
            }
            None => {
                return Finding::skip(format!(
                    "declares it does not read {}; checked when the kit loads the library in process",
                    unread.join(", ")
                ))
            }
            Some(Err(why)) => {
                return Finding::fail(format!("declares it does not read {}, but {why}", unread.join(", ")))
            }
            Some(Ok(twin)) => twin,
        };
        let given = pass(&twin, &probes, &skip, Path::Sync, &volatile, options);
        let compared = (0..probes.len()).filter(|&i| first[i].answered() && given[i].answered()).count();
        compare(&probes, &first, &given, "without them", "given them").map_or_else(
            || {
                Finding::pass(format!(
                    "declares it does not read {}: {compared} requests decided alike with and without them",
                    unread.join(", ")
                ))
            },
            |differences| {
                Finding::fail(format!(
                    "declares it does not read {} (`READS_TOOL_INPUT` / `READS_AUTHZ_ATTRIBUTES` false), \
                     but {} of {compared} requests are decided differently when it is given them: the \
                     host never gives them to it, so either read nothing of them or declare that it does",
                    unread.join(", "),
                    differences.len()
                ))
                .details(differences)
            },
        )
    });

    recorder.check(CaseId::EvaluationPanics, || {
        let runs = [("evaluate", &first), ("evaluate again", &again), ("aevaluate", &asynchronous)];
        let mut panics = Vec::new();
        let mut evaluations = 0;
        for (i, probe) in probes.iter().enumerate() {
            let mut paths = Vec::new();
            let mut message = None;
            for (path, outcomes) in runs {
                if let Some(Outcome::Panicked(m)) = outcomes.get(i) {
                    paths.push(path);
                    message.get_or_insert(m);
                }
            }
            if let Some(message) = message {
                evaluations += paths.len();
                panics.push(format!("{} ({}): {}", probe.name, paths.join(", "), shorten(message, 200)));
            }
        }
        if panics.is_empty() {
            Finding::pass("no evaluation panicked")
        } else {
            Finding::fail(format!(
                "{} requests made the provider panic ({evaluations} evaluations); each panic was caught \
                 and answered by fail_closed, but a panic is a bug: return `Err(ProviderError::error(..))` \
                 for input you cannot handle",
                panics.len()
            ))
            .details(panics)
        }
    });
    recorder.check(CaseId::DecisionHygiene, || hygiene(&loaded.info.name, &probes, &first));

    recorder.cases.extend(measured.cases);
    recorder.check(CaseId::Fuzz, || fuzz_case(provider, &volatile, options, seed));
}

/// Random requests sent at once in the thread check, besides the everyday ones.
const RANDOM_THREAD_REQUESTS: usize = 200;

/// Random requests in batches, until the fuzz time is up.
const FUZZ_BATCH: usize = 64;

/// The `fuzz` case: random requests from `seed` for `options.fuzz`, on both
/// paths in turn; each must be decided in time.
fn fuzz_case(
    provider: &Arc<dyn GuardrailProvider>,
    volatile: &Arc<Vec<String>>,
    options: &Options,
    seed: u64,
) -> Finding {
    if options.fuzz.is_zero() {
        return Finding::skip("not run: the fuzz time is zero");
    }
    // Another stream than the thread check's requests.
    let fuzz_seed = seed ^ 0x5EED_F0F0_5EED_F0F0;
    let started = std::time::Instant::now();
    let (mut sent, mut problems, mut interrupts) = (0usize, Vec::new(), 0usize);
    let mut batch_number = 0u64;
    while started.elapsed() < options.fuzz && problems.len() < 8 {
        let probes = Arc::new(fuzz::random_probes(fuzz_seed.wrapping_add(batch_number), FUZZ_BATCH));
        let path = if batch_number % 2 == 0 { Path::Sync } else { Path::Async };
        let outcomes = pass(provider, &probes, &BTreeSet::new(), path, volatile, options);
        for (probe, outcome) in probes.iter().zip(&outcomes) {
            match outcome {
                Outcome::Decided(_) => {}
                Outcome::Interrupted(_) => interrupts += 1,
                Outcome::NotSent(_) => continue,
                _ => problems.push(format!(
                    "batch {batch_number}, {}: {}; the request: {}",
                    probe.name.replace(&format!(" (seed {})", fuzz_seed.wrapping_add(batch_number)), ""),
                    outcome.summary(),
                    shorten(&serde_json::to_string(&probe.request).unwrap_or_default(), 400)
                )),
            }
            sent += 1;
        }
        if outcomes.iter().any(|o| !o.answered()) {
            problems.push("stopped here: a provider that hangs once is not asked again".into());
            break;
        }
        batch_number += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let reproduce = format!("seed {seed}; the same seed sends the same requests");
    let finding = if problems.is_empty() {
        let interrupted =
            if interrupts > 0 { format!(" ({interrupts} with an interrupt)") } else { String::new() };
        Finding::pass(format!(
            "{sent} random requests in {seconds:.1} s, each decided{interrupted} ({reproduce})"
        ))
    } else {
        Finding::fail(format!(
            "{} of {sent} random requests got no decision ({reproduce}); a provider must decide every \
             request, however odd",
            problems.iter().filter(|p| !p.starts_with("stopped")).count()
        ))
        .details(problems)
    };
    finding.metric("requests", sent).metric("seed", seed)
}

/// The corpus case from the first pass.
fn corpus_finding(probes: &[Probe], outcomes: &[Outcome]) -> Finding {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let (mut allowed, mut denied) = (0, 0);
    for (probe, outcome) in probes.iter().zip(outcomes) {
        match outcome {
            Outcome::Decided(d) if d.allow => allowed += 1,
            Outcome::Decided(_) => denied += 1,
            Outcome::Panicked(_) => {}
            Outcome::Interrupted(m) => {
                warnings.push(format!("{}: interrupt: {}", probe.name, shorten(m, 200)))
            }
            Outcome::Failed(_) | Outcome::NoAnswer(_) | Outcome::NotSent(_) => {
                problems.push(format!("{}: {}", probe.name, outcome.summary()))
            }
        }
    }
    let counts = format!("{} requests: {allowed} allowed, {denied} denied", probes.len());
    let finding = if !problems.is_empty() {
        Finding::fail(format!(
            "{counts}; {} got no decision (an error, or no answer in time); a provider must decide \
             every request, however odd; a hang blocks the agent's tool call",
            problems.len()
        ))
        .details(problems)
    } else if !warnings.is_empty() {
        Finding::warn(format!(
            "{counts}; {} raised an interrupt, which suspends the agent; make sure these requests call \
             for a human",
            warnings.len()
        ))
        .details(warnings)
    } else {
        Finding::pass(counts)
    };
    finding.metric("requests", probes.len()).metric("allowed", allowed).metric("denied", denied)
}

/// Whether a later outcome `b` differs from an earlier `a`. Nothing differs
/// from a request `a` got no answer for, or one `b` did not send; a hang in
/// `b` only is a difference.
fn differs(a: &Outcome, b: &Outcome) -> bool {
    a.answered() && !matches!(b, Outcome::NotSent(_)) && !a.agrees_with(b)
}

/// The requests whose outcomes differ, as report lines.
fn compare(
    probes: &[Probe],
    a: &[Outcome],
    b: &[Outcome],
    a_name: &str,
    b_name: &str,
) -> Option<Vec<String>> {
    let differences: Vec<String> = probes
        .iter()
        .zip(a.iter().zip(b))
        .filter(|(_, (x, y))| differs(x, y))
        .map(|(p, (x, y))| format!("{}: {a_name} {}; {b_name} {}", p.name, x.summary(), y.summary()))
        .collect();
    (!differences.is_empty()).then_some(differences)
}

/// Whether `code` is `namespace.rest` with non-empty parts and no spaces.
fn namespaced(code: &str) -> Option<&str> {
    let (namespace, rest) = code.split_once('.')?;
    let clean = |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control());
    (clean(namespace) && rest.split('.').all(clean)).then_some(namespace)
}

/// The code namespaces a provider may use without a warning: `oap` (the
/// Open Agent Passport codes), `custom` (DeerFlow's convention for custom
/// providers) and the provider's own name.
fn known_namespace(namespace: &str, provider: &str) -> bool {
    let normal = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    namespace == "oap" || namespace == "custom" || normal(namespace) == normal(provider)
}

fn hygiene(provider: &str, probes: &[Probe], outcomes: &[Outcome]) -> Finding {
    let mut failures = Vec::new();
    let mut warnings = Vec::new();
    let mut denials = 0;
    for (probe, outcome) in probes.iter().zip(outcomes) {
        let Outcome::Decided(decision) = outcome else { continue };
        if !decision.allow {
            denials += 1;
            if decision.reasons.is_empty() {
                warnings.push(format!(
                    "{}: a denial without reasons (the middleware reports it as oap.denied)",
                    probe.name
                ));
            }
        }
        for reason in &decision.reasons {
            let code = shorten(&reason.code, 80);
            match namespaced(&reason.code) {
                None if !decision.allow => {
                    failures.push(format!("{}: code `{code}` is not namespaced (`ns.code`)", probe.name))
                }
                None => warnings.push(format!("{}: code `{code}` is not namespaced (`ns.code`)", probe.name)),
                Some(ns) if !known_namespace(ns, provider) => warnings.push(format!(
                    "{}: code `{code}` is outside oap.*, custom.* and {provider}.*",
                    probe.name
                )),
                Some(_) => {}
            }
        }
    }
    let finding = if !failures.is_empty() {
        Finding::fail(format!(
            "{} denials carry a reason code that is empty or not namespaced; agents and audit logs \
             key on codes: use `oap.<code>` for OAP meanings, or `<provider>.<code>`",
            failures.len()
        ))
        .details(failures.into_iter().chain(warnings).collect())
    } else if !warnings.is_empty() {
        Finding::warn(format!(
            "{} reasons could be clearer: give every denial a reason, and use codes in oap.*, \
             custom.* or {provider}.*",
            warnings.len()
        ))
        .details(warnings)
    } else if denials == 0 {
        Finding::pass("no request of the corpus was denied, so there was no denial to check")
    } else {
        Finding::pass(format!("{denials} denials, each with a namespaced reason code"))
    };
    finding.metric("denials", denials)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_must_have_a_namespace_and_a_name() {
        assert_eq!(namespaced("oap.tool_not_allowed"), Some("oap"));
        assert_eq!(namespaced("acme.fs.write"), Some("acme"));
        for bad in ["", "blocked", ".x", "x.", "a..b", "a. b", "a.b\n"] {
            assert_eq!(namespaced(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn own_namespace_ignores_case_and_dashes() {
        assert!(known_namespace("my_policy", "my-policy"));
        assert!(known_namespace("oap", "x") && known_namespace("custom", "x"));
        assert!(!known_namespace("acme", "my-policy"));
    }
}
