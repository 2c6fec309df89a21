//! Policies a call cannot satisfy, known before Cedar evaluates them.
//!
//! Many policies start with a test of what the context holds: `when {
//! context has path && ... }`, `when { context.args has method && ... }`.
//! When the call's context does not hold it, Cedar evaluates the policy to
//! `false`, without an error: the policy is neither a reason nor an error
//! of the response, and leaving it out of the set Cedar evaluates changes
//! nothing but the time. A policy is left out only when this is known from
//! the policy's first conditions alone, read as `has` tests joined by
//! `&&`, `||` and `!` (Cedar evaluates them left to right and stops as
//! soon as the answer is known, as here); anything else in them is
//! unknown, and the policy is evaluated. The scope (`principal`, `action`,
//! `resource`) never raises an error, so it does not matter here.

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

/// What a condition is known to be from what the context holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// `context has a` (`["a"]`), `context.a has b` (`["a", "b"]`).
    Has(Vec<String>),
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
            _ => Guard::Other,
        }
    }

    /// Its value, when `present` says enough (`present(path)`: whether the
    /// context holds `path`, when that is known and asking does not raise
    /// an error); `None` when it is not known.
    pub fn eval(&self, present: &impl Fn(&[String]) -> Option<bool>) -> Option<bool> {
        match self {
            Guard::Has(path) => present(path),
            Guard::Not(inner) => inner.eval(present).map(|b| !b),
            Guard::And(left, right) => match left.eval(present)? {
                false => Some(false),
                true => right.eval(present),
            },
            Guard::Or(left, right) => match left.eval(present)? {
                true => Some(true),
                false => right.eval(present),
            },
            Guard::Other => None,
        }
    }

    /// The `has` tests it holds.
    fn tests<'a>(&'a self, out: &mut Vec<&'a [String]>) {
        match self {
            Guard::Has(path) => out.push(path),
            Guard::Not(inner) => inner.tests(out),
            Guard::And(left, right) | Guard::Or(left, right) => {
                left.tests(out);
                right.tests(out);
            }
            Guard::Other => {}
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

    /// The `has` tests of the guards, each once.
    pub fn tests(&self) -> Vec<Vec<String>> {
        let mut tests = Vec::new();
        for (_, guards) in &self.guarded {
            for guard in guards {
                guard.tests(&mut tests);
            }
        }
        let mut tests: Vec<Vec<String>> = tests.into_iter().map(<[String]>::to_vec).collect();
        tests.sort();
        tests.dedup();
        tests
    }

    /// The policies a call whose context holds what `present` says can
    /// satisfy, or raise an error in: all but those its guards rule out.
    pub fn for_call(&self, present: &impl Fn(&[String]) -> Option<bool>) -> Arc<PolicySet> {
        let mut out = 0u64;
        for (bit, (_, guards)) in self.guarded.iter().enumerate() {
            if left_out(guards, present) {
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
fn left_out(guards: &[Guard], present: &impl Fn(&[String]) -> Option<bool>) -> bool {
    for guard in guards {
        match guard.eval(present) {
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

    /// `present` for a context that holds `paths` (each `a` or `a.b`),
    /// where `a.b` is known only under `args`.
    fn holding(paths: &[&str]) -> impl Fn(&[String]) -> Option<bool> {
        let held: BTreeSet<String> = paths.iter().map(|p| p.to_string()).collect();
        move |path: &[String]| match path {
            [key] => Some(held.contains(key)),
            [first, key] if first == "args" && held.contains("args") => {
                Some(held.contains(&format!("args.{key}")))
            }
            _ => None,
        }
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
        let unknown_args = |path: &[String]| match path {
            [key] => Some(key == "tool"),
            _ => None,
        };
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
}
