//! The tool names the host accepts, checked before any guard sees a call.
//!
//! A name is refused when it is empty, starts or ends with white space
//! (Unicode `White_Space`), or holds anywhere a character that cannot be
//! seen: a control character (`Cc`), a format character (`Cf`: zero-width
//! space and joiners, bidi controls, the byte-order mark, tags ...), or one
//! of the other invisible characters in [`INVISIBLE`] (default-ignorable
//! code points that are not `Cf`, such as variation selectors and the
//! Hangul fillers, the line and paragraph separators, and U+2800 BRAILLE
//! PATTERN BLANK). Anything else is accepted: white space inside a name,
//! punctuation, letters of any script (`résumé`).
//!
//! Such a name reads as another (`bash\u{200b}` as `bash`) to a person, and
//! to a policy it does not: a rule for `bash` would not apply to it. The
//! middleware denies the call with [`INVALID_CODE`] before any guard is
//! asked, and the tool filter drops the name.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::request::GuardrailDecision;

/// The reason code of a call refused for its tool name.
pub const INVALID_CODE: &str = "guardhost.tool_name_invalid";

/// The kind of character a name may not hold anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hidden {
    /// A control character (`Cc`: U+0000–U+001F, U+007F–U+009F).
    Control,
    /// A format character (`Cf`).
    Format,
    /// Another invisible character ([`INVISIBLE`]).
    Invisible,
}

impl Hidden {
    fn describe(self) -> &'static str {
        match self {
            Hidden::Control => "a control character",
            Hidden::Format => "an invisible format character",
            Hidden::Invisible => "an invisible character",
        }
    }
}

/// What is wrong with a tool name. Positions count characters from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidToolName {
    /// The name is empty (or the call has none).
    #[error("the tool name is empty")]
    Empty,
    /// The name starts or ends with white space.
    #[error(
        "the tool name {} with white space (U+{:04X} at character {position} of {length})",
        if *.at_start { "starts" } else { "ends" },
        u32::from(*.character)
    )]
    Padded {
        /// The white space.
        character: char,
        /// Where it is.
        position: usize,
        /// The name's length in characters.
        length: usize,
        /// Whether it starts the name (else it ends it).
        at_start: bool,
    },
    /// The name holds a character that cannot be seen.
    #[error(
        "the tool name has U+{:04X} ({}) at character {position} of {length}",
        u32::from(*.character),
        .kind.describe()
    )]
    Hidden {
        /// The character.
        character: char,
        /// What kind it is.
        kind: Hidden,
        /// Where it is.
        position: usize,
        /// The name's length in characters.
        length: usize,
    },
}

/// Checks `name`; `Err` names the first offending character. An ordinary
/// name (printable ASCII, no space at either end) is accepted by one pass
/// over its bytes.
#[inline]
pub fn check(name: &str) -> Result<(), InvalidToolName> {
    let bytes = name.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err(InvalidToolName::Empty);
    };
    // Printable ASCII is 0x20 (space) to 0x7E.
    if first != b' ' && last != b' ' && bytes.iter().all(|&b| b.wrapping_sub(0x20) < 0x5F) {
        return Ok(());
    }
    check_chars(name)
}

/// Whether `name` is a tool name the host accepts.
#[inline]
pub fn is_valid(name: &str) -> bool {
    check(name).is_ok()
}

/// [`check`] beyond printable ASCII, character by character.
#[cold]
fn check_chars(name: &str) -> Result<(), InvalidToolName> {
    let length = name.chars().count();
    for (index, character) in name.chars().enumerate() {
        let position = index + 1;
        if let Some(kind) = hidden(character) {
            return Err(InvalidToolName::Hidden { character, kind, position, length });
        }
        if character.is_whitespace() && (position == 1 || position == length) {
            return Err(InvalidToolName::Padded { character, position, length, at_start: position == 1 });
        }
    }
    Ok(())
}

/// The format characters (`Cf`, Unicode 16.0), as inclusive ranges.
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// The other characters refused as invisible, as inclusive ranges: the
/// default-ignorable code points that are not `Cf` (U+034F COMBINING
/// GRAPHEME JOINER, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0,
/// U+17B4–U+17B5, the variation selectors U+180B–U+180D, U+180F,
/// U+FE00–U+FE0F and U+E0100–U+E01EF, and the reserved U+2065,
/// U+FFF0–U+FFF8 and the rest of U+E0000–U+E0FFF, whose tags are `Cf`),
/// the line and paragraph separators U+2028–U+2029, and U+2800 BRAILLE
/// PATTERN BLANK.
pub const INVISIBLE: &[(u32, u32)] = &[
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180D),
    (0x180F, 0x180F),
    (0x2028, 0x2029),
    (0x2065, 0x2065),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0000),
    (0xE0002, 0xE001F),
    (0xE0080, 0xE0FFF),
];

fn in_ranges(ranges: &[(u32, u32)], character: char) -> bool {
    let code = u32::from(character);
    ranges
        .binary_search_by(|&(low, high)| {
            if high < code {
                std::cmp::Ordering::Less
            } else if low > code {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// What kind of character `character` is, if a name may not hold it.
fn hidden(character: char) -> Option<Hidden> {
    if character.is_control() {
        Some(Hidden::Control)
    } else if character.is_ascii() {
        None
    } else if in_ranges(FORMAT, character) {
        Some(Hidden::Format)
    } else if in_ranges(INVISIBLE, character) {
        Some(Hidden::Invisible)
    } else {
        None
    }
}

/// `name` as a message can show it: each character a name may not hold,
/// and each white space but U+0020 at either end, written `<U+XXXX>`;
/// borrowed when there is none (always for a name [`check`] accepts).
pub fn escaped(name: &str) -> Cow<'_, str> {
    if is_valid(name) {
        return Cow::Borrowed(name);
    }
    let start = name.len() - name.trim_start().len();
    let end = name.trim_end().len();
    let mut out = String::with_capacity(name.len() + 8);
    for (at, c) in name.char_indices() {
        let at_an_end = at < start || at >= end;
        match hidden(c).is_some() || (at_an_end && c != ' ') {
            true => {
                let _ = write!(out, "<U+{:04X}>", u32::from(c));
            }
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The host's denial of a call of `name`, which `problem` is wrong with:
/// what is wrong, and how to call the tool instead.
pub fn refusal(name: &str, problem: &InvalidToolName) -> GuardrailDecision {
    let fix = match problem {
        InvalidToolName::Empty => "call the tool by its name".to_owned(),
        InvalidToolName::Padded { .. } => {
            format!("call the tool by its name without the white space: '{}'", escaped(name.trim()))
        }
        InvalidToolName::Hidden { character, .. } => {
            format!("call the tool by its name without U+{:04X}", u32::from(*character))
        }
    };
    let message = format!(
        "tool name '{}' is invalid: {problem}; a tool name must not be empty, start or end with white \
         space, or hold control, format or other invisible characters; {fix}",
        escaped(name)
    );
    GuardrailDecision::with_reason(false, INVALID_CODE, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_pass() {
        for name in [
            "bash",
            "mcp__github__create_issue",
            "read_file",
            "web.search",
            "write-file",
            "a",
            "x/y:z@1",
            "résumé",
            "日本語ツール",
            "read file",
            "naïve\u{00A0}tool",
            "e\u{0301}",
        ] {
            assert_eq!(check(name), Ok(()), "{name:?}");
            assert!(is_valid(name));
            assert_eq!(escaped(name), Cow::Borrowed(name));
        }
    }

    #[test]
    fn the_empty_name_is_refused() {
        assert_eq!(check(""), Err(InvalidToolName::Empty));
    }

    #[test]
    fn white_space_at_either_end_is_refused() {
        let padded = |character, position, length, at_start| {
            Err(InvalidToolName::Padded { character, position, length, at_start })
        };
        assert_eq!(check("bash "), padded(' ', 5, 5, false));
        assert_eq!(check(" bash"), padded(' ', 1, 5, true));
        assert_eq!(check(" "), padded(' ', 1, 1, true));
        assert_eq!(check("bash\u{3000}"), padded('\u{3000}', 5, 5, false));
        assert_eq!(check("\u{00A0}bash"), padded('\u{00A0}', 1, 5, true));
        assert_eq!(check("bash\u{2009}"), padded('\u{2009}', 5, 5, false));
        assert_eq!(
            check("bash ").unwrap_err().to_string(),
            "the tool name ends with white space (U+0020 at character 5 of 5)"
        );
    }

    #[test]
    fn control_characters_are_refused_anywhere() {
        for (name, character, position) in [
            ("bash\0", '\0', 5),
            ("ba\nsh", '\n', 3),
            ("\tbash", '\t', 1),
            ("bash\u{7F}", '\u{7F}', 5),
            ("bash\u{85}", '\u{85}', 5),
            ("bash\u{1B}[0m", '\u{1B}', 5),
        ] {
            let length = name.chars().count();
            assert_eq!(
                check(name),
                Err(InvalidToolName::Hidden { character, kind: Hidden::Control, position, length }),
                "{name:?}"
            );
        }
    }

    #[test]
    fn format_characters_are_refused_anywhere() {
        for character in [
            '\u{AD}',
            '\u{600}',
            '\u{61C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{FFF9}',
            '\u{1343F}',
            '\u{1D173}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E007F}',
        ] {
            let name = format!("ba{character}sh");
            assert_eq!(
                check(&name),
                Err(InvalidToolName::Hidden { character, kind: Hidden::Format, position: 3, length: 5 }),
                "U+{:04X}",
                u32::from(character)
            );
        }
    }

    #[test]
    fn other_invisible_characters_are_refused_anywhere() {
        for character in [
            '\u{34F}',
            '\u{115F}',
            '\u{1160}',
            '\u{17B4}',
            '\u{180B}',
            '\u{180F}',
            '\u{2028}',
            '\u{2029}',
            '\u{2065}',
            '\u{2800}',
            '\u{3164}',
            '\u{FE00}',
            '\u{FE0F}',
            '\u{FFA0}',
            '\u{FFF0}',
            '\u{E0000}',
            '\u{E0100}',
            '\u{E01EF}',
            '\u{E0FFF}',
        ] {
            let name = format!("bash{character}");
            assert_eq!(
                check(&name),
                Err(InvalidToolName::Hidden { character, kind: Hidden::Invisible, position: 5, length: 5 }),
                "U+{:04X}",
                u32::from(character)
            );
        }
        // Their neighbours are ordinary characters.
        for character in ['\u{34E}', '\u{2801}', '\u{3165}', '\u{FE10}', '\u{E1000}', '\u{2027}'] {
            assert!(is_valid(&format!("bash{character}")), "U+{:04X}", u32::from(character));
        }
    }

    #[test]
    fn the_first_offending_character_is_named() {
        let error = check(" ba\u{200B}sh").unwrap_err();
        assert!(matches!(error, InvalidToolName::Padded { position: 1, .. }), "{error:?}");
        let error = check("b\u{200B}ash\0").unwrap_err();
        assert!(matches!(error, InvalidToolName::Hidden { position: 2, kind: Hidden::Format, .. }));
    }

    #[test]
    fn the_refusal_says_what_is_wrong_and_how_to_fix_it_without_the_raw_characters() {
        let decision = refusal("bash\u{200B}", &check("bash\u{200B}").unwrap_err());
        assert!(!decision.allow);
        assert_eq!(decision.reasons[0].code, INVALID_CODE);
        assert_eq!(
            decision.reasons[0].message,
            "tool name 'bash<U+200B>' is invalid: the tool name has U+200B (an invisible format character) \
             at character 5 of 5; a tool name must not be empty, start or end with white space, or hold \
             control, format or other invisible characters; call the tool by its name without U+200B"
        );
        let padded = refusal(" bash\u{3000}", &check(" bash\u{3000}").unwrap_err());
        assert!(
            padded.reasons[0]
                .message
                .starts_with("tool name ' bash<U+3000>' is invalid: the tool name starts"),
            "{}",
            padded.reasons[0].message
        );
        assert!(padded.reasons[0].message.ends_with("without the white space: 'bash'"));
        for name in
            ["bash\0", "bash\u{200B}", "\u{FEFF}bash", "bash\u{E0041}", "bash\u{2028}", "bash\u{3000}"]
        {
            let message = &refusal(name, &check(name).unwrap_err()).reasons[0].message;
            assert!(message.chars().all(|c| c == ' ' || !(c.is_whitespace() || c.is_control())));
            assert!(message.chars().all(|c| hidden(c).is_none()), "{message:?}");
        }
        let empty = refusal("", &InvalidToolName::Empty);
        assert_eq!(
            empty.reasons[0].message,
            "tool name '' is invalid: the tool name is empty; a tool name must not be empty, start or end \
             with white space, or hold control, format or other invisible characters; call the tool by its name"
        );
    }

    #[test]
    fn escaping_writes_code_points() {
        assert_eq!(escaped("a\u{200B}b\0c\u{00A0}d e"), "a<U+200B>b<U+0000>c\u{00A0}d e");
        assert_eq!(escaped("\u{00A0} bash \u{3000}"), "<U+00A0> bash <U+3000>");
        assert_eq!(escaped("résumé"), "résumé");
    }

    #[test]
    fn the_tables_are_sorted_and_disjoint() {
        for table in [FORMAT, INVISIBLE] {
            assert!(table.iter().all(|(low, high)| low <= high));
            assert!(table.windows(2).all(|w| w[0].1 < w[1].0));
        }
        assert!(!FORMAT.iter().any(|&(low, high)| INVISIBLE.iter().any(|&(l, h)| l <= high && low <= h)));
    }
}
