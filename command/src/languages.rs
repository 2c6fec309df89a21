//! The little languages some programs run, read far enough to find the
//! commands they run: a `sed` script (`e`, `s///e`), an `awk` program
//! (`system()`, pipes), `git -c` configuration (keys whose value is a
//! command), SQLite's dot-commands (`.shell`). What a reader cannot read
//! is a [`Finding`], never a guess.

use crate::finding::{Code, Finding};
use crate::grammar::Role;

/// The shell code that `text` (a value of `role`) runs; `Err` when that
/// cannot be said.
pub fn commands(role: Role, text: &str) -> Result<Vec<String>, Finding> {
    match role {
        Role::SedScript => sed(text),
        Role::AwkProgram => awk(text),
        Role::GitConfig => git_config(text),
        Role::SqliteSql => sqlite(text),
        Role::TarAction => tar_action(text),
        _ => Ok(Vec::new()),
    }
}

impl Finding {
    /// The finding with the program it is about named first.
    pub fn within(mut self, program: &str) -> Finding {
        self.message = format!("{program}: {}", self.message);
        self
    }
}

fn unverified(message: impl Into<String>) -> Finding {
    Finding::new(Code::Unverified, message)
}

/// A `sed` script: addresses, then one-letter commands. `e` runs its
/// argument (or the pattern space: code made at run time); `s///e` runs
/// the pattern space; `w`, `W` and `s///w` write files (not commands).
fn sed(script: &str) -> Result<Vec<String>, Finding> {
    let bytes = script.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    let line_end =
        |from: usize| bytes[from..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |e| from + e);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b';' | b'{' | b'}' | b'!' | b',' | b'$' | b'~' | b'+' | b'0'..=b'9' => {
                i += 1
            }
            b'/' | b'\\' => {
                // An address: `/re/` or `\cREc`.
                let delimiter = if c == b'\\' {
                    i += 1;
                    *bytes.get(i).ok_or_else(|| unverified("a sed address is cut short"))?
                } else {
                    c
                };
                i = skip_delimited(bytes, i + 1, delimiter)?;
                while bytes.get(i).is_some_and(|b| matches!(b, b'I' | b'M')) {
                    i += 1;
                }
            }
            b'#' | b':' | b'b' | b't' | b'T' | b'a' | b'i' | b'c' | b'r' | b'R' | b'w' | b'W' => {
                // A comment, a label or a branch, text, or a file name: to
                // the end of the line (`b`, `t`, `T` and `:` end at `;`).
                let end = if matches!(c, b'b' | b't' | b'T' | b':') {
                    bytes[i..]
                        .iter()
                        .position(|b| matches!(b, b';' | b'\n' | b'}'))
                        .map_or(bytes.len(), |e| i + e)
                } else {
                    line_end(i)
                };
                i = end;
            }
            b'e' => {
                let end = line_end(i);
                let command = script[i + 1..end].trim();
                if command.is_empty() {
                    return Err(Finding::new(
                        Code::RuntimeCode,
                        "its script runs the pattern space as a command (`e`)",
                    ));
                }
                found.push(command.to_owned());
                i = end;
            }
            b's' | b'y' => {
                let delimiter = *bytes.get(i + 1).ok_or_else(|| unverified("a sed `s` is cut short"))?;
                i = skip_delimited(bytes, i + 2, delimiter)?;
                i = skip_delimited(bytes, i, delimiter)?;
                if c == b's' {
                    while let Some(&flag) = bytes.get(i) {
                        match flag {
                            b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9' => i += 1,
                            b'e' => {
                                return Err(Finding::new(
                                    Code::RuntimeCode,
                                    "its script runs a substitution's result as a command (`s///e`)",
                                ))
                            }
                            b'w' => {
                                i = line_end(i);
                                break;
                            }
                            _ => break,
                        }
                    }
                }
            }
            b'p' | b'P' | b'd' | b'D' | b'n' | b'N' | b'g' | b'G' | b'h' | b'H' | b'x' | b'l' | b'='
            | b'q' | b'Q' | b'z' | b'F' => i += 1,
            b'v' => {
                i = bytes[i..].iter().position(|b| matches!(b, b';' | b'\n')).map_or(bytes.len(), |e| i + e)
            }
            other => {
                return Err(unverified(format!(
                    "its script has a command `{}` the guard does not read",
                    char::from(other).escape_debug()
                )))
            }
        }
    }
    Ok(found)
}

/// Skips to after the next unescaped `delimiter` from `from`.
fn skip_delimited(bytes: &[u8], mut from: usize, delimiter: u8) -> Result<usize, Finding> {
    while from < bytes.len() {
        match bytes[from] {
            b'\\' => from += 2,
            b if b == delimiter => return Ok(from + 1),
            _ => from += 1,
        }
    }
    Err(unverified("its script has an unterminated expression"))
}

/// An `awk` program: `system(...)`, a pipe to or from a command (`print |
/// "cmd"`, `"cmd" | getline`) run commands. A literal command is
/// returned; anything else is code made at run time.
fn awk(program: &str) -> Result<Vec<String>, Finding> {
    let mut found = Vec::new();
    // Strings and regular expressions removed, so that `"a|b"` and `/x|y/`
    // are not pipes; each string is kept to name a literal command.
    let mut plain = String::with_capacity(program.len());
    let mut strings = Vec::new();
    let mut chars = program.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut text = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => text.extend(chars.next()),
                        '"' => break,
                        c => text.push(c),
                    }
                }
                plain.push_str(&format!("\u{0}{}\u{0}", strings.len()));
                strings.push(text);
            }
            '/' if plain.trim_end().chars().next_back().is_none_or(|p| "(,{;!~&|\n".contains(p)) => {
                // A regular expression: `/a|b/`.
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '/' => break,
                        _ => {}
                    }
                }
                plain.push_str("//");
            }
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            c => plain.push(c),
        }
    }
    let literal = |at: &str| -> Option<String> {
        let rest = at.trim_start().strip_prefix('\u{0}')?;
        let (index, _) = rest.split_once('\u{0}')?;
        strings.get(index.parse::<usize>().ok()?).cloned()
    };
    let runtime = || Finding::new(Code::RuntimeCode, "its program runs a command made at run time");
    let words = |c: char| c.is_alphanumeric() || c == '_';
    for (at, _) in plain.match_indices("system") {
        let before = plain[..at].chars().next_back();
        if before.is_some_and(words) {
            continue;
        }
        let after = plain[at + 6..].trim_start();
        if let Some(argument) = after.strip_prefix('(') {
            let closed = argument.trim_start();
            match literal(closed) {
                Some(command)
                    if closed.split_once('\u{0}').is_some_and(|(_, r)| {
                        r.split_once('\u{0}').is_some_and(|(_, r)| r.trim_start().starts_with(')'))
                    }) =>
                {
                    found.push(command)
                }
                _ => return Err(runtime()),
            }
        }
    }
    let bytes = plain.as_bytes();
    for (at, _) in plain.match_indices('|') {
        let doubled = bytes.get(at + 1) == Some(&b'|') || (at > 0 && bytes[at - 1] == b'|');
        if doubled {
            continue;
        }
        // `print | "cmd"` or `"cmd" | getline`.
        let after = plain[at + 1..].trim_start_matches('&');
        let command = literal(after).or_else(|| {
            // A string just before the pipe: `"\0N\0"` ends it (looked for
            // only there, so each pipe costs the string's length at most).
            let before = plain[..at].trim_end().strip_suffix('\u{0}')?;
            let start = before.rfind('\u{0}')?;
            literal(&plain[start..])
        });
        match command {
            Some(command) => found.push(command),
            None => return Err(runtime()),
        }
    }
    Ok(found)
}

/// `git -c key=value`: keys whose value git runs as a command, or that
/// load more configuration, hand on that command; keys known to run
/// nothing pass; any other key is unverified (git has hundreds, and new
/// ones arrive).
fn git_config(text: &str) -> Result<Vec<String>, Finding> {
    let (key, value) = text.split_once('=').unwrap_or((text, "true"));
    let key = key.to_ascii_lowercase();
    let section = key.split('.').next().unwrap_or("");
    let last = key.rsplit('.').next().unwrap_or("");
    const HARMLESS_SECTIONS: &[&str] = &[
        "user",
        "color",
        "advice",
        "init",
        "push",
        "pull",
        "fetch",
        "log",
        "format",
        "column",
        "status",
        "branch",
        "merge",
        "rebase",
        "safe",
        "commit",
        "tag",
        "i18n",
        "gc",
        "pack",
        "index",
        "feature",
        "maintenance",
    ];
    const HARMLESS_CORE: &[&str] = &[
        "autocrlf",
        "quotepath",
        "filemode",
        "ignorecase",
        "safecrlf",
        "eol",
        "abbrev",
        "whitespace",
        "precomposeunicode",
        "longpaths",
        "symlinks",
        "compression",
        "bare",
        "logallrefupdates",
    ];
    const COMMANDS: &[&str] = &[
        "core.sshcommand",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.fsmonitor",
        "core.gitproxy",
        "sequence.editor",
        "diff.external",
        "credential.helper",
        "gpg.program",
        "uploadpack.packobjectshook",
    ];
    if key.starts_with("alias.") {
        return match value.strip_prefix('!') {
            Some(command) => Ok(vec![command.to_owned()]),
            None => Ok(Vec::new()),
        };
    }
    if COMMANDS.contains(&key.as_str())
        || (section == "pager")
        || (matches!(section, "filter" | "diff" | "merge" | "difftool" | "mergetool" | "credential")
            && matches!(
                last,
                "clean" | "smudge" | "process" | "textconv" | "command" | "driver" | "cmd" | "helper"
            ))
    {
        return Ok(vec![value.to_owned()]);
    }
    let harmless = (HARMLESS_SECTIONS.contains(&section)
        && !matches!(last, "hook" | "hookspath" | "program" | "command" | "editor" | "cmd"))
        || (section == "core" && HARMLESS_CORE.contains(&last));
    if harmless {
        return Ok(Vec::new());
    }
    Err(unverified(format!("`-c {key}` is a setting the guard does not know to run nothing")))
}

/// SQLite input: `.shell` and `.system` run commands, `.once` and
/// `.output` to `|cmd` too; `.load` and `load_extension()` load code; the
/// dot-commands listed read or print only.
fn sqlite(text: &str) -> Result<Vec<String>, Finding> {
    const READING: &[&str] = &[
        ".tables",
        ".schema",
        ".headers",
        ".header",
        ".mode",
        ".quit",
        ".exit",
        ".indexes",
        ".indices",
        ".dump",
        ".help",
        ".databases",
        ".show",
        ".width",
        ".nullvalue",
        ".separator",
        ".timer",
        ".changes",
        ".bail",
        ".echo",
        ".print",
        ".fullschema",
        ".stats",
        ".eqp",
        ".explain",
    ];
    let mut found = Vec::new();
    if text.to_ascii_lowercase().contains("load_extension") {
        return Err(unverified("it loads an extension (`load_extension`)"));
    }
    for line in text.lines().map(str::trim_start) {
        let Some(dot) = line.strip_prefix('.').map(|_| line) else { continue };
        let (command, rest) = dot.split_once(char::is_whitespace).unwrap_or((dot, ""));
        match command {
            ".shell" | ".system" => found.push(rest.trim().to_owned()),
            ".once" | ".output" if rest.trim_start().starts_with('|') => {
                found.push(rest.trim_start()[1..].trim().to_owned())
            }
            c if READING.contains(&c) => {}
            c => {
                return Err(unverified(format!(
                    "its dot-command `{}` is not one the guard knows to run nothing",
                    c.chars().take(20).collect::<String>().escape_debug()
                )))
            }
        }
    }
    Ok(found)
}

/// A `tar --checkpoint-action`: `exec=COMMAND` runs COMMAND through the
/// shell; the other actions print, wait or ring.
fn tar_action(action: &str) -> Result<Vec<String>, Finding> {
    match action.split_once('=') {
        Some(("exec", command)) => Ok(vec![command.to_owned()]),
        Some(("echo" | "ttyout" | "sleep", _)) => Ok(Vec::new()),
        None if matches!(action, "bell" | "dot" | "echo" | "totals" | "wait") => Ok(Vec::new()),
        _ => Err(unverified(format!(
            "its checkpoint action `{}` is not one the guard knows",
            action.chars().take(20).collect::<String>().escape_debug()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_run_commands_are_read() {
        assert_eq!(sed("1e rm -rf /").unwrap(), ["rm -rf /"]);
        assert_eq!(sed("s/a/b/g; /x/d; 1,3p; $!N").unwrap(), Vec::<String>::new());
        assert_eq!(sed("s|a|b|e").unwrap_err().code, Code::RuntimeCode);
        assert_eq!(sed("e").unwrap_err().code, Code::RuntimeCode);
        assert_eq!(sed("/error/p").unwrap(), Vec::<String>::new(), "an `e` in a pattern is text");
        assert_eq!(sed("s/x/e/w out.txt").unwrap(), Vec::<String>::new());
        assert_eq!(sed("1,20p").unwrap(), Vec::<String>::new());
        assert_eq!(sed("K").unwrap_err().code, Code::Unverified);
    }

    #[test]
    fn awk_programs_that_run_commands_are_read() {
        assert_eq!(awk("{system(\"id\")}").unwrap(), ["id"]);
        assert_eq!(awk("{system($0)}").unwrap_err().code, Code::RuntimeCode);
        assert_eq!(awk("{print | \"sh\"}").unwrap(), ["sh"]);
        assert_eq!(awk("BEGIN {\"date\" | getline d}").unwrap(), ["date"]);
        assert_eq!(awk("{print $1 | $2}").unwrap_err().code, Code::RuntimeCode);
        assert_eq!(awk("$1 > 5 || /a|b/ {print \"x|y\"}").unwrap(), Vec::<String>::new());
        assert_eq!(awk("{ mysystem = 1 }").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn git_settings_that_run_commands_are_read() {
        assert_eq!(git_config("core.sshCommand=ssh -i k").unwrap(), ["ssh -i k"]);
        assert_eq!(git_config("alias.x=!rm -rf /").unwrap(), ["rm -rf /"]);
        assert_eq!(git_config("filter.a.smudge=evil").unwrap(), ["evil"]);
        assert!(git_config("user.name=a").unwrap().is_empty());
        assert!(git_config("color.ui=auto").unwrap().is_empty());
        assert_eq!(git_config("core.hooksPath=/tmp/h").unwrap_err().code, Code::Unverified);
        assert_eq!(git_config("include.path=/tmp/c").unwrap_err().code, Code::Unverified);
    }

    #[test]
    fn tar_checkpoint_actions_are_read() {
        assert_eq!(tar_action("exec=sh -c id").unwrap(), ["sh -c id"]);
        assert!(tar_action("dot").unwrap().is_empty());
        assert!(tar_action("echo=done").unwrap().is_empty());
        assert_eq!(tar_action("wait=SIGUSR1x").unwrap_err().code, Code::Unverified);
    }

    #[test]
    fn sqlite_dot_commands_are_read() {
        assert_eq!(sqlite(".shell rm -rf /").unwrap(), ["rm -rf /"]);
        assert_eq!(sqlite(".once |sh").unwrap(), ["sh"]);
        assert!(sqlite("select 1;\n.tables").unwrap().is_empty());
        assert_eq!(sqlite("select load_extension('x')").unwrap_err().code, Code::Unverified);
        assert_eq!(sqlite(".import x t").unwrap_err().code, Code::Unverified);
    }
}
