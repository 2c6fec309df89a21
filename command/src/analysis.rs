//! The checks that read a command's structure ([`shell::Script`]): which
//! program each simple command really runs once wrappers are unwrapped by
//! their grammars (`env`, `exec`, `sudo`, `timeout`, `nice`, `xargs`,
//! `strace`, `unshare` ...: [`effective`]), the code that shells, `eval`
//! and exec vectors are handed ([`expand`]), and the built-in dangerous
//! operations on what runs, not on the text ([`check`]).
//!
//! Unknowns are [`Code::Unresolved`]: a command word known
//! only when the command runs (a variable, a substitution, `$IFS` tricks, a
//! function defined in the same command) under an allowlist, or, under
//! `*`, when it feeds or wraps an interpreter or looks like a dangerous
//! operation; code handed to a shell or `eval` that cannot be read first.

use crate::argv;
use crate::finding::{Code, Finding};
use crate::grammar::{grammar, Grammar, Role};
use crate::path;
use crate::shell::{self, Command, RedirectKind, Script, Unreadable, Via, Word};

const UNRESOLVED: Code = Code::Unresolved;
const DANGEROUS: Code = Code::Dangerous;

/// Shells: they run code given with `-c`, on standard input or in a file.
const SHELLS: &[&str] =
    &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh", "rbash"];

/// Other interpreters: they run code given with a flag, on standard input
/// or in a file.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "rscript",
    "deno",
    "bun",
    "pwsh",
    "powershell",
    "osascript",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "jshell",
    "irb",
    "ipython",
];

/// Programs that fetch data from the network.
const DOWNLOADERS: &[&str] = &[
    "curl",
    "curlie",
    "wget",
    "wget2",
    "nc",
    "netcat",
    "ncat",
    "socat",
    "aria2c",
    "http",
    "https",
    "xh",
    "fetch",
    "lwp-request",
    "lwp-download",
    "ftp",
    "tftp",
    "telnet",
];

/// Programs whose output is decoded data, not text anyone wrote.
const DECODERS: &[&str] = &[
    "base64", "base32", "basenc", "xxd", "uudecode", "openssl", "gunzip", "zcat", "gzip", "bzip2", "bunzip2",
    "xz", "unxz", "zstd", "rev", "tr", "od", "printf",
];

/// The mode the command pack runs in.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// `allowed_commands: ["*"]`: any command but the dangerous ones.
    Any,
    /// An allowlist: only its commands run.
    Listed,
}

/// What a simple command runs once its wrappers are unwrapped.
#[derive(Debug, Clone)]
pub struct Effective<'s> {
    /// The programs run, outermost first (`sudo`, `env`, `rm`), each with
    /// its arguments.
    pub layers: Vec<&'s [Word]>,
    /// Code one of the wrappers runs as a shell command (`watch 'x'`,
    /// `su -c 'x'`, `env -S 'x'`).
    pub code: Option<Word>,
    /// Whether the innermost program gets arguments nobody wrote
    /// (`xargs`).
    pub extra_arguments: bool,
    /// The variables a wrapper sets for the program it runs (`env
    /// PATH=x ls`).
    pub assignments: Vec<String>,
}

impl Effective<'_> {
    /// The words of the program that finally runs.
    pub fn inner(&self) -> &[Word] {
        self.layers.last().copied().unwrap_or(&[])
    }

    /// The basename of the program that finally runs, if known.
    pub fn name(&self) -> Option<&str> {
        self.inner().first().and_then(Word::lit).map(basename)
    }
}

/// The basename of a word (`/usr/bin/rm` → `rm`).
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

pub(crate) fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// Whether `name` is a POSIX `sh` (where `time` is no reserved word
/// before an option, or at all).
fn is_posix_sh(name: &str) -> bool {
    matches!(name, "sh" | "dash" | "ash" | "posh")
}

pub(crate) fn is_interpreter(name: &str) -> bool {
    is_shell(name)
        || INTERPRETERS.iter().any(|i| i.eq_ignore_ascii_case(name))
        // python3.12, perl5.36, node18 ...
        || ["python", "perl", "ruby", "node", "php", "lua"].iter().any(|p| {
            name.len() > p.len()
                && name.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
                && name.as_bytes()[p.len()..].iter().all(|b| b.is_ascii_digit() || *b == b'.')
        })
}

/// An interpreter of a language other than the shell's.
pub fn is_foreign_interpreter(name: &str) -> bool {
    is_interpreter(name) && !is_shell(name)
}

pub(crate) fn is_downloader(name: &str) -> bool {
    DOWNLOADERS.contains(&name)
}

/// Whether a grammar's program runs a command its operands give (a
/// wrapper: `sudo`, `timeout`, `nice`, `watch`); the shell code its
/// options give (`env -S`, `su -c`) is an exec vector like any other.
fn wraps(grammar: &Grammar) -> bool {
    grammar.operands.iter().any(|r| matches!(r, Role::Command | Role::ShellWords))
}

/// Unwraps the wrappers of a command's words, each read with its grammar
/// ([`argv::read`]): `timeout --sig=KILL 5 nice -n5 rm` runs `rm`.
pub fn effective(words: &[Word]) -> Effective<'_> {
    let mut out =
        Effective { layers: vec![words], code: None, extra_arguments: false, assignments: Vec::new() };
    let mut rest = words;
    // Each round unwraps one wrapper; a command has few.
    for _ in 0..16 {
        let Some(name) = rest.first().and_then(Word::lit).map(basename) else { break };
        let Some(grammar) = grammar(name).filter(|g| wraps(g)) else { break };
        let reading = argv::read(grammar, &rest[1..]);
        if name == "xargs" {
            out.extra_arguments = true;
        }
        let words: Vec<&Word> =
            reading.operands.iter().filter(|(_, role)| *role == Role::ShellWords).map(|(w, _)| *w).collect();
        if !words.is_empty() {
            // `watch` and `parallel` run their operands, joined, as shell code.
            let texts: Option<Vec<&str>> = words.iter().map(|w| w.lit()).collect();
            out.code = Some(match texts {
                Some(texts) => Word::Lit(texts.join(" ")),
                None => Word::Dyn(Default::default()),
            });
        }
        let Some(mut command) = reading.command else {
            // A wrapper with nothing to run (`sudo -i` starts a shell).
            if matches!(name, "sudo" | "doas" | "run0" | "su" | "runuser" | "pkexec") && out.code.is_none() {
                out.layers.push(&[]);
            }
            break;
        };
        if name == "env" {
            // `env NAME=VALUE ... command`.
            while let Some((variable, _)) =
                command.first().and_then(Word::lit).and_then(|w| w.split_once('='))
            {
                out.assignments.push(variable.to_owned());
                command = &command[1..];
            }
            if command.is_empty() {
                break;
            }
        }
        rest = command;
        out.layers.push(rest);
    }
    out
}

/// Where an interpreter takes its program from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Program<'s> {
    /// Standard input.
    Stdin,
    /// A file (or a substitution standing for one).
    File(&'s Word),
    /// An argument holding the code (`-c`, `-e`).
    Code(&'s Word),
}

/// The program an interpreter runs, from its arguments.
pub(crate) fn program<'s>(name: &str, args: &'s [Word]) -> Program<'s> {
    let shell = is_shell(name) || matches!(name, "source" | ".");
    if matches!(name, "source" | ".") {
        return args.first().map_or(Program::Stdin, Program::File);
    }
    let code_flags: &[&str] = match name {
        n if shell && n == "fish" => &["-c", "--command"],
        _ if shell => &[],
        "node" | "nodejs" | "deno" | "bun" => &["-e", "--eval", "-p", "--print"],
        "php" => &["-r"],
        "awk" | "gawk" | "mawk" | "nawk" => &[],
        "pwsh" | "powershell" => &["-c", "-command", "-Command"],
        _ => &["-c", "-e", "-E"],
    };
    let mut code_next = false;
    let mut at = 0;
    while at < args.len() {
        let word = &args[at];
        let Some(w) = word.lit() else {
            return if code_next { Program::Code(word) } else { Program::File(word) };
        };
        if code_next && !w.starts_with('-') {
            return Program::Code(word);
        }
        if w == "-" || w == "--" {
            return if w == "-" {
                Program::Stdin
            } else if code_next {
                // `bash -c -- 'code'`: `--` ends the options, the code follows.
                args.get(at + 1).map_or(Program::Stdin, Program::Code)
            } else {
                args.get(at + 1).map_or(Program::Stdin, Program::File)
            };
        }
        if shell && (w.starts_with('-') || w.starts_with('+')) && !w.starts_with("--") {
            if w.contains('c') {
                code_next = true;
            }
            if w.contains('s') && !code_next {
                return Program::Stdin;
            }
            if w == "-o" || w == "+o" || w == "-O" || w == "+O" {
                at += 1;
            }
        } else if shell && w.starts_with("--") {
            if w == "--rcfile" || w == "--init-file" {
                at += 1;
            }
        } else if code_flags.contains(&w) {
            return args.get(at + 1).map_or(Program::Stdin, Program::Code);
        } else if !shell && w.starts_with('-') {
            // `python3 -m module`, `-W arg`: a module or option value.
            if matches!(w, "-m") {
                return args.get(at + 1).map_or(Program::Stdin, Program::File);
            }
            if matches!(w, "-W" | "-X" | "-I" | "-r" | "--require" | "-f") && name != "awk" {
                at += 1;
            }
            if matches!(name, "awk" | "gawk" | "mawk" | "nawk") && w == "-f" {
                return args.get(at + 1).map_or(Program::Stdin, Program::File);
            }
        } else {
            if matches!(name, "awk" | "gawk" | "mawk" | "nawk") {
                return Program::Code(word);
            }
            return Program::File(word);
        }
        at += 1;
    }
    if code_next {
        // `sh -c` with nothing after it fails; nothing runs.
        return Program::Stdin;
    }
    Program::Stdin
}

/// Runs the structural checks on `script` (the parsed `command`), adding
/// the code it hands to shells as it finds it. `Err` is the first denial.
pub fn check(script: &mut Script, mode: Mode) -> Result<(), Finding> {
    if !script.expanded {
        expand(script)?;
    }
    let downloads = holds(script, |c| effective(&c.words).name().is_some_and(is_downloader));
    let decodes =
        holds(script, |c| effective(&c.words).name().is_some_and(|n| DECODERS.contains(&n) && n != "printf"));
    let unknown = holds(script, |c| effective(&c.words).inner().first().is_some_and(|w| w.lit().is_none()));
    let mut pipes = Pipes::default();
    let cd_away = script.commands.iter().any(|c| {
        let e = effective(&c.words);
        let Some(name @ ("cd" | "pushd")) = e.name() else { return false };
        // The target as `cd` reads it (`cd -P /` goes to `/`).
        let Some(reading) = grammar(name).map(|g| argv::read(g, &e.inner()[1..])) else { return true };
        match reading.operands.first().map(|(w, _)| *w) {
            None => true,
            Some(Word::Lit(target)) => target == "-" || top_level(target),
            Some(Word::Dyn(_)) => true,
        }
    });
    for (index, command) in script.commands.iter().enumerate() {
        // Outside a pipeline nothing is fed, and nothing given.
        let fed = if command.stages.is_empty() {
            Fed::default()
        } else {
            let (fed, _) = pipes.fed(&command.stages);
            let (given, _, _) = gives(command, downloads[index], decodes[index], unknown[index]);
            pipes.note(&command.stages, given, None, &[]);
            fed
        };
        let e = effective(&command.words);
        let functions = &script.functions;
        // Unknown command words.
        for layer in &e.layers {
            let Some(first) = layer.first() else { continue };
            let name = match first {
                Word::Lit(name) => basename(name),
                Word::Dyn(dynamic) => {
                    // A function running a name known only when it runs
                    // (`$FUNCNAME`, `"$0"`) in a pipeline or the background
                    // may be running itself.
                    if command.function.is_some() && (!command.stages.is_empty() || command.background) {
                        return Err(Finding::new(DANGEROUS, "Fork bomb detected"));
                    }
                    if let Mode::Listed = mode {
                        return Err(Finding::new(
                            UNRESOLVED,
                            "Command runs a program whose name is known only when it runs",
                        ));
                    }
                    unknown_program(layer, dynamic, downloads[index] || fed.downloads, cd_away)?;
                    continue;
                }
            };
            if functions.iter().any(|f| f.name == name) {
                // A function that calls itself, directly or through others
                // (`a(){ b|b& }; b(){ a; }`), in a pipeline or the
                // background multiplies.
                let parallel = !command.stages.is_empty() || command.background;
                if parallel && command.function.as_deref().is_some_and(|f| calls(script, name, f)) {
                    return Err(Finding::new(DANGEROUS, "Fork bomb detected"));
                }
                if let Mode::Listed = mode {
                    return Err(Finding::new(
                        UNRESOLVED,
                        format!("Command calls '{name}', a function it defines itself"),
                    ));
                }
            }
        }
        if let Some(name) = e.name() {
            interpreter(command, &e, name, downloads[index], fed)?;
            if let Some(what) = dangerous(e.inner(), cd_away) {
                return Err(what);
            }
        } else if e.inner().is_empty() && e.layers.len() > 1 {
            // `sudo -i`: a shell reading standard input.
            if fed.downloads {
                return Err(Finding::new(DANGEROUS, "Download-and-execute pattern detected"));
            }
        }
        for redirect in &command.redirects {
            if redirect.kind == RedirectKind::Write {
                if let Some(target) = redirect.target.lit() {
                    if block_device(target) {
                        return Err(Finding::new(
                            DANGEROUS,
                            "Dangerous disk operation: write to a block device",
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether function `from` reaches function `to` through the calls in the
/// bodies of the script's functions (itself included).
fn calls(script: &Script, from: &str, to: &str) -> bool {
    let mut seen: Vec<&str> = Vec::new();
    let mut stack = vec![from];
    while let Some(function) = stack.pop() {
        if function == to {
            return true;
        }
        if seen.contains(&function) || seen.len() > 256 {
            continue;
        }
        seen.push(function);
        for command in script.commands.iter().filter(|c| c.function.as_deref() == Some(function)) {
            for layer in effective(&command.words).layers {
                if let Some(callee) = layer.first().and_then(Word::lit) {
                    if let Some(f) = script.functions.iter().find(|f| f.name == callee) {
                        stack.push(&f.name);
                    }
                }
            }
        }
    }
    false
}

/// Adds the code that commands hand to a shell (`sh -c`, `eval`, text
/// piped into a shell, `find -exec`, `xargs`, `watch`), until none is
/// left; a command is visited once.
pub fn expand(script: &mut Script) -> Result<(), Finding> {
    script.expanded = true;
    let mut pipes = Pipes::default();
    let mut index = 0;
    while index < script.commands.len() {
        let command = &script.commands[index];
        let (fed, innermost) = pipes.fed(&command.stages);
        let fed_text =
            innermost.map(|(t, _)| t).filter(|t| !fed.unwritten && !t.is_empty()).map(str::to_owned);
        // What `xargs` appends: the paths `find` lists (each under one of
        // its starting paths, the first being the starting path itself),
        // else arguments nobody wrote.
        let listed: Option<Vec<String>> =
            innermost.map(|(_, r)| r).filter(|r| !fed.not_found && !r.is_empty()).map(<[String]>::to_vec);
        if !command.stages.is_empty() {
            let (given, printed, roots) = gives(command, false, false, false);
            pipes.note(&command.stages, given, printed.as_deref(), &roots);
        }
        let e = effective(&command.words);
        // Code run by a shell, and whether that shell is a POSIX `sh`
        // (`/bin/sh` for `watch`, `su -c`, `tar --to-command`; `time` is
        // a program there), or `bash` (and `eval`, read as the script).
        let mut code: Vec<(String, bool)> = Vec::new();
        let mut synthetic: Vec<Vec<Word>> = Vec::new();
        let mut doubts: Vec<Finding> = Vec::new();
        if let Some(word) = &e.code {
            match word {
                Word::Lit(text) => {
                    code.push((text.strip_prefix("--split-string=").unwrap_or(text).to_owned(), true))
                }
                Word::Dyn(_) => {
                    return Err(Finding::new(
                        UNRESOLVED,
                        "Command runs shell code that is known only when it runs",
                    ))
                }
            }
        }
        // Each wrapper layer hands its words on; `find -exec` and `xargs`
        // run commands of their own.
        for layer in &e.layers {
            let Some(name) = layer.first().and_then(Word::lit).map(basename) else { continue };
            if name == "find" {
                synthetic.extend(find_exec(layer));
            }
        }
        // The exec vectors of the program that finally runs, read with its
        // grammar: options and operands that are shell code, programs, or
        // code in a language whose reader finds the commands it runs.
        // Every layer's: a wrapper's options run code too (`env -S`,
        // `flock -c`), and a program may have several (`tar -I x
        // --to-command=y`).
        for layer in &e.layers {
            let Some(grammar) = layer.first().and_then(Word::lit).map(basename).and_then(grammar) else {
                continue;
            };
            let reading = argv::read(grammar, &layer[1..]);
            let values = reading
                .options
                .iter()
                .filter_map(|o| o.value.as_ref().map(|v| (v, o.role)))
                .chain(reading.operands.iter().map(|(w, r)| (*w, *r)));
            for (value, role) in values {
                match (role, value) {
                    (Role::Shell, Word::Lit(text)) => code.push((text.clone(), true)),
                    (Role::Program, Word::Lit(text)) => {
                        synthetic.push(text.split_whitespace().map(|w| Word::Lit(w.to_owned())).collect())
                    }
                    (Role::Shell | Role::Program, Word::Dyn(_)) => {
                        return Err(Finding::new(
                            UNRESOLVED,
                            format!("Command hands '{}' a program known only when it runs", reading.name),
                        ))
                    }
                    (
                        Role::SedScript
                        | Role::AwkProgram
                        | Role::GitConfig
                        | Role::SqliteSql
                        | Role::TarAction,
                        Word::Lit(text),
                    ) => match crate::languages::commands(role, text) {
                        Ok(found) => code.extend(found.into_iter().map(|c| (c, true))),
                        Err(doubt) => doubts.push(doubt.within(reading.name)),
                    },
                    (
                        Role::SedScript
                        | Role::AwkProgram
                        | Role::GitConfig
                        | Role::SqliteSql
                        | Role::TarAction,
                        Word::Dyn(_),
                    ) => doubts.push(Finding::new(
                        Code::RuntimeCode,
                        format!("Command hands '{}' code known only when it runs", reading.name),
                    )),
                    _ => {}
                }
            }
        }
        if e.extra_arguments && e.layers.len() > 1 {
            let mut words = e.inner().to_vec();
            if words.is_empty() {
                words.push(Word::Lit("echo".into()));
            }
            match &listed {
                Some(roots) => words.extend(roots.iter().map(|r| Word::Lit(r.clone()))),
                None => words.push(Word::Dyn(Default::default())),
            }
            synthetic.push(words);
        }
        match e.name() {
            Some("eval") => {
                let args = &e.inner()[1..];
                let mut joined = Vec::with_capacity(args.len());
                for arg in args {
                    match arg {
                        Word::Lit(text) => joined.push(text.as_str()),
                        Word::Dyn(_) => {
                            return Err(Finding::new(
                                UNRESOLVED,
                                "Command runs `eval` on text that is known only when it runs",
                            ))
                        }
                    }
                }
                code.push((joined.join(" "), false));
            }
            Some(name) if is_shell(name) => match program(name, &e.inner()[1..]) {
                Program::Code(Word::Lit(text)) => code.push((text.clone(), is_posix_sh(name))),
                Program::Code(Word::Dyn(_)) => {
                    return Err(Finding::new(
                        UNRESOLVED,
                        "Command runs shell code that is known only when it runs",
                    ))
                }
                Program::Stdin => {
                    if let Some(text) = &command.stdin_text {
                        match text {
                            Word::Lit(text) => code.push((text.clone(), is_posix_sh(name))),
                            Word::Dyn(_) => {
                                return Err(Finding::new(
                                    UNRESOLVED,
                                    "Command feeds a shell code that is known only when it runs",
                                ))
                            }
                        }
                    } else if let Some(text) = fed_text {
                        code.push((text, is_posix_sh(name)));
                    }
                }
                Program::File(_) => {}
            },
            _ => {}
        }
        let (depth, stages) = (command.depth, command.stages.clone());
        script.doubts.extend(doubts);
        for (text, posix) in code {
            script.add_as(&text, Some(index), Via::Code, posix).map_err(unreadable)?;
        }
        for words in synthetic {
            if depth + 1 > shell::MAX_NESTING {
                return Err(unreadable(Unreadable::TooDeep));
            }
            let parent = &script.commands[index];
            let command = Command {
                words,
                assignments: Vec::new(),
                redirects: Vec::new(),
                stdin_text: None,
                stages: stages.clone(),
                background: parent.background,
                function: parent.function.clone(),
                parent: Some(index),
                via: Via::Code,
                depth: depth + 1,
            };
            script.push(command).map_err(unreadable)?;
        }
        index += 1;
    }
    Ok(())
}

/// The denial for a command that cannot be read.
pub fn unreadable(why: Unreadable) -> Finding {
    match why {
        Unreadable::TooLong => Finding::new(
            Code::TooLong,
            format!("Command is longer than {} bytes, the most that is checked", shell::MAX_COMMAND_BYTES),
        ),
        Unreadable::TooDeep => Finding::new(
            Code::TooComplex,
            format!("Command nests deeper than {} levels, the most that is checked", shell::MAX_NESTING),
        ),
        Unreadable::TooMuch => Finding::new(
            Code::TooComplex,
            format!(
                "Command runs more code than is checked ({} bytes, {} commands, the code it hands to shells included)",
                shell::MAX_CODE_BYTES,
                shell::MAX_COMMANDS
            ),
        ),
        Unreadable::Syntax(_) => Finding::new(
            Code::Unparsable,
            "Command is not valid shell syntax, so what it runs cannot be checked",
        ),
    }
}

/// The commands `find -exec` runs, `{}` standing for each starting path
/// (read with `find`'s grammar: `find -P / -exec` starts at `/`): once per
/// path for `... ;`, once with every path for `... {} +`. A `{}` in the
/// program's place runs the found files themselves, which only the run
/// knows.
fn find_exec(words: &[Word]) -> Vec<Vec<Word>> {
    let Some(grammar) = grammar("find") else { return Vec::new() };
    let reading = argv::read(grammar, &words[1..]);
    let mut starts: Vec<Word> = reading.operands.iter().take(8).map(|(w, _)| (*w).clone()).collect();
    if starts.is_empty() {
        starts.push(Word::Lit(".".into()));
    }
    let mut out = Vec::new();
    for until in &reading.until {
        let with = |paths: &[Word]| -> Vec<Word> {
            let mut run = Vec::new();
            for (i, w) in until.words.iter().enumerate() {
                match (w.lit(), paths) {
                    (Some(t), _) if t.contains("{}") && i == 0 => run.push(Word::Dyn(Default::default())),
                    (Some("{}"), _) => run.extend(paths.iter().cloned()),
                    // `... ;` puts the path wherever `{}` is in a word
                    // (`sh -c 'rm {}'`).
                    (Some(t), [Word::Lit(path)]) if t.contains("{}") => {
                        run.push(Word::Lit(t.replace("{}", path)))
                    }
                    (Some(t), [_]) if t.contains("{}") => run.push(Word::Dyn(shell::Dynamic {
                        without: t.replace("{}", ""),
                        split: t.split("{}").filter(|p| !p.is_empty()).map(str::to_owned).collect(),
                        substitutes: false,
                    })),
                    _ => run.push(w.clone()),
                }
            }
            run
        };
        if until.batched {
            out.push(with(&starts));
        } else {
            out.extend(starts.iter().map(|start| with(std::slice::from_ref(start))));
        }
    }
    out
}

/// For each command, whether it or a command it holds (in a substitution
/// or code it runs) satisfies `what`.
fn holds(script: &Script, what: impl Fn(&Command) -> bool) -> Vec<bool> {
    let mut found = vec![false; script.commands.len()];
    for (index, command) in script.commands.iter().enumerate() {
        if what(command) {
            let mut at = Some(index);
            while let Some(i) = at {
                if found[i] && i != index {
                    break;
                }
                found[i] = true;
                at = script.commands[i].parent;
            }
        }
    }
    found
}

/// What reaches a command's standard input through pipes, from the
/// earlier stages of the pipelines it sits in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fed {
    /// A download (a downloader, or a command holding one).
    pub downloads: bool,
    /// Decoded data (`base64 -d` ...).
    pub decodes: bool,
    /// The output of a program whose name is known only when it runs.
    pub unknown: bool,
    /// Output of anything but `echo` and `printf` of known words.
    pub unwritten: bool,
    /// Output of anything but `find` from known starting paths.
    pub not_found: bool,
}

impl std::ops::BitOrAssign for Fed {
    fn bitor_assign(&mut self, other: Fed) {
        self.downloads |= other.downloads;
        self.decodes |= other.decodes;
        self.unknown |= other.unknown;
        self.unwritten |= other.unwritten;
        self.not_found |= other.not_found;
    }
}

/// The pipelines' stages seen so far, noted in source order (a stage's
/// commands come before the next stage's), so that what feeds a command is
/// known in constant time per enclosing pipeline: linear in all.
#[derive(Debug, Default)]
pub(crate) struct Pipes {
    /// Per pipeline: the stage being noted, what its earlier stages give,
    /// what it gives so far, and the text the earlier stages print.
    pipelines: Vec<PipeState>,
}

#[derive(Debug, Default, Clone)]
struct PipeState {
    stage: u32,
    before: Fed,
    current: Fed,
    printed_before: String,
    printed_current: String,
    roots_before: Vec<String>,
    roots_current: Vec<String>,
}

impl Pipes {
    fn state(&mut self, pipeline: u32) -> &mut PipeState {
        let at = pipeline as usize;
        if self.pipelines.len() <= at {
            self.pipelines.resize(at + 1, PipeState::default());
        }
        &mut self.pipelines[at]
    }

    /// Moves pipeline `pipeline` on to `stage` if it is further.
    fn advance(&mut self, pipeline: u32, stage: u32) {
        let state = self.state(pipeline);
        if stage > state.stage {
            let current = std::mem::take(&mut state.current);
            state.before |= current;
            let printed = std::mem::take(&mut state.printed_current);
            state.printed_before.push_str(&printed);
            let roots = std::mem::take(&mut state.roots_current);
            state.roots_before.extend(roots);
            state.stage = stage;
        }
    }

    /// What reaches a command at `stages`, with the text printed into its
    /// innermost pipeline and the paths `find` lists into it.
    pub(crate) fn fed(&mut self, stages: &[(u32, u32)]) -> (Fed, Option<(&str, &[String])>) {
        let mut fed = Fed::default();
        for &(pipeline, stage) in stages {
            self.advance(pipeline, stage);
            fed |= self.state(pipeline).before;
        }
        let innermost = stages.last().map(|&(p, _)| {
            let state = &self.pipelines[p as usize];
            (state.printed_before.as_str(), state.roots_before.as_slice())
        });
        (fed, innermost)
    }

    /// Notes what a command at `stages` gives the later stages.
    pub(crate) fn note(
        &mut self,
        stages: &[(u32, u32)],
        gives: Fed,
        printed: Option<&str>,
        roots: &[String],
    ) {
        for &(pipeline, stage) in stages {
            self.advance(pipeline, stage);
            let state = self.state(pipeline);
            if stage < state.stage {
                // Code run by a command of an earlier stage, added later:
                // it feeds every stage after its own.
                state.before |= gives;
            } else {
                state.current |= gives;
                if let Some(text) = printed {
                    state.printed_current.push_str(text);
                }
                state.roots_current.extend(roots.iter().take(8).cloned());
            }
        }
    }
}

/// The text `echo` or `printf` prints, when all its words are known.
fn printed_by(words: &[Word]) -> Option<String> {
    let e = effective(words);
    if !matches!(e.name(), Some("echo" | "printf")) {
        return None;
    }
    let words: Option<Vec<&str>> = e.inner()[1..].iter().map(Word::lit).collect();
    let words: Vec<&str> =
        words?.into_iter().skip_while(|w| matches!(*w, "-n" | "-e" | "-E" | "-ne" | "-en")).collect();
    let mut text = words.join(" ");
    // `printf` and `echo -e` decode escapes and formats (`r\x6d` prints
    // `rm`): what they print is not the text written.
    if text.contains(['\\', '%']) {
        return None;
    }
    text.push('\n');
    Some(text)
}

/// The starting paths of a `find`, when all are known (`.` when it names
/// none).
fn found_by(words: &[Word]) -> Option<Vec<String>> {
    let e = effective(words);
    if e.name() != Some("find") {
        return None;
    }
    let starts: Option<Vec<String>> = e.inner()[1..]
        .iter()
        .take_while(|w| w.lit().is_none_or(|w| !w.starts_with('-') && w != "(" && w != "!"))
        .map(|w| w.lit().map(str::to_owned))
        .collect();
    starts.map(|s| if s.is_empty() { vec![".".to_owned()] } else { s })
}

/// What a command gives the later stages of its pipelines, from what it
/// and the commands it holds are: what it feeds, the text it prints, the
/// paths it lists.
pub(crate) fn gives(
    command: &Command,
    downloads: bool,
    decodes: bool,
    unknown: bool,
) -> (Fed, Option<String>, Vec<String>) {
    let odd = downloads || decodes || unknown;
    if command.words.is_empty() {
        let fed = Fed { downloads, decodes, unknown, unwritten: odd, not_found: odd };
        return (fed, None, Vec::new());
    }
    let printed = printed_by(&command.words);
    let roots = found_by(&command.words);
    let fed = Fed { downloads, decodes, unknown, unwritten: printed.is_none(), not_found: roots.is_none() };
    (fed, printed, roots.unwrap_or_default())
}

/// The checks on an interpreter (a shell, `source`, Python ...): it must
/// not run downloaded, decoded or unknown code.
fn interpreter(
    command: &Command,
    e: &Effective<'_>,
    name: &str,
    downloads: bool,
    fed: Fed,
) -> Result<(), Finding> {
    let sources = matches!(name, "source" | "." | "eval");
    if !is_interpreter(name) && !sources {
        return Ok(());
    }
    let download_and_run = || Finding::new(DANGEROUS, "Download-and-execute pattern detected");
    // Code from a substitution or process substitution in its arguments,
    // its here-string or its redirections.
    if downloads {
        return Err(download_and_run());
    }
    let shell_like = is_shell(name) || sources;
    match program(name, &e.inner()[1..]) {
        Program::File(Word::Dyn(d)) if d.substitutes && shell_like => {
            return Err(Finding::new(
                UNRESOLVED,
                format!("Command runs '{name}' on code from a substitution"),
            ));
        }
        Program::File(Word::Lit(path))
            if shell_like && matches!(path.as_str(), "/dev/stdin" | "/dev/fd/0") => {}
        Program::File(_) | Program::Code(_) => return Ok(()),
        Program::Stdin => {}
    }
    if name == "eval" {
        return Ok(());
    }
    // It reads its program from standard input.
    let from_substitution = command
        .redirects
        .iter()
        .any(|r| r.kind == RedirectKind::Read && matches!(&r.target, Word::Dyn(d) if d.substitutes));
    if from_substitution {
        return Err(Finding::new(UNRESOLVED, format!("Command runs '{name}' on code from a substitution")));
    }
    if fed.downloads {
        return Err(download_and_run());
    }
    if fed.unknown {
        return Err(Finding::new(
            UNRESOLVED,
            format!("Command pipes the output of an unknown program into '{name}'"),
        ));
    }
    if fed.decodes {
        return Err(Finding::new(DANGEROUS, format!("Decoded data piped into an interpreter ('{name}')")));
    }
    Ok(())
}

/// The checks on a program whose name is known only when it runs (`$x`,
/// `rm${IFS}-rf`), under `*`: denied when it feeds or wraps an interpreter
/// or looks like a dangerous operation.
fn unknown_program(
    words: &[Word],
    dynamic: &shell::Dynamic,
    downloads: bool,
    cd_away: bool,
) -> Result<(), Finding> {
    let unknown = || {
        Finding::new(
            UNRESOLVED,
            "Command runs a program whose name is known only when it runs, in a way that could be dangerous",
        )
    };
    // What `$IFS` tricks run: the literal parts, split where expansions stand.
    let mut split: Vec<Word> = dynamic.split.iter().map(|s| Word::Lit(s.clone())).collect();
    split.extend(words[1..].iter().cloned());
    if let Some(name) = split.first().and_then(Word::lit).map(basename) {
        if is_interpreter(name) || is_downloader(name) || matches!(name, "eval" | "source" | ".") {
            return Err(unknown());
        }
        if dangerous(&split, cd_away).is_some() {
            return Err(unknown());
        }
    }
    // Its arguments would make a dangerous program dangerous.
    for program in ["rm", "chmod", "chown", "chgrp", "dd", "find", "shred", "tee", "cp"] {
        let mut as_program = vec![Word::Lit(program.into())];
        as_program.extend(words[1..].iter().cloned());
        if dangerous(&as_program, cd_away).is_some() {
            return Err(unknown());
        }
    }
    // It wraps a download, or is fed one, or feeds an interpreter.
    if downloads {
        return Err(unknown());
    }
    Ok(())
}

/// Whether `path` is `/`, a top-level directory (`/etc`, `/mnt/`), the
/// home directory (`~`, `$HOME`), a glob over one of them (`/*`, `/e*`,
/// `/{a,b}`), or only `..` steps; after `.`, `..` and repeated slashes are
/// resolved as the kernel would on names.
pub fn top_level(path: &str) -> bool {
    let normal;
    let path = if path.starts_with('/') {
        // `/proc/self/root/*` is `/*`; `//`, `/./` and `..` resolved.
        let glob = path.ends_with("/*") || path.ends_with("/.*");
        normal = format!("{}{}", path::normalize(path, None).path, if glob { "/*" } else { "" });
        normal.as_str()
    } else {
        path
    };
    let rooted = path.starts_with('/');
    let path = path.trim_end_matches("/*").trim_end_matches("/.*");
    if path.is_empty() {
        return rooted;
    }
    let home = path == "~" || path.starts_with("~/") || (path.starts_with('~') && !path.contains('/'));
    let absolute = path.starts_with('/') || home;
    if !absolute {
        // Relative: a path that climbs out of the working directory, to
        // the folder above or a glob there (`..`, `../*`, and
        // `x/../../../../*`, which climbs through a real folder first).
        let normal = path::normalize(path, None);
        if !normal.escapes {
            return false;
        }
        let below = normal.path.trim_start_matches("../");
        return below.is_empty()
            || below == ".."
            || below.split('/').next().is_some_and(|p| p.contains(['*', '?', '[', '{']));
    }
    let rest = if home { path.split_once('/').map_or("", |(_, r)| r) } else { path };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let glob_first = parts.first().is_some_and(|p| p.contains(['*', '?', '[', '{']));
    if home {
        return parts.is_empty() || glob_first;
    }
    parts.len() <= 1 || glob_first
}

/// Whether `path` names a disk (`/dev/sda`, `/dev/nvme0n1`, `/dev/mmcblk0`
/// and their partitions, device-mapper and RAID devices).
pub fn block_device(path: &str) -> bool {
    let normal = path::normalize(path, None).path;
    let Some(device) = normal.strip_prefix("/dev/") else { return false };
    const DISKS: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "mapper/", "nbd", "zd",
        "rbd", "bcache",
    ];
    DISKS.iter().any(|d| device.starts_with(d)) || device.starts_with("disk/by-")
}

/// The built-in dangerous operations, on one program and its arguments:
/// recursive deletion of `/`, a top-level directory or the home directory
/// (or of what is known only when it runs); disk writes and filesystem
/// creation; recursive or root-wide world-writable modes and recursive
/// owner changes of top-level directories. `cd_away` says the command
/// changes to a directory that is top-level or unknown.
pub fn dangerous(words: &[Word], cd_away: bool) -> Option<Finding> {
    let name = basename(words.first()?.lit()?);
    let args = &words[1..];
    let lits = || args.iter().filter_map(Word::lit);
    let (flags, operands) = split_flags(args);
    match name {
        "rm" => {
            // Read as `rm` reads its options: `--recur`, `--r`, `-Rf`.
            let reading = argv::read(grammar("rm")?, args);
            let no_preserve_root = reading.has("no-preserve-root");
            if !reading.has("recursive") && !no_preserve_root {
                return None;
            }
            let destructive = || Finding::new(DANGEROUS, "Destructive file operation: rm -rf / or rm -rf /*");
            if no_preserve_root {
                return Some(destructive());
            }
            for (operand, _) in &reading.operands {
                match operand {
                    Word::Lit(target) => {
                        if top_level(target) || cd_away && relative_everything(target) {
                            return Some(destructive());
                        }
                    }
                    Word::Dyn(d) => {
                        return Some(if top_level(&d.without) && !d.without.is_empty() {
                            destructive()
                        } else {
                            Finding::new(
                                UNRESOLVED,
                                "Recursive deletion of a path that is known only when it runs",
                            )
                        })
                    }
                }
            }
            None
        }
        "find" => {
            let deletes = lits().any(|w| w == "-delete");
            if !deletes {
                return None;
            }
            // The starting paths, after `-P`, `-L`, `-H` and `-D`.
            let reading = argv::read(grammar("find")?, args);
            let starts: Vec<&Word> = reading.operands.iter().map(|(w, _)| *w).collect();
            let root = starts.iter().any(|w| match w {
                Word::Lit(p) => top_level(p) || cd_away && relative_everything(p),
                Word::Dyn(_) => true,
            }) || (starts.is_empty() && cd_away);
            root.then(|| {
                Finding::new(
                    DANGEROUS,
                    "Destructive file operation: find -delete on / or a top-level directory",
                )
            })
        }
        "dd" => {
            let reads_device = lits().any(|w| w.starts_with("if=/dev/"));
            let writes_disk = lits().any(|w| w.strip_prefix("of=").is_some_and(block_device))
                || args.iter().any(|w| matches!(w, Word::Dyn(d) if d.without.starts_with("of=")));
            (reads_device || writes_disk)
                .then(|| Finding::new(DANGEROUS, "Dangerous disk operation: dd if=/dev/"))
        }
        n if n.starts_with("mkfs")
            || matches!(
                n,
                "mke2fs" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "mkfatfs" | "mformat" | "mkudffs"
            )
            || n == "mkswap" && operands.iter().any(|w| w.lit().is_some_and(block_device)) =>
        {
            Some(Finding::new(DANGEROUS, "Filesystem creation: mkfs"))
        }
        // Encryption headers written or erased make a disk unreadable.
        "cryptsetup"
            if lits()
                .any(|w| matches!(w.to_ascii_lowercase().as_str(), "luksformat" | "erase" | "lukserase")) =>
        {
            Some(Finding::new(DANGEROUS, "Dangerous disk operation: cryptsetup formats or erases a device"))
        }
        // `dd`'s forensic forks read `if=` and `of=` as `dd` does.
        "dcfldd" | "dc3dd" => dangerous(&[&[Word::Lit("dd".into())], args].concat(), cd_away),
        "setfacl" => {
            // An ACL entry giving others (`o::`, `other::`) write, recursive
            // or on a top-level path.
            let recursive = lits().any(|w| w == "-R" || w == "--recursive" || short(w, 'R'));
            let world = lits().any(|w| {
                w.split(',').any(|entry| {
                    let entry = entry.trim_start_matches("d:").trim_start_matches("default:");
                    (entry.starts_with("o:") || entry.starts_with("other:"))
                        && entry.rsplit(':').next().is_some_and(|p| p.contains('w'))
                })
            });
            let top = operands.iter().any(|w| w.lit().is_some_and(top_level));
            (world && (recursive || top))
                .then(|| Finding::new(DANGEROUS, "Recursive world-writable permissions (setfacl o::rwx)"))
        }
        "shred" | "wipefs" | "blkdiscard" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "sgdisk" | "gdisk"
        | "tee" | "cp" | "mv" | "cat" | "badblocks" | "hdparm" | "pv" => {
            let write_target: Vec<&Word> = match name {
                "tee" => operands.clone(),
                "cp" | "mv" | "cat" => {
                    operands.last().copied().into_iter().filter(|_| name != "cat").collect()
                }
                _ => operands.clone(),
            };
            write_target
                .iter()
                .any(|w| w.lit().is_some_and(block_device))
                .then(|| Finding::new(DANGEROUS, "Dangerous disk operation: write to a block device"))
        }
        "chmod" | "chown" | "chgrp" => {
            // Read as the program reads its options (`--recur`, `-R`).
            let reading = argv::read(grammar(name)?, args);
            let recursive = reading.has("recursive");
            // `--reference` copies another file's mode, which the command
            // does not show: every operand is then a target.
            let reference = reading.has("reference");
            let operands: Vec<&Word> = reading.operands.iter().map(|(w, _)| *w).collect();
            let (mode, targets) = if name == "chmod" && !reference {
                (
                    operands.first().and_then(|w| w.lit()).unwrap_or_default(),
                    operands.get(1..).unwrap_or_default(),
                )
            } else {
                ("", operands.get(usize::from(name != "chmod")..).unwrap_or_default())
            };
            let world_writable = name == "chmod"
                && (reference || world_writable(mode) || flags.iter().any(|f| world_writable(f)));
            let top = targets.iter().any(|w| match w {
                Word::Lit(p) => top_level(p),
                Word::Dyn(d) => top_level(&d.without),
            });
            if world_writable && (recursive || top) {
                return Some(Finding::new(DANGEROUS, "Recursive world-writable permissions (chmod -R 777)"));
            }
            (recursive && top)
                .then(|| Finding::new(DANGEROUS, format!("Recursive {name} of / or a top-level directory")))
        }
        _ => None,
    }
}

/// `*`, `.`, `./*`, `.*`, or a glob over the entries (`[a-z]*`): what a
/// recursive deletion takes from the working directory.
fn relative_everything(path: &str) -> bool {
    matches!(path, "." | "./" | "./*" | ".*" | "*/" | "./.*")
        // Any glob over the folder's entries: `*`, `[a-z]*`, `?*`.
        || path.trim_start_matches("./").split('/').next().is_some_and(|p| p.contains(['*', '?', '[']))
}

/// A short flag cluster holding `letter` (`-rf` holds `r`).
fn short(flag: &str, letter: char) -> bool {
    flag.starts_with('-') && !flag.starts_with("--") && flag[1..].contains(letter)
}

/// The flags and the operands of a program's arguments (flags stop at
/// `--`).
fn split_flags(args: &[Word]) -> (Vec<&str>, Vec<&Word>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut done = false;
    for arg in args {
        match arg.lit() {
            Some("--") if !done => done = true,
            Some(w) if !done && w.starts_with('-') && w.len() > 1 => flags.push(w),
            _ => operands.push(arg),
        }
    }
    (flags, operands)
}

/// Whether a `chmod` mode lets everyone write: octal with the others'
/// write bit (`777`, `0666`), or a symbolic clause giving `o` or `a` the
/// `w` permission or a copy of another class's (`a+rwx`, `o=w`, `ugo+w`,
/// `go=u`).
fn world_writable(mode: &str) -> bool {
    let mode = mode.trim_start_matches('-');
    if !mode.is_empty() && mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return mode.as_bytes().last().is_some_and(|d| (d - b'0') & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let op = clause.find(['+', '=']);
        let Some(op) = op else { return false };
        let who = &clause[..op];
        let perms = &clause[op + 1..];
        // `o=u`, `go+g`: others get the owner's or the group's
        // permissions, which may include write.
        (who.contains('o') || who.contains('a')) && perms.contains(['w', 'u', 'g'])
    })
}
