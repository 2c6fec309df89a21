//! How deeply a command nests, counted before it is parsed.

/// An upper bound of how deeply `code` nests, in one pass: every `(`,
/// `{`, `[`, backtick and compound-command keyword opens a level, `)`,
/// `}`, `]` and closing keywords close one; quotes are ignored, so text
/// in quotes can only raise the count.
pub fn nesting(code: &str) -> usize {
    let bytes = code.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'{' | b'[' | b'`' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'a'..=b'z' => {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_lowercase() {
                    i += 1;
                }
                let boundary =
                    |at: Option<&u8>| at.is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
                if boundary(start.checked_sub(1).and_then(|s| bytes.get(s))) && boundary(bytes.get(i)) {
                    match &code[start..i] {
                        "if" | "while" | "until" | "for" | "case" | "select" | "function" => {
                            depth += 1;
                            deepest = deepest.max(depth);
                        }
                        "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}
