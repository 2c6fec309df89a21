//! The message of a rule whose condition is false: the pack's own, else a
//! sentence for the decisive comparison, else the rule's description.

use crate::eval::{self, show, truth, Cx, Tri, Val};
use crate::parser::{ArithOp, Base, CmpOp, Expr, Quant, Step};

use super::{GenericPack, Rule};

impl GenericPack {
    /// The deny message of a rule whose condition is false.
    pub(super) fn message(&self, cx: &Cx<'_>, rule: &Rule, expr: &Expr) -> String {
        if let Some(m) = &rule.message {
            return m.clone();
        }
        if let Some(m) = self.describe(cx, rule, expr, &mut Vec::new()) {
            return m;
        }
        match &rule.description {
            Some(d) => d.clone(),
            None => format!("Denied by policy rule {}", rule.info.name),
        }
    }

    /// A sentence for the decisive comparison of a false condition.
    fn describe<'a>(
        &'a self,
        cx: &Cx<'a>,
        rule: &Rule,
        expr: &'a Expr,
        vars: &mut Vec<Val<'a>>,
    ) -> Option<String> {
        match expr {
            Expr::Or(..) => {
                let mut parts = Vec::new();
                disjuncts(expr, &mut parts);
                let decisive = parts.into_iter().find(|p| matches!(p, Expr::In(..) | Expr::Cmp(..)))?;
                self.describe(cx, rule, decisive, vars)
            }
            Expr::And(a, b) => {
                let first_false =
                    [a, b].into_iter().find(|side| truth(&cx.eval(side, vars)) == Tri::False)?;
                self.describe(cx, rule, first_false, vars)
            }
            // `NOT (x in blocked)`, `NOT any(item.c in blocked for item in items)`.
            Expr::Not(inner) => match &**inner {
                Expr::In(needle, hay, false) => {
                    Some(self.membership_message(cx, rule, needle, hay, true, vars))
                }
                Expr::Comp(Quant::Any, elem, binder, iter) => {
                    let Expr::In(needle, hay, false) = &**elem else { return None };
                    let items: Vec<Val<'a>> = match cx.eval(iter, vars) {
                        Val::Arr(a) => a.iter().map(|v| eval::from_json(v, eval::Src::Data)).collect(),
                        Val::List(l) => l,
                        _ => return None,
                    };
                    for item in items {
                        vars.resize(binder.slot, Val::Missing(eval::Src::Data));
                        vars.push(item);
                        if truth(&cx.eval(elem, vars)) == Tri::True {
                            return Some(self.membership_message(cx, rule, needle, hay, true, vars));
                        }
                    }
                    None
                }
                _ => None,
            },
            Expr::In(needle, hay, negated) => {
                Some(self.membership_message(cx, rule, needle, hay, *negated, vars))
            }
            Expr::Cmp(op, a, b) => {
                let (va, vb) = (show(&cx.eval(a, vars)), show(&cx.eval(b, vars)));
                Some(match (op, &**a) {
                    (CmpOp::Le | CmpOp::Lt, Expr::Arith(ArithOp::Add, x, y)) => {
                        let (vx, vy) = (show(&cx.eval(x, vars)), show(&cx.eval(y, vars)));
                        let (lx, ly) = (label(self, x), label(self, y).to_lowercase());
                        format!("{lx} {vx} plus {ly} {vy} exceeds the limit of {vb}")
                    }
                    (CmpOp::Lt, Expr::State(_)) => {
                        format!("{} {va} has reached the limit of {vb}", label(self, a))
                    }
                    (CmpOp::Le | CmpOp::Lt, _) => {
                        format!("{} {va} exceeds the limit of {vb}", label(self, a))
                    }
                    (CmpOp::Ge | CmpOp::Gt, _) => {
                        format!("{} {va} is below the required {vb}", label(self, a))
                    }
                    (CmpOp::Eq, _) => format!("{} is {va}, not {vb}", label(self, a)),
                    (CmpOp::Ne, _) => format!("{} must not be {vb}", label(self, a)),
                })
            }
            _ => None,
        }
    }

    /// `needle in hay` was false (or, `excluded`, true where it must not be).
    fn membership_message<'a>(
        &'a self,
        cx: &Cx<'a>,
        rule: &Rule,
        needle: &'a Expr,
        hay: &Expr,
        excluded: bool,
        vars: &mut Vec<Val<'a>>,
    ) -> String {
        let value = show(&cx.eval(needle, vars));
        let label = label(self, needle);
        let what = if let Expr::State(_) = hay {
            "has already been used"
        } else if excluded {
            if last_field(hay).is_some_and(|f| f.contains("block")) {
                "is blocked"
            } else {
                "is restricted"
            }
        } else if rule.info.deny_code.contains("unsupported") {
            "is not supported"
        } else {
            "is not allowed"
        };
        format!("{label} {value} {what}")
    }
}

fn disjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Or(a, b) => {
            disjuncts(a, out);
            disjuncts(b, out);
        }
        other => out.push(other),
    }
}

fn last_field(e: &Expr) -> Option<&str> {
    match e {
        Expr::Path(_, steps) => steps.iter().rev().find_map(|s| match s {
            Step::Field(f) => Some(&**f),
            Step::Index(_) => None,
        }),
        _ => None,
    }
}

fn humanize(name: &str) -> String {
    let words = name.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => "Value".into(),
    }
}

/// What a value is called in a message.
fn label(pack: &GenericPack, e: &Expr) -> String {
    match e {
        Expr::Path(base, steps) => {
            let fields: Vec<&str> = steps
                .iter()
                .filter_map(|s| match s {
                    Step::Field(f) => Some(&**f),
                    Step::Index(_) => None,
                })
                .collect();
            match fields.as_slice() {
                [.., owner, "length"] => format!("Number of {}", owner.replace('_', " ")),
                [.., last] => humanize(last),
                [] => match base {
                    Base::Var(_) => "Item".into(),
                    _ => "Value".into(),
                },
            }
        }
        Expr::State(r) => pack.state_vars.get(r.var).map_or_else(|| "Total".into(), |v| humanize(&v.name)),
        Expr::Call(..) => "Required level".into(),
        _ => "Value".into(),
    }
}
