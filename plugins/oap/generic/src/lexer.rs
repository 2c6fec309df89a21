//! Tokenizer for rule conditions.

/// Longest condition accepted, in bytes.
pub(super) const MAX_CONDITION_LEN: usize = 4096;
/// Most tokens accepted in one condition.
pub(super) const MAX_TOKENS: usize = 1000;

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(Box<str>),
    Num(f64),
    Str(Box<str>),
    // Keywords (case-insensitive).
    And,
    Or,
    Not,
    In,
    Is,
    For,
    True,
    False,
    Null,
    // Punctuation.
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Arrow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("identifier `{name}`"),
            Tok::Num(n) => format!("number {n}"),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::And => "`and`".into(),
            Tok::Or => "`or`".into(),
            Tok::Not => "`not`".into(),
            Tok::In => "`in`".into(),
            Tok::Is => "`is`".into(),
            Tok::For => "`for`".into(),
            Tok::True => "`true`".into(),
            Tok::False => "`false`".into(),
            Tok::Null => "`null`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Dot => "`.`".into(),
            Tok::Arrow => "`=>`".into(),
            Tok::Eq => "`==`".into(),
            Tok::Ne => "`!=`".into(),
            Tok::Lt => "`<`".into(),
            Tok::Le => "`<=`".into(),
            Tok::Gt => "`>`".into(),
            Tok::Ge => "`>=`".into(),
            Tok::Plus => "`+`".into(),
            Tok::Minus => "`-`".into(),
            Tok::Star => "`*`".into(),
            Tok::Slash => "`/`".into(),
            Tok::Percent => "`%`".into(),
            Tok::Bang => "`!`".into(),
        }
    }
}

fn keyword(word: &str) -> Option<Tok> {
    const WORDS: [(&str, Tok); 10] = [
        ("and", Tok::And),
        ("or", Tok::Or),
        ("not", Tok::Not),
        ("in", Tok::In),
        ("is", Tok::Is),
        ("for", Tok::For),
        ("true", Tok::True),
        ("false", Tok::False),
        ("null", Tok::Null),
        ("none", Tok::Null),
    ];
    WORDS.iter().find(|(w, _)| w.eq_ignore_ascii_case(word)).map(|(_, t)| t.clone())
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Splits `src` into tokens; an error names the offending byte offset.
pub(super) fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    if src.len() > MAX_CONDITION_LEN {
        return Err(format!("condition longer than {MAX_CONDITION_LEN} bytes"));
    }
    let mut toks = Vec::new();
    let mut chars = src.char_indices().peekable();
    while let Some((pos, c)) = chars.next() {
        if toks.len() >= MAX_TOKENS {
            return Err(format!("condition has more than {MAX_TOKENS} tokens"));
        }
        let next = chars.peek().map(|&(_, n)| n);
        let tok = match c {
            c if c.is_whitespace() => continue,
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBracket,
            ']' => Tok::RBracket,
            ',' => Tok::Comma,
            '.' => Tok::Dot,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '%' => Tok::Percent,
            '=' => match next {
                Some('>') => {
                    chars.next();
                    Tok::Arrow
                }
                Some('=') => {
                    chars.next();
                    if chars.peek().map(|&(_, n)| n) == Some('=') {
                        chars.next();
                    }
                    Tok::Eq
                }
                _ => return Err(format!("lone `=` at offset {pos} (comparison is `==`)")),
            },
            '!' => {
                if next == Some('=') {
                    chars.next();
                    if chars.peek().map(|&(_, n)| n) == Some('=') {
                        chars.next();
                    }
                    Tok::Ne
                } else {
                    Tok::Bang
                }
            }
            '<' | '>' => {
                let or_equal = next == Some('=');
                if or_equal {
                    chars.next();
                }
                match (c, or_equal) {
                    ('<', false) => Tok::Lt,
                    ('<', true) => Tok::Le,
                    (_, false) => Tok::Gt,
                    (_, true) => Tok::Ge,
                }
            }
            '&' | '|' => {
                if next != Some(c) {
                    return Err(format!("lone `{c}` at offset {pos} (use `{c}{c}`)"));
                }
                chars.next();
                if c == '&' {
                    Tok::And
                } else {
                    Tok::Or
                }
            }
            '\'' | '"' => {
                let mut text = String::new();
                let mut closed = false;
                while let Some((_, ch)) = chars.next() {
                    match ch {
                        ch if ch == c => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, 'n')) => text.push('\n'),
                            Some((_, 't')) => text.push('\t'),
                            Some((_, 'r')) => text.push('\r'),
                            Some((_, other)) => text.push(other),
                            None => break,
                        },
                        ch => text.push(ch),
                    }
                }
                if !closed {
                    return Err(format!("unterminated string starting at offset {pos}"));
                }
                Tok::Str(text.into())
            }
            c if c.is_ascii_digit() => {
                let mut end = pos + c.len_utf8();
                let mut seen_dot = false;
                let mut seen_exp = false;
                while let Some(&(i, ch)) = chars.peek() {
                    let take = if ch.is_ascii_digit() {
                        true
                    } else if ch == '.' && !seen_dot && !seen_exp {
                        // `1.5` is a number, `items.length` never starts with a digit.
                        let after = src[i + 1..].chars().next();
                        if after.is_some_and(|a| a.is_ascii_digit()) {
                            seen_dot = true;
                            true
                        } else {
                            false
                        }
                    } else if (ch == 'e' || ch == 'E') && !seen_exp {
                        let rest = &src[i + 1..];
                        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
                        if rest.starts_with(|d: char| d.is_ascii_digit()) {
                            seen_exp = true;
                            if src[i + 1..].starts_with(['+', '-']) {
                                chars.next();
                            }
                            true
                        } else {
                            false
                        }
                    } else {
                        false
                    };
                    if !take {
                        break;
                    }
                    chars.next();
                    end = chars.peek().map_or(src.len(), |&(j, _)| j);
                }
                let text = &src[pos..end];
                match text.parse::<f64>() {
                    Ok(n) if n.is_finite() => Tok::Num(n),
                    _ => return Err(format!("number `{text}` out of range")),
                }
            }
            c if is_ident_start(c) => {
                let mut end = pos + c.len_utf8();
                while let Some(&(i, ch)) = chars.peek() {
                    if !is_ident_char(ch) {
                        break;
                    }
                    chars.next();
                    end = i + ch.len_utf8();
                }
                let word = &src[pos..end];
                keyword(word).unwrap_or_else(|| Tok::Ident(word.into()))
            }
            other => return Err(format!("unexpected character `{other}` at offset {pos}")),
        };
        toks.push(tok);
    }
    Ok(toks)
}
