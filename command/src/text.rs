//! The command's text, as APort's checks read it (the OAP provider's
//! command pack runs them beside the model): [`injection`] on the raw
//! text, [`dangerous_operation`] on the [`normalize`]d text, and
//! [`foreign_code`], the code handed to other languages' interpreters
//! searched as text.

use crate::analysis::{self, basename};
use crate::shell::{self, Word};

/// The commands that make a `$(...)` an injection (APort's list).
const DANGEROUS_IN_SUBSTITUTION: &[&str] =
    &["rm", "dd", "mkfs", "curl", "wget", "chmod", "chown", "sudo", "kill", "nc", "netcat"];

/// APort's `validate_command_string`: whether the command holds a backtick,
/// a `$(` running a dangerous command, or a control character. Linear: a
/// `$(` looks up to the next `)` or newline, so every `$(` between two of
/// those sees the same text, and the first one sees the most.
pub fn injection(command: &str) -> bool {
    if command.contains('`') {
        return true;
    }
    if command.bytes().any(|b| matches!(b, 0x00..=0x08 | 0x0e..=0x1f)) {
        return true;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    for segment in command.split([')', '\n']) {
        let Some(open) = segment.find("$(") else { continue };
        // The text after the first `$(` of the segment, up to its end, in
        // maximal runs of word characters: whole words (the character
        // before each is `(` or not a word character).
        let inside = &segment[open + 2..];
        if inside.split(|c: char| !word(c)).any(|run| DANGEROUS_IN_SUBSTITUTION.contains(&run)) {
            return true;
        }
    }
    false
}

/// Interpreters a download must not be piped into.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "python", "python3", "perl", "ruby", "node"];

/// Code in another language handed to an interpreter (`python3 -c`,
/// `perl -e`, `node -e`): searched as text for the shell's dangerous
/// operations, since it can run them (`os.system('rm -rf /')`).
pub fn foreign_code(script: &shell::Script) -> Option<&'static str> {
    script.commands.iter().find_map(|command| {
        let effective = analysis::effective(&command.words);
        let inner = effective.inner();
        inner.iter().skip(1).filter_map(Word::lit).find_map(|text| {
            let name = effective.name()?;
            (analysis::is_foreign_interpreter(name) && text.len() > 2)
                .then(|| dangerous_operation(&normalize(text)))?
        })
    })
}

/// A command as a shell runs it, for pattern checks: quotes and escapes
/// removed, white space collapsed, lower case (`su\do  "rm"` → `sudo rm`).
pub fn normalize(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut space = false;
    for c in command.chars().filter(|c| !matches!(c, '\\' | '"' | '\'')) {
        if c.is_whitespace() {
            space = !out.is_empty();
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
        }
    }
    out
}

/// The built-in dangerous operations, whatever the passport says; looked
/// for in the normalised command ([`normalize`]).
pub fn dangerous_operation(text: &str) -> Option<&'static str> {
    // Each look is skipped when the text lacks what it needs (removing
    // white space adds no `:` or `=`), which spares the allocations for
    // most commands.
    if text.contains(':') || text.contains('=') {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.contains(":(){:|:&};:") {
            return Some("Fork bomb detected");
        }
        if compact.contains("ddif=/dev/") {
            return Some("Dangerous disk operation: dd if=/dev/");
        }
    }
    let separators = |c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')');
    if text.contains("mkfs") && text.split(separators).any(|w| basename(w).starts_with("mkfs")) {
        return Some("Filesystem creation: mkfs");
    }
    let words: Vec<&str> = if text.contains("rm") {
        text.split(separators).filter(|w| !w.is_empty()).collect()
    } else {
        Vec::new()
    };
    for (i, word) in words.iter().enumerate() {
        if basename(word) != "rm" {
            continue;
        }
        let rest = &words[i + 1..];
        let flags: String = rest.iter().take_while(|w| w.starts_with('-')).copied().collect();
        let recursive = flags.contains('r') || flags.contains("--recursive");
        let force = flags.contains('f') || flags.contains("--force");
        let root = rest.iter().any(|w| {
            matches!(
                *w,
                "/" | "/*" | "/." | "//" | "~" | "~/" | "~/*" | "$home" | "${home}" | "--no-preserve-root"
            )
        });
        if recursive && force && root {
            return Some("Destructive file operation: rm -rf / or rm -rf /*");
        }
    }
    // A download piped into an interpreter, at any later stage of the pipe.
    if !text.contains("curl") && !text.contains("wget") {
        return None;
    }
    let stages: Vec<&str> = text.split('|').collect();
    for (i, stage) in stages.iter().enumerate() {
        if !stage.split_whitespace().any(|w| matches!(basename(w), "curl" | "wget")) {
            continue;
        }
        for later in &stages[i + 1..] {
            let program =
                later.split_whitespace().find(|w| *w != "sudo" && !w.starts_with('-') && !w.contains('='));
            if program.map(basename).is_some_and(|p| SHELLS.contains(&p)) {
                return Some("Download-and-execute pattern detected");
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The injection scan finds what APort's per-`$(` look finds, in one
    /// pass.
    #[test]
    fn the_linear_injection_scan_agrees_with_the_per_substitution_look() {
        fn reference(command: &str) -> bool {
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            command.match_indices("$(").any(|(at, _)| {
                let rest = &command[at + 2..];
                let inside = &rest[..rest.find([')', '\n']).unwrap_or(rest.len())];
                DANGEROUS_IN_SUBSTITUTION.iter().any(|name| {
                    inside.match_indices(name).any(|(i, m)| {
                        let before = if i == 0 { Some('(') } else { inside[..i].chars().next_back() };
                        !word(before) && !word(inside[i + m.len()..].chars().next())
                    })
                })
            })
        }
        let parts = ["$(", ")", "\n", "rm", "xrm", "rm_", " ", "é", "—", "curl", "(", "a", "$", "kill"];
        // Every sequence of up to four parts.
        let mut stack = vec![(String::new(), 0)];
        while let Some((text, count)) = stack.pop() {
            assert_eq!(injection(&text), reference(&text), "{text:?}");
            if count < 4 {
                for part in parts {
                    stack.push((format!("{text}{part}"), count + 1));
                }
            }
        }
    }
}
