//! A word after quote removal: quotes, escapes and `$'...'` decoded,
//! expansions marked, and the substitutions in it added as commands.

use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::{Dynamic, Script, Unreadable, Via, Word};

impl Script {
    /// A word after quote removal; substitutions in it are added as
    /// commands held by `at`.
    pub fn word(&mut self, raw: &str, at: usize) -> Result<Word, Unreadable> {
        // Most words hold nothing the shell changes.
        if !raw.bytes().any(|b| matches!(b, b'$' | b'`' | b'\\' | b'\'' | b'"' | b'~')) {
            return Ok(Word::Lit(raw.to_owned()));
        }
        let pieces = brush_parser::word::parse(raw, &Default::default())
            .map_err(|e| Unreadable::Syntax(e.to_string()))?;
        let mut text = String::new();
        let mut dynamic = Dynamic::default();
        let known = self.pieces(raw, &pieces, at, false, &mut text, &mut dynamic)?;
        Ok(if known { Word::Lit(text) } else { finish(text, dynamic) })
    }

    /// Appends the pieces' literal text to `text`; returns whether the
    /// whole is known.
    pub(super) fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        at: usize,
        quoted: bool,
        text: &mut String,
        dynamic: &mut Dynamic,
    ) -> Result<bool, Unreadable> {
        let mut known = true;
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(t) | WordPiece::SingleQuotedText(t) => text.push_str(t),
                WordPiece::AnsiCQuotedText(t) => match ansi_c(t) {
                    Some(decoded) => text.push_str(&decoded),
                    None => {
                        known = false;
                        expansion(text, dynamic);
                    }
                },
                WordPiece::EscapeSequence(e) => {
                    let escaped = e.strip_prefix('\\').unwrap_or(e);
                    // In double quotes a backslash stays unless it escapes
                    // `$`, a backtick, `"`, `\` or a newline.
                    if quoted && !escaped.starts_with(['$', '`', '"', '\\', '\n']) {
                        text.push('\\');
                    }
                    if escaped != "\n" {
                        text.push_str(escaped);
                    }
                }
                WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    known &= self.pieces(raw, inner, at, true, text, dynamic)?;
                }
                WordPiece::TildeExpansion(tilde) => {
                    text.push('~');
                    if let brush_parser::word::TildeExpr::UserHome(user) = tilde {
                        text.push_str(user);
                    } else if !matches!(tilde, brush_parser::word::TildeExpr::Home) {
                        // `~+`, `~-`, `~N`: a directory of the shell's.
                        known = false;
                        expansion(text, dynamic);
                    }
                }
                WordPiece::ParameterExpansion(expr) => {
                    use brush_parser::word::{Parameter, ParameterExpr};
                    // `$HOME` is the home directory, as `~` is.
                    if let ParameterExpr::Parameter { parameter: Parameter::Named(name), indirect: false } =
                        expr
                    {
                        if name == "HOME" {
                            text.push('~');
                            continue;
                        }
                    }
                    known = false;
                    expansion(text, dynamic);
                    // Defaults, alternatives, patterns and subscripts are
                    // words too: substitutions in them run.
                    let source = raw.get(piece.start_index..piece.end_index).unwrap_or_default();
                    if let Some(inner) = source.strip_prefix("${").and_then(|s| s.strip_suffix('}')) {
                        if inner.contains(['$', '`']) {
                            let mut scratch = String::new();
                            let mut ignored = Dynamic::default();
                            let inner_pieces = brush_parser::word::parse(inner, &Default::default())
                                .map_err(|e| Unreadable::Syntax(e.to_string()))?;
                            self.pieces(inner, &inner_pieces, at, true, &mut scratch, &mut ignored)?;
                            dynamic.substitutes |= ignored.substitutes;
                        }
                    }
                }
                WordPiece::CommandSubstitution(code) => {
                    known = false;
                    expansion(text, dynamic);
                    dynamic.substitutes = true;
                    self.add(code, Some(at), Via::CommandSubstitution)?;
                }
                WordPiece::BackquotedCommandSubstitution(code) => {
                    known = false;
                    expansion(text, dynamic);
                    dynamic.substitutes = true;
                    self.add(&unescape_backquoted(code), Some(at), Via::CommandSubstitution)?;
                }
                WordPiece::ArithmeticExpression(expr) => {
                    known = false;
                    expansion(text, dynamic);
                    if expr.value.contains(['$', '`']) {
                        let mut scratch = String::new();
                        let mut ignored = Dynamic::default();
                        let inner = brush_parser::word::parse(&expr.value, &Default::default())
                            .map_err(|e| Unreadable::Syntax(e.to_string()))?;
                        self.pieces(&expr.value, &inner, at, true, &mut scratch, &mut ignored)?;
                        dynamic.substitutes |= ignored.substitutes;
                    }
                }
            }
        }
        Ok(known)
    }
}

/// Where an expansion stands in a word: a split point.
fn expansion(text: &str, dynamic: &mut Dynamic) {
    let start: usize = dynamic.split.iter().map(String::len).sum();
    let piece = text.get(start..).unwrap_or_default();
    dynamic.split.push(piece.to_owned());
}

/// The dynamic word for `text` (its literal parts) and its split points.
pub(super) fn finish(text: String, mut dynamic: Dynamic) -> Word {
    let start: usize = dynamic.split.iter().map(String::len).sum();
    dynamic.split.push(text.get(start..).unwrap_or_default().to_owned());
    dynamic.split.retain(|s| !s.is_empty());
    dynamic.without = text;
    Word::Dyn(dynamic)
}

/// The code of a backquoted substitution: `\$`, `` \` `` and `\\` lose
/// their backslash.
fn unescape_backquoted(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next) = chars.peek() {
                if matches!(next, '$' | '`' | '\\') {
                    out.push(next);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// The text of `$'...'` (without its quotes), or `None` for an escape it
/// does not decode (`\c`, `\u` beyond Unicode).
fn ansi_c(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, radix: u32, max: usize| {
        let mut value = 0u32;
        let mut count = 0;
        while count < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value * radix + d;
                    chars.next();
                    count += 1;
                }
                None => break,
            }
        }
        (count > 0).then_some(value)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next()?;
        let decoded = match escaped {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'e' | 'E' => '\u{1b}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\\' | '\'' | '"' | '?' => escaped,
            'x' => char::from_u32(digits(&mut chars, 16, 2)?)?,
            'u' => char::from_u32(digits(&mut chars, 16, 4)?)?,
            'U' => char::from_u32(digits(&mut chars, 16, 8)?)?,
            '0'..='7' => {
                let mut value = escaped.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                char::from_u32(value)?
            }
            _ => return None,
        };
        out.push(decoded);
    }
    Some(out)
}
