//! Code handed on: the script grows by the code its commands hand to
//! shells (`sh -c`, `eval`, text piped into a shell), by the commands of
//! exec vectors (`find -exec`, `xargs`, `watch`), until none is left.

use super::pipes::{gives, Pipes};
use super::programs::{basename, is_posix_sh, is_shell, program, Program};
use super::wrappers::effective;
use super::UNRESOLVED;
use crate::argv;
use crate::finding::{Code, Finding};
use crate::grammar::{grammar, Role};
use crate::shell::{self, Command, Script, Unreadable, Via, Word};

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
