//! The facts a policy needs about a command: every program it runs (each
//! simple command, each program a wrapper or an exec vector runs, the code
//! handed to shells), each read with its grammar; the environment changes
//! that affect what runs; code made at run time handed to an interpreter;
//! what could not be known. [`Model::read`] gives them; [`summary`] is the
//! short form the Cedar provider's `context.command` carries.

use crate::analysis::{self, basename, effective, is_interpreter};
use crate::argv;
use crate::finding::{Code, Finding};
use crate::grammar::{grammar, Role};
use crate::path;
use crate::shell::{self, RedirectKind, Script, Via, Word};
use crate::text::{foreign_code, injection};

/// What a command runs, in short, for a policy (the Cedar provider's
/// `context.command`): decided on the structure, never on the text, and
/// unknowns said, not guessed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Every program it runs as written (`/usr/bin/rm`): each simple
    /// command, each program a wrapper runs (`env`, `timeout`, `sudo`
    /// ...), the code it hands to shells, `eval`, `find -exec` and
    /// `xargs`; sorted, once each.
    pub programs: Vec<String>,
    /// Their basenames (`rm`), sorted, once each.
    pub names: Vec<String>,
    /// Whether something it runs is known only when it runs: a program
    /// name or shell code from a variable or a substitution, a function it
    /// defines itself, a variable that changes what runs (`PATH=...`,
    /// `LD_PRELOAD=...`), or a command that cannot be read at all (too
    /// long, too deep, not valid syntax).
    pub unknown: bool,
    /// Whether it holds one of the built-in dangerous operations
    /// (`oap.dangerous_operation`, `oap.command_injection_detected`:
    /// `rm -rf /`, download-and-run, disk writes, fork bombs ...).
    pub dangerous: bool,
    /// Whether it writes to a file outside the working directory (anything
    /// but `/dev/null`, a descriptor or a relative path without `..`).
    pub writes_outside: bool,
    /// Whether a program it runs has no grammar, or is given an option its
    /// grammar does not know, or an exec vector's code cannot be read
    /// (`git -c` of a setting not known to run nothing): what it runs
    /// cannot be said.
    pub unverified: bool,
    /// Whether it changes a variable that changes what runs (`PATH`,
    /// `LD_PRELOAD`, `GIT_SSH_COMMAND` ...), anywhere in the script.
    pub environment: bool,
    /// Whether it hands an interpreter code made at run time (a pipe from
    /// a program, `/dev/stdin`, the network, a file it writes itself).
    pub runtime_code: bool,
}

/// Reads `command` as the OAP provider's command pack does, without a
/// passport's limits.
pub fn summary(command: &str) -> Summary {
    let mut summary = Summary { dangerous: injection(command), ..Summary::default() };
    let mut model = match Model::read(command.trim()) {
        Ok(model) => model,
        Err(finding) => {
            if finding.code == Code::Dangerous {
                summary.dangerous = true;
            } else {
                summary.unknown = true;
            }
            return summary;
        }
    };
    summary.writes_outside =
        model.script.commands.iter().any(|c| c.via == crate::shell::Via::Direct && writes_outside(c));
    match analysis::check(&mut model.script, analysis::Mode::Any) {
        Ok(()) => {}
        Err(finding) if finding.code == Code::Dangerous => summary.dangerous = true,
        Err(_) => summary.unknown = true,
    }
    if foreign_code(&model.script).is_some() {
        summary.dangerous = true;
    }
    summary.environment = !model.environment.is_empty();
    summary.runtime_code = !model.runtime_code.is_empty();
    // A variable that changes what runs, or code made at run time, makes
    // what runs unknown too.
    summary.unknown |= summary.environment || summary.runtime_code;
    summary.unverified = !model.doubts.is_empty();
    for run in &model.runs {
        match run.words.first() {
            Some(crate::shell::Word::Lit(program)) => {
                if model.script.functions.iter().any(|f| f.name == *program) {
                    summary.unknown = true;
                }
                summary.unverified |= !run.known || !run.unknown.is_empty();
                summary.programs.push(program.clone());
                summary.names.push(basename(program).to_owned());
            }
            Some(crate::shell::Word::Dyn(_)) => summary.unknown = true,
            None => {}
        }
    }
    for list in [&mut summary.programs, &mut summary.names] {
        list.sort_unstable();
        list.dedup();
    }
    summary
}

/// Variables that change what a command runs or how a shell starts (with
/// `LD_*`, `DYLD_*`, `BASH_FUNC_*` and git's command variables: see
/// [`affects_what_runs`]).
pub const UNSAFE_VARIABLES: &[&str] = &[
    "PATH",
    "IFS",
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "PS4",
    "GCONV_PATH",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "RUBYOPT",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "EDITOR",
    "PAGER",
    "BROWSER",
];

/// Whether a command writes, by a redirection, to a file outside the
/// working directory: anything but `/dev/null`, `/dev/stdout`,
/// `/dev/stderr`, a descriptor, or a relative path that stays inside
/// once normalised.
pub fn writes_outside(command: &shell::Command) -> bool {
    command.redirects.iter().any(|redirect| {
        redirect.kind == RedirectKind::Write
            && !redirect.target.lit().is_some_and(|t| {
                let normal = path::normalize(t, None);
                matches!(normal.path.as_str(), "/dev/null" | "/dev/stdout" | "/dev/stderr")
                    || (!t.starts_with('/') && !t.starts_with('~') && !normal.escapes)
            })
    })
}

/// One program a command runs.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its words: the program as written, then its arguments.
    pub words: Vec<Word>,
    /// Which simple command of [`Model::script`] it belongs to.
    pub command: usize,
    /// The wrapper it runs under (`0`: the command itself, `1`: what the
    /// first wrapper runs ...).
    pub layer: usize,
    /// The program and subcommands, as read (`git status`); empty when
    /// the program's name is known only when it runs.
    pub name: String,
    /// Whether the guard has its grammar.
    pub known: bool,
    /// What its grammar does not know in its arguments (options,
    /// subcommands); empty when all was read.
    pub unknown: Vec<String>,
    /// Whether it runs the project's own code by design (`make`, `npm`).
    pub runs_project_code: bool,
    /// How its code reached the script.
    pub via: Via,
}

impl Run {
    /// The program's basename, when known (`rm` for `/bin/rm`).
    pub fn program(&self) -> Option<&str> {
        self.words.first().and_then(Word::lit).map(basename)
    }
}

/// What a command runs and does, for a policy to judge.
#[derive(Debug, Clone)]
pub struct Model {
    /// The script, with the code handed to shells and exec vectors added.
    pub script: Script,
    /// Every program it runs, in order.
    pub runs: Vec<Run>,
    /// Variables it changes that affect what runs (`PATH`, `LD_PRELOAD`
    /// ...), however set: before a command, as a statement, `export`,
    /// `declare -x`, `env NAME=...`.
    pub environment: Vec<String>,
    /// Code made at run time handed to an interpreter, and the exec
    /// vectors whose code cannot be read: what each is.
    pub runtime_code: Vec<Finding>,
    /// What the exec vectors' readers could not verify.
    pub doubts: Vec<Finding>,
}

/// Builtins that set variables from their `NAME=VALUE` arguments.
const SETTERS: &[&str] = &["export", "declare", "typeset", "readonly", "local"];

/// Whether changing `variable` changes what runs or how a program starts.
pub fn affects_what_runs(variable: &str) -> bool {
    UNSAFE_VARIABLES.contains(&variable)
        || variable.starts_with("LD_")
        || variable.starts_with("DYLD_")
        || variable.starts_with("BASH_FUNC_")
        || matches!(
            variable,
            "GIT_SSH"
                | "GIT_PAGER"
                | "GIT_EDITOR"
                | "GIT_ASKPASS"
                | "GIT_EXTERNAL_DIFF"
                | "GIT_PROXY_COMMAND"
                | "GIT_CONFIG"
                | "GIT_CONFIG_GLOBAL"
                | "GIT_CONFIG_SYSTEM"
                | "GIT_CONFIG_COUNT"
                | "GIT_TEMPLATE_DIR"
                | "SSH_ASKPASS"
                | "SUDO_ASKPASS"
                | "VISUAL"
                | "MANPAGER"
                | "LESSOPEN"
                | "LESSCLOSE"
                | "PYTHONHOME"
                | "PYTHONINSPECT"
                | "RUBYLIB"
                | "NODE_PATH"
                | "JAVA_TOOL_OPTIONS"
                | "_JAVA_OPTIONS"
                | "CDPATH"
                | "HOME"
        )
        || (variable.starts_with("GIT_CONFIG_KEY_") || variable.starts_with("GIT_CONFIG_VALUE_"))
}

impl Model {
    /// Reads `command`: the script as `bash` reads it, the code its
    /// programs hand on added, every program read with its grammar.
    /// `Err` when it cannot be read at all (too long, too deep, not
    /// shell syntax) or hands on code known only when it runs.
    pub fn read(command: &str) -> Result<Model, Finding> {
        let mut script = shell::parse(command).map_err(analysis::unreadable)?;
        analysis::expand(&mut script)?;
        let mut model = Model {
            runs: Vec::new(),
            environment: Vec::new(),
            runtime_code: Vec::new(),
            doubts: Vec::new(),
            script: Script::default(),
        };
        // An exec vector's code made at run time is code made at run time.
        for doubt in std::mem::take(&mut script.doubts) {
            if doubt.code == Code::RuntimeCode {
                model.runtime_code.push(doubt);
            } else {
                model.doubts.push(doubt);
            }
        }
        // A set: a script may write many files and run many interpreters.
        let mut written: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut pipes = analysis::Pipes::default();
        for (index, command) in script.commands.iter().enumerate() {
            // Outside a pipeline nothing is fed, and nothing given.
            let unwritten_input = !command.stages.is_empty() && {
                let (fed, _) = pipes.fed(&command.stages);
                let (given, printed, roots) = analysis::gives(command, false, false, false);
                pipes.note(&command.stages, given, printed.as_deref(), &roots);
                fed.unwritten
            };
            for variable in &command.assignments {
                if affects_what_runs(variable) {
                    model.environment.push(variable.clone());
                }
            }
            let e = effective(&command.words);
            model.environment.extend(e.assignments.iter().filter(|v| affects_what_runs(v)).cloned());
            for (layer, words) in e.layers.iter().enumerate() {
                let Some(first) = words.first() else { continue };
                let name = first.lit().map(basename).unwrap_or_default();
                let grammar = (!name.is_empty()).then(|| grammar(name)).flatten();
                let reading = grammar.map(|g| argv::read(g, &words[1..]));
                if SETTERS.contains(&name) {
                    for word in &words[1..] {
                        let variable = word.lit().and_then(|w| w.split_once('=')).map(|(v, _)| v);
                        if let Some(variable) = variable.filter(|v| affects_what_runs(v)) {
                            model.environment.push(variable.to_owned());
                        }
                    }
                }
                if let Some(reading) = &reading {
                    for (value, role) in reading
                        .options
                        .iter()
                        .filter_map(|o| o.value.as_ref().map(|v| (v, o.role)))
                        .chain(reading.operands.iter().map(|(w, r)| (*w, *r)))
                    {
                        if let (Role::Write, Word::Lit(path)) = (role, value) {
                            written.insert(path::normalize(path, None).path);
                        }
                    }
                }
                model.runs.push(Run {
                    words: words.to_vec(),
                    command: index,
                    layer,
                    name: reading.as_ref().map_or(name, |r| r.name).to_owned(),
                    known: grammar.is_some(),
                    unknown: reading.as_ref().map(|r| r.unknown.clone()).unwrap_or_default(),
                    runs_project_code: grammar.is_some_and(|g| g.runs_project_code),
                    via: command.via,
                });
            }
            for redirect in &command.redirects {
                if let Some(target) = redirect.target.lit() {
                    if redirect.kind == RedirectKind::Write {
                        written.insert(path::normalize(target, None).path);
                    }
                    if path::is_network(target) && e.name().is_some_and(is_interpreter) {
                        model.runtime_code.push(Finding::new(
                            Code::RuntimeCode,
                            "Command connects an interpreter to the network (/dev/tcp, /dev/udp)",
                        ));
                    }
                }
            }
            if let Some(finding) = runtime_code(&script, index, &e, &written, unwritten_input) {
                model.runtime_code.push(finding);
            }
        }
        model.script = script;
        Ok(model)
    }
}

/// Whether the interpreter command `index` runs takes its program from
/// something known only at run time: a pipe from anything but `echo` or
/// `printf` of known text, a descriptor (`/dev/stdin`, `/proc/self/fd/0`),
/// the network, a process substitution, or a file written earlier in the
/// script.
fn runtime_code(
    script: &Script,
    index: usize,
    e: &analysis::Effective<'_>,
    written: &std::collections::HashSet<String>,
    unwritten_input: bool,
) -> Option<Finding> {
    let command = &script.commands[index];
    let name = e.name()?;
    let sources = matches!(name, "source" | ".");
    if !is_interpreter(name) && !sources {
        return None;
    }
    let finding =
        |what: &str| Some(Finding::new(Code::RuntimeCode, format!("Command runs '{name}' on {what}")));
    match analysis::program(name, &e.inner()[1..]) {
        analysis::Program::File(Word::Lit(file)) => {
            let normal = path::normalize(file, None);
            if normal.descriptor {
                return finding("a descriptor's content (code made at run time)");
            }
            if path::is_network(file) {
                return finding("code from the network");
            }
            if written.contains(&normal.path) {
                return finding("a file the same command writes");
            }
            None
        }
        analysis::Program::File(Word::Dyn(d)) if d.substitutes => finding("code from a substitution"),
        analysis::Program::Stdin if command.stdin_text.is_none() => {
            let redirected = command.redirects.iter().find(|r| r.kind == RedirectKind::Read);
            if let Some(redirect) = redirected {
                return match redirect.target.lit() {
                    Some(file) if path::is_network(file) => finding("code from the network"),
                    Some(file) if written.contains(&path::normalize(file, None).path) => {
                        finding("a file the same command writes")
                    }
                    Some(_) => None,
                    None => finding("code from a file known only when it runs"),
                };
            }
            if unwritten_input {
                return finding("its input, which another program makes at run time");
            }
            if command.via == Via::Code {
                // A program an exec vector runs reading its input: a shell
                // on a network connection (`nc -e /bin/sh`).
                let parent = command.parent.map(|p| effective(&script.commands[p].words));
                if parent.and_then(|p| p.name().map(analysis::is_downloader)).unwrap_or(false) {
                    return finding("a network connection");
                }
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_lists_what_runs_and_says_what_is_not_known() {
        let s = summary("curl -s x | env FOO=1 /usr/bin/timeout 5 sh -c 'rm a; $X b' > /tmp/o");
        assert_eq!(s.programs, ["/usr/bin/timeout", "curl", "env", "rm", "sh"]);
        assert_eq!(s.names, ["curl", "env", "rm", "sh", "timeout"]);
        assert!(s.unknown && s.writes_outside, "{s:?}");
        assert_eq!(
            summary("ls -la"),
            Summary { programs: vec!["ls".into()], names: vec!["ls".into()], ..Summary::default() }
        );
        assert!(summary("rm -rf /").dangerous);
        assert!(summary("echo `id`").dangerous, "an injection");
        let unreadable = summary("if then (");
        assert!(unreadable.unknown && unreadable.programs.is_empty());
        assert!(summary("LD_PRELOAD=x.so ls").unknown);
        assert!(summary("g() { ls; }; g").unknown);
    }

    fn runs(command: &str) -> Vec<Vec<String>> {
        let model = Model::read(command).unwrap();
        model
            .runs
            .iter()
            .map(|r| r.words.iter().map(|w| w.lit().unwrap_or("<dyn>").to_owned()).collect())
            .collect()
    }

    #[test]
    fn find_exec_runs_as_find_runs_it() {
        let listed = runs("find a b -exec ls -l {} +");
        assert!(listed.contains(&vec!["ls".into(), "-l".into(), "a".into(), "b".into()]), "{listed:?}");
        assert!(!listed.iter().any(|r| r == &["ls", "-l", "a"]), "one run with every path: {listed:?}");
        let listed = runs(r"find a b -exec sh -c 'rm {}' \;");
        assert!(
            listed.contains(&vec!["rm".into(), "a".into()])
                && listed.contains(&vec!["rm".into(), "b".into()])
        );
        // A `+` not right after `{}` is a word of the command.
        let listed = runs(r"find a -exec echo + {} \;");
        assert!(listed.contains(&vec!["echo".into(), "+".into(), "a".into()]), "{listed:?}");
        assert!(Model::read(r#"find "$D" -exec sh -c 'rm {}' \;"#).is_err(), "code made at run time");
    }

    #[test]
    fn time_is_a_program_under_a_posix_sh() {
        let listed = runs("sh -c 'time -p ls | wc'");
        assert!(listed.contains(&vec!["time".into(), "-p".into(), "ls".into()]), "{listed:?}");
        assert!(listed.iter().any(|r| r == &["ls"]) && listed.iter().any(|r| r == &["wc"]), "{listed:?}");
        assert!(runs("dash -c 'time ls'").iter().any(|r| r[0] == "time"));
        assert!(!runs("bash -c 'time -p ls'").iter().any(|r| r[0] == "time"), "a reserved word in bash");
        assert!(!runs("time -p ls").iter().any(|r| r[0] == "time"));
    }
}
