//! The descriptor and construction checks.

use serde_json::{json, Map, Value};

use super::call::with_deadline;
use super::report::shorten;
use crate::finding::{Finding, Recorder};
use crate::options::Options;
use crate::report::CaseId;
use guardhost::ProviderFailure;
use guardhost::{BuildError, Descriptor, LoadedProvider, FRAMEWORK_KEY, FRAMEWORK_VALUE};

/// A config key no provider declares.
pub(crate) const UNKNOWN_KEY: &str = "guardhost_conformance_unknown_key";

/// Values of the wrong type for almost any config key.
pub(crate) fn bad_values() -> [Value; 3] {
    [json!({"guardhost_conformance": [true, null]}), json!(-1), json!("\u{0}")]
}

fn panicked(failure: &ProviderFailure) -> bool {
    matches!(failure, ProviderFailure::Error { panicked: true, .. })
}

/// Calls the library's own constructor (no host key check), within the
/// call timeout. `Ok(())` when it built a provider.
fn construct_raw(
    descriptor: &Descriptor,
    config: Map<String, Value>,
    options: &Options,
) -> Result<(), String> {
    let descriptor = descriptor.clone();
    match with_deadline(options.call_timeout, move || descriptor.construct_raw(&config).map(drop)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(failure)) if panicked(&failure) => {
            Err(format!("panicked: {}", shorten(&failure.to_string(), 500)))
        }
        Ok(Err(failure)) => Err(format!("error: {}", shorten(&failure.to_string(), 500))),
        Err(no_answer) => Err(format!("hung: {no_answer}")),
    }
}

pub(crate) fn with(config: &Map<String, Value>, key: &str, value: Value) -> Map<String, Value> {
    let mut config = config.clone();
    config.insert(key.to_owned(), value);
    config
}

/// Runs the descriptor and construction cases; returns the provider built
/// the way the host builds it, when that worked (and `None` after recording
/// `construction.config`'s failure: the later cases would prove nothing).
pub(crate) fn check(
    recorder: &mut Recorder,
    descriptor: &Descriptor,
    config: &Map<String, Value>,
    options: &Options,
) -> Option<LoadedProvider> {
    recorder.check(CaseId::DescriptorName, || name(descriptor.name()));
    let mut keys = None;
    recorder.check(CaseId::DescriptorKeys, || {
        let (finding, listed) = accepted_keys(descriptor, options);
        keys = listed;
        finding
    });
    let keys = keys.unwrap_or_default();
    let takes_framework = descriptor.accepts_extra_keys() || keys.iter().any(|k| k == FRAMEWORK_KEY);
    recorder.check(CaseId::DescriptorFramework, || framework(descriptor, config, takes_framework, options));

    let mut loaded = None;
    recorder.check(CaseId::ConstructionConfig, || {
        let descriptor = descriptor.clone();
        let config = config.clone();
        match with_deadline(options.call_timeout, move || descriptor.construct(&config)) {
            Ok(Ok(provider)) => {
                let injected = if provider.info.framework_injected { "injected" } else { "not injected" };
                let finding = Finding::pass(format!(
                    "constructed '{}' from the given config (framework {injected})",
                    shorten(&provider.info.name, 80)
                ));
                loaded = Some(provider);
                finding
            }
            Ok(Err(BuildError::Constructor { message, panicked: true, .. })) => Finding::fail(format!(
                "the constructor panicked ({}); a constructor must return an error \
                 (`Err(ProviderError::error(..))`) for a config it cannot use",
                shorten(&message, 500)
            )),
            Ok(Err(error)) => Finding::fail(format!(
                "{}; {}",
                shorten(&error.to_string(), 500),
                options.caller.config_hint()
            )),
            Err(no_answer) => Finding::fail(format!(
                "the constructor did not return ({no_answer}); a constructor must not block"
            )),
        }
    });
    loaded.as_ref()?;
    // What the host would pass: the given config, plus `framework` when the
    // provider takes it.
    let mut base = config.clone();
    if takes_framework && !base.contains_key(FRAMEWORK_KEY) {
        base.insert(FRAMEWORK_KEY.to_owned(), Value::from(FRAMEWORK_VALUE));
    }
    recorder.check(CaseId::ConstructionUnknownKey, || unknown_key(descriptor, &base, options));
    recorder.check(CaseId::ConstructionErrors, || bad_config_values(descriptor, &base, &keys, options));
    loaded
}

pub(crate) fn name(name: &str) -> Finding {
    if name.trim().is_empty() {
        return Finding::fail(
            "the provider's name is empty; set `const NAME` to a short name operators will recognise in logs",
        );
    }
    let odd = name.chars().any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if odd {
        return Finding::warn(format!(
            "the name '{}' has characters other than ASCII letters, digits, `-`, `_` and `.`; \
             it appears in logs and audit events, so prefer a plain identifier",
            shorten(name, 80)
        ));
    }
    Finding::pass(format!("'{name}'"))
}

fn accepted_keys(descriptor: &Descriptor, options: &Options) -> (Finding, Option<Vec<String>>) {
    let listing = {
        let descriptor = descriptor.clone();
        with_deadline(options.call_timeout, move || descriptor.accepted_keys())
    };
    let keys = match listing {
        Ok(Ok(keys)) => keys,
        Ok(Err(failure)) => {
            let what = if panicked(&failure) { "panicked" } else { "failed" };
            return (
                Finding::fail(format!(
                    "listing the accepted keys {what}: {}; override `Provider::accepted_keys` \
                     when the config type cannot list its fields",
                    shorten(&failure.to_string(), 500)
                )),
                None,
            );
        }
        Err(no_answer) => {
            return (Finding::fail(format!("listing the accepted keys did not return ({no_answer})")), None)
        }
    };
    let finding = key_list(&keys, descriptor.accepts_extra_keys());
    (finding, Some(keys))
}

/// The `descriptor.keys` finding for a listing of keys: none blank, none
/// twice.
pub(crate) fn key_list(keys: &[String], accepts_extra_keys: bool) -> Finding {
    let mut problems = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if key.trim().is_empty() {
            problems.push(format!("key #{i} is blank"));
        } else if keys[..i].contains(key) {
            problems.push(format!("`{key}` is listed twice"));
        }
    }
    let extra = if accepts_extra_keys { " and any other key" } else { "" };
    let listed = if keys.is_empty() { "no keys".to_owned() } else { shorten(&keys.join(", "), 500) };
    if problems.is_empty() {
        Finding::pass(format!("accepts {listed}{extra}"))
    } else {
        Finding::fail(format!("the accepted keys are malformed: {}", problems.join("; ")))
    }
}

fn framework(
    descriptor: &Descriptor,
    config: &Map<String, Value>,
    takes_framework: bool,
    options: &Options,
) -> Finding {
    if !takes_framework {
        return Finding::pass("does not take `framework`, so the host does not inject it");
    }
    if config.contains_key(FRAMEWORK_KEY) {
        return Finding::pass("takes `framework`; the given config sets it, so the host does not inject it");
    }
    let with_framework = with(config, FRAMEWORK_KEY, Value::from(FRAMEWORK_VALUE));
    match construct_raw(descriptor, with_framework, options) {
        Ok(()) => Finding::pass(format!("takes `framework` and accepts the injected \"{FRAMEWORK_VALUE}\"")),
        Err(with_error) => match construct_raw(descriptor, config.clone(), options) {
            Ok(()) => Finding::fail(format!(
                "declares that it takes `framework`, so the host injects framework: \"{FRAMEWORK_VALUE}\", \
                 but the constructor then fails ({with_error}); accept that value, or remove `framework` \
                 from the config type (and do not accept any key)"
            )),
            Err(_) => {
                Finding::skip("the constructor fails with the given config alone (see construction.config)")
            }
        },
    }
}

fn unknown_key(descriptor: &Descriptor, config: &Map<String, Value>, options: &Options) -> Finding {
    let extended = with(config, UNKNOWN_KEY, json!("x"));
    if descriptor.accepts_extra_keys() {
        let host_side = {
            let (descriptor, extended) = (descriptor.clone(), extended.clone());
            with_deadline(options.call_timeout, move || descriptor.construct(&extended).map(drop))
        };
        return match host_side {
            Ok(Ok(())) => Finding::pass("takes any key, and an unknown one is accepted"),
            Ok(Err(error)) => Finding::fail(format!(
                "declares that it takes any key, but the config with `{UNKNOWN_KEY}` was refused: {}; \
                 ignore keys you do not know, or set ACCEPTS_EXTRA_KEYS to false",
                shorten(&error.to_string(), 500)
            )),
            Err(no_answer) => Finding::fail(format!("the constructor did not return ({no_answer})")),
        };
    }
    let host_side = {
        let (descriptor, extended) = (descriptor.clone(), extended.clone());
        with_deadline(options.call_timeout, move || descriptor.construct(&extended).map(drop))
    };
    match host_side {
        Ok(Err(BuildError::UnknownKey { .. })) => {}
        Ok(other) => {
            return Finding::fail(format!(
                "the host did not refuse the unknown key `{UNKNOWN_KEY}` (got {})",
                match other {
                    Ok(()) => "a provider".to_owned(),
                    Err(error) => shorten(&error.to_string(), 500),
                }
            ))
        }
        Err(no_answer) => return Finding::fail(format!("the constructor did not return ({no_answer})")),
    }
    match construct_raw(descriptor, extended, options) {
        Err(message) if message.starts_with("error:") => {
            Finding::pass("an unknown key is refused by the host, and by the constructor itself")
        }
        Err(message) => Finding::fail(format!(
            "the constructor, given an unknown key, {message}; it must return an error"
        )),
        Ok(()) => Finding::warn(format!(
            "the host refuses unknown keys, but the constructor itself silently ignores `{UNKNOWN_KEY}`, \
             so a host that does not check keys would let a typo through; add \
             `#[serde(deny_unknown_fields)]` to the config type"
        )),
    }
}

fn bad_config_values(
    descriptor: &Descriptor,
    config: &Map<String, Value>,
    keys: &[String],
    options: &Options,
) -> Finding {
    if keys.is_empty() {
        return Finding::pass("declares no keys, so there is no value to get wrong");
    }
    let mut problems = Vec::new();
    let mut tried = 0;
    'keys: for key in keys {
        for value in bad_values() {
            tried += 1;
            let shown = shorten(&value.to_string(), 60);
            if let Err(message) = construct_raw(descriptor, with(config, key, value), options) {
                if !message.starts_with("error:") {
                    problems.push(format!("{} = {shown}: {}", shorten(key, 60), shorten(&message, 300)));
                }
                if message.starts_with("hung:") {
                    problems.push("stopped here: a constructor that hangs once is not called again".into());
                    break 'keys;
                }
            }
        }
    }
    if problems.is_empty() {
        Finding::pass(format!(
            "{tried} wrongly typed values: each refused with an error or accepted, none panicked"
        ))
    } else {
        Finding::fail(format!(
            "{} of {tried} wrongly typed values made the constructor panic or hang; \
             validate the config and return `Err(ProviderError::error(..))` instead",
            problems.len()
        ))
        .details(problems)
    }
    .metric("values_tried", tried)
}
