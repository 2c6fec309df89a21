//! Name resolution and state inference, run once per pack at load time.

use std::collections::{HashMap, HashSet};

use crate::parser::{ArithOp, Base, CmpOp, Expr, StateRef, Step};

/// How a stateful name accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StateKind {
    /// `S + x <= limit`: the sum of `x` over allowed calls in the window.
    Sum,
    /// `S < limit`: the number of allowed calls in the window.
    Count,
    /// `x not in S`: the values of `x` seen in allowed calls, kept for the window.
    Set,
}

/// A stateful name of a pack.
#[derive(Debug, Clone)]
pub(super) struct StateVar {
    pub name: Box<str>,
    pub kind: StateKind,
    /// Counter window (fixed UTC buckets) or set retention, in seconds.
    pub window_secs: u64,
}

/// What an allowed call adds to a state variable.
#[derive(Debug, Clone)]
pub(super) enum UpdateOp {
    Add(Expr),
    One,
    Insert(Expr),
}

/// One update applied after an allowed call.
#[derive(Debug, Clone)]
pub(super) struct Update {
    pub target: StateRef,
    pub op: UpdateOp,
}

const ROOTS: [&str; 4] = ["passport", "context", "limits", "policy"];

/// The result of binding a pack's conditions.
pub(super) struct Bound {
    pub exprs: Vec<Option<Expr>>,
    pub vars: Vec<StateVar>,
    pub updates: Vec<Update>,
}

/// Binds every parsed condition of a pack. `declared` are the context
/// fields the pack declares; they are never state.
pub(super) fn bind_pack(parsed: Vec<Option<Expr>>, declared: &HashSet<String>) -> Bound {
    let mut binder = Binder {
        declared,
        vars: Vec::new(),
        index: HashMap::new(),
        updates: Vec::new(),
        seen: HashSet::new(),
    };
    for expr in parsed.iter().flatten() {
        binder.infer(expr);
    }
    let exprs = parsed
        .into_iter()
        .map(|e| {
            e.map(|e| {
                let mut scope = Vec::new();
                binder.bind(e, &mut scope)
            })
        })
        .collect();
    Bound { exprs, vars: binder.vars, updates: binder.updates }
}

struct Binder<'d> {
    declared: &'d HashSet<String>,
    vars: Vec<StateVar>,
    index: HashMap<Box<str>, usize>,
    updates: Vec<Update>,
    seen: HashSet<String>,
}

/// `name` or `name[key]` with a bare name.
fn bare_ref(e: &Expr) -> Option<&str> {
    match e {
        Expr::Path(Base::Ident(name), steps)
            if steps.is_empty() || matches!(steps.as_slice(), [Step::Index(_)]) =>
        {
            Some(name)
        }
        _ => None,
    }
}

/// Field names along the paths of `e`, for choosing a window.
fn path_words(e: &Expr, out: &mut String) {
    match e {
        Expr::Path(base, steps) => {
            match base {
                Base::Ident(n) => out.push_str(n),
                Base::Expr(inner) => path_words(inner, out),
                _ => {}
            }
            for s in steps {
                match s {
                    Step::Field(f) => {
                        out.push(' ');
                        out.push_str(f);
                    }
                    Step::Index(i) => path_words(i, out),
                }
            }
            out.push(' ');
        }
        Expr::Arith(_, a, b) => {
            path_words(a, out);
            path_words(b, out);
        }
        _ => {}
    }
}

fn window_for(words: &str) -> u64 {
    let w = words.to_ascii_lowercase();
    if w.contains("minute") || w.contains("per_min") {
        60
    } else if w.contains("hour") {
        3600
    } else {
        86_400
    }
}

/// Index expressions inside the paths of `e` (e.g. `[currency]` in
/// `limits.currency_limits[currency].daily_cap`).
fn index_exprs(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Path(base, steps) => {
            if let Base::Expr(inner) = base {
                index_exprs(inner, out);
            }
            for s in steps {
                if let Step::Index(i) = s {
                    out.push(i.clone());
                }
            }
        }
        Expr::Arith(_, a, b) => {
            index_exprs(a, out);
            index_exprs(b, out);
        }
        _ => {}
    }
}

impl Binder<'_> {
    fn is_state_candidate(&self, name: &str) -> bool {
        !ROOTS.contains(&name) && !self.declared.contains(name)
    }

    fn register(&mut self, name: &str, kind: StateKind, limit: &Expr) {
        if self.index.contains_key(name) {
            return;
        }
        let mut words = String::from(name);
        words.push(' ');
        path_words(limit, &mut words);
        let window_secs = window_for(&words);
        self.index.insert(name.into(), self.vars.len());
        self.vars.push(StateVar { name: name.into(), kind, window_secs });
    }

    /// First pass: finds the accumulator shapes.
    fn infer(&mut self, e: &Expr) {
        match e {
            Expr::Cmp(op @ (CmpOp::Le | CmpOp::Lt), left, right) => {
                if let Expr::Arith(ArithOp::Add, a, b) = &**left {
                    for side in [a, b] {
                        if let Some(name) = bare_ref(side).filter(|n| self.is_state_candidate(n)) {
                            self.register(name, StateKind::Sum, right);
                            break;
                        }
                    }
                } else if *op == CmpOp::Lt {
                    if let Some(name) = bare_ref(left).filter(|n| self.is_state_candidate(n)) {
                        self.register(name, StateKind::Count, right);
                    }
                }
            }
            Expr::In(_, hay, true) => {
                if let Some(name) = bare_ref(hay).filter(|n| self.is_state_candidate(n)) {
                    self.register(name, StateKind::Set, hay);
                }
            }
            _ => {}
        }
        self.walk(e);
    }

    fn walk(&mut self, e: &Expr) {
        match e {
            Expr::Lit(_) => {}
            Expr::List(items) | Expr::Call(_, items) => items.iter().for_each(|i| self.infer(i)),
            Expr::Path(base, steps) => {
                if let Base::Expr(inner) = base {
                    self.infer(inner);
                }
                for s in steps {
                    if let Step::Index(i) = s {
                        self.infer(i);
                    }
                }
            }
            Expr::State(_) => {}
            Expr::Not(a) | Expr::Neg(a) | Expr::IsEmpty(a, _) | Expr::Lambda(_, a) => self.infer(a),
            Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Cmp(_, a, b)
            | Expr::In(a, b, _)
            | Expr::Arith(_, a, b) => {
                self.infer(a);
                self.infer(b);
            }
            Expr::Method(r, _, args) => {
                self.infer(r);
                args.iter().for_each(|a| self.infer(a));
            }
            Expr::Comp(_, elem, _, iter) => {
                self.infer(elem);
                self.infer(iter);
            }
        }
    }

    fn push_update(&mut self, target: &StateRef, op: UpdateOp) {
        let signature = format!("{target:?}{op:?}");
        if self.seen.insert(signature) {
            self.updates.push(Update { target: target.clone(), op });
        }
    }

    fn kind_of(&self, r: &StateRef) -> Option<StateKind> {
        self.vars.get(r.var).map(|v| v.kind)
    }

    /// Second pass: resolves names; `scope` holds the enclosing binders.
    fn bind(&mut self, e: Expr, scope: &mut Vec<Box<str>>) -> Expr {
        match e {
            Expr::Lit(_) | Expr::State(_) => e,
            Expr::List(items) => Expr::List(items.into_iter().map(|i| self.bind(i, scope)).collect()),
            Expr::Call(f, args) => Expr::Call(f, args.into_iter().map(|a| self.bind(a, scope)).collect()),
            Expr::Path(base, steps) => self.bind_path(base, steps, scope),
            Expr::Not(a) => Expr::Not(Box::new(self.bind(*a, scope))),
            Expr::Neg(a) => Expr::Neg(Box::new(self.bind(*a, scope))),
            Expr::IsEmpty(a, n) => Expr::IsEmpty(Box::new(self.bind(*a, scope)), n),
            Expr::And(a, b) => Expr::And(Box::new(self.bind(*a, scope)), Box::new(self.bind(*b, scope))),
            Expr::Or(a, b) => Expr::Or(Box::new(self.bind(*a, scope)), Box::new(self.bind(*b, scope))),
            Expr::Arith(op, a, b) => {
                Expr::Arith(op, Box::new(self.bind(*a, scope)), Box::new(self.bind(*b, scope)))
            }
            Expr::Cmp(op, a, b) => {
                let mut left = self.bind(*a, scope);
                let right = self.bind(*b, scope);
                self.accumulate_cmp(op, &mut left, &right);
                Expr::Cmp(op, Box::new(left), Box::new(right))
            }
            Expr::In(a, b, negated) => {
                let needle = self.bind(*a, scope);
                let hay = self.bind(*b, scope);
                if negated {
                    if let Expr::State(target) = &hay {
                        if self.kind_of(target) == Some(StateKind::Set) {
                            self.push_update(target, UpdateOp::Insert(needle.clone()));
                        }
                    }
                }
                Expr::In(Box::new(needle), Box::new(hay), negated)
            }
            Expr::Method(r, m, args) => {
                let r = self.bind(*r, scope);
                Expr::Method(Box::new(r), m, args.into_iter().map(|a| self.bind(a, scope)).collect())
            }
            Expr::Lambda(mut b, body) => {
                b.slot = scope.len();
                scope.push(b.name.clone());
                let body = self.bind(*body, scope);
                scope.pop();
                Expr::Lambda(b, Box::new(body))
            }
            Expr::Comp(q, elem, mut b, iter) => {
                let iter = self.bind(*iter, scope);
                b.slot = scope.len();
                scope.push(b.name.clone());
                let elem = self.bind(*elem, scope);
                scope.pop();
                Expr::Comp(q, Box::new(elem), b, Box::new(iter))
            }
        }
    }

    /// Gives an accumulator its scope and records its update.
    fn accumulate_cmp(&mut self, op: CmpOp, left: &mut Expr, right: &Expr) {
        if !matches!(op, CmpOp::Le | CmpOp::Lt) {
            return;
        }
        let mut scope_exprs = Vec::new();
        index_exprs(right, &mut scope_exprs);
        if let Expr::Arith(ArithOp::Add, a, b) = left {
            let is_sum = |e: &Expr| matches!(e, Expr::State(t) if self.kind_of(t) == Some(StateKind::Sum));
            let (target, amount) = if is_sum(a) {
                (&mut **a, &**b)
            } else if is_sum(b) {
                (&mut **b, &**a)
            } else {
                return;
            };
            let Expr::State(target) = target else { return };
            target.scope = scope_exprs;
            let (target, amount) = (target.clone(), amount.clone());
            self.push_update(&target, UpdateOp::Add(amount));
        } else if let Expr::State(target) = left {
            if op == CmpOp::Lt && self.kind_of(target) == Some(StateKind::Count) {
                target.scope = scope_exprs;
                let target = target.clone();
                self.push_update(&target, UpdateOp::One);
            }
        }
    }

    fn bind_path(&mut self, base: Base, steps: Vec<Step>, scope: &mut Vec<Box<str>>) -> Expr {
        let mut steps: Vec<Step> = steps
            .into_iter()
            .map(|s| match s {
                Step::Index(i) => Step::Index(self.bind(i, scope)),
                field => field,
            })
            .collect();
        let base = match base {
            Base::Ident(name) => {
                if let Some(slot) = scope.iter().rposition(|n| *n == name) {
                    Base::Var(slot)
                } else {
                    match &*name {
                        "passport" => Base::Passport,
                        "context" => Base::Context,
                        "limits" => Base::Limits,
                        "policy" => Base::Policy,
                        _ => {
                            if let Some(&var) = self.index.get(&name) {
                                let key = match steps.first() {
                                    Some(Step::Index(_)) => match steps.remove(0) {
                                        Step::Index(k) => Some(Box::new(k)),
                                        Step::Field(_) => None,
                                    },
                                    _ => None,
                                };
                                let state = Expr::State(StateRef { var, key, scope: Vec::new() });
                                if steps.is_empty() {
                                    return state;
                                }
                                return Expr::Path(Base::Expr(Box::new(state)), steps);
                            }
                            steps.insert(0, Step::Field(name));
                            Base::Context
                        }
                    }
                }
            }
            Base::Expr(inner) => Base::Expr(Box::new(self.bind(*inner, scope))),
            other => other,
        };
        Expr::Path(base, steps)
    }
}
