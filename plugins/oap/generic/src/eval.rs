//! The evaluator: values, three-valued logic, paths, functions.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::assurance::{assurance_rank, Assurance};
use crate::bind::{StateKind, StateVar};
use crate::parser::{ArithOp, Base, CmpOp, Expr, Func, Lit, Method, Quant, StateRef, Step};
use crate::state::StateView;
use crate::time::parse_timestamp;

/// Fallback names for limits a passport spells differently from the pack,
/// `(name in the rule, name tried when it is absent)`; used only inside
/// `limits` (see [`crate::pack`], *Names*).
pub const LIMIT_ALIASES: &[(&str, &str)] = &[
    ("supported_currencies", "currency_limits"),
    ("refund_reason_codes", "reason_codes"),
    ("reason_codes", "refund_reason_codes"),
    ("max_export_rows", "max_rows"),
    ("max_rows", "max_export_rows"),
];

/// Where an absent value was looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Src {
    /// Passport, limits or pack: absent reads as false in a truth test.
    Config,
    /// Context, variables, or the result of an operation on an absent value:
    /// unknown.
    Data,
}

/// A value during evaluation.
#[derive(Debug, Clone)]
pub(super) enum Val<'a> {
    Missing(Src),
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    Arr(&'a [Value]),
    Obj(&'a Map<String, Value>),
    List(Vec<Val<'a>>),
    Err(&'static str),
}

/// Truth of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tri {
    True,
    False,
    Unknown,
    Error(&'static str),
}

const UNKNOWN: Val<'static> = Val::Missing(Src::Data);

pub(super) fn from_json(v: &Value, src: Src) -> Val<'_> {
    match v {
        Value::Null => Val::Missing(src),
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => n.as_f64().map_or(Val::Err("number out of range"), Val::Num),
        Value::String(s) => Val::Str(Cow::Borrowed(s)),
        Value::Array(a) => Val::Arr(a),
        Value::Object(o) => Val::Obj(o),
    }
}

pub(super) fn truth(v: &Val<'_>) -> Tri {
    let b = match v {
        Val::Missing(Src::Config) => false,
        Val::Missing(Src::Data) => return Tri::Unknown,
        Val::Err(e) => return Tri::Error(e),
        Val::Bool(b) => *b,
        Val::Num(n) => *n != 0.0 && !n.is_nan(),
        Val::Str(s) => !s.is_empty(),
        Val::Arr(a) => !a.is_empty(),
        Val::Obj(o) => !o.is_empty(),
        Val::List(l) => !l.is_empty(),
    };
    if b {
        Tri::True
    } else {
        Tri::False
    }
}

fn from_tri(t: Tri) -> Val<'static> {
    match t {
        Tri::True => Val::Bool(true),
        Tri::False => Val::Bool(false),
        Tri::Unknown => UNKNOWN,
        Tri::Error(e) => Val::Err(e),
    }
}

fn not(t: Tri) -> Tri {
    match t {
        Tri::True => Tri::False,
        Tri::False => Tri::True,
        other => other,
    }
}

/// Kleene aggregation for `and`/`all` (`conj`) and `or`/`any`.
struct Agg {
    conj: bool,
    error: Option<&'static str>,
    unknown: bool,
}

impl Agg {
    fn new(conj: bool) -> Self {
        Agg { conj, error: None, unknown: false }
    }

    /// Adds one operand; returns the result once it is decided.
    fn push(&mut self, t: Tri) -> Option<Tri> {
        match t {
            Tri::True if !self.conj => Some(Tri::True),
            Tri::False if self.conj => Some(Tri::False),
            Tri::Error(e) => {
                self.error.get_or_insert(e);
                None
            }
            Tri::Unknown => {
                self.unknown = true;
                None
            }
            _ => None,
        }
    }

    fn finish(&self) -> Tri {
        match (self.error, self.unknown) {
            (Some(e), _) => Tri::Error(e),
            (None, true) => Tri::Unknown,
            (None, false) if self.conj => Tri::True,
            _ => Tri::False,
        }
    }
}

/// Strict equality: numbers by value, no coercion between types.
fn val_eq(a: &Val<'_>, b: &Val<'_>) -> bool {
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Obj(x), Val::Obj(y)) => x == y,
        (Val::Arr(x), Val::Arr(y)) => x == y,
        (Val::Arr(x), Val::List(y)) | (Val::List(y), Val::Arr(x)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| val_eq(&from_json(x, Src::Data), y))
        }
        (Val::List(x), Val::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| val_eq(x, y)),
        _ => false,
    }
}

/// Membership of `needle` in an array element (equal, or an object whose
/// `id` is equal).
fn element_matches(el: &Val<'_>, needle: &Val<'_>) -> bool {
    if val_eq(el, needle) {
        return true;
    }
    match el {
        Val::Obj(o) => o.get("id").is_some_and(|id| val_eq(&from_json(id, Src::Data), needle)),
        _ => false,
    }
}

/// Writes a number the way JSON does (`5000`, not `5000.0`).
fn write_num(out: &mut String, n: f64) {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        let _ = write!(out, "{}", n as i64);
    } else {
        let _ = write!(out, "{n}");
    }
}

/// `needle in hay`.
fn contains<'a>(hay: &Val<'a>, needle: &Val<'a>) -> Val<'a> {
    match (hay, needle) {
        (Val::Err(e), _) | (_, Val::Err(e)) => Val::Err(e),
        (Val::Missing(_), _) | (_, Val::Missing(_)) => UNKNOWN,
        (Val::Arr(a), n) => Val::Bool(a.iter().any(|el| element_matches(&from_json(el, Src::Data), n))),
        (Val::List(l), n) => Val::Bool(l.iter().any(|el| element_matches(el, n))),
        (Val::Obj(o), Val::Str(k)) => Val::Bool(o.contains_key(k.as_ref())),
        (Val::Obj(o), Val::Num(n)) => {
            let mut k = String::new();
            write_num(&mut k, *n);
            Val::Bool(o.contains_key(&k))
        }
        (Val::Obj(_), _) => Val::Bool(false),
        (Val::Str(s), Val::Str(n)) => Val::Bool(s.contains(n.as_ref())),
        (Val::Str(_), _) => Val::Err("only a string can be looked for in a string"),
        _ => Val::Err("`in` needs a list, an object or a string on its right"),
    }
}

fn order(a: &Val<'_>, b: &Val<'_>) -> Result<Option<Ordering>, &'static str> {
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => Ok(x.partial_cmp(y)),
        (Val::Str(x), Val::Str(y)) => Ok(Some(match (assurance_rank(x), assurance_rank(y)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x.cmp(y),
        })),
        _ => Err("values of different types cannot be ordered"),
    }
}

fn compare<'a>(op: CmpOp, a: &Val<'a>, b: &Val<'a>) -> Val<'a> {
    match (a, b) {
        (Val::Err(e), _) | (_, Val::Err(e)) => return Val::Err(e),
        (Val::Missing(_), _) | (_, Val::Missing(_)) => return UNKNOWN,
        _ => {}
    }
    let ord = match op {
        CmpOp::Eq => return Val::Bool(val_eq(a, b)),
        CmpOp::Ne => return Val::Bool(!val_eq(a, b)),
        _ => match order(a, b) {
            Ok(o) => o,
            Err(e) => return Val::Err(e),
        },
    };
    Val::Bool(match (op, ord) {
        (_, None) => false,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (_, Some(o)) => o != Ordering::Less,
    })
}

fn arith<'a>(op: ArithOp, a: Val<'a>, b: Val<'a>) -> Val<'a> {
    let (x, y) = match (a, b) {
        (Val::Err(e), _) | (_, Val::Err(e)) => return Val::Err(e),
        (Val::Missing(_), _) | (_, Val::Missing(_)) => return UNKNOWN,
        (Val::Num(x), Val::Num(y)) => (x, y),
        (Val::Str(x), Val::Str(y)) if op == ArithOp::Add => return Val::Str(Cow::Owned(format!("{x}{y}"))),
        _ => return Val::Err("arithmetic needs numbers"),
    };
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div | ArithOp::Rem if y == 0.0 => return Val::Err("division by zero"),
        ArithOp::Div => x / y,
        ArithOp::Rem => x % y,
    };
    if r.is_finite() {
        Val::Num(r)
    } else {
        Val::Err("arithmetic overflow")
    }
}

fn is_empty(v: &Val<'_>) -> Val<'static> {
    match v {
        Val::Missing(_) => Val::Bool(true),
        Val::Err(e) => Val::Err(e),
        Val::Str(s) => Val::Bool(s.is_empty()),
        Val::Arr(a) => Val::Bool(a.is_empty()),
        Val::Obj(o) => Val::Bool(o.is_empty()),
        Val::List(l) => Val::Bool(l.is_empty()),
        Val::Bool(_) | Val::Num(_) => Val::Bool(false),
    }
}

/// What an evaluation reads of the pack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackView<'a> {
    /// The pack id, the first part of every state key.
    pub id: &'a str,
    /// The pack document (`policy.X`).
    pub doc: &'a Value,
    /// Keys of `passport.limits` that `limits.X` is relative to.
    pub limit_scopes: &'a [String],
    /// The stateful names.
    pub state_vars: &'a [StateVar],
    /// For `getRequiredAssuranceLevel`.
    pub assurance: &'a Assurance,
}

/// Everything an evaluation reads.
pub(super) struct Cx<'a> {
    pub pack: PackView<'a>,
    pub passport: &'a Value,
    pub context: &'a Map<String, Value>,
    pub state: Option<&'a dyn StateView>,
    /// Whose state: the passport id.
    pub subject: &'a str,
    pub now: f64,
}

/// `key` equals the fields at the start of `steps` joined by dots; returns
/// how many fields it spans (at least 2).
fn dotted_span(key: &str, steps: &[Step]) -> Option<usize> {
    let mut n = 0;
    for seg in key.split('.') {
        match steps.get(n) {
            Some(Step::Field(f)) if **f == *seg => n += 1,
            _ => return None,
        }
    }
    (n >= 2).then_some(n)
}

/// Looks up the field(s) at the start of `steps` in `map`: the longest
/// dotted key first (`finance.transaction`), then the plain field, then a
/// limit alias. Returns the value and how many steps it consumed.
fn lookup<'a>(map: &'a Map<String, Value>, steps: &[Step], in_limits: bool) -> Option<(&'a Value, usize)> {
    let Some(Step::Field(first)) = steps.first() else {
        return None;
    };
    let mut best: Option<(&Value, usize)> = None;
    if matches!(steps.get(1), Some(Step::Field(_))) {
        for (k, v) in map {
            if k.contains('.') {
                if let Some(n) = dotted_span(k, steps) {
                    if best.is_none_or(|(_, b)| n > b) {
                        best = Some((v, n));
                    }
                }
            }
        }
    }
    if best.is_some() {
        return best;
    }
    if let Some(v) = map.get(first.as_ref()) {
        return Some((v, 1));
    }
    if in_limits {
        for (from, to) in LIMIT_ALIASES {
            if **first == **from {
                if let Some(v) = map.get(*to) {
                    return Some((v, 1));
                }
            }
        }
    }
    None
}

fn scalar_key(v: &Val<'_>, out: &mut String) -> Result<(), Val<'static>> {
    match v {
        Val::Str(s) => out.push_str(s),
        Val::Num(n) => write_num(out, *n),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Missing(_) => return Err(UNKNOWN),
        Val::Err(e) => return Err(Val::Err(e)),
        _ => return Err(Val::Err("a key must be a string, a number or a boolean")),
    }
    Ok(())
}

fn index<'a>(cur: Val<'a>, key: &Val<'a>, src: Src) -> Val<'a> {
    match (&cur, key) {
        (Val::Err(_) | Val::Missing(_), _) => cur,
        (_, Val::Err(e)) => Val::Err(e),
        (_, Val::Missing(_)) => UNKNOWN,
        (Val::Obj(o), Val::Str(k)) => o.get(k.as_ref()).map_or(Val::Missing(src), |v| from_json(v, src)),
        (Val::Obj(o), Val::Num(_) | Val::Bool(_)) => {
            let mut k = String::new();
            match scalar_key(key, &mut k) {
                Ok(()) => o.get(&k).map_or(Val::Missing(src), |v| from_json(v, src)),
                Err(e) => e,
            }
        }
        (Val::Arr(a), Val::Num(n)) if n.fract() == 0.0 && *n >= 0.0 => {
            a.get(*n as usize).map_or(Val::Missing(src), |v| from_json(v, src))
        }
        (Val::List(l), Val::Num(n)) if n.fract() == 0.0 && *n >= 0.0 => {
            l.get(*n as usize).cloned().unwrap_or(Val::Missing(src))
        }
        _ => Val::Missing(src),
    }
}

impl<'a> Cx<'a> {
    pub(super) fn eval(&self, e: &'a Expr, vars: &mut Vec<Val<'a>>) -> Val<'a> {
        match e {
            Expr::Lit(Lit::Null) => Val::Missing(Src::Data),
            Expr::Lit(Lit::Bool(b)) => Val::Bool(*b),
            Expr::Lit(Lit::Num(n)) => Val::Num(*n),
            Expr::Lit(Lit::Str(s)) => Val::Str(Cow::Borrowed(s)),
            Expr::List(items) => Val::List(items.iter().map(|i| self.eval(i, vars)).collect()),
            Expr::Path(base, steps) => self.path(base, steps, vars),
            Expr::State(r) => self.state_value(r, vars),
            Expr::Not(a) => from_tri(not(truth(&self.eval(a, vars)))),
            Expr::And(a, b) | Expr::Or(a, b) => {
                let mut agg = Agg::new(matches!(e, Expr::And(..)));
                for side in [a, b] {
                    if let Some(t) = agg.push(truth(&self.eval(side, vars))) {
                        return from_tri(t);
                    }
                }
                from_tri(agg.finish())
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.eval(a, vars), self.eval(b, vars));
                compare(*op, &a, &b)
            }
            Expr::In(needle, hay, negated) => {
                let r = self.membership(needle, hay, vars);
                if *negated {
                    from_tri(not(truth(&r)))
                } else {
                    r
                }
            }
            Expr::IsEmpty(a, negated) => {
                let r = is_empty(&self.eval(a, vars));
                if *negated {
                    from_tri(not(truth(&r)))
                } else {
                    r
                }
            }
            Expr::Arith(op, a, b) => {
                let (a, b) = (self.eval(a, vars), self.eval(b, vars));
                arith(*op, a, b)
            }
            Expr::Neg(a) => match self.eval(a, vars) {
                Val::Num(n) => Val::Num(-n),
                Val::Missing(_) => UNKNOWN,
                Val::Err(e) => Val::Err(e),
                _ => Val::Err("only a number can be negated"),
            },
            Expr::Call(f, args) => self.call(*f, args, vars),
            Expr::Method(recv, m, args) => self.method(recv, *m, args, vars),
            Expr::Lambda(..) => Val::Err("a lambda is not a value"),
            Expr::Comp(q, elem, binder, iter) => {
                let coll = self.eval(iter, vars);
                self.quantify(*q, &coll, |cx, vars| truth(&cx.eval(elem, vars)), binder.slot, vars)
            }
        }
    }

    /// Runs `body` with each element of `coll` bound at `slot`.
    fn quantify(
        &self,
        q: Quant,
        coll: &Val<'a>,
        body: impl Fn(&Self, &mut Vec<Val<'a>>) -> Tri,
        slot: usize,
        vars: &mut Vec<Val<'a>>,
    ) -> Val<'a> {
        let mut agg = Agg::new(q == Quant::All);
        let mut run = |el: Val<'a>, vars: &mut Vec<Val<'a>>| {
            vars.truncate(slot);
            vars.push(el);
            let t = body(self, vars);
            vars.truncate(slot);
            agg.push(t)
        };
        let decided = match coll {
            Val::Missing(_) => return UNKNOWN,
            Val::Err(e) => return Val::Err(e),
            Val::Arr(a) => a.iter().find_map(|el| run(from_json(el, Src::Data), vars)),
            Val::List(l) => l.iter().find_map(|el| run(el.clone(), vars)),
            Val::Obj(o) => o.keys().find_map(|k| run(Val::Str(Cow::Borrowed(k)), vars)),
            _ => return Val::Err("only a list or an object can be iterated"),
        };
        from_tri(decided.unwrap_or_else(|| agg.finish()))
    }

    fn membership(&self, needle: &'a Expr, hay: &'a Expr, vars: &mut Vec<Val<'a>>) -> Val<'a> {
        if let Expr::State(r) = hay {
            if let Some(var) = self.pack.state_vars.get(r.var).filter(|v| v.kind == StateKind::Set) {
                let n = self.eval(needle, vars);
                let mut member = String::new();
                if let Err(e) = scalar_key(&n, &mut member) {
                    return e;
                }
                return match self.state_key(r, vars) {
                    Ok(key) => Val::Bool(
                        self.state.is_some_and(|s| s.contains(&key, &member, var.window_secs, self.now)),
                    ),
                    Err(e) => e,
                };
            }
        }
        if let Expr::List(items) = hay {
            // `x in ['a', 'b']` without building the list.
            return match self.eval(needle, vars) {
                n @ (Val::Missing(_) | Val::Err(_)) => contains(&UNKNOWN, &n),
                n => Val::Bool(items.iter().any(|i| element_matches(&self.eval(i, vars), &n))),
            };
        }
        let (n, h) = (self.eval(needle, vars), self.eval(hay, vars));
        contains(&h, &n)
    }

    /// `pack \x1f passport \x1f name [\x1f key] [\x1f scope...]`.
    pub(super) fn state_key(&self, r: &'a StateRef, vars: &mut Vec<Val<'a>>) -> Result<String, Val<'a>> {
        let name = self.pack.state_vars.get(r.var).map_or("", |v| &v.name);
        let mut key = String::with_capacity(64);
        for part in [self.pack.id, self.subject, name] {
            key.push_str(part);
            key.push('\u{1f}');
        }
        for e in r.key.iter().map(|k| &**k).chain(&r.scope) {
            let v = self.eval(e, vars);
            scalar_key(&v, &mut key)?;
            key.push('\u{1f}');
        }
        Ok(key)
    }

    fn state_value(&self, r: &'a StateRef, vars: &mut Vec<Val<'a>>) -> Val<'a> {
        let Some(var) = self.pack.state_vars.get(r.var) else {
            return UNKNOWN;
        };
        let key = match self.state_key(r, vars) {
            Ok(k) => k,
            Err(e) => return e,
        };
        match (var.kind, self.state) {
            (StateKind::Sum | StateKind::Count, Some(s)) => {
                Val::Num(s.counter(&key, var.window_secs, self.now))
            }
            (StateKind::Sum | StateKind::Count, None) => Val::Num(0.0),
            (StateKind::Set, Some(s)) => {
                let members = s.members(&key, var.window_secs, self.now);
                Val::List(members.into_iter().map(|m| Val::Str(Cow::Owned(m))).collect())
            }
            (StateKind::Set, None) => Val::List(Vec::new()),
        }
    }

    fn path(&self, base: &'a Base, steps: &'a [Step], vars: &mut Vec<Val<'a>>) -> Val<'a> {
        match base {
            Base::Passport => match steps.first() {
                Some(Step::Field(f)) if &**f == "limits" => match self.passport.get("limits") {
                    Some(l) => self.walk(from_json(l, Src::Config), &steps[1..], Src::Config, true, vars),
                    None => Val::Missing(Src::Config),
                },
                _ => self.walk(from_json(self.passport, Src::Config), steps, Src::Config, false, vars),
            },
            Base::Context => self.walk(Val::Obj(self.context), steps, Src::Data, false, vars),
            Base::Policy => self.walk(from_json(self.pack.doc, Src::Config), steps, Src::Config, false, vars),
            Base::Limits => {
                let Some(limits) = self.passport.get("limits").and_then(Value::as_object) else {
                    return Val::Missing(Src::Config);
                };
                for scope in self.pack.limit_scopes {
                    if let Some(Value::Object(caps)) = limits.get(scope) {
                        if steps.is_empty() {
                            return Val::Obj(caps);
                        }
                        if let Some((v, n)) = lookup(caps, steps, true) {
                            return self.walk(
                                from_json(v, Src::Config),
                                &steps[n..],
                                Src::Config,
                                true,
                                vars,
                            );
                        }
                    }
                }
                self.walk(Val::Obj(limits), steps, Src::Config, true, vars)
            }
            Base::Var(slot) => {
                let v = vars.get(*slot).cloned().unwrap_or(UNKNOWN);
                self.walk(v, steps, Src::Data, false, vars)
            }
            Base::Expr(e) => {
                let v = self.eval(e, vars);
                self.walk(v, steps, Src::Data, false, vars)
            }
            Base::Ident(_) => UNKNOWN,
        }
    }

    fn walk(
        &self,
        mut cur: Val<'a>,
        steps: &'a [Step],
        src: Src,
        in_limits: bool,
        vars: &mut Vec<Val<'a>>,
    ) -> Val<'a> {
        let mut i = 0;
        while i < steps.len() {
            match &steps[i] {
                Step::Field(name) => {
                    let is_len = &**name == "length";
                    cur = match cur {
                        Val::Obj(o) => match lookup(o, &steps[i..], in_limits) {
                            Some((v, n)) => {
                                cur = from_json(v, src);
                                i += n;
                                continue;
                            }
                            None => return Val::Missing(src),
                        },
                        Val::Arr(a) if is_len => Val::Num(a.len() as f64),
                        Val::List(l) if is_len => Val::Num(l.len() as f64),
                        Val::Str(s) if is_len => Val::Num(s.chars().count() as f64),
                        Val::Missing(s) => return Val::Missing(s),
                        Val::Err(e) => return Val::Err(e),
                        _ => return Val::Missing(src),
                    };
                }
                Step::Index(ix) => {
                    let key = self.eval(ix, vars);
                    cur = index(cur, &key, src);
                    if matches!(cur, Val::Missing(_) | Val::Err(_)) {
                        return cur;
                    }
                }
            }
            i += 1;
        }
        cur
    }

    fn call(&self, f: Func, args: &'a [Expr], vars: &mut Vec<Val<'a>>) -> Val<'a> {
        let mut arg = |i: usize| args.get(i).map_or(UNKNOWN, |a| self.eval(a, vars));
        let num = |v: Val<'a>, op: fn(f64) -> f64| match v {
            Val::Num(n) => Val::Num(op(n)),
            Val::Missing(_) => UNKNOWN,
            Val::Err(e) => Val::Err(e),
            _ => Val::Err("a number was expected"),
        };
        match f {
            Func::Now => Val::Num(self.now),
            Func::ToTimestamp => match arg(0) {
                // Numbers are Unix seconds; beyond year 5138 they are milliseconds.
                Val::Num(n) if n.abs() > 1e11 => Val::Num(n / 1000.0),
                Val::Num(n) => Val::Num(n),
                Val::Str(s) => parse_timestamp(&s).map_or(Val::Err("not a date-time"), Val::Num),
                Val::Missing(_) => UNKNOWN,
                Val::Err(e) => Val::Err(e),
                _ => Val::Err("not a date-time"),
            },
            Func::RequiredAssurance => match arg(0) {
                Val::Num(amount) => Val::Str(Cow::Borrowed(self.pack.assurance.required(amount))),
                Val::Missing(_) => UNKNOWN,
                Val::Err(e) => Val::Err(e),
                _ => Val::Err("the amount must be a number"),
            },
            Func::Ceil => num(arg(0), f64::ceil),
            Func::Floor => num(arg(0), f64::floor),
            Func::Round => num(arg(0), f64::round),
            Func::Abs => num(arg(0), f64::abs),
            Func::Min | Func::Max => {
                let first = arg(0);
                let items: Vec<Val<'a>> = match (&first, args.len()) {
                    (Val::Arr(a), 1) => a.iter().map(|v| from_json(v, Src::Data)).collect(),
                    (Val::List(l), 1) => l.clone(),
                    _ => std::iter::once(first).chain((1..args.len()).map(&mut arg)).collect(),
                };
                let mut best: Option<f64> = None;
                for v in items {
                    match v {
                        Val::Num(n) => {
                            let better = best.is_none_or(|b| if f == Func::Min { n < b } else { n > b });
                            if better {
                                best = Some(n);
                            }
                        }
                        Val::Missing(_) => return UNKNOWN,
                        Val::Err(e) => return Val::Err(e),
                        _ => return Val::Err("min/max need numbers"),
                    }
                }
                best.map_or(UNKNOWN, Val::Num)
            }
            Func::Len => match arg(0) {
                Val::Arr(a) => Val::Num(a.len() as f64),
                Val::List(l) => Val::Num(l.len() as f64),
                Val::Obj(o) => Val::Num(o.len() as f64),
                Val::Str(s) => Val::Num(s.chars().count() as f64),
                Val::Missing(_) => UNKNOWN,
                Val::Err(e) => Val::Err(e),
                _ => Val::Err("len needs a list, an object or a string"),
            },
            Func::Lower | Func::Upper => match arg(0) {
                Val::Str(s) if f == Func::Lower => Val::Str(Cow::Owned(s.to_lowercase())),
                Val::Str(s) => Val::Str(Cow::Owned(s.to_uppercase())),
                Val::Missing(_) => UNKNOWN,
                Val::Err(e) => Val::Err(e),
                _ => Val::Err("a string was expected"),
            },
            Func::Any | Func::All => {
                let coll = arg(0);
                let q = if f == Func::Any { Quant::Any } else { Quant::All };
                let slot = vars.len();
                self.quantify(q, &coll, |_, vars| vars.last().map_or(Tri::Unknown, truth), slot, vars)
            }
        }
    }

    fn method(&self, recv: &'a Expr, m: Method, args: &'a [Expr], vars: &mut Vec<Val<'a>>) -> Val<'a> {
        let r = self.eval(recv, vars);
        match r {
            Val::Missing(_) => return UNKNOWN,
            Val::Err(e) => return Val::Err(e),
            _ => {}
        }
        match m {
            Method::Some | Method::Every => {
                let Some(Expr::Lambda(binder, body)) = args.first() else {
                    return Val::Err("`some`/`every` take a lambda");
                };
                let q = if m == Method::Some { Quant::Any } else { Quant::All };
                match r {
                    Val::Arr(_) | Val::List(_) => {
                        self.quantify(q, &r, |cx, vars| truth(&cx.eval(body, vars)), binder.slot, vars)
                    }
                    _ => Val::Err("`some`/`every` need a list"),
                }
            }
            Method::Includes => {
                let needle = args.first().map_or(UNKNOWN, |a| self.eval(a, vars));
                match r {
                    Val::Arr(_) | Val::List(_) | Val::Obj(_) | Val::Str(_) => contains(&r, &needle),
                    _ => Val::Err("`includes` needs a list, an object or a string"),
                }
            }
            Method::StartsWith | Method::EndsWith => {
                let arg = args.first().map_or(UNKNOWN, |a| self.eval(a, vars));
                match (&r, &arg) {
                    (_, Val::Missing(_)) => UNKNOWN,
                    (_, Val::Err(e)) => Val::Err(e),
                    (Val::Str(s), Val::Str(p)) if m == Method::StartsWith => {
                        Val::Bool(s.starts_with(p.as_ref()))
                    }
                    (Val::Str(s), Val::Str(p)) => Val::Bool(s.ends_with(p.as_ref())),
                    _ => Val::Err("startsWith/endsWith need strings"),
                }
            }
            Method::Replace => {
                let from = args.first().map_or(UNKNOWN, |a| self.eval(a, vars));
                let to = args.get(1).map_or(UNKNOWN, |a| self.eval(a, vars));
                match (&r, &from, &to) {
                    (_, Val::Missing(_), _) | (_, _, Val::Missing(_)) => UNKNOWN,
                    (Val::Str(s), Val::Str(f), Val::Str(t)) => {
                        Val::Str(Cow::Owned(s.replacen(f.as_ref(), t, 1)))
                    }
                    _ => Val::Err("replace needs strings"),
                }
            }
            Method::Split => {
                let sep = args.first().map_or(UNKNOWN, |a| self.eval(a, vars));
                match (&r, &sep) {
                    (_, Val::Missing(_)) => UNKNOWN,
                    (Val::Str(s), Val::Str(p)) if p.is_empty() => {
                        Val::List(s.chars().map(|c| Val::Str(Cow::Owned(c.to_string()))).collect())
                    }
                    (Val::Str(s), Val::Str(p)) => Val::List(
                        s.split(p.as_ref()).map(|part| Val::Str(Cow::Owned(part.to_owned()))).collect(),
                    ),
                    _ => Val::Err("split needs strings"),
                }
            }
            Method::Lower | Method::Upper | Method::Trim => match r {
                Val::Str(s) => Val::Str(Cow::Owned(match m {
                    Method::Lower => s.to_lowercase(),
                    Method::Upper => s.to_uppercase(),
                    _ => s.trim().to_owned(),
                })),
                _ => Val::Err("a string was expected"),
            },
        }
    }
}

/// Renders a value for a message.
pub(super) fn show(v: &Val<'_>) -> String {
    match v {
        Val::Missing(_) => "(absent)".into(),
        Val::Err(e) => format!("(error: {e})"),
        Val::Bool(b) => b.to_string(),
        Val::Num(n) => {
            let mut s = String::new();
            write_num(&mut s, *n);
            s
        }
        Val::Str(s) => s.to_string(),
        Val::Arr(a) => Value::Array(a.to_vec()).to_string(),
        Val::Obj(o) => Value::Object((*o).clone()).to_string(),
        Val::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", ")),
    }
}
