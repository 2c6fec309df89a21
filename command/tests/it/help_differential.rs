//! The programs' grammars (`src/programs.yaml`) against the programs
//! themselves, for the GNU programs installed.
//!
//! - [`grammars_agree_with_the_programs_help`]: each program's `--help`
//!   option table is read (its spellings, and whether each takes a value,
//!   an optional one or none) and compared with the grammar. A spelling
//!   both know must take the same kind of value, or the guard reads the
//!   next word differently from the program (the dangerous mistake: the
//!   test fails). A grammar spelling the program does not list is an
//!   extra (printed). An option the program lists and the grammar does
//!   not is refused by the guard, which is safe, and is only counted,
//!   unless the grammar reads it as another option (a long option whose
//!   name begins one the grammar knows), or its description says it runs
//!   a command or a program: an exec vector the grammar must know, or
//!   leave out on purpose ([`REFUSED_EXEC_VECTORS`]). Either fails.
//! - [`abbreviations_are_read_as_the_programs_read_them`]: every prefix of
//!   every long option of a few programs is read with [`argv::read`] and
//!   given to the program itself, in a folder of its own, so that
//!   `getopt_long` stops at it and names it (a flag given a value, a value
//!   missing after the last word) or, for an optional value, with harmless
//!   operands. The program must name the option the grammar read, with the
//!   same kind of value, and refuse as ambiguous what the grammar finds
//!   ambiguous. A prefix the program refuses (ambiguous with an option the
//!   grammar lacks) is printed: the program runs nothing.
//!
//! A program that is not installed, or not GNU's, is skipped, saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use guardhost_command::argv;
use guardhost_command::grammar::{grammar, Grammar, Role, Takes};
use guardhost_command::shell::Word;

/// The programs compared with their `--help`.
const PROGRAMS: &[&str] = &[
    "rm", "find", "chmod", "chown", "tar", "sort", "cp", "mv", "ls", "cat", "head", "tail", "wc", "grep",
    "sed", "cut", "uniq", "du", "df", "date", "touch", "mkdir", "ln", "tee", "diff", "xargs", "timeout",
    "env", "nice", "stat", "readlink", "realpath",
];

/// A difference between a program's `--help` and the grammar, checked by
/// hand against the program: it applies while both say what it says.
struct Reviewed {
    program: &'static str,
    spelling: &'static str,
    /// What the installed program's `--help` says.
    help: Takes,
    /// What the grammar reads.
    grammar: Takes,
    why: &'static str,
}

const REVIEWED: &[Reviewed] = &[
    Reviewed {
        program: "find",
        spelling: "-regextype",
        help: Takes::Nothing,
        grammar: Takes::Value,
        why: "find's --help lists its positional options without their arguments; `-regextype TYPE`",
    },
    Reviewed {
        program: "xargs",
        spelling: "--max-lines",
        help: Takes::Value,
        grammar: Takes::Optional,
        why: "xargs reads --max-lines with an optional value, as -l, whatever its --help says",
    },
    Reviewed {
        program: "cp",
        spelling: "--update",
        help: Takes::Nothing,
        grammar: Takes::Optional,
        why: "coreutils 9.3 gave --update an optional value (--update=none); a long option's \
              optional value is attached, so both read the next word alike",
    },
    Reviewed {
        program: "mv",
        spelling: "--update",
        help: Takes::Nothing,
        grammar: Takes::Optional,
        why: "as cp's --update",
    },
];

/// Options missing from a grammar whose description names a command or a
/// program but which run nothing, checked by hand: (program, spelling,
/// why).
const NOT_EXEC_VECTORS: &[(&str, &str, &str)] = &[(
    "tar",
    "--no-auto-compress",
    "it turns -a off: tar then picks no compression program from the archive's name",
)];

/// Exec vectors kept out of their grammar on purpose, so that the guard
/// refuses them (the test checks it does): (program, spelling, why).
const REFUSED_EXEC_VECTORS: &[(&str, &str, &str)] = &[];

/// Lines of a `--help` that read as options and are not: (program,
/// spelling, what it is).
const NOT_OPTIONS: &[(&str, &str, &str)] = &[("cut", "-M", "a range, `-M`: from the first to the M'th")];

/// An option as a program's `--help` lists it.
#[derive(Debug, Clone)]
struct Listed {
    takes: Takes,
    /// The metavariable and the description, for the exec-vector check.
    text: String,
}

/// What follows an option's name in the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Arg {
    None,
    /// `--x=ARG`, `--x ARG`, `-x ARG`.
    Required(String),
    /// `--x[=ARG]`, `-x[ARG]`.
    Optional(String),
    /// `-NUM`: letters attached to a short option, not a table entry.
    Attached,
}

#[derive(Debug, Clone)]
struct Item {
    name: String,
    arg: Arg,
}

impl Item {
    fn is_long(&self) -> bool {
        self.name.starts_with("--")
    }
}

/// A metavariable written apart (`-l N`, `--label LABEL`): upper case,
/// or (`-e script,`) followed by another spelling.
fn spaced_metavariable(after: &str) -> Option<(String, &str)> {
    let rest = after.strip_prefix(' ')?;
    if rest.starts_with([' ', '-']) || rest.is_empty() {
        return None;
    }
    let end = rest.find([' ', ',']).unwrap_or(rest.len());
    let (word, tail) = rest.split_at(end);
    let ends_item = tail.is_empty() || tail.starts_with("  ") || tail.starts_with(',');
    let upper = word.chars().any(|c| c.is_ascii_uppercase()) && !word.chars().any(|c| c.is_ascii_lowercase());
    (ends_item && (upper || tail.starts_with(", -"))).then(|| (word.to_owned(), tail))
}

/// One spelling at the start of `text`, and what follows it.
fn item(text: &str) -> Option<(Item, &str)> {
    if let Some(body) = text.strip_prefix("--") {
        let end =
            body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(body.len());
        if end == 0 {
            return None;
        }
        let name = format!("--{}", &body[..end]);
        let after = &body[end..];
        if let Some(inner) = after.strip_prefix("[=") {
            let close = inner.find(']')?;
            return Some((Item { name, arg: Arg::Optional(inner[..close].to_owned()) }, &inner[close + 1..]));
        }
        if let Some(value) = after.strip_prefix('=') {
            let end = value
                .find(|c: char| c.is_whitespace())
                .map(|e| value[..e].trim_end_matches(',').len())
                .unwrap_or_else(|| value.trim_end_matches(',').len());
            return Some((Item { name, arg: Arg::Required(value[..end].to_owned()) }, &value[end..]));
        }
        if let Some((word, tail)) = spaced_metavariable(after) {
            return Some((Item { name, arg: Arg::Required(word) }, tail));
        }
        return Some((Item { name, arg: Arg::None }, after));
    }
    let body = text.strip_prefix('-')?;
    let letter = body.chars().next().filter(|c| c.is_ascii_alphanumeric() || *c == '?')?;
    let name = format!("-{letter}");
    let after = &body[1..];
    if let Some(inner) = after.strip_prefix('[') {
        let close = inner.find(']')?;
        return Some((Item { name, arg: Arg::Optional(inner[..close].to_owned()) }, &inner[close + 1..]));
    }
    if after.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some((Item { name, arg: Arg::Attached }, ""));
    }
    if let Some((word, tail)) = spaced_metavariable(after) {
        return Some((Item { name, arg: Arg::Required(word) }, tail));
    }
    Some((Item { name, arg: Arg::None }, after))
}

/// The spellings at the start of a table line (`-c, -C NUM, --context[=NUM]`)
/// and the description after them.
fn entry(line: &str) -> Option<(Vec<Item>, &str)> {
    let mut rest = line;
    let mut items = Vec::new();
    loop {
        let (found, after) = item(rest)?;
        items.push(found);
        rest = after;
        match rest.strip_prefix(", ") {
            Some(next) if next.starts_with('-') => rest = next,
            // `-c  --format=FORMAT` (stat): two spellings without a comma.
            _ if rest.starts_with("  --") && !items[0].is_long() && items.len() == 1 => rest = &rest[2..],
            // `--color[=WHEN],` with `--colour[=WHEN]` on the next line.
            _ => break,
        }
    }
    Some((items, rest.trim_start_matches(',').trim()))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A program's options as its `--help` table lists them; the lines that
/// start like an option but are not read as one are returned apart.
fn table(help: &str) -> (BTreeMap<String, Listed>, Vec<String>) {
    // "Mandatory arguments to long options are mandatory for short options
    // too" is GNU's rule; some add that optional ones are optional for them.
    let optional_for_short = help.contains("optional arguments to long options are also")
        || help.contains("Mandatory and optional arguments");
    let lines: Vec<&str> = help.lines().collect();
    let mut entries = Vec::new();
    let mut unread = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if indent(line) == 0 || !trimmed.starts_with('-') {
            continue;
        }
        let Some((items, description)) = entry(trimmed) else {
            if trimmed.len() > 1 && !trimmed[1..].starts_with(' ') {
                unread.push(trimmed.to_owned());
            }
            continue;
        };
        let mut text = description.to_owned();
        for next in &lines[at + 1..] {
            if next.trim().is_empty() || indent(next) <= indent(line) || entry(next.trim_start()).is_some() {
                break;
            }
            text.push(' ');
            text.push_str(next.trim());
        }
        if items.iter().any(|i| i.arg == Arg::Attached) {
            unread.push(trimmed.to_owned());
        }
        let items: Vec<Item> = items.into_iter().filter(|i| i.arg != Arg::Attached).collect();
        if !items.is_empty() {
            entries.push((items, text));
        }
    }
    // A long option listed with several values (`--check`,
    // `--check=quiet`) lists literal values, not metavariables, in all but
    // its upper-case forms.
    let mut forms: BTreeMap<&str, BTreeSet<&Arg>> = BTreeMap::new();
    for (items, _) in &entries {
        for i in items.iter().filter(|i| i.is_long()) {
            forms.entry(&i.name).or_default().insert(&i.arg);
        }
    }
    let literal = |i: &Item| match &i.arg {
        Arg::Required(v) => forms[i.name.as_str()].len() > 1 && !v.chars().any(|c| c.is_ascii_uppercase()),
        _ => false,
    };
    let long_takes = |name: &str| {
        let forms = &forms[name];
        let none = forms.contains(&Arg::None);
        if forms.iter().any(|a| matches!(a, Arg::Optional(_))) || (none && forms.len() > 1) {
            Takes::Optional
        } else if none {
            Takes::Nothing
        } else {
            Takes::Value
        }
    };
    let mut out: BTreeMap<String, Listed> = BTreeMap::new();
    for (items, description) in &entries {
        let explicit_short = items.iter().any(|i| !i.is_long() && i.arg != Arg::None);
        let principal = items.iter().find(|i| i.is_long() && !literal(i));
        for i in items {
            let (takes, metavariable) = match (&i.arg, i.is_long()) {
                (_, true) => (long_takes(&i.name), String::new()),
                (Arg::Required(m), false) => (Takes::Value, m.clone()),
                (Arg::Optional(m), false) => (Takes::Optional, m.clone()),
                (_, false) => match principal {
                    Some(p) if !explicit_short => match long_takes(&p.name) {
                        Takes::Optional if !optional_for_short => (Takes::Nothing, String::new()),
                        takes => (takes, String::new()),
                    },
                    _ => (Takes::Nothing, String::new()),
                },
            };
            let metavariable = match &i.arg {
                Arg::Required(m) | Arg::Optional(m) => m.clone(),
                _ => metavariable,
            };
            let text = format!("{metavariable} {description}");
            out.entry(i.name.clone())
                .and_modify(|l| l.text = format!("{} {text}", l.text))
                .or_insert(Listed { takes, text });
        }
    }
    (out, unread)
}

/// `find`'s options: its `--help` lists its expression in paragraphs
/// (`-amin N -anewer FILE ...`) and its leading options in its usage line.
fn find_table(help: &str) -> (BTreeMap<String, Listed>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut add = |words: &[&str]| {
        let mut at = 0;
        while at < words.len() {
            let name = words[at];
            let end = words[at + 1..]
                .iter()
                .position(|w| w.starts_with('-') && w.len() > 1 && w[1..].starts_with(char::is_alphabetic))
                .map_or(words.len(), |e| at + 1 + e);
            let args = words[at + 1..end].join(" ");
            // `-fprintf FILE FORMAT` takes two; `-exec COMMAND ;` one
            // command (read up to its end).
            let values = &words[at + 1..end];
            let takes = match values.len() {
                0 => Takes::Nothing,
                2 if !values.iter().any(|w| *w == ";" || *w == "+") => Takes::Two,
                _ => Takes::Value,
            };
            out.insert(name.to_owned(), Listed { takes, text: args });
            at = end;
        }
    };
    let usage = help.lines().next().unwrap_or_default();
    for group in usage.split('[').skip(1) {
        let words: Vec<&str> = group.split(']').next().unwrap_or_default().split_whitespace().collect();
        // `-Olevel` is spelled with its level attached: not a table entry.
        if words.first().is_some_and(|w| w.len() == 2 && w.starts_with('-')) {
            add(&words);
        }
    }
    let mut expression = false;
    let mut rest = String::new();
    for line in help.lines() {
        if line.starts_with("Positional options") {
            expression = true;
        } else if line.starts_with("Other common options") {
            expression = false;
        } else if expression && indent(line) > 0 {
            let words: Vec<&str> = line.split_whitespace().collect();
            add(&words);
        } else if !expression {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    let (long, unread) = table(&rest);
    out.extend(long);
    (out, unread)
}

/// The program's `--help` in the C locale, if it is GNU's; else why not.
fn help(program: &str) -> Result<String, String> {
    let run = |arg: &str| {
        Command::new(program)
            .arg(arg)
            .env("LC_ALL", "C")
            .env_remove("POSIXLY_CORRECT")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("`{program}` is not installed ({e})"))
    };
    let version = run("--version")?;
    if !String::from_utf8_lossy(&version.stdout).contains("GNU") {
        return Err(format!("`{program}` is not GNU's"));
    }
    let output = run("--help")?;
    if !output.status.success() {
        return Err(format!("`{program} --help` failed"));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether a description or metavariable says the option runs something
/// ("the command line" aside).
fn names_a_run(text: &str) -> bool {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.iter().enumerate().any(|(at, w)| {
        let command =
            matches!(w.as_str(), "command" | "commands") && words.get(at + 1).is_none_or(|n| n != "line");
        command
            || matches!(
                w.as_str(),
                "program"
                    | "programs"
                    | "prog"
                    | "execute"
                    | "executes"
                    | "executing"
                    | "exec"
                    | "run"
                    | "runs"
            )
    })
}

fn kind(takes: Takes) -> &'static str {
    match takes {
        Takes::Nothing => "no value",
        Takes::Value => "a value",
        Takes::Optional => "an optional value",
        Takes::Two => "two values",
    }
}

#[test]
fn grammars_agree_with_the_programs_help() {
    let mut failures = Vec::new();
    let mut compared_programs = 0;
    for &program in PROGRAMS {
        let text = match help(program) {
            Ok(text) => text,
            Err(why) => {
                eprintln!("skipped {program}: {why}");
                continue;
            }
        };
        let (mut listed, unread) = if program == "find" { find_table(&text) } else { table(&text) };
        listed.retain(|spelling, _| !NOT_OPTIONS.iter().any(|(p, s, _)| *p == program && s == spelling));
        let grammar = grammar(program).unwrap_or_else(|| panic!("{program} has no grammar"));
        assert!(listed.len() >= 3, "{program}: {} options read from its --help:\n{text}", listed.len());
        compared_programs += 1;
        let mut notes = Vec::new();
        let mut extras = Vec::new();
        let mut runs_as_text = Vec::new();
        let mut compared = 0;
        for spelling in &grammar.spellings {
            let Some(option) = listed.get(&spelling.text) else {
                extras.push(spelling.text.as_str());
                continue;
            };
            compared += 1;
            if spelling.takes == option.takes {
                if names_a_run(&option.text)
                    && spelling.takes != Takes::Nothing
                    && spelling.role == Role::Text
                {
                    runs_as_text.push(spelling.text.as_str());
                }
                continue;
            }
            let reviewed = REVIEWED.iter().find(|r| {
                r.program == program
                    && r.spelling == spelling.text
                    && r.help == option.takes
                    && r.grammar == spelling.takes
            });
            match reviewed {
                Some(r) => notes.push(format!("  reviewed: {} ({})", r.spelling, r.why)),
                None => failures.push(format!(
                    "{program} {}: the grammar reads {}, the program's --help says it takes {}",
                    spelling.text,
                    kind(spelling.takes),
                    kind(option.takes)
                )),
            }
        }
        let known: BTreeSet<&str> = grammar.spellings.iter().map(|s| s.text.as_str()).collect();
        let missing: Vec<&str> = listed.keys().map(String::as_str).filter(|s| !known.contains(s)).collect();
        for &spelling in &missing {
            let option = &listed[spelling];
            // A long option the grammar lacks must be refused, not read as
            // one whose name it begins (`--foo` as `--foo-bar`).
            if spelling.starts_with("--") {
                if let Some(other) = read(grammar, spelling) {
                    failures.push(format!(
                        "{program} {spelling}: not in the grammar, which reads it as `{other}`"
                    ));
                }
            }
            let refused = REFUSED_EXEC_VECTORS.iter().find(|(p, s, _)| *p == program && *s == spelling);
            if let Some((_, _, why)) = refused {
                notes.push(format!("  exec vector refused on purpose: {spelling} ({why})"));
                continue;
            }
            let reviewed = NOT_EXEC_VECTORS.iter().any(|(p, s, _)| *p == program && *s == spelling);
            if names_a_run(&option.text) && !reviewed {
                failures.push(format!(
                    "{program} {spelling}: not in the grammar, and it may run something: {}",
                    option.text.trim()
                ));
            }
        }
        for (p, spelling, _) in REFUSED_EXEC_VECTORS.iter().filter(|(p, _, _)| *p == program) {
            let word = format!("{spelling}=x");
            let args = [Word::Lit(word.clone())];
            assert!(!argv::read(grammar, &args).unknown.is_empty(), "{p} {word} is read, not refused");
        }
        // One message per program, so that the tests running alongside
        // do not cut it up.
        let mut summary = format!(
            "{program}: {} options in --help, {compared} grammar spellings compared, {} extra, {} missing\n",
            listed.len(),
            extras.len(),
            missing.len()
        );
        for note in notes {
            summary += &format!("{note}\n");
        }
        if !extras.is_empty() {
            summary += &format!("  extra (in the grammar, not in --help): {}\n", extras.join(" "));
        }
        if !missing.is_empty() {
            summary += &format!("  missing (refused by the guard): {}\n", missing.join(" "));
        }
        if !runs_as_text.is_empty() {
            summary += &format!(
                "  described as running something, its value read as data: {}\n",
                runs_as_text.join(" ")
            );
        }
        if !unread.is_empty() {
            summary += &format!("  lines not read as options: {unread:?}\n");
        }
        eprint!("{summary}");
    }
    eprintln!("{compared_programs} programs compared with their --help");
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

/// How the program took an option given alone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Taken {
    /// `getopt_long` found the prefix ambiguous.
    Ambiguous,
    /// It knows no such option.
    Unrecognized,
    /// It stopped at the option named, which takes no value.
    Flag(String),
    /// It stopped at the option named, which needs a value.
    NeedsValue(String),
    /// It read on: the option was known.
    Ran,
}

/// Runs `program` with `args` in `dir`, and tells how it took them.
fn taken(program: &str, args: &[&str], dir: &Path) -> Taken {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("POSIXLY_CORRECT")
        .env_remove("TAR_OPTIONS")
        .env_remove("TAPE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let quoted = || stderr.split('\'').nth(1).unwrap_or_default().to_owned();
    if stderr.contains("is ambiguous") {
        Taken::Ambiguous
    } else if stderr.contains("unrecognized option") {
        Taken::Unrecognized
    } else if stderr.contains("doesn't allow an argument") {
        Taken::Flag(quoted())
    } else if stderr.contains("requires an argument") {
        Taken::NeedsValue(quoted())
    } else {
        Taken::Ran
    }
}

/// A folder of the test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("guardhost-help-differential-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the grammar reads `word` given alone: the option it names, or
/// `None` if the grammar does not know it (or finds it ambiguous).
fn read(grammar: &'static Grammar, word: &str) -> Option<String> {
    let args = [Word::Lit(word.to_owned())];
    let reading = argv::read(grammar, &args);
    reading.options.first().filter(|_| reading.unknown.is_empty()).map(|o| o.option.to_owned())
}

/// The programs whose abbreviations are tried, with operands that make
/// every option harmless: a file that does not exist in an empty folder,
/// `/dev/null`, or (`tar`) no operation at all, which `tar` refuses after
/// reading its options.
const ABBREVIATED: &[(&str, &[&str])] =
    &[("rm", &["nonexistent"]), ("sort", &["/dev/null"]), ("ls", &["nonexistent"]), ("tar", &[])];

#[test]
fn abbreviations_are_read_as_the_programs_read_them() {
    let mut failures = Vec::new();
    for &(program, operands) in ABBREVIATED {
        if let Err(why) = help(program) {
            eprintln!("skipped {program}: {why}");
            continue;
        }
        let grammar = grammar(program).unwrap();
        let dir = TempDir::new(program);
        // The option a word stops at, in the program and in the grammar.
        let run = |word: &str| {
            let mut args = operands.to_vec();
            args.push(word);
            taken(program, &args, &dir.0)
        };
        let longs: Vec<_> = grammar.spellings.iter().filter(|s| s.text.starts_with("--")).collect();
        let prefixes: BTreeSet<&str> =
            longs.iter().flat_map(|s| (3..=s.text.len()).map(move |n| &s.text[..n])).collect();
        let (mut agreed, mut ambiguous, mut refused) = (0, 0, Vec::new());
        for prefix in prefixes {
            let candidates: BTreeSet<&str> =
                longs.iter().filter(|s| s.text.starts_with(prefix)).map(|s| s.option.as_str()).collect();
            let Some(option) = read(grammar, prefix) else {
                // Ambiguous to the grammar: the program must refuse it too.
                assert!(candidates.len() > 1, "{program} {prefix}: unknown with {candidates:?}");
                match run(prefix) {
                    Taken::Ambiguous => ambiguous += 1,
                    other => failures.push(format!(
                        "{program} {prefix}: ambiguous to the grammar ({candidates:?}), the program: {other:?}"
                    )),
                }
                continue;
            };
            let spelling = longs.iter().find(|s| s.option == option && s.text.starts_with(prefix)).unwrap();
            let same_option =
                |name: &str| grammar.spellings.iter().any(|s| s.text == name && s.option == option);
            // A flag given a value and a value left out stop the program
            // at the option, which it names; an optional value, left out,
            // lets it run.
            let (word, expected) = match spelling.takes {
                Takes::Nothing => (format!("{prefix}=x"), "a flag"),
                Takes::Value => (prefix.to_owned(), "an option that needs a value"),
                Takes::Optional => (prefix.to_owned(), "an option that runs without its value"),
                Takes::Two => unreachable!("only one-dash long options take two values"),
            };
            let got = run(&word);
            match (&got, spelling.takes) {
                (Taken::Flag(name), Takes::Nothing) | (Taken::NeedsValue(name), Takes::Value)
                    if same_option(name) =>
                {
                    agreed += 1
                }
                (Taken::Ran, Takes::Optional) => agreed += 1,
                // The program refuses the word and runs nothing: an
                // option the grammar lacks makes the prefix ambiguous, or
                // the grammar spells an option the program lacks.
                (Taken::Ambiguous | Taken::Unrecognized, _) => refused.push(prefix),
                _ => failures.push(format!(
                    "{program} {word}: the grammar reads {expected} (`{option}`), the program: {got:?}"
                )),
            }
        }
        let mut summary = format!(
            "{program}: {agreed} long-option prefixes read as the program reads them, {ambiguous} ambiguous \
             to both, {} read by the grammar and refused by the program\n",
            refused.len()
        );
        if !refused.is_empty() {
            summary += &format!("  refused by the program (it runs nothing): {}\n", refused.join(" "));
        }
        eprint!("{summary}");
    }
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_abbreviations_the_issue_names() {
    // (program, harmless arguments, the option the first is read as)
    let cases: &[(&str, &[&str], Option<&str>)] = &[
        ("rm", &["--recur", "--force", "nonexistent"], Some("recursive")),
        ("sort", &["--rev", "/dev/null"], Some("reverse")),
        ("ls", &["--c", "nonexistent"], None),
        ("tar", &["--to-c=cat", "--list", "--file=/dev/null"], Some("to-command")),
    ];
    for &(program, args, option) in cases {
        if let Err(why) = help(program) {
            eprintln!("skipped {program}: {why}");
            continue;
        }
        let words: Vec<Word> = args.iter().map(|a| Word::Lit((*a).to_owned())).collect();
        let reading = argv::read(grammar(program).unwrap(), &words);
        let first = reading.options.first().map(|o| o.option);
        assert_eq!(first.filter(|_| reading.unknown.is_empty()), option, "{program} {args:?}: {reading:?}");
        let dir = TempDir::new(&format!("{program}-named"));
        let whole = taken(program, args, &dir.0);
        assert_eq!(whole, if option.is_some() { Taken::Ran } else { Taken::Ambiguous }, "{program} {args:?}");
        // Given the abbreviation alone, with a value it refuses or without
        // the one it needs, the program stops there and names the option.
        if let Some(option) = option {
            let (name, _) = args[0].split_once('=').unwrap_or((args[0], ""));
            let (word, expected) = if program == "tar" {
                (name.to_owned(), Taken::NeedsValue(format!("--{option}")))
            } else {
                (format!("{name}=x"), Taken::Flag(format!("--{option}")))
            };
            assert_eq!(taken(program, &[&word], &dir.0), expected, "{program} {word}");
        }
    }
}
