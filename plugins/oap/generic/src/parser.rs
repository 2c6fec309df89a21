//! Recursive-descent parser from tokens to [`Expr`].
//!
//! Precedence, loosest first: `or`/`||`; `and`/`&&`; `not` (Python's
//! keyword, looser than comparisons); comparisons (`== != < <= > >=`, `in`,
//! `not in`, `is [not] empty`, not chainable); `+ -`; `* / %`; unary `-` and
//! `!` (JavaScript's operator, tighter than comparisons); postfix `.field`,
//! `[index]`, calls.

use crate::lexer::{tokenize, Tok};

/// Deepest expression nesting accepted.
pub(super) const MAX_DEPTH: usize = 48;

/// A literal.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lit {
    Null,
    Bool(bool),
    Num(f64),
    Str(Box<str>),
}

/// Where a path starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Base {
    /// A bare name, before binding.
    Ident(Box<str>),
    /// The whole passport document.
    Passport,
    /// The tool call's arguments.
    Context,
    /// The pack's capability limits (see the module docs).
    Limits,
    /// The pack document itself.
    Policy,
    /// A lambda or comprehension variable (index into the variable stack).
    Var(usize),
    /// Any other expression, e.g. `(a).b` or `x.split('-')[0]`.
    Expr(Box<Expr>),
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    Field(Box<str>),
    Index(Expr),
}

/// Ordering and equality operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// Built-in functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Now,
    ToTimestamp,
    RequiredAssurance,
    Ceil,
    Floor,
    Round,
    Abs,
    Min,
    Max,
    Len,
    Lower,
    Upper,
    Any,
    All,
}

impl Func {
    fn from_name(name: &str) -> Option<(Func, usize, usize)> {
        // (function, min args, max args)
        Some(match name {
            "now" => (Func::Now, 0, 0),
            "to_timestamp" | "toTimestamp" => (Func::ToTimestamp, 1, 1),
            "getRequiredAssuranceLevel" | "get_required_assurance_level" => (Func::RequiredAssurance, 1, 2),
            "ceil" => (Func::Ceil, 1, 1),
            "floor" => (Func::Floor, 1, 1),
            "round" => (Func::Round, 1, 1),
            "abs" => (Func::Abs, 1, 1),
            "min" => (Func::Min, 1, 16),
            "max" => (Func::Max, 1, 16),
            "len" => (Func::Len, 1, 1),
            "lower" => (Func::Lower, 1, 1),
            "upper" => (Func::Upper, 1, 1),
            "any" => (Func::Any, 1, 1),
            "all" => (Func::All, 1, 1),
            _ => return None,
        })
    }
}

/// Methods callable on a value (`x.includes(y)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Includes,
    Some,
    Every,
    StartsWith,
    EndsWith,
    Replace,
    Split,
    Lower,
    Upper,
    Trim,
}

impl Method {
    fn from_name(name: &str) -> Option<(Method, usize, usize)> {
        Some(match name {
            "includes" | "contains" => (Method::Includes, 1, 1),
            "some" => (Method::Some, 1, 1),
            "every" => (Method::Every, 1, 1),
            "startsWith" | "startswith" => (Method::StartsWith, 1, 1),
            "endsWith" | "endswith" => (Method::EndsWith, 1, 1),
            "replace" => (Method::Replace, 2, 2),
            "split" => (Method::Split, 1, 1),
            "toLowerCase" | "lower" => (Method::Lower, 0, 0),
            "toUpperCase" | "upper" => (Method::Upper, 0, 0),
            "trim" | "strip" => (Method::Trim, 0, 0),
            _ => return None,
        })
    }

    /// Whether the method's argument is a lambda (`x => ...`).
    fn takes_lambda(self) -> bool {
        matches!(self, Method::Some | Method::Every)
    }
}

/// A variable introduced by a lambda or a comprehension.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Binder {
    pub name: Box<str>,
    /// Its index in the variable stack, set by binding.
    pub slot: usize,
}

/// `any`/`all` over a comprehension, `some`/`every` over a lambda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quant {
    Any,
    All,
}

/// A reference to a stateful name (see the module docs), made by binding.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StateRef {
    /// Index into the pack's state variables.
    pub var: usize,
    /// `name[key]`.
    pub key: Option<Box<Expr>>,
    /// Index expressions of the limit the variable is compared with; their
    /// values scope the counter (e.g. per currency).
    pub scope: Vec<Expr>,
}

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Lit(Lit),
    List(Vec<Expr>),
    Path(Base, Vec<Step>),
    State(StateRef),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// `needle in hay` (`negated`: `not in`).
    In(Box<Expr>, Box<Expr>, bool),
    /// `x is empty` (`negated`: `is not empty`).
    IsEmpty(Box<Expr>, bool),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Call(Func, Vec<Expr>),
    Method(Box<Expr>, Method, Vec<Expr>),
    /// `x => body`, only as the argument of `some`/`every`.
    Lambda(Binder, Box<Expr>),
    /// `any(elem for var in iter)` / `all(...)`.
    Comp(Quant, Box<Expr>, Binder, Box<Expr>),
}

impl Expr {
    /// Nesting depth of the tree.
    pub(super) fn depth(&self) -> usize {
        let kids: usize = match self {
            Expr::Lit(_) => 0,
            Expr::List(items) | Expr::Call(_, items) => items.iter().map(Expr::depth).max().unwrap_or(0),
            Expr::Path(base, steps) => {
                let b = match base {
                    Base::Expr(e) => e.depth(),
                    _ => 0,
                };
                steps
                    .iter()
                    .map(|s| match s {
                        Step::Index(e) => e.depth(),
                        Step::Field(_) => 0,
                    })
                    .max()
                    .unwrap_or(0)
                    .max(b)
            }
            Expr::State(s) => {
                let k = s.key.as_ref().map_or(0, |k| k.depth());
                s.scope.iter().map(Expr::depth).max().unwrap_or(0).max(k)
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::IsEmpty(e, _) | Expr::Lambda(_, e) => e.depth(),
            Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Cmp(_, a, b)
            | Expr::In(a, b, _)
            | Expr::Arith(_, a, b) => a.depth().max(b.depth()),
            Expr::Method(r, _, args) => args.iter().map(Expr::depth).max().unwrap_or(0).max(r.depth()),
            Expr::Comp(_, e, _, it) => e.depth().max(it.depth()),
        };
        kids + 1
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
}

type PResult<T> = Result<T, String>;

/// Parses one condition.
pub(super) fn parse(src: &str) -> PResult<Expr> {
    let toks = tokenize(src)?;
    if toks.is_empty() {
        return Err("empty condition".into());
    }
    let mut p = Parser { toks, pos: 0, depth: 0 };
    let expr = p.expr()?;
    if let Some(tok) = p.peek() {
        return Err(format!("unexpected {} after a complete expression", tok.describe()));
    }
    if expr.depth() > MAX_DEPTH {
        return Err(format!("condition nested deeper than {MAX_DEPTH} levels"));
    }
    Ok(expr)
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, offset: usize) -> Option<&Tok> {
        self.toks.get(self.pos + offset)
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &Tok, what: &str) -> PResult<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(match self.peek() {
                Some(t) => format!("expected {} {what}, found {}", tok.describe(), t.describe()),
                None => format!("expected {} {what}, found the end", tok.describe()),
            })
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(format!("condition nested deeper than {MAX_DEPTH} levels"))
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.or();
        self.leave();
        r
    }

    fn or(&mut self) -> PResult<Expr> {
        let mut left = self.and()?;
        while self.eat(&Tok::Or) {
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut left = self.not()?;
        while self.eat(&Tok::And) {
            let right = self.not()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn not(&mut self) -> PResult<Expr> {
        if self.eat(&Tok::Not) {
            self.enter()?;
            let inner = self.not();
            self.leave();
            return Ok(Expr::Not(Box::new(inner?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> PResult<Expr> {
        let left = self.additive()?;
        let expr = match self.peek() {
            Some(Tok::Eq) | Some(Tok::Ne) | Some(Tok::Lt) | Some(Tok::Le) | Some(Tok::Gt) | Some(Tok::Ge) => {
                let op = match self.toks[self.pos] {
                    Tok::Eq => CmpOp::Eq,
                    Tok::Ne => CmpOp::Ne,
                    Tok::Lt => CmpOp::Lt,
                    Tok::Le => CmpOp::Le,
                    Tok::Gt => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                self.pos += 1;
                let right = self.additive()?;
                Expr::Cmp(op, Box::new(left), Box::new(right))
            }
            Some(Tok::In) => {
                self.pos += 1;
                let right = self.additive()?;
                Expr::In(Box::new(left), Box::new(right), false)
            }
            Some(Tok::Not) if self.peek_at(1) == Some(&Tok::In) => {
                self.pos += 2;
                let right = self.additive()?;
                Expr::In(Box::new(left), Box::new(right), true)
            }
            Some(Tok::Is) => {
                self.pos += 1;
                let negated = self.eat(&Tok::Not);
                match self.peek() {
                    Some(Tok::Ident(w)) if w.eq_ignore_ascii_case("empty") => self.pos += 1,
                    Some(t) => return Err(format!("expected `empty` after `is`, found {}", t.describe())),
                    None => return Err("expected `empty` after `is`, found the end".into()),
                }
                Expr::IsEmpty(Box::new(left), negated)
            }
            _ => return Ok(left),
        };
        match self.peek() {
            Some(Tok::Eq | Tok::Ne | Tok::Lt | Tok::Le | Tok::Gt | Tok::Ge | Tok::In | Tok::Is) => {
                Err("chained comparisons are not supported; use `and`".into())
            }
            _ => Ok(expr),
        }
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut left = self.multiplicative()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Plus) => ArithOp::Add,
                Some(Tok::Minus) => ArithOp::Sub,
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.multiplicative()?;
            left = Expr::Arith(op, Box::new(left), Box::new(right));
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Star) => ArithOp::Mul,
                Some(Tok::Slash) => ArithOp::Div,
                Some(Tok::Percent) => ArithOp::Rem,
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.unary()?;
            left = Expr::Arith(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let wrap: fn(Box<Expr>) -> Expr = match self.peek() {
            Some(Tok::Minus) => Expr::Neg,
            Some(Tok::Bang) => Expr::Not,
            _ => return self.postfix(),
        };
        self.pos += 1;
        self.enter()?;
        let inner = self.unary();
        self.leave();
        Ok(wrap(Box::new(inner?)))
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let (mut base, mut steps) = match self.primary()? {
            Expr::Path(base, steps) => (base, steps),
            other => (Base::Expr(Box::new(other)), Vec::new()),
        };
        loop {
            match self.peek() {
                Some(Tok::Dot) => {
                    self.pos += 1;
                    match self.toks.get(self.pos) {
                        Some(Tok::Ident(name)) => {
                            steps.push(Step::Field(name.clone()));
                            self.pos += 1;
                        }
                        Some(t) => {
                            return Err(format!("expected a field name after `.`, found {}", t.describe()))
                        }
                        None => return Err("expected a field name after `.`, found the end".into()),
                    }
                }
                Some(Tok::LBracket) => {
                    self.pos += 1;
                    let index = self.expr()?;
                    self.expect(&Tok::RBracket, "to close the index")?;
                    steps.push(Step::Index(index));
                }
                Some(Tok::LParen) => {
                    let Some(Step::Field(name)) = steps.pop() else {
                        return Err("only named functions and methods can be called".into());
                    };
                    let Some((method, min, max)) = Method::from_name(&name) else {
                        return Err(format!("unknown method `{name}`"));
                    };
                    self.pos += 1;
                    let args = self.args(method.takes_lambda())?;
                    if args.len() < min || args.len() > max {
                        return Err(format!(
                            "method `{name}` takes {min} to {max} arguments, got {}",
                            args.len()
                        ));
                    }
                    let receiver = path_or_expr(base, steps);
                    base = Base::Expr(Box::new(Expr::Method(Box::new(receiver), method, args)));
                    steps = Vec::new();
                }
                _ => return Ok(path_or_expr(base, steps)),
            }
        }
    }

    /// Arguments after `(`, through `)`.
    fn args(&mut self, lambda: bool) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        if self.eat(&Tok::RParen) {
            return Ok(args);
        }
        loop {
            if lambda {
                args.push(self.lambda()?);
            } else {
                args.push(self.expr()?);
            }
            if self.eat(&Tok::RParen) {
                return Ok(args);
            }
            self.expect(&Tok::Comma, "between arguments")?;
        }
    }

    fn lambda(&mut self) -> PResult<Expr> {
        let name = match (self.peek(), self.peek_at(1)) {
            (Some(Tok::Ident(name)), Some(Tok::Arrow)) => name.clone(),
            _ => return Err("`some`/`every` take a lambda `x => ...`".into()),
        };
        self.pos += 2;
        let body = self.expr()?;
        Ok(Expr::Lambda(Binder { name, slot: 0 }, Box::new(body)))
    }

    fn primary(&mut self) -> PResult<Expr> {
        let Some(tok) = self.toks.get(self.pos).cloned() else {
            return Err("unexpected end of condition".into());
        };
        self.pos += 1;
        Ok(match tok {
            Tok::Num(n) => Expr::Lit(Lit::Num(n)),
            Tok::Str(s) => Expr::Lit(Lit::Str(s)),
            Tok::True => Expr::Lit(Lit::Bool(true)),
            Tok::False => Expr::Lit(Lit::Bool(false)),
            Tok::Null => Expr::Lit(Lit::Null),
            Tok::LParen => {
                let inner = self.expr()?;
                self.expect(&Tok::RParen, "to close `(`")?;
                inner
            }
            Tok::LBracket => {
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.expr()?);
                        if self.eat(&Tok::RBracket) {
                            break;
                        }
                        self.expect(&Tok::Comma, "between list items")?;
                    }
                }
                Expr::List(items)
            }
            Tok::Ident(name) => {
                if self.peek() == Some(&Tok::Arrow) {
                    return Err(
                        "a lambda `x => ...` is only allowed as the argument of `some`/`every`".into()
                    );
                }
                if self.eat(&Tok::LParen) {
                    self.call(&name)?
                } else {
                    Expr::Path(Base::Ident(name), Vec::new())
                }
            }
            other => return Err(format!("unexpected {}", other.describe())),
        })
    }

    /// A function call after `name(`.
    fn call(&mut self, name: &str) -> PResult<Expr> {
        let Some((func, min, max)) = Func::from_name(name) else {
            return Err(format!("unknown function `{name}`"));
        };
        if matches!(func, Func::Any | Func::All) && self.peek() != Some(&Tok::RParen) {
            // any(elem for var in iter) or any(list)
            let elem = self.expr()?;
            let quant = if func == Func::Any { Quant::Any } else { Quant::All };
            if self.eat(&Tok::For) {
                let var = match self.toks.get(self.pos) {
                    Some(Tok::Ident(v)) => v.clone(),
                    _ => return Err("expected a variable name after `for`".into()),
                };
                self.pos += 1;
                self.expect(&Tok::In, "after the comprehension variable")?;
                let iter = self.expr()?;
                self.expect(&Tok::RParen, "to close the comprehension")?;
                return Ok(Expr::Comp(quant, Box::new(elem), Binder { name: var, slot: 0 }, Box::new(iter)));
            }
            self.expect(&Tok::RParen, &format!("to close `{name}(`"))?;
            return Ok(Expr::Call(func, vec![elem]));
        }
        let args = self.args(false)?;
        if args.len() < min || args.len() > max {
            return Err(format!("function `{name}` takes {min} to {max} arguments, got {}", args.len()));
        }
        Ok(Expr::Call(func, args))
    }
}

fn path_or_expr(base: Base, steps: Vec<Step>) -> Expr {
    match base {
        Base::Expr(e) if steps.is_empty() => *e,
        base => Expr::Path(base, steps),
    }
}
