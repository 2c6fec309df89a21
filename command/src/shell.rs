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

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

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

impl Script {
    /// Parses `code` and adds its commands, as held by `parent`, read as
    /// the code around it is read (`bash` at the top).
    pub fn add(&mut self, code: &str, parent: Option<usize>, via: Via) -> Result<(), Unreadable> {
        self.add_as(code, parent, via, self.posix)
    }

    /// [`Script::add`] for code read by `bash` (`posix` false) or by a
    /// POSIX `sh` (`dash`, or `bash` run as `sh`), where `time` is a
    /// program: always for `dash`, before an option for `bash` as `sh`.
    /// Either way the model lists the `time` program as run.
    pub fn add_as(
        &mut self,
        code: &str,
        parent: Option<usize>,
        via: Via,
        posix: bool,
    ) -> Result<(), Unreadable> {
        let outer = std::mem::replace(&mut self.posix, posix);
        let added = self.parse_and_add(code, parent, via);
        self.posix = outer;
        added
    }

    fn parse_and_add(&mut self, code: &str, parent: Option<usize>, via: Via) -> Result<(), Unreadable> {
        if code.len() > MAX_COMMAND_BYTES {
            return Err(Unreadable::TooLong);
        }
        self.parsed += code.len();
        if self.parsed > MAX_CODE_BYTES {
            return Err(Unreadable::TooMuch);
        }
        let depth = parent.map_or(0, |p| self.commands[p].depth + 1);
        if depth + nesting(code) > MAX_NESTING {
            return Err(Unreadable::TooDeep);
        }
        let program = parse_program(code)?;
        let context = Context {
            parent,
            via,
            depth,
            stages: parent.map(|p| self.commands[p].stages.clone()).unwrap_or_default(),
            background: false,
            function: parent.and_then(|p| self.commands[p].function.clone()),
        };
        for list in &program.complete_commands {
            self.list(list, &context)?;
        }
        Ok(())
    }

    fn list(&mut self, list: &ast::CompoundList, context: &Context) -> Result<(), Unreadable> {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            let mut context = context.clone();
            context.background |= matches!(separator, ast::SeparatorOperator::Async);
            self.pipeline(&and_or.first, &context)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, &context)?;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, context: &Context) -> Result<(), Unreadable> {
        if self.posix && pipeline.timed.is_some() {
            if let Some(ast::Command::Simple(first)) = pipeline.seq.first() {
                // `sh` runs the `time` program with the first command.
                let mut timed = pipeline.clone();
                timed.timed = None;
                timed.seq[0] = ast::Command::Simple(time_program(first, pipeline.timed.as_ref()));
                return self.pipeline(&timed, context);
            }
        }
        if pipeline.seq.len() == 1 {
            return self.command(&pipeline.seq[0], context);
        }
        let id = self.pipelines;
        self.pipelines += 1;
        for (stage, command) in pipeline.seq.iter().enumerate() {
            let mut context = context.clone();
            context.stages.push((id, stage as u32));
            self.command(command, &context)?;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, context: &Context) -> Result<(), Unreadable> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, context),
            ast::Command::Compound(compound, redirects) => {
                // The compound's redirections apply to each command in it.
                let at = self.commands.len();
                self.compound(compound, context)?;
                if let Some(list) = redirects {
                    let mut found = Vec::new();
                    let holder = self.holder(context)?;
                    for redirect in &list.0 {
                        self.redirect(redirect, holder, &mut found)?;
                    }
                    for command in &mut self.commands[at..] {
                        command.redirects.extend(found.iter().cloned());
                    }
                }
                Ok(())
            }
            ast::Command::Function(definition) => {
                let name = definition.fname.value.clone();
                self.functions.push(Function { name: name.clone() });
                let mut context = context.clone();
                context.function = Some(name);
                let ast::FunctionBody(body, redirects) = &definition.body;
                self.compound(body, &context)?;
                if let Some(list) = redirects {
                    let holder = self.holder(&context)?;
                    let mut found = Vec::new();
                    for redirect in &list.0 {
                        self.redirect(redirect, holder, &mut found)?;
                    }
                }
                Ok(())
            }
            ast::Command::ExtendedTest(test, _) => {
                let holder = self.holder(context)?;
                self.extended_test(&test.expr, holder)
            }
        }
    }

    /// A placeholder command that holds what a construct without a command
    /// of its own runs (`[[ $(id) ]]`, `for x in $(ls)`, `case $(id) in`).
    fn holder(&mut self, context: &Context) -> Result<usize, Unreadable> {
        self.push(Command {
            words: Vec::new(),
            assignments: Vec::new(),
            redirects: Vec::new(),
            stdin_text: None,
            stages: context.stages.clone(),
            background: context.background,
            function: context.function.clone(),
            parent: context.parent,
            via: context.via,
            depth: context.depth,
        })
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, holder: usize) -> Result<(), Unreadable> {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, holder)?;
                self.extended_test(b, holder)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, holder),
            E::UnaryTest(_, word) => self.word(&word.value, holder).map(drop),
            E::BinaryTest(_, a, b) => {
                self.word(&a.value, holder)?;
                self.word(&b.value, holder).map(drop)
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, context: &Context) -> Result<(), Unreadable> {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(arithmetic) => {
                let holder = self.holder(context)?;
                self.arithmetic(&arithmetic.expr.value, holder)
            }
            C::ArithmeticForClause(clause) => {
                let holder = self.holder(context)?;
                for expr in [&clause.initializer, &clause.condition, &clause.updater].into_iter().flatten() {
                    self.arithmetic(&expr.value, holder)?;
                }
                self.list(&clause.body.list, context)
            }
            C::BraceGroup(group) => self.list(&group.list, context),
            C::Subshell(subshell) => self.list(&subshell.list, context),
            C::ForClause(clause) => {
                if let Some(values) = &clause.values {
                    let holder = self.holder(context)?;
                    for value in values {
                        self.word(&value.value, holder)?;
                    }
                }
                self.list(&clause.body.list, context)
            }
            C::CaseClause(clause) => {
                let holder = self.holder(context)?;
                self.word(&clause.value.value, holder)?;
                for item in &clause.cases {
                    for pattern in &item.patterns {
                        self.word(&pattern.value, holder)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list, context)?;
                    }
                }
                Ok(())
            }
            C::IfClause(clause) => {
                self.list(&clause.condition, context)?;
                self.list(&clause.then, context)?;
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, context)?;
                    }
                    self.list(&other.body, context)?;
                }
                Ok(())
            }
            C::WhileClause(ast::WhileOrUntilClauseCommand(condition, body, _))
            | C::UntilClause(ast::WhileOrUntilClauseCommand(condition, body, _)) => {
                self.list(condition, context)?;
                self.list(&body.list, context)
            }
            C::Coprocess(coprocess) => {
                let mut context = context.clone();
                context.background = true;
                self.command(&coprocess.body, &context)
            }
        }
    }

    /// Records a command; `Err` past [`MAX_COMMANDS`].
    pub fn push(&mut self, command: Command) -> Result<usize, Unreadable> {
        if self.commands.len() >= MAX_COMMANDS {
            return Err(Unreadable::TooMuch);
        }
        self.commands.push(command);
        Ok(self.commands.len() - 1)
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, context: &Context) -> Result<(), Unreadable> {
        let at = self.holder(context)?;
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        let mut redirects = Vec::new();
        let items = simple.prefix.iter().flat_map(|p| &p.0).chain(simple.suffix.iter().flat_map(|s| &s.0));
        let mut named = false;
        let mut name_done = false;
        for (index, item) in items.enumerate() {
            // The name sits between the prefix and the suffix.
            let in_suffix = index >= simple.prefix.as_ref().map_or(0, |p| p.0.len());
            if in_suffix && !name_done {
                name_done = true;
                if let Some(name) = &simple.word_or_name {
                    words.push(self.word(&name.value, at)?);
                    named = true;
                }
            }
            use ast::CommandPrefixOrSuffixItem as I;
            match item {
                I::IoRedirect(redirect) => {
                    if let Some(text) = self.redirect(redirect, at, &mut redirects)? {
                        self.commands[at].stdin_text = Some(text);
                    }
                }
                I::Word(word) => words.push(self.word(&word.value, at)?),
                I::AssignmentWord(assignment, word) => {
                    if named {
                        // `declare x=$(id)`, `export P=...`: an argument.
                        words.push(self.word(&word.value, at)?);
                    } else {
                        let name = match &assignment.name {
                            ast::AssignmentName::VariableName(n)
                            | ast::AssignmentName::ArrayElementName(n, _) => n,
                        };
                        assignments.push(name.clone());
                        match &assignment.value {
                            ast::AssignmentValue::Scalar(value) => {
                                self.word(&value.value, at)?;
                            }
                            ast::AssignmentValue::Array(values) => {
                                for (key, value) in values {
                                    if let Some(key) = key {
                                        self.word(&key.value, at)?;
                                    }
                                    self.word(&value.value, at)?;
                                }
                            }
                        }
                    }
                }
                I::ProcessSubstitution(_, subshell) => {
                    self.process_substitution(subshell, at)?;
                    words.push(Word::Dyn(Dynamic { substitutes: true, ..Dynamic::default() }));
                }
            }
        }
        if !name_done {
            if let Some(name) = &simple.word_or_name {
                words.push(self.word(&name.value, at)?);
            }
        }
        let command = &mut self.commands[at];
        command.words = words;
        command.assignments = assignments;
        command.redirects.extend(redirects);
        Ok(())
    }

    /// Records a redirection of command `at`; returns the text it gives on
    /// standard input, for here-strings and here-documents.
    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
        at: usize,
        found: &mut Vec<Redirect>,
    ) -> Result<Option<Word>, Unreadable> {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match redirect {
            ast::IoRedirect::File(_, kind, target) => {
                let kind = match kind {
                    K::Read => RedirectKind::Read,
                    K::DuplicateInput | K::DuplicateOutput => RedirectKind::Duplicate,
                    K::Write | K::Append | K::ReadAndWrite | K::Clobber => RedirectKind::Write,
                };
                let target = match target {
                    T::Filename(word) => self.word(&word.value, at)?,
                    T::Fd(fd) => Word::Lit(fd.to_string()),
                    T::Duplicate(word) => {
                        let word = self.word(&word.value, at)?;
                        // `>&file` writes a file, like `&>`.
                        let fd =
                            word.lit().is_some_and(|w| w == "-" || w.bytes().all(|b| b.is_ascii_digit()));
                        if !fd && kind == RedirectKind::Duplicate {
                            found.push(Redirect { kind: RedirectKind::Write, target: word });
                            return Ok(None);
                        }
                        word
                    }
                    T::ProcessSubstitution(_, subshell) => {
                        self.process_substitution(subshell, at)?;
                        Word::Dyn(Dynamic { substitutes: true, ..Dynamic::default() })
                    }
                };
                found.push(Redirect { kind, target });
                Ok(None)
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let target = self.word(&word.value, at)?;
                found.push(Redirect { kind: RedirectKind::Write, target });
                Ok(None)
            }
            ast::IoRedirect::HereString(_, word) => self.word(&word.value, at).map(Some),
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    // Substitutions in an unquoted here-document run.
                    let pieces = brush_parser::word::parse_heredoc(&doc.doc.value, &Default::default())
                        .map_err(|e| Unreadable::Syntax(e.to_string()))?;
                    let mut dynamic = Dynamic::default();
                    let mut text = String::new();
                    let known = self.pieces(&doc.doc.value, &pieces, at, false, &mut text, &mut dynamic)?;
                    Ok(Some(if known { Word::Lit(text) } else { finish(text, dynamic) }))
                } else {
                    Ok(Some(Word::Lit(doc.doc.value.clone())))
                }
            }
        }
    }

    fn process_substitution(&mut self, subshell: &ast::SubshellCommand, at: usize) -> Result<(), Unreadable> {
        let context = Context {
            parent: Some(at),
            via: Via::ProcessSubstitution,
            depth: self.commands[at].depth + 1,
            stages: self.commands[at].stages.clone(),
            background: false,
            function: self.commands[at].function.clone(),
        };
        if context.depth > MAX_NESTING {
            return Err(Unreadable::TooDeep);
        }
        self.list(&subshell.list, &context)
    }

    fn arithmetic(&mut self, expr: &str, holder: usize) -> Result<(), Unreadable> {
        if expr.contains(['$', '`']) {
            self.word(expr, holder)?;
        }
        Ok(())
    }

    /// A word after quote removal; substitutions in it are added as
    /// commands held by `at`.
    pub fn word(&mut self, raw: &str, at: usize) -> Result<Word, Unreadable> {
        // Most words hold nothing the shell changes.
        if !raw.bytes().any(|b| matches!(b, b'$' | b'`' | b'\\' | b'\'' | b'"' | b'~')) {
            return Ok(Word::Lit(raw.to_owned()));
        }
        let pieces = brush_parser::word::parse(raw, &Default::default())
            .map_err(|e| Unreadable::Syntax(e.to_string()))?;
        let mut text = String::new();
        let mut dynamic = Dynamic::default();
        let known = self.pieces(raw, &pieces, at, false, &mut text, &mut dynamic)?;
        Ok(if known { Word::Lit(text) } else { finish(text, dynamic) })
    }

    /// Appends the pieces' literal text to `text`; returns whether the
    /// whole is known.
    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        at: usize,
        quoted: bool,
        text: &mut String,
        dynamic: &mut Dynamic,
    ) -> Result<bool, Unreadable> {
        let mut known = true;
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(t) | WordPiece::SingleQuotedText(t) => text.push_str(t),
                WordPiece::AnsiCQuotedText(t) => match ansi_c(t) {
                    Some(decoded) => text.push_str(&decoded),
                    None => {
                        known = false;
                        expansion(text, dynamic);
                    }
                },
                WordPiece::EscapeSequence(e) => {
                    let escaped = e.strip_prefix('\\').unwrap_or(e);
                    // In double quotes a backslash stays unless it escapes
                    // `$`, a backtick, `"`, `\` or a newline.
                    if quoted && !escaped.starts_with(['$', '`', '"', '\\', '\n']) {
                        text.push('\\');
                    }
                    if escaped != "\n" {
                        text.push_str(escaped);
                    }
                }
                WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    known &= self.pieces(raw, inner, at, true, text, dynamic)?;
                }
                WordPiece::TildeExpansion(tilde) => {
                    text.push('~');
                    if let brush_parser::word::TildeExpr::UserHome(user) = tilde {
                        text.push_str(user);
                    } else if !matches!(tilde, brush_parser::word::TildeExpr::Home) {
                        // `~+`, `~-`, `~N`: a directory of the shell's.
                        known = false;
                        expansion(text, dynamic);
                    }
                }
                WordPiece::ParameterExpansion(expr) => {
                    use brush_parser::word::{Parameter, ParameterExpr};
                    // `$HOME` is the home directory, as `~` is.
                    if let ParameterExpr::Parameter { parameter: Parameter::Named(name), indirect: false } =
                        expr
                    {
                        if name == "HOME" {
                            text.push('~');
                            continue;
                        }
                    }
                    known = false;
                    expansion(text, dynamic);
                    // Defaults, alternatives, patterns and subscripts are
                    // words too: substitutions in them run.
                    let source = raw.get(piece.start_index..piece.end_index).unwrap_or_default();
                    if let Some(inner) = source.strip_prefix("${").and_then(|s| s.strip_suffix('}')) {
                        if inner.contains(['$', '`']) {
                            let mut scratch = String::new();
                            let mut ignored = Dynamic::default();
                            let inner_pieces = brush_parser::word::parse(inner, &Default::default())
                                .map_err(|e| Unreadable::Syntax(e.to_string()))?;
                            self.pieces(inner, &inner_pieces, at, true, &mut scratch, &mut ignored)?;
                            dynamic.substitutes |= ignored.substitutes;
                        }
                    }
                }
                WordPiece::CommandSubstitution(code) => {
                    known = false;
                    expansion(text, dynamic);
                    dynamic.substitutes = true;
                    self.add(code, Some(at), Via::CommandSubstitution)?;
                }
                WordPiece::BackquotedCommandSubstitution(code) => {
                    known = false;
                    expansion(text, dynamic);
                    dynamic.substitutes = true;
                    self.add(&unescape_backquoted(code), Some(at), Via::CommandSubstitution)?;
                }
                WordPiece::ArithmeticExpression(expr) => {
                    known = false;
                    expansion(text, dynamic);
                    if expr.value.contains(['$', '`']) {
                        let mut scratch = String::new();
                        let mut ignored = Dynamic::default();
                        let inner = brush_parser::word::parse(&expr.value, &Default::default())
                            .map_err(|e| Unreadable::Syntax(e.to_string()))?;
                        self.pieces(&expr.value, &inner, at, true, &mut scratch, &mut ignored)?;
                        dynamic.substitutes |= ignored.substitutes;
                    }
                }
            }
        }
        Ok(known)
    }
}

/// Where an expansion stands in a word: a split point.
fn expansion(text: &str, dynamic: &mut Dynamic) {
    let start: usize = dynamic.split.iter().map(String::len).sum();
    let piece = text.get(start..).unwrap_or_default();
    dynamic.split.push(piece.to_owned());
}

/// The dynamic word for `text` (its literal parts) and its split points.
fn finish(text: String, mut dynamic: Dynamic) -> Word {
    let start: usize = dynamic.split.iter().map(String::len).sum();
    dynamic.split.push(text.get(start..).unwrap_or_default().to_owned());
    dynamic.split.retain(|s| !s.is_empty());
    dynamic.without = text;
    Word::Dyn(dynamic)
}

/// `time [-p] COMMAND` as a simple command of the `time` program: the
/// command's words become its operands, its assignments and redirections
/// stay where they were written.
fn time_program(command: &ast::SimpleCommand, timed: Option<&ast::PipelineTimed>) -> ast::SimpleCommand {
    let word =
        |text: &str| ast::CommandPrefixOrSuffixItem::Word(ast::Word { value: text.to_owned(), loc: None });
    let mut suffix = Vec::new();
    if timed.is_some_and(ast::PipelineTimed::is_posix_output) {
        suffix.push(word("-p"));
    }
    suffix.extend(command.word_or_name.iter().map(|name| word(&name.value)));
    suffix.extend(command.suffix.iter().flat_map(|s| s.0.iter().cloned()));
    ast::SimpleCommand {
        prefix: command.prefix.clone(),
        word_or_name: Some(ast::Word { value: "time".to_owned(), loc: None }),
        suffix: Some(ast::CommandSuffix(suffix)),
    }
}

/// The inherited position of the commands being added.
#[derive(Debug, Clone)]
struct Context {
    parent: Option<usize>,
    via: Via,
    depth: usize,
    stages: Vec<(u32, u32)>,
    background: bool,
    function: Option<String>,
}

fn parse_program(code: &str) -> Result<ast::Program, Unreadable> {
    let options = brush_parser::ParserOptions::default();
    let mut reader = std::io::BufReader::new(code.as_bytes());
    brush_parser::Parser::new(&mut reader, &options)
        .parse_program()
        .map_err(|e| Unreadable::Syntax(e.to_string()))
}

/// The code of a backquoted substitution: `\$`, `` \` `` and `\\` lose
/// their backslash.
fn unescape_backquoted(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next) = chars.peek() {
                if matches!(next, '$' | '`' | '\\') {
                    out.push(next);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// The text of `$'...'` (without its quotes), or `None` for an escape it
/// does not decode (`\c`, `\u` beyond Unicode).
fn ansi_c(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, radix: u32, max: usize| {
        let mut value = 0u32;
        let mut count = 0;
        while count < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value * radix + d;
                    chars.next();
                    count += 1;
                }
                None => break,
            }
        }
        (count > 0).then_some(value)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next()?;
        let decoded = match escaped {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'e' | 'E' => '\u{1b}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\\' | '\'' | '"' | '?' => escaped,
            'x' => char::from_u32(digits(&mut chars, 16, 2)?)?,
            'u' => char::from_u32(digits(&mut chars, 16, 4)?)?,
            'U' => char::from_u32(digits(&mut chars, 16, 8)?)?,
            '0'..='7' => {
                let mut value = escaped.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                char::from_u32(value)?
            }
            _ => return None,
        };
        out.push(decoded);
    }
    Some(out)
}

/// An upper bound of how deeply `code` nests, in one pass: every `(`,
/// `{`, `[`, backtick and compound-command keyword opens a level, `)`,
/// `}`, `]` and closing keywords close one; quotes are ignored, so text
/// in quotes can only raise the count.
pub fn nesting(code: &str) -> usize {
    let bytes = code.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'{' | b'[' | b'`' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'a'..=b'z' => {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_lowercase() {
                    i += 1;
                }
                let boundary =
                    |at: Option<&u8>| at.is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
                if boundary(start.checked_sub(1).and_then(|s| bytes.get(s))) && boundary(bytes.get(i)) {
                    match &code[start..i] {
                        "if" | "while" | "until" | "for" | "case" | "select" | "function" => {
                            depth += 1;
                            deepest = deepest.max(depth);
                        }
                        "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(script: &Script) -> Vec<Vec<String>> {
        script
            .commands
            .iter()
            .filter(|c| !c.words.is_empty())
            .map(|c| c.words.iter().map(|w| w.lit().unwrap_or("<dyn>").to_owned()).collect())
            .collect()
    }

    #[test]
    fn every_simple_command_is_found_with_its_words_unquoted() {
        let script =
            parse(r#"cd /x && "rm" -rf '/' ; echo "$(curl x)" | sh; f() { g; }; (h) & i <(j) > k"#).unwrap();
        assert_eq!(
            lits(&script),
            vec![
                vec!["cd", "/x"],
                vec!["rm", "-rf", "/"],
                vec!["echo", "<dyn>"],
                vec!["curl", "x"],
                vec!["sh"],
                vec!["g"],
                vec!["h"],
                vec!["i", "<dyn>"],
                vec!["j"],
            ]
        );
        let curl = script.commands.iter().position(|c| c.name() == Some("curl")).unwrap();
        let echo = script.commands.iter().position(|c| c.name() == Some("echo")).unwrap();
        assert_eq!(script.commands[curl].parent, Some(echo));
        assert_eq!(script.commands[curl].via, Via::CommandSubstitution);
        assert_eq!(script.functions, vec![Function { name: "f".into() }]);
        let h = script.commands.iter().find(|c| c.name() == Some("h")).unwrap();
        assert!(h.background);
        let i = script.commands.iter().find(|c| c.name() == Some("i")).unwrap();
        assert_eq!(i.redirects, vec![Redirect { kind: RedirectKind::Write, target: Word::Lit("k".into()) }]);
    }

    #[test]
    fn quotes_escapes_and_expansions() {
        let script = parse(r#"\rm $'\x72m' a"b"c ~/x "$HOME" rm${IFS}-rf "$D"/*"#).unwrap();
        let words = &script.commands[0].words;
        assert_eq!(words[0], Word::Lit("rm".into()));
        assert_eq!(words[1], Word::Lit("rm".into()));
        assert_eq!(words[2], Word::Lit("abc".into()));
        assert_eq!(words[3], Word::Lit("~/x".into()));
        assert_eq!(words[4], Word::Lit("~".into()));
        let Word::Dyn(ifs) = &words[5] else { panic!("{:?}", words[5]) };
        assert_eq!(ifs.split, vec!["rm", "-rf"]);
        let Word::Dyn(glob) = &words[6] else { panic!() };
        assert_eq!(glob.without, "/*");
    }

    #[test]
    fn substitutions_everywhere_are_found() {
        for command in [
            "echo ${x:-$(id)}",
            "echo $((1 + $(id)))",
            "[[ -n $(id) ]]",
            "for x in $(id); do :; done",
            "case $(id) in *) ;; esac",
            "cat <<EOF\n$(id)\nEOF",
            "cat <<< $(id)",
            "x=$(id)",
            "echo `id`",
            "echo \"`echo \\`id\\``\"",
            "(( $(id) ))",
            "declare y=$(id)",
        ] {
            let script = parse(command).unwrap_or_else(|e| panic!("{command}: {e:?}"));
            assert!(script.commands.iter().any(|c| c.name() == Some("id")), "{command}: {script:?}");
        }
    }

    /// Plain commands are read without the parser, as the parser reads
    /// them.
    #[test]
    fn plain_commands_read_as_the_parser_reads_them() {
        for command in [
            "ls -la /mnt/user-data/workspace",
            "git status --short",
            "python3 main.py --out=x.json -v",
            "echo a*b? c:d e,f g@h 100% x^y",
            "make\t-j4  all",
            "ls x=1",
            "cat",
        ] {
            assert!(plain(command).is_some(), "{command}");
            let mut parsed = Script::default();
            parsed.add(command, None, Via::Direct).unwrap();
            assert_eq!(parse(command).unwrap().commands, parsed.commands, "{command}");
        }
        for command in
            ["x=1 ls", "if", "time ls", "for", "ls ~", "ls # c", "ls; id", "ls\nid", "[[ x ]]", "ls 'a'"]
        {
            assert!(plain(command).is_none(), "{command}");
        }
    }

    #[test]
    fn caps_refuse_before_parsing() {
        assert_eq!(parse(&"a".repeat(MAX_COMMAND_BYTES + 1)), Err(Unreadable::TooLong));
        assert_eq!(parse(&format!("echo {}", "$(".repeat(MAX_NESTING + 1))), Err(Unreadable::TooDeep));
        assert!(matches!(parse("echo 'unterminated"), Err(Unreadable::Syntax(_))));
        assert_eq!(nesting("if a; then b; fi; if c; then d; fi"), 1);
        assert_eq!(nesting("echo $(a $(b)) ${c}"), 2);
    }
}
