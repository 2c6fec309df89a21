//! Wrappers unwrapped: what a simple command runs once `env`, `sudo`,
//! `timeout`, `xargs` and the like are read by their grammars.

use super::programs::basename;
use crate::argv;
use crate::grammar::{grammar, Grammar, Role};
use crate::shell::Word;

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
