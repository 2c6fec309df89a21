//! `system.command.execute.v1`: shell commands (`bash`).
//!
//! The command is judged on what it runs, as the command model reads it
//! (`guardhost-command`: the script as `bash` reads it, each program's
//! arguments with its grammar, the code and programs handed on). In
//! APort's order, first failure wins:
//!
//! 1. the command is present; a `timeout` within `max_execution_time` when
//!    that limit is set;
//! 2. no injection, whatever the allowlist (`oap.command_injection_detected`,
//!    APort's `validate_command_string` on the text): no backtick anywhere,
//!    no `$(` followed on the same line, before the next `)`, by one of `rm
//!    dd mkfs curl wget chmod chown sudo kill nc netcat` as a whole word, no
//!    control character other than tab, newline, vertical tab, form feed and
//!    carriage return;
//! 3. the command can be read: at most 16 KiB (`oap.command_too_long`),
//!    nested at most 32 deep, at most 64 KiB of code handed on
//!    (`oap.command_too_complex`), valid syntax (`oap.command_unparsable`);
//! 4. with an allowlist other than `*`: APort's chain rule unless the
//!    passport sets `allow_chains: true` (no unquoted `; & | ( ) < >`,
//!    newline, `#` starting a word, `$'`, `$"` or `$(`:
//!    `oap.command_chain_unsupported`); every program written, wrapped or
//!    substituted starts with an allowed entry's words
//!    (`oap.command_not_allowed`), has a grammar and is given only options
//!    it knows (`oap.command_unverified`, unless `trusted_commands` names
//!    it); with `allow_chains`, output goes only to `/dev/null`, a
//!    descriptor or a relative path inside the working directory
//!    (`oap.command_redirect_not_allowed`); no variable that changes what
//!    runs is set anywhere (`oap.command_environment`); the exec vectors'
//!    code can be read (`oap.command_unverified`);
//! 5. the structural checks (`analysis`): the built-in dangerous
//!    operations (`oap.dangerous_operation`) and unknowns
//!    (`oap.command_unresolved`), then no code made at run time handed to
//!    an interpreter (`oap.command_runtime_code`), whatever the allowlist;
//! 6. none of the passport's `blocked_patterns` (a pattern of several words
//!    matches as a case-insensitive substring, a single word at word
//!    boundaries), on the command with quotes and backslashes removed and
//!    white space collapsed;
//! 7. with an allowlist, every program the code handed on runs (`sh -c`,
//!    `eval`, `find -exec`, `xargs`, exec vectors such as `tar
//!    --to-command`) is allowed (`oap.command_exec_not_allowed`) and
//!    verified as in 4.

use guardhost_command::analysis::{self, Mode};
use guardhost_command::model::{writes_outside, Model, Run};
use guardhost_command::shell::{Via, Word};
use guardhost_command::text::{foreign_code, injection, normalize};
use guardhost_command::Finding;
use serde_json::{Map, Value};

use super::{arg, deny, number_arg, Checked, Denial, Limits};

/// The OAP denial for a finding of the command model: its code prefixed
/// with `oap.`.
pub fn denial(finding: Finding) -> Denial {
    Denial { code: format!("oap.{}", finding.code.name()), message: finding.message }
}

/// Checks a command call.
pub fn check(args: &Map<String, Value>, limits: Limits<'_>) -> Checked {
    let command = match arg(args, "command").map(str::trim) {
        Some(c) if !c.is_empty() => c,
        _ => return Err(deny("oap.missing_required_context", "the call has no `command` to check")),
    };
    if let Some(max) = limits.number("max_execution_time") {
        match number_arg(args, "timeout") {
            None => {
                return Err(deny(
                    "oap.missing_required_context",
                    "Command timeout evidence is required when max_execution_time is configured",
                ))
            }
            Some(timeout) if timeout > max => {
                return Err(deny("oap.timeout_exceeded", "Command timeout exceeds max_execution_time"))
            }
            Some(_) => {}
        }
    }
    if injection(command) {
        return Err(deny(
            "oap.command_injection_detected",
            "Command contains potentially dangerous characters",
        ));
    }
    let mut model = Model::read(command).map_err(denial)?;
    // The allowlist is read where it is needed, not collected: a passport
    // may list many commands, and the first entries match most calls.
    let allowed = || strings(limits, "allowed_commands");
    let any_command = allowed().any(|a| a.contains('*') && a.trim() == "*");
    let chains = limits.get("allow_chains").and_then(Value::as_bool).unwrap_or(false);
    if !any_command {
        // With an allowlist, the allowed command must be all that runs: by
        // APort's rule, no chaining, grouping, substitution or
        // redirection; with `allow_chains`, every command written is
        // allowed and writes nowhere but the working directory.
        if !chains && first_control(command).is_some() {
            return Err(deny(
                "oap.command_chain_unsupported",
                "Command contains shell control operators that cannot be safely authorized against a local \
                 command allowlist",
            ));
        }
        listed(&model, command, limits, chains, false)?;
    }
    let mode = if any_command { Mode::Any } else { Mode::Listed };
    analysis::check(&mut model.script, mode).map_err(denial)?;
    if let Some(finding) = model.runtime_code.first() {
        return Err(denial(finding.clone()));
    }
    if let Some(what) = foreign_code(&model.script) {
        return Err(deny("oap.dangerous_operation", what));
    }
    let normal = normalize(command);
    let lowered = lower_text(&normal);
    if let Some(pattern) = strings(limits, "blocked_patterns").find(|p| matches_lowered(&lowered, p)) {
        return Err(deny("oap.blocked_pattern", format!("Command contains blocked pattern: {pattern}")));
    }
    if !any_command {
        listed(&model, command, limits, chains, true)?;
    }
    Ok(())
}

/// Under an allowlist, what must hold of every program the command runs
/// (written, under a wrapper, in a substitution, or handed on by an exec
/// vector): it is listed; the guard has its grammar, or the passport
/// trusts it with whatever it runs (`trusted_commands`); every option is
/// one its grammar knows; the script changes no variable that affects
/// what runs; the exec vectors' code can be read.
///
/// In APort's order, what the command runs beyond what it writes (the code
/// of `sh -c` and `eval`, exec vectors) is checked after the blocked
/// patterns: `handed_on` says which pass this is.
fn listed(model: &Model, text: &str, limits: Limits<'_>, chains: bool, handed_on: bool) -> Checked {
    let allowed = || strings(limits, "allowed_commands");
    let trusted = |run: &Run| strings(limits, "trusted_commands").any(|t| Some(t.trim()) == run.program());
    for run in &model.runs {
        let command = &model.script.commands[run.command];
        if (command.via == Via::Code) != handed_on {
            continue;
        }
        let Some(program) = run.program() else {
            return Err(deny(
                "oap.command_unresolved",
                "Command runs a program whose name is known only when it runs",
            ));
        };
        if model.script.functions.iter().any(|f| f.name == program) {
            return Err(deny(
                "oap.command_unresolved",
                format!("Command calls '{program}', a function it defines itself"),
            ));
        }
        if !permitted(&run.words, allowed) {
            return Err(if command.via == Via::Code {
                deny(
                    "oap.command_exec_not_allowed",
                    format!("Command makes another program run '{program}', which is not in allowed list"),
                )
            } else {
                deny("oap.command_not_allowed", format!("Command '{text}' is not in allowed list"))
            });
        }
        if trusted(run) {
            continue;
        }
        if !run.known {
            return Err(deny(
                "oap.command_unverified",
                format!(
                    "Command runs '{program}', which is listed but has no grammar, so what it runs cannot be said; \
                     list it in trusted_commands to let it run whatever it runs"
                ),
            ));
        }
        if let Some(what) = run.unknown.first() {
            return Err(deny(
                "oap.command_unverified",
                format!(
                    "Command runs '{}' with {what}, which its grammar does not know, so what it runs cannot be \
                     said; use the program's known options, or list it in trusted_commands to let it run \
                     whatever it runs",
                    run.name
                ),
            ));
        }
        if chains && command.via == Via::Direct && run.layer == 0 && writes_outside(command) {
            return Err(deny(
                "oap.command_redirect_not_allowed",
                "Command writes to a file outside the working directory; with an allowlist, output may go to \
                 /dev/null or a relative path only",
            ));
        }
    }
    if handed_on {
        return Ok(());
    }
    if let Some(variable) = model.environment.first() {
        return Err(deny(
            "oap.command_environment",
            format!(
                "Command changes {variable}, which changes what runs; with an allowlist it is not changed"
            ),
        ));
    }
    if let Some(doubt) = model.doubts.first() {
        return Err(denial(doubt.clone()));
    }
    Ok(())
}

/// Whether a program's words match an allowlist entry's words (`git
/// status` allows `git status -s`, not `git push`).
fn permitted<'a, I: Iterator<Item = &'a str>>(words: &[Word], allowed: impl Fn() -> I) -> bool {
    allowed().any(|entry| {
        // An entry of white space alone allows nothing.
        let mut entry_words = entry.split_whitespace().peekable();
        if entry_words.peek().is_none() {
            return false;
        }
        let mut at = 0;
        entry_words.all(|w| {
            let ok = words.get(at).and_then(Word::lit) == Some(w);
            at += 1;
            ok
        })
    })
}

/// The strings of a list limit, as `Limits::strings` gives them, without
/// collecting them.
fn strings<'a>(limits: Limits<'a>, key: &str) -> impl Iterator<Item = &'a str> {
    limits.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// The first construct that runs or redirects more than one command:
/// unquoted `; & | ( ) < >`, a newline, a `#` starting a word, `$'` or
/// `$"`, or a `$(` or backtick anywhere but in single quotes.
fn first_control(command: &str) -> Option<String> {
    let bytes = command.as_bytes();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let next = bytes.get(i + 1).copied();
        match byte {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'`' if !single => return Some("`".into()),
            b'$' if !single && next == Some(b'(') => return Some("$(".into()),
            b'$' if !single && !double && matches!(next, Some(b'\'' | b'"')) => {
                return Some(format!("${}", next.map_or(' ', char::from)))
            }
            b'#' if !single && !double && (i == 0 || bytes[i - 1].is_ascii_whitespace()) => {
                return Some("#".into())
            }
            b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' | b'\n' if !single && !double => {
                return Some(char::from(byte).to_string())
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// APort's blocked-pattern rule: several words → case-insensitive
/// substring; one word → case-insensitive match at word boundaries.
pub fn matches_pattern(text: &str, pattern: &str) -> bool {
    matches_lowered(&lower_text(text), pattern)
}

/// `text` lowered when it has an upper-case letter (the command is
/// normalised to lower case, so usually it is returned as it is).
fn lower_text(text: &str) -> std::borrow::Cow<'_, str> {
    let upper = if text.is_ascii() {
        text.bytes().any(|b| b.is_ascii_uppercase())
    } else {
        text.chars().any(char::is_uppercase)
    };
    if upper {
        text.to_lowercase().into()
    } else {
        text.into()
    }
}

/// [`matches_pattern`] on a text already through [`lower_text`].
fn matches_lowered(text: &str, pattern: &str) -> bool {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return false;
    }
    // Lowered unless it is ASCII without an upper-case letter
    // (`to_lowercase` also changes title-case letters, which are not
    // upper case).
    let pattern: std::borrow::Cow<'_, str> =
        if pattern.is_ascii() && !pattern.bytes().any(|b| b.is_ascii_uppercase()) {
            pattern.into()
        } else {
            pattern.to_lowercase().into()
        };
    // Trimmed, it has several words exactly when it has white space.
    if pattern.chars().any(char::is_whitespace) {
        return matches(text, &pattern).next().is_some();
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    // A boundary is needed only where the pattern itself starts or ends
    // with a word character (`dd if=` may be followed by anything).
    let (starts_word, ends_word) = (word(pattern.chars().next()), word(pattern.chars().next_back()));
    let found = matches(text, &pattern).any(|at| {
        let glued_before = starts_word && word(text[..at].chars().next_back());
        let glued_after = ends_word && word(text[at + pattern.len()..].chars().next());
        !glued_before && !glued_after
    });
    found
}

/// Where `pattern` (not empty) starts in `text`, leftmost first and not
/// overlapping, as `str::match_indices` finds them; a plain scan, cheaper
/// than its searcher's set-up for a command and a short pattern. A match
/// of whole UTF-8 text starts and ends on character boundaries.
fn matches<'t>(text: &'t str, pattern: &'t str) -> impl Iterator<Item = usize> + 't {
    let (text, pattern) = (text.as_bytes(), pattern.as_bytes());
    let mut at = 0;
    std::iter::from_fn(move || {
        let (&first, _) = pattern.split_first()?;
        // The last place a match can start.
        let last = text.len().checked_sub(pattern.len())?;
        while at <= last {
            let found = at + text[at..=last].iter().position(|&b| b == first)?;
            if text[found..found + pattern.len()] == *pattern {
                at = found + pattern.len();
                return Some(found);
            }
            at = found + 1;
        }
        None
    })
}

#[cfg(test)]
mod tests;
