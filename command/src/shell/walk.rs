//! The walk over `brush-parser`'s tree: lists, pipelines, compound
//! commands, function definitions and redirections, each simple command
//! recorded with where it sits.

use brush_parser::ast;

use super::nesting::nesting;
use super::words::finish;
use super::{
    Command, Dynamic, Function, Redirect, RedirectKind, Script, Unreadable, Via, Word, MAX_CODE_BYTES,
    MAX_COMMANDS, MAX_COMMAND_BYTES, MAX_NESTING,
};

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
