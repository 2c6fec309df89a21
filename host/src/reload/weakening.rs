//! What a reload takes away from the guardrail it replaces: a guard
//! removed (`enabled: false`, an entry dropped or renamed, the
//! `authorization:` section gone), a guard moved out of `enforce` mode,
//! one that failed closed now failing open, one that now decides fewer
//! tools. A reload may add guards and tighten them freely. And what it
//! changes at all, for the reload's log line: entries added, removed and
//! changed, with their digests.

use crate::config::Mode;
use crate::middleware::{GuardKind, ToolSelector};
use crate::setup::Guardrail;

/// What of one guard a reload must not weaken (kept instead of the guard
/// itself, which would keep its provider, and its provider process, alive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuardShape {
    name: String,
    kind: GuardKind,
    mode: Mode,
    fail_closed: bool,
    selector: Option<ToolSelector>,
    /// The entry's digest as written (`""` when not built from a file).
    digest: String,
}

/// The shapes of `guardrail`'s guards, in order (none without a guardrail).
pub(crate) fn shapes(guardrail: Option<&Guardrail>) -> Vec<GuardShape> {
    let guards = guardrail.map_or(&[][..], |g| g.middleware.guards());
    guards
        .iter()
        .enumerate()
        .map(|(index, g)| GuardShape {
            name: g.name().to_owned(),
            kind: g.kind(),
            mode: g.mode(),
            fail_closed: g.fail_closed(),
            selector: g.selector().cloned(),
            digest: guardrail
                .and_then(|g| g.written.get(index))
                .map_or_else(String::new, |w| w.digest.clone()),
        })
        .collect()
}

/// What a reload from `old` to `new` changes, entry by entry, said for an
/// operator: entries added, removed, and changed (their entry as written,
/// named by its digest's first 12 hex digits, or their mode,
/// `fail_closed` or tools). Empty when every entry is as it was (a data
/// file or a library changed).
pub(crate) fn changes(old: &[GuardShape], new: &[GuardShape]) -> Vec<String> {
    let short = |digest: &str| digest.get(..19).unwrap_or(digest).to_owned();
    let mut found = Vec::new();
    for before in old {
        match new.iter().find(|g| g.name == before.name && g.kind == before.kind) {
            None => found.push(format!("{} removed", describe(before))),
            Some(after) if after != before => found.push(match after.digest != before.digest {
                true => format!(
                    "{} changed ({} -> {})",
                    describe(before),
                    short(&before.digest),
                    short(&after.digest)
                ),
                false => format!("{} changed its mode, fail_closed or tools", describe(before)),
            }),
            Some(_) => {}
        }
    }
    for after in new.iter().filter(|g| !old.iter().any(|o| o.name == g.name && o.kind == g.kind)) {
        found.push(format!("{} added ({})", describe(after), short(&after.digest)));
    }
    found
}

/// Each way `new` is weaker than `old`, said for an operator, in the order
/// of `old`'s guards (empty: `new` keeps every guard at least as strict).
pub(crate) fn weakenings(old: &[GuardShape], new: &[GuardShape]) -> Vec<String> {
    let mut found = Vec::new();
    for before in old {
        let Some(after) = new.iter().find(|g| g.name == before.name && g.kind == before.kind) else {
            found.push(format!("{} removed", describe(before)));
            continue;
        };
        if before.mode == Mode::Enforce && after.mode != Mode::Enforce {
            found.push(format!("{} moved from enforce to {} mode", describe(before), after.mode));
        }
        if before.fail_closed && !after.fail_closed {
            found.push(format!("{} no longer fails closed", describe(before)));
        }
        if !selects_at_least(after.selector.as_ref(), before.selector.as_ref()) {
            found.push(format!(
                "{} decides {} instead of {}",
                describe(before),
                selection(after.selector.as_ref()),
                selection(before.selector.as_ref())
            ));
        }
    }
    found
}

fn describe(guard: &GuardShape) -> String {
    match guard.kind {
        GuardKind::Authorization => "the `authorization:` provider".to_owned(),
        GuardKind::Guardrail => format!("entry '{}'", guard.name),
    }
}

fn selection(selector: Option<&ToolSelector>) -> String {
    selector.map_or_else(|| "every tool".to_owned(), ToString::to_string)
}

/// Whether `new` provably selects every tool `old` selects: it selects
/// every tool, or it keeps each of `old`'s `tools` patterns (any tool when
/// `old` has none) and excepts no pattern `old` did not. Patterns are
/// compared as written, so a change that only looks narrower is counted as
/// narrower.
fn selects_at_least(new: Option<&ToolSelector>, old: Option<&ToolSelector>) -> bool {
    let Some(new) = new else { return true };
    let Some(old) = old else { return new.selects_all() };
    let tools_kept = new.tools().is_empty()
        || (!old.tools().is_empty() && old.tools().iter().all(|t| new.tools().contains(t)));
    let no_new_exceptions = new.except_tools().iter().all(|e| old.except_tools().contains(e));
    tools_kept && no_new_exceptions
}

#[cfg(test)]
mod tests {
    use super::selects_at_least;
    use crate::middleware::ToolSelector;

    fn sel(tools: &[&str], except: &[&str]) -> Option<ToolSelector> {
        let s = |v: &[&str]| v.iter().map(|t| (*t).to_owned()).collect();
        Some(ToolSelector::new(s(tools), s(except))).filter(|s| !s.selects_all())
    }

    #[test]
    fn a_selection_may_widen_and_never_narrow() {
        let all = None;
        assert!(selects_at_least(all.as_ref(), all.as_ref()));
        assert!(selects_at_least(all.as_ref(), sel(&["bash"], &[]).as_ref()));
        assert!(!selects_at_least(sel(&["bash"], &[]).as_ref(), all.as_ref()));
        assert!(!selects_at_least(sel(&[], &["bash"]).as_ref(), all.as_ref()));
        assert!(selects_at_least(sel(&["bash", "sh"], &[]).as_ref(), sel(&["bash"], &[]).as_ref()));
        assert!(!selects_at_least(sel(&["sh"], &[]).as_ref(), sel(&["bash"], &[]).as_ref()));
        assert!(selects_at_least(sel(&[], &["ls"]).as_ref(), sel(&[], &["ls", "cat"]).as_ref()));
        assert!(!selects_at_least(sel(&[], &["ls", "cat"]).as_ref(), sel(&[], &["ls"]).as_ref()));
        assert!(selects_at_least(sel(&[], &["ls"]).as_ref(), sel(&["bash"], &["ls"]).as_ref()));
    }
}
