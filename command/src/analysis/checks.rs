//! The structural checks run over a whole script: command words known
//! only when they run, fork bombs, interpreters fed downloaded, decoded or
//! unknown code, and the dangerous operations of what finally runs.

use super::danger::{block_device, dangerous, top_level};
use super::expansion::expand;
use super::pipes::{gives, Fed, Pipes};
use super::programs::{basename, is_downloader, is_interpreter, is_shell, program, Program, DECODERS};
use super::wrappers::{effective, Effective};
use super::{DANGEROUS, UNRESOLVED};
use crate::argv;
use crate::finding::Finding;
use crate::grammar::grammar;
use crate::shell::{self, Command, RedirectKind, Script, Word};

/// The mode the command pack runs in.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// `allowed_commands: ["*"]`: any command but the dangerous ones.
    Any,
    /// An allowlist: only its commands run.
    Listed,
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
