//! Tool-name patterns, as guardhost reads them in a chain entry's `tools:`
//! and `except_tools:`, for providers that take patterns in their config.

/// Whether `text` matches the glob `pattern` as a whole: `*` matches any
/// run of characters (none included), `?` any one character. Linear in
/// practice: one backtrack point, the last `*`. Allocates nothing: ASCII
/// names are compared byte by byte, others character by character.
pub fn glob(pattern: &str, text: &str) -> bool {
    if pattern.is_ascii() && text.is_ascii() {
        matches(pattern.as_bytes(), text.as_bytes(), b'*', b'?')
    } else {
        let (pattern, text): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
        matches(&pattern, &text, '*', '?')
    }
}

fn matches<T: PartialEq + Copy>(pattern: &[T], text: &[T], star: T, one: T) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(&c) if c == star => {
                backtrack = Some((p, t));
                p += 1;
            }
            Some(&c) if c == one || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match backtrack {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    backtrack = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == star)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        let cases = [
            ("bash", "bash", true),
            ("bash", "bash2", false),
            ("write_*", "write_file", true),
            ("write_*", "write_", true),
            ("write_*", "rewrite_file", false),
            ("*_file", "read_file", true),
            ("*", "", true),
            ("?ash", "bash", true),
            ("?ash", "ash", false),
            ("mcp__*__delete*", "mcp__github__delete_repo", true),
            ("mcp__*__delete*", "mcp__github__create_repo", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYcZ", false),
            ("Bash", "bash", false),
            ("ünï*", "ünïcode", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob(pattern, text), expected, "{pattern} ~ {text}");
        }
    }
}
