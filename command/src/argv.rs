//! One program's arguments read with its grammar, as `getopt_long` reads
//! them: short options bundled (`-rf`), a short option's value attached or
//! next (`-n5`, `-n 5`), long options abbreviated to any unambiguous prefix
//! (`--recur`), `--opt=value`, `--` ending the options, options after
//! operands (GNU order) unless the program reads options first (a
//! wrapper), and subcommands (`git -C x status`).

use crate::grammar::{Grammar, Role, Spelling, Takes};
use crate::shell::Word;

/// An option as the program read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    /// The option's name in the grammar (`recursive` for `-R`, `--recur`).
    pub option: &'static str,
    /// What its value is.
    pub role: Role,
    /// Its value, if it takes one and one was given.
    pub value: Option<Word>,
}

/// A program's arguments, read.
#[derive(Debug, Clone, Default)]
pub struct Reading<'w> {
    /// The grammar read with: the subcommand's, if there is one.
    pub grammar: Option<&'static Grammar>,
    /// The program and subcommands (`git status`).
    pub name: &'static str,
    /// The options, in order.
    pub options: Vec<Opt>,
    /// The operands with their roles, in order (a command's words
    /// excluded: see [`Reading::command`]).
    pub operands: Vec<(&'w Word, Role)>,
    /// What the grammar does not know: options, subcommands, or an option
    /// known only when the command runs; empty when all was read.
    pub unknown: Vec<String>,
    /// The command the program runs with the rest of its words
    /// ([`Role::Command`]).
    pub command: Option<&'w [Word]>,
    /// The commands given up to a `;` or `{} +` ([`Role::CommandUntilSemicolon`]).
    pub until: Vec<Until<'w>>,
}

/// A command given up to a `;` or `{} +` (`find -exec`).
#[derive(Debug, Clone, Copy)]
pub struct Until<'w> {
    /// Its words, the terminator left out (a `{}` before `+` kept).
    pub words: &'w [Word],
    /// Ended by `{} +`: run once with every path in place of that `{}`,
    /// not once per path.
    pub batched: bool,
}

impl Reading<'_> {
    /// Whether option `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.options.iter().any(|o| o.option == name)
    }
}

/// Reads `args` (the words after the program's name) with `grammar`.
pub fn read<'w>(grammar: &'static Grammar, args: &'w [Word]) -> Reading<'w> {
    let mut reading = Reading { grammar: Some(grammar), name: &grammar.name, ..Reading::default() };
    let mut grammar = grammar;
    let mut operands_only = false;
    let mut operand_index = 0;
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let text = match word {
            Word::Lit(text) => text.as_str(),
            Word::Dyn(dynamic) => {
                // A word known only when it runs may be an option: one that
                // matters if the program has options that run or write.
                let matters = grammar.spellings.iter().any(|s| s.role.runs() || s.role == Role::Write);
                if !operands_only
                    && matters
                    && (dynamic.without.is_empty() || dynamic.without.starts_with('-'))
                {
                    reading.unknown.push("an option known only when the command runs".to_owned());
                }
                if !grammar.subcommands.is_empty() && operand_index == 0 {
                    reading.unknown.push("a subcommand known only when the command runs".to_owned());
                }
                let role = grammar.operand_role(operand_index, |name| reading.has(name));
                if role == Role::Command {
                    reading.command = Some(&args[i - 1..]);
                    return reading;
                }
                reading.operands.push((word, role));
                operand_index += 1;
                operands_only |= grammar.options_first;
                continue;
            }
        };
        let is_option = !operands_only && text.len() > 1 && text.starts_with('-');
        if !is_option {
            if !operands_only && grammar.operators.iter().any(|o| o == text) {
                continue;
            }
            if !grammar.subcommands.is_empty() && operand_index == 0 {
                match grammar.subcommands.get(text) {
                    Some(sub) => {
                        grammar = sub;
                        reading.grammar = Some(sub);
                        reading.name = &sub.name;
                        operands_only = false;
                        continue;
                    }
                    None => reading.unknown.push(format!("the subcommand `{}`", shown(text))),
                }
            }
            let role = grammar.operand_role(operand_index, |name| reading.has(name));
            match role {
                Role::Command => {
                    reading.command = Some(&args[i - 1..]);
                    return reading;
                }
                Role::ShellWords => {
                    reading.operands.push((word, role));
                    for rest in &args[i..] {
                        reading.operands.push((rest, role));
                    }
                    return reading;
                }
                _ => reading.operands.push((word, role)),
            }
            operand_index += 1;
            operands_only |= grammar.options_first;
            continue;
        }
        if text == "--" {
            operands_only = true;
            continue;
        }
        let name = text.split_once('=').map_or(text, |(n, _)| n);
        let spelled_whole = name.len() > 2 && grammar.spellings.iter().any(|s| s.text == name);
        if text.starts_with("--") || spelled_whole || (grammar.single_dash_long && text.len() > 2) {
            i = long(grammar, text, args, i, &mut reading);
        } else {
            i = short(grammar, text, args, i, &mut reading);
        }
        // An interpreter's script (`python3 -m mod`, `java -jar x.jar`)
        // ends its options: what follows is the script's.
        if grammar.options_first
            && reading.options.last().is_some_and(|o| o.role == Role::Script && o.value.is_some())
        {
            operands_only = true;
            operand_index += 1;
        }
    }
    reading
}

/// A word for a message: at most 40 characters, control characters
/// escaped.
fn shown(text: &str) -> String {
    text.chars().take(40).flat_map(char::escape_debug).collect()
}

/// Reads the long option `text`; returns where reading goes on.
fn long<'w>(
    grammar: &'static Grammar,
    text: &str,
    args: &'w [Word],
    mut i: usize,
    reading: &mut Reading<'w>,
) -> usize {
    let (name, attached) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    let exact = grammar.spellings.iter().find(|s| s.text == name);
    let found = exact.or_else(|| {
        if grammar.single_dash_long {
            return None;
        }
        // `getopt_long` takes any unambiguous prefix; candidates that are
        // spellings of one option are not ambiguous.
        let mut candidates =
            grammar.spellings.iter().filter(|s| s.text.starts_with("--") && s.text.starts_with(name));
        let first = candidates.next()?;
        candidates.all(|c| c.option == first.option).then_some(first)
    });
    let Some(spelling) = found else {
        if !grammar.open {
            reading.unknown.push(format!("the option `{}`", shown(name)));
        }
        return i;
    };
    let value = match spelling.takes {
        Takes::Nothing => {
            if attached.is_some() {
                reading.unknown.push(format!("a value for `{}`, which takes none", spelling.text));
            }
            None
        }
        Takes::Optional => attached.map(|v| Word::Lit(v.to_owned())),
        Takes::Two => {
            // The first value has the role; the second is text.
            if attached.is_some() || args.len() < i + 2 {
                reading.unknown.push(format!("`{}` not followed by its two values", spelling.text));
            }
            let value = args.get(i).cloned();
            i = (i + 2).min(args.len());
            value
        }
        Takes::Value => match attached {
            Some(v) => Some(Word::Lit(v.to_owned())),
            None => {
                if spelling.role == Role::CommandUntilSemicolon {
                    // As `find` reads it: `;` ends the command, and so
                    // does `+` right after a `{}`; any other `+` is one
                    // of its words.
                    let ends = |at: usize| match args[at].lit() {
                        Some(";") => Some(false),
                        Some("+") if at > i && args[at - 1].lit() == Some("{}") => Some(true),
                        _ => None,
                    };
                    let (end, batched) = (i..args.len())
                        .find_map(|at| ends(at).map(|b| (at, b)))
                        .unwrap_or((args.len(), false));
                    reading.until.push(Until { words: &args[i..end], batched });
                    push(reading, spelling, None);
                    return end + 1;
                }
                let value = args.get(i).cloned();
                i += 1;
                value
            }
        },
    };
    push(reading, spelling, value);
    i
}

/// Reads the short options of `text` (`-rf`, `-n5`); returns where
/// reading goes on.
fn short(
    grammar: &'static Grammar,
    text: &str,
    args: &[Word],
    mut i: usize,
    reading: &mut Reading<'_>,
) -> usize {
    let body = &text[1..];
    for (at, c) in body.char_indices() {
        let mut buffer = [0u8; 4];
        let letter = c.encode_utf8(&mut buffer);
        let Some(spelling) = grammar
            .spellings
            .iter()
            .find(|s| s.is_short() && &s.text[1..] == letter && s.text.starts_with('-'))
        else {
            if !grammar.open {
                reading.unknown.push(format!("the option `-{}`", shown(letter)));
            }
            continue;
        };
        let rest = &body[at + c.len_utf8()..];
        match spelling.takes {
            Takes::Nothing => push(reading, spelling, None),
            Takes::Two => unreachable!("a two-value spelling is never short (checked by the grammar)"),
            Takes::Optional => {
                push(reading, spelling, (!rest.is_empty()).then(|| Word::Lit(rest.to_owned())));
                return i;
            }
            Takes::Value => {
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(Word::Lit(rest.to_owned()))
                };
                push(reading, spelling, value);
                return i;
            }
        }
    }
    i
}

fn push(reading: &mut Reading<'_>, spelling: &'static Spelling, value: Option<Word>) {
    reading.options.push(Opt { option: &spelling.option, role: spelling.role, value });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::grammar;

    fn words(text: &str) -> Vec<Word> {
        text.split_whitespace().map(|w| Word::Lit(w.to_owned())).collect()
    }

    fn options(program: &str, args: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
        let args = words(args);
        let reading = read(grammar(program).unwrap(), &args);
        (
            reading.options.iter().map(|o| o.option.to_owned()).collect(),
            reading.operands.iter().map(|(w, _)| w.lit().unwrap().to_owned()).collect(),
            reading.unknown.clone(),
        )
    }

    #[test]
    fn options_are_read_as_getopt_long_reads_them() {
        // Abbreviations, bundles, `--`, options after operands.
        assert_eq!(options("rm", "--recur -f /x").0, ["recursive", "force"]);
        assert_eq!(options("rm", "--r --f /x").0, ["recursive", "force"]);
        assert_eq!(options("ls", "--c x").2, ["the option `--c`"], "ambiguous: --color, --classify ...");
        assert_eq!(options("rm", "-rf /x").0, ["recursive", "force"]);
        assert_eq!(options("rm", "/x -r").0, ["recursive"]);
        assert_eq!(options("rm", "-- -r").1, ["-r"]);
        assert_eq!(options("rm", "--frobnicate x").2, ["the option `--frobnicate`"]);
        // `find -fprintf FILE FORMAT`: two values, the file written.
        let args = words(". -fprintf /etc/x %p -print");
        let reading = read(grammar("find").unwrap(), &args);
        let fprintf = reading.options.iter().find(|o| o.option == "fprintf").unwrap();
        assert_eq!((fprintf.role, fprintf.value.as_ref().and_then(Word::lit)), (Role::Write, Some("/etc/x")));
        assert_eq!((reading.operands.len(), reading.unknown.len()), (1, 0), "{:?}", reading.unknown);
        assert_eq!(options("find", ". -fprintf /x").2, ["`-fprintf` not followed by its two values"]);
        // Values attached and apart.
        let (opts, operands, unknown) = options("head", "-n5 a -n 6 b");
        assert_eq!((opts.len(), operands, unknown.len()), (2, vec!["a".to_owned(), "b".to_owned()], 0));
        // A wrapper reads its options first: the command's are its own.
        let args = words("-s KILL 5 rm -rf /");
        let reading = read(grammar("timeout").unwrap(), &args);
        assert_eq!(reading.command.unwrap()[0].lit(), Some("rm"));
        assert!(reading.unknown.is_empty());
        // Subcommands, after the program's options.
        let args = words("-C /x -c user.name=a status --short");
        let reading = read(grammar("git").unwrap(), &args);
        assert_eq!(reading.name, "git status");
        assert!(reading.unknown.is_empty(), "{:?}", reading.unknown);
        let args = words("frobnicate");
        assert_eq!(read(grammar("git").unwrap(), &args).unknown, ["the subcommand `frobnicate`"]);
    }
}
