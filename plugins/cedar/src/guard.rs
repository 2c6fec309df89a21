//! Policies a call cannot satisfy, known before Cedar evaluates them.
//!
//! Many policies start with a test of what the context holds: `when {
//! context has path && ... }`, `when { context.args has method && ... }`,
//! or of a string it holds: `context.path.lower like "*.pem"`. When the
//! call's context does not hold it, or the string does not match, Cedar
//! evaluates the policy to `false`, without an error: the policy is
//! neither a reason nor an error of the response, and leaving it out of
//! the set Cedar evaluates changes nothing but the time. A policy is left
//! out only when this is known from the policy's first conditions alone,
//! read as `has` and `like` tests joined by `&&`, `||` and `!` (Cedar
//! evaluates them left to right and stops as soon as the answer is known,
//! as here); anything else in them is unknown, and so is a `like` of an
//! attribute whose string the call's [`Facts`] do not give (it may be
//! missing, or not a string: an error in Cedar), and the policy is
//! evaluated. The scope (`principal`, `action`, `resource`) never raises
//! an error, so it does not matter here.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use cedar_policy::{PolicyId, PolicySet};
use serde_json::Value;

use crate::need::context_path;

/// The most policies of a set whose guards are kept (a bit each).
const MAX_GUARDED: usize = 64;

/// The most subsets of one set kept (one per combination of the policies
/// left out that calls have had): past it, a call with a new combination
/// is decided by the whole set, which is correct, only slower.
const MAX_SUBSETS: usize = 1024;

/// What a call's context is known to hold, as the guards ask it.
pub trait Facts {
    /// Whether the context holds `path` (`["a"]`: `context.a`; `["a",
    /// "b"]`: `context.a.b`), when that is known and asking does not raise
    /// an error.
    fn present(&self, path: &[String]) -> Option<bool>;
    /// The string the context holds at `path`, when it holds one there
    /// and it is known here.
    fn text(&self, path: &[String]) -> Option<&str>;
}

/// A piece of a `like` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `*`: any characters, none included.
    Star,
    /// These characters.
    Text(String),
}

/// Whether `text` matches the `like` pattern `pieces` (no two literal
/// pieces in a row: [`merged`]), as Cedar reads it. A literal piece is
/// valid UTF-8 and so is `text`, so a match of bytes is
/// a match of characters: a piece found in `text` starts on a character.
pub fn like(pieces: &[Piece], text: &str) -> bool {
    let mut rest = text;
    let mut anchored = true;
    let last = pieces.len().saturating_sub(1);
    for (index, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Star => anchored = false,
            Piece::Text(literal) if index == last && !anchored => return rest.ends_with(literal.as_str()),
            Piece::Text(literal) if anchored => match rest.strip_prefix(literal.as_str()) {
                Some(after) => rest = after,
                None => return false,
            },
            Piece::Text(literal) => match rest.find(literal.as_str()) {
                // The first place is right: a later piece can only start
                // further on.
                Some(at) => {
                    rest = &rest[at + literal.len()..];
                    anchored = true;
                }
                None => return false,
            },
        }
    }
    !anchored || rest.is_empty()
}

/// The pieces with each run of literal pieces joined into one (a policy's
/// JSON gives a piece per character), so that [`like`] reads each run
/// whole.
fn merged(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match (out.last_mut(), piece) {
            (Some(Piece::Text(run)), Piece::Text(more)) => run.push_str(&more),
            (_, piece) => out.push(piece),
        }
    }
    out
}

/// What a condition is known to be from what the context holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// `context has a` (`["a"]`), `context.a has b` (`["a", "b"]`).
    Has(Vec<String>),
    /// `context.a.b like "p*"`: the attribute's path and the pattern.
    Like(Vec<String>, Vec<Piece>),
    /// `!g`.
    Not(Box<Guard>),
    /// `a && b`.
    And(Box<Guard>, Box<Guard>),
    /// `a || b`.
    Or(Box<Guard>, Box<Guard>),
    /// Anything else: not known before Cedar evaluates it.
    Other,
}

impl Guard {
    /// The guard of an expression in its JSON form.
    fn of(expr: &Value) -> Guard {
        let Some((op, operands)) = expr.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next())
        else {
            return Guard::Other;
        };
        let operand = |name: &str| operands.get(name).map_or(Guard::Other, Guard::of);
        match op.as_str() {
            "&&" => Guard::And(Box::new(operand("left")), Box::new(operand("right"))),
            "||" => Guard::Or(Box::new(operand("left")), Box::new(operand("right"))),
            "!" => Guard::Not(Box::new(operand("arg"))),
            "has" => {
                let attr = operands.get("attr").and_then(Value::as_str);
                let left = operands.get("left").and_then(context_path);
                match (attr, left) {
                    (Some(attr), Some(mut path)) => {
                        path.push(attr.to_owned());
                        Guard::Has(path)
                    }
                    _ => Guard::Other,
                }
            }
            "like" => {
                let path = operands.get("left").and_then(context_path).filter(|p| !p.is_empty());
                let pieces: Option<Vec<Piece>> =
                    operands.get("pattern").and_then(Value::as_array).and_then(|elems| {
                        elems
                            .iter()
                            .map(|elem| match elem {
                                Value::String(w) if w == "Wildcard" => Some(Piece::Star),
                                Value::Object(o) => {
                                    o.get("Literal")?.as_str().map(|t| Piece::Text(t.to_owned()))
                                }
                                _ => None,
                            })
                            .collect()
                    });
                match (path, pieces) {
                    (Some(path), Some(pieces)) => Guard::Like(path, merged(pieces)),
                    _ => Guard::Other,
                }
            }
            _ => Guard::Other,
        }
    }

    /// Its value, when `facts` say enough; `None` when it is not known.
    pub fn eval(&self, facts: &impl Facts) -> Option<bool> {
        match self {
            Guard::Has(path) => facts.present(path),
            Guard::Like(path, pieces) => facts.text(path).map(|text| like(pieces, text)),
            Guard::Not(inner) => inner.eval(facts).map(|b| !b),
            Guard::And(left, right) => match left.eval(facts)? {
                false => Some(false),
                true => right.eval(facts),
            },
            Guard::Or(left, right) => match left.eval(facts)? {
                true => Some(true),
                false => right.eval(facts),
            },
            Guard::Other => None,
        }
    }

    /// The paths its `has` tests (`likes` false) or its `like` tests
    /// (`likes` true) read.
    fn tests<'a>(&'a self, likes: bool, out: &mut Vec<&'a [String]>) {
        match self {
            Guard::Has(path) if !likes => out.push(path),
            Guard::Like(path, _) if likes => out.push(path),
            Guard::Has(_) | Guard::Like(..) | Guard::Other => {}
            Guard::Not(inner) => inner.tests(likes, out),
            Guard::And(left, right) | Guard::Or(left, right) => {
                left.tests(likes, out);
                right.tests(likes, out);
            }
        }
    }
}

/// A policy set with the guards of its policies, and the subsets calls
/// have needed.
#[derive(Debug)]
pub struct Guarded {
    /// The policies.
    pub policies: Arc<PolicySet>,
    /// The policies that may be left out, each with the guards of its
    /// conditions in order (`unless { e }` as `!e`).
    guarded: Vec<(PolicyId, Vec<Guard>)>,
    /// The subsets by the policies left out (bit `i`: `guarded[i]`).
    subsets: RwLock<HashMap<u64, Arc<PolicySet>>>,
}

impl Guarded {
    /// Reads the guards of `policies`.
    pub fn new(policies: PolicySet) -> Guarded {
        let mut guarded = Vec::new();
        for policy in policies.policies() {
            let Ok(json) = policy.to_json() else { continue };
            let Some(conditions) = json.get("conditions").and_then(Value::as_array) else { continue };
            let guards: Vec<Guard> = conditions
                .iter()
                .map(|condition| {
                    let guard = condition.get("body").map_or(Guard::Other, Guard::of);
                    match condition.get("kind").and_then(Value::as_str) {
                        Some("when") => guard,
                        Some("unless") => Guard::Not(Box::new(guard)),
                        _ => Guard::Other,
                    }
                })
                .collect();
            if guards.first().is_some_and(|g| *g != Guard::Other) && guarded.len() < MAX_GUARDED {
                guarded.push((policy.id().clone(), guards));
            }
        }
        Guarded { policies: Arc::new(policies), guarded, subsets: RwLock::default() }
    }

    /// The paths the guards' `has` tests read, each once.
    pub fn tests(&self) -> Vec<Vec<String>> {
        self.paths(false)
    }

    /// The paths of the strings the guards' `like` tests read, each once.
    pub fn likes(&self) -> Vec<Vec<String>> {
        self.paths(true)
    }

    fn paths(&self, likes: bool) -> Vec<Vec<String>> {
        let mut tests = Vec::new();
        for (_, guards) in &self.guarded {
            for guard in guards {
                guard.tests(likes, &mut tests);
            }
        }
        let mut tests: Vec<Vec<String>> = tests.into_iter().map(<[String]>::to_vec).collect();
        tests.sort();
        tests.dedup();
        tests
    }

    /// The policies a call whose context holds what `facts` say can
    /// satisfy, or raise an error in: all but those its guards rule out.
    pub fn for_call(&self, facts: &impl Facts) -> Arc<PolicySet> {
        let mut out = 0u64;
        for (bit, (_, guards)) in self.guarded.iter().enumerate() {
            if left_out(guards, facts) {
                out |= 1 << bit;
            }
        }
        if out == 0 {
            return self.policies.clone();
        }
        if let Some(subset) = self.subsets.read().unwrap_or_else(|e| e.into_inner()).get(&out) {
            return subset.clone();
        }
        let mut subset = PolicySet::new();
        for policy in self.policies.policies() {
            let skipped = self
                .guarded
                .iter()
                .enumerate()
                .any(|(bit, (id, _))| out & (1 << bit) != 0 && id == policy.id());
            if !skipped && subset.add(policy.clone()).is_err() {
                // Cannot happen (the ids are those of a set); the whole
                // set is always right.
                return self.policies.clone();
            }
        }
        let subset = Arc::new(subset);
        let mut subsets = self.subsets.write().unwrap_or_else(|e| e.into_inner());
        if subsets.len() < MAX_SUBSETS {
            subsets.insert(out, subset.clone());
        }
        subset
    }
}

/// Whether a policy with these condition guards is known to evaluate to
/// `false` without an error: its conditions are evaluated in order, and
/// the first that is not known to be `true` decides.
fn left_out(guards: &[Guard], facts: &impl Facts) -> bool {
    for guard in guards {
        match guard.eval(facts) {
            Some(true) => continue,
            Some(false) => return true,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::str::FromStr;

    use super::*;

    fn guarded(text: &str) -> Guarded {
        Guarded::new(PolicySet::from_str(text).unwrap())
    }

    /// Facts of a context that holds `paths` (each `a` or `a.b`), where
    /// `a.b` is known only under `args`, and the strings `texts`.
    struct Held {
        paths: BTreeSet<String>,
        args_known: bool,
        texts: Vec<(Vec<String>, String)>,
    }

    impl Facts for Held {
        fn present(&self, path: &[String]) -> Option<bool> {
            match path {
                [key] => Some(self.paths.contains(key)),
                [first, key] if first == "args" && self.args_known && self.paths.contains("args") => {
                    Some(self.paths.contains(&format!("args.{key}")))
                }
                _ => None,
            }
        }

        fn text(&self, path: &[String]) -> Option<&str> {
            self.texts.iter().find(|(p, _)| p == path).map(|(_, text)| text.as_str())
        }
    }

    fn holding(paths: &[&str]) -> Held {
        Held { paths: paths.iter().map(|p| p.to_string()).collect(), args_known: true, texts: Vec::new() }
    }

    fn with_text(mut held: Held, path: &str, text: &str) -> Held {
        held.texts.push((path.split('.').map(str::to_owned).collect(), text.to_owned()));
        held
    }

    fn ids(set: &PolicySet) -> Vec<String> {
        let mut ids: Vec<String> = set.policies().map(|p| p.annotation("id").unwrap().to_owned()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_policy_is_left_out_only_when_its_first_conditions_are_known_false() {
        let set = guarded(
            r#"@id("path") forbid (principal, action, resource) when { context has path && context.path like "*x" };
               @id("method") forbid (principal, action, resource) when { context.args has method && context.args.method == "x" };
               @id("either") forbid (principal, action, resource) when { (context has a && context.a) || (context.args has b && context.args.b) };
               @id("unless") forbid (principal, action, resource) unless { context has url && context.url };
               @id("second") forbid (principal, action, resource) when { context.is_subagent } when { context has path };
               @id("after-true") forbid (principal, action, resource) when { context has tool } when { context has path };
               @id("not") permit (principal, action, resource) when { !(context has path) };
               @id("plain") permit (principal, action, resource);"#,
        );
        let all = ids(&set.policies);
        // Nothing held: every policy guarded by a `has` is left out,
        // except those that are true without it (`unless`, `!`), or whose
        // guard is not first, or unknown.
        let none = set.for_call(&holding(&["args"]));
        assert_eq!(ids(&none), ["not", "plain", "second", "unless"]);
        // Everything held: nothing left out but the policy that asks for
        // no path.
        let every = holding(&["args", "path", "args.method", "a", "args.b", "url", "tool"]);
        let but_not: Vec<&String> = all.iter().filter(|id| *id != "not").collect();
        assert_eq!(ids(&set.for_call(&every)).iter().collect::<Vec<_>>(), but_not);
        // `context.args` not known to be there: `context.args has x` may
        // raise an error, so the policy stays.
        let unknown_args = Held { paths: ["tool".to_owned()].into(), args_known: false, texts: Vec::new() };
        assert_eq!(
            ids(&set.for_call(&unknown_args)),
            ["either", "method", "not", "plain", "second", "unless"]
        );
        // The same call twice gets the same subset.
        assert!(Arc::ptr_eq(&set.for_call(&holding(&["args"])), &none));
    }

    #[test]
    fn the_guards_read_has_tests_joined_by_and_or_not() {
        let set = guarded(
            r#"forbid (principal, action, resource) when { context has a && (context.args has b || !(context has c)) };
               forbid (principal, action, resource) when { context has a.b };
               forbid (principal, action, resource) when { context.x has y && true };"#,
        );
        let has = |p: &[&str]| Guard::Has(p.iter().map(|s| s.to_string()).collect());
        let guards: Vec<&Vec<Guard>> = set.guarded.iter().map(|(_, g)| g).collect();
        // `has a.b` (Cedar's `has a && a has b`) is not read: its policy is
        // always evaluated.
        assert_eq!(guards.len(), 2);
        assert!(guards.contains(&&vec![Guard::And(
            Box::new(has(&["a"])),
            Box::new(Guard::Or(Box::new(has(&["args", "b"])), Box::new(Guard::Not(Box::new(has(&["c"])))))),
        )]));
        assert!(guards.contains(&&vec![Guard::And(Box::new(has(&["x", "y"])), Box::new(Guard::Other))]));
        assert_eq!(set.tests(), [vec!["a"], vec!["args", "b"], vec!["c"], vec!["x", "y"]]);
    }

    #[test]
    fn a_like_the_call_does_not_match_leaves_its_policy_out() {
        let set = guarded(
            r#"@id("secrets") forbid (principal, action, resource) when { context has path && (context.path.lower like "*.pem" || context.path.lower like "*/.env*") };
               @id("dots") forbid (principal, action, resource) when { context.args has path && context.args.path like "*..*" };
               @id("host") forbid (principal, action, resource) when { context has url && context.url.host like "*.x" };
               @id("plain") permit (principal, action, resource);"#,
        );
        let held = || holding(&["args", "args.path", "path", "url"]);
        // Strings that match no pattern: those policies are left out.
        let file = with_text(with_text(held(), "path.lower", "/w/readme.md"), "args.path", "/w/README.md");
        assert_eq!(ids(&set.for_call(&file)), ["host", "plain"], "no string known for url.host");
        // A string that matches: its policy stays.
        let key = with_text(with_text(held(), "path.lower", "/w/key.pem"), "args.path", "/w/key.PEM");
        assert_eq!(ids(&set.for_call(&key)), ["host", "plain", "secrets"]);
        let climbs = with_text(with_text(held(), "path.lower", "/w/x"), "args.path", "/w/../x");
        assert_eq!(ids(&set.for_call(&climbs)), ["dots", "host", "plain"]);
        // No string known (missing, or not a string: an error in Cedar):
        // the policy stays.
        assert_eq!(ids(&set.for_call(&held())), ["dots", "host", "plain", "secrets"]);
        assert_eq!(set.likes(), [vec!["args", "path"], vec!["path", "lower"], vec!["url", "host"]]);
    }

    /// The pieces of a pattern written as in a policy, `*` a wildcard.
    fn pieces(pattern: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        for (i, part) in pattern.split('*').enumerate() {
            if i > 0 {
                out.push(Piece::Star);
            }
            if !part.is_empty() {
                out.push(Piece::Text(part.to_owned()));
            }
        }
        out
    }

    /// Every word of at most `max` letters of `alphabet`.
    fn words(alphabet: &[char], max: usize) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
            out.extend(last.iter().cloned());
        }
        out
    }

    #[test]
    fn like_matches_as_cedar_matches() {
        use cedar_policy::{Context, Entities, EntityUid, EvalResult, Expression, Request};
        let uid = |text: &str| EntityUid::from_str(text).unwrap();
        let request = Request::new(
            uid(r#"User::"u""#),
            uid(r#"Action::"a""#),
            uid(r#"Tool::"t""#),
            Context::empty(),
            None,
        )
        .unwrap();
        let entities = Entities::empty();
        let (mut compared, mut matched) = (0, 0);
        for pattern in words(&['a', 'b', 'é', '*'], 4) {
            let ours = pieces(&pattern);
            assert_eq!(
                Guard::of(&like_json(&pattern)),
                Guard::Like(vec!["s".into()], ours.clone()),
                "{pattern}"
            );
            for text in words(&['a', 'b', 'é', '.'], 3) {
                let expr = Expression::from_str(&format!(r#""{text}" like "{pattern}""#)).unwrap();
                let cedar = match cedar_policy::eval_expression(&request, &entities, &expr).unwrap() {
                    EvalResult::Bool(b) => b,
                    other => panic!("{other:?}"),
                };
                assert_eq!(like(&ours, &text), cedar, "{text:?} like {pattern:?}");
                compared += 1;
                matched += usize::from(cedar);
            }
        }
        assert!(compared > 20_000 && matched > 1_000, "{compared} compared, {matched} matched");
    }

    /// `context.s like "pattern"` in its JSON form, as a policy gives it.
    fn like_json(pattern: &str) -> Value {
        let text = format!(r#"permit (principal, action, resource) when {{ context.s like "{pattern}" }};"#);
        let policy = cedar_policy::Policy::from_str(&text).unwrap();
        policy.to_json().unwrap()["conditions"][0]["body"].clone()
    }
}
