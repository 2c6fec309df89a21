//! A `bash` command as the shell reads it: parsed by `brush-parser`, then
//! flattened into every simple command it runs, wherever it sits (lists,
//! pipelines, subshells, groups, loops, conditions, function bodies, command
//! and process substitutions, arithmetic, parameter defaults, here-strings
//! and the code of `sh -c`, `eval` and the like, which the checks add as
//! they find it), each with its words after quote removal.
//!
//! A word the shell only knows when it runs (a variable, a substitution, an
//! arithmetic result) is [`Word::Dyn`]: the checks treat it as unknown and
//! decide on unknowns by denying. Two caps keep a decision short and the
//! parser's recursion bounded; past them the command is refused, never
//! parsed: [`MAX_COMMAND_BYTES`] and [`MAX_NESTING`].
//!
//! - `walk`: the one walk over `brush-parser`'s tree, each simple command
//!   recorded with where it sits;
//! - `words`: a word after quote removal, the substitutions in it added
//!   as commands;
//! - `nesting`: how deeply a command nests, counted before it is parsed
//!   ([`nesting()`]).

mod nesting;
#[cfg(test)]
mod tests;
mod walk;
mod words;

pub use nesting::nesting;

/// The longest command parsed (16 KiB). Longer ones are denied with
/// [`crate::Code::TooLong`]: parsing is linear, and this bounds a decision to
/// a few milliseconds whatever the command holds. A longer script is
/// written to a file (`write_file`) and run from there.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;

/// The deepest nesting parsed: brackets, braces, substitutions, backticks
/// and compound-command keywords, counted by a linear scan before parsing
/// (an over-estimate). Deeper commands are denied with
/// [`crate::Code::TooComplex`], so the parser's recursion stays within a
/// thread's stack.
pub const MAX_NESTING: usize = 32;

/// The most code parsed for one command, the code it hands to shells
/// (`sh -c`, `eval`, `find -exec` ...) included: four times
/// [`MAX_COMMAND_BYTES`]. Past it the command is denied with
/// [`crate::Code::TooComplex`], so code that multiplies as it is unwrapped
/// cannot make a decision long.
pub const MAX_CODE_BYTES: usize = 4 * MAX_COMMAND_BYTES;

/// The most simple commands recorded for one command, for the same reason.
pub const MAX_COMMANDS: usize = 1 << 16;

/// Why a command could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Longer than [`MAX_COMMAND_BYTES`].
    TooLong,
    /// Nested deeper than [`MAX_NESTING`].
    TooDeep,
    /// More code than [`MAX_CODE_BYTES`] or more commands than
    /// [`MAX_COMMANDS`], once the code handed to shells is counted.
    TooMuch,
    /// Not a command `bash` would run (the parser's message).
    Syntax(String),
}

/// A word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Known before the command runs (`"rm"`, `\rm`, `'/'`, `$'\x72m'`, `~`).
    Lit(String),
    /// Known only when the command runs.
    Dyn(Dynamic),
}

/// A word holding expansions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// The literal text with every expansion removed (`"$D"/*` gives `/*`).
    pub without: String,
    /// The literal text split where expansions stand (`rm${IFS}-rf` gives
    /// `rm`, `-rf`): what `$IFS` tricks run.
    pub split: Vec<String>,
    /// Whether the word holds a command or process substitution.
    pub substitutes: bool,
}

impl Word {
    /// The literal text, if known.
    pub fn lit(&self) -> Option<&str> {
        match self {
            Word::Lit(s) => Some(s),
            Word::Dyn(_) => None,
        }
    }
}

/// How a command's code reached the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Written in the command itself.
    Direct,
    /// Inside `$(...)` or backticks in a word of the parent.
    CommandSubstitution,
    /// Inside `<(...)` or `>(...)` of the parent.
    ProcessSubstitution,
    /// Code the parent runs (`sh -c '...'`, `eval ...`, text piped into a
    /// shell, `find -exec`, `xargs`, `watch`).
    Code,
}

/// A redirection's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`
    Read,
    /// `>`, `>>`, `>|`, `<>`, `&>`: a file is written.
    Write,
    /// `>&N`, `<&N`: a descriptor is duplicated.
    Duplicate,
}

/// A redirection to or from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Its direction.
    pub kind: RedirectKind,
    /// The file (or descriptor) named.
    pub target: Word,
}

/// One simple command (a name and its arguments), wherever it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The command name and its arguments (assignments before the name
    /// excluded); empty for an assignment or a redirection alone.
    pub words: Vec<Word>,
    /// The variables assigned before the name (`PATH=... ls`).
    pub assignments: Vec<String>,
    /// Its redirections to or from files.
    pub redirects: Vec<Redirect>,
    /// Text given on its standard input (a here-string or here-document).
    pub stdin_text: Option<Word>,
    /// The enclosing pipeline stages, outermost first: `(pipeline, stage)`.
    pub stages: Vec<(u32, u32)>,
    /// Run in the background (`&`), or in a coprocess.
    pub background: bool,
    /// The function whose body holds it, if any.
    pub function: Option<String>,
    /// The command whose word, redirection or code holds it.
    pub parent: Option<usize>,
    /// How it got there.
    pub via: Via,
    /// How many parents up to the top.
    pub depth: usize,
}

impl Command {
    /// The command name, when known.
    pub fn name(&self) -> Option<&str> {
        self.words.first().and_then(Word::lit)
    }
}

/// A function defined in the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
}

/// Every simple command of a shell command, in source order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The simple commands.
    pub commands: Vec<Command>,
    /// The functions it defines.
    pub functions: Vec<Function>,
    /// Constructs whose code cannot be known before it runs and that no
    /// command holds: what each is.
    pub opaque: Vec<&'static str>,
    /// What the exec vectors of the programs it runs hand on that cannot
    /// be read (`awk '{system($0)}'`, `git -c` of a key not known).
    pub doubts: Vec<crate::Finding>,
    /// Whether the code handed to shells and the commands of exec vectors
    /// have been added ([`crate::analysis::expand`]).
    pub expanded: bool,
    /// Pipelines numbered so far.
    pipelines: u32,
    /// Bytes of code parsed so far.
    parsed: usize,
    /// Whether the code being parsed is read by a POSIX `sh` ([`Script::add_as`]).
    posix: bool,
}

/// Reads `command` as `bash` would, refusing it past the caps.
pub fn parse(command: &str) -> Result<Script, Unreadable> {
    let mut script = Script::default();
    if let Some(words) = plain(command) {
        // One simple command of plain words: what the parser would give.
        script.push(Command {
            words,
            assignments: Vec::new(),
            redirects: Vec::new(),
            stdin_text: None,
            stages: Vec::new(),
            background: false,
            function: None,
            parent: None,
            via: Via::Direct,
            depth: 0,
        })?;
        return Ok(script);
    }
    script.add(command, None, Via::Direct)?;
    Ok(script)
}

/// Words the shell gives a meaning of its own when they come first.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in",
    "select", "function", "time", "coproc",
];

/// The words of a command made only of plain words (letters, digits and
/// `-_./=:,+@%*?^`, separated by spaces or tabs) whose first word is no
/// reserved word nor an assignment: one simple command, each word as
/// written. Most everyday commands are such (`ls -la /mnt/user-data`), and
/// reading them needs no parser.
fn plain(command: &str) -> Option<Vec<Word>> {
    if command.len() > MAX_COMMAND_BYTES
        || !command.bytes().all(|b| b.is_ascii_alphanumeric() || b" \t-_./=:,+@%*?^".contains(&b))
    {
        return None;
    }
    let mut words = command.split([' ', '\t']).filter(|w| !w.is_empty()).peekable();
    let first = *words.peek()?;
    if first.contains('=') || RESERVED.contains(&first) {
        return None;
    }
    Some(words.map(|w| Word::Lit(w.to_owned())).collect())
}
