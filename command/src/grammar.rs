//! The programs' grammars: for each program the guard knows, its options
//! (which take a value, how they may be spelled), what its operands are,
//! and which options or operands run other programs or code.
//!
//! The data is `src/programs.yaml`, read once, the first time a grammar is
//! asked for ([`grammar`]); its tests check every entry. A program without
//! a grammar is not guessed at: the model says so ([`crate::Code::Unverified`]).
//!
//! An entry, by example:
//!
//! ```yaml
//! rm:
//!   options:
//!     recursive: -r -R --recursive      # one option, three spellings
//!     interactive: -i -I --interactive=? # `=?`: an optional value, `--x=V` only
//!   operands: delete                    # every operand is deleted
//! timeout:
//!   options:
//!     signal: -s= --signal=             # `=`: takes a value (`-sV`, `-s V`, `--signal=V`, `--signal V`)
//!   operands: [text, command]           # a duration, then the command it runs
//! ```
//!
//! A value or an operand has a [`Role`]; the last role of an `operands`
//! list stands for every further operand. `{spell: ..., value: ROLE}`
//! gives an option's value a role other than `text`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use serde::Deserialize;

/// What a value or an operand is to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Text with no effect outside the program (a pattern, a count).
    Text,
    /// A file or folder read.
    Read,
    /// A file or folder written (created, changed, moved onto).
    Write,
    /// A file or folder deleted.
    Delete,
    /// A folder the program changes to before it works (`git -C`).
    Dir,
    /// Where the program connects (`curl URL`).
    Url,
    /// A file mode (`chmod`'s first operand, `--reference` aside).
    Mode,
    /// This operand and every one after it are a command the program runs.
    Command,
    /// Words up to `;` or `+` are a command run once per found path (`find
    /// -exec`).
    CommandUntilSemicolon,
    /// Shell code the program runs (`su -c`, `tar --to-command`).
    Shell,
    /// Every further operand, joined with spaces, is shell code (`watch`).
    ShellWords,
    /// A program the program runs, with arguments split at white space
    /// (`sort --compress-program`, `rg --pre`, `tar -I`).
    Program,
    /// Code in another language that the grammar cannot read (`python -c`,
    /// `perl -e`): it can run anything.
    ForeignCode,
    /// A `sed` script: read by [`crate::model`]'s `sed` reader.
    SedScript,
    /// An `awk` program: read by the `awk` reader.
    AwkProgram,
    /// `git -c key=value`: a configuration value, some of which run
    /// commands.
    GitConfig,
    /// An SQLite statement or dot-command (`sqlite3 db 'SQL'`, `-cmd`).
    SqliteSql,
    /// A `tar --checkpoint-action` (`exec=COMMAND` runs a command).
    TarAction,
    /// A file whose content is run as code by the program (`bash FILE`,
    /// `python FILE`, `awk -f FILE`).
    Script,
}

impl Role {
    fn parse(text: &str) -> Option<Role> {
        Some(match text {
            "text" => Role::Text,
            "read" => Role::Read,
            "write" => Role::Write,
            "delete" => Role::Delete,
            "dir" => Role::Dir,
            "url" => Role::Url,
            "mode" => Role::Mode,
            "command" => Role::Command,
            "command-until-semicolon" => Role::CommandUntilSemicolon,
            "shell" => Role::Shell,
            "shell-words" => Role::ShellWords,
            "program" => Role::Program,
            "foreign-code" => Role::ForeignCode,
            "sed-script" => Role::SedScript,
            "awk-program" => Role::AwkProgram,
            "git-config" => Role::GitConfig,
            "sqlite-sql" => Role::SqliteSql,
            "tar-action" => Role::TarAction,
            "script" => Role::Script,
            _ => return None,
        })
    }

    /// Whether a value of this role makes the program run something other
    /// than itself.
    pub fn runs(self) -> bool {
        matches!(
            self,
            Role::Command
                | Role::CommandUntilSemicolon
                | Role::Shell
                | Role::ShellWords
                | Role::Program
                | Role::ForeignCode
                | Role::Script
        )
    }
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A flag.
    Nothing,
    /// A value: the next word, or attached (`-n5`, `--lines=5`).
    Value,
    /// An optional value, attached only (`--color=auto`, `-O2`).
    Optional,
    /// Two values, the next two words (`find -fprintf FILE FORMAT`): the
    /// first has the option's role, the second is text. Spelled `==` in
    /// the data; never attached, never bundled.
    Two,
}

/// One spelling of an option (`-r`, `--recursive`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spelling {
    /// As written, with its dashes.
    pub text: String,
    /// The option it spells (the key in the data: `recursive`).
    pub option: String,
    /// Whether it takes a value.
    pub takes: Takes,
    /// What the value is.
    pub role: Role,
}

impl Spelling {
    /// A one-letter option (`-r`), which may be bundled (`-rf`).
    pub fn is_short(&self) -> bool {
        self.text.len() == 2 && !self.text.starts_with("--")
    }
}

/// How a program reads its arguments.
#[derive(Debug, Clone, Default)]
pub struct Grammar {
    /// The program's name.
    pub name: String,
    /// Every spelling of every option.
    pub spellings: Vec<Spelling>,
    /// The operands' roles, the last for every further one; empty: text.
    pub operands: Vec<Role>,
    /// The options whose presence means the first operand is not
    /// `operands[0]`, which is dropped (`sed -e SCRIPT FILE`).
    pub first_operand_unless: Vec<String>,
    /// Options stop at the first operand (a wrapper: what follows is the
    /// command's), as `getopt` with `+` or POSIX order reads them.
    pub options_first: bool,
    /// Long options are written with one dash (`find -name`, `java
    /// -jar`), and short options cannot be bundled.
    pub single_dash_long: bool,
    /// Words that are operators, not operands (`find`'s `(`, `!`).
    pub operators: Vec<String>,
    /// Options the grammar does not list are flags without effect outside
    /// the program: a reviewed exception, for subcommands with hundreds
    /// of options none of which runs anything (`git log`). An abbreviation
    /// of a listed option is still read as it.
    pub open: bool,
    /// The program runs the project's own code by design (`make`, `npm
    /// run`, `pytest`): what it runs is not in the command.
    pub runs_project_code: bool,
    /// Subcommands (`git status`), read after the program's options; a
    /// subcommand not listed is unknown.
    pub subcommands: BTreeMap<String, Grammar>,
}

impl Grammar {
    /// The role of operand `index` (0-based); `given` says whether an
    /// option (by its name in the grammar) was given.
    pub fn operand_role(&self, index: usize, given: impl Fn(&str) -> bool) -> Role {
        let skip = usize::from(self.first_operand_unless.iter().any(|o| given(o)));
        let roles = &self.operands[skip.min(self.operands.len())..];
        roles.get(index).or(roles.last()).copied().unwrap_or(Role::Text)
    }
}

/// The grammars, by program name: looked up for every simple command of
/// every decision (several times), so with a hash that costs a few
/// instructions per byte of a short name.
pub type Grammars = HashMap<String, Grammar, BuildHasherDefault<Fnv>>;

/// The grammars, by program name; read from the data the first time.
pub fn grammars() -> &'static Grammars {
    static GRAMMARS: OnceLock<Grammars> = OnceLock::new();
    GRAMMARS.get_or_init(|| {
        load(include_str!("programs.yaml"))
            .expect("src/programs.yaml is checked by its tests")
            .into_iter()
            .collect()
    })
}

/// FNV-1a: program names are short and not chosen to collide (a name that
/// did would cost a lookup a few comparisons, never a wrong grammar).
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The grammar of `name` (a basename: `rm`), if the guard knows it.
pub fn grammar(name: &str) -> Option<&'static Grammar> {
    grammars().get(name)
}

/// An entry as written in the data.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default)]
    options: BTreeMap<String, OptionEntry>,
    #[serde(default)]
    operands: Option<Operands>,
    #[serde(default)]
    first_operand_unless: Vec<String>,
    #[serde(default)]
    options_first: bool,
    #[serde(default)]
    single_dash_long: bool,
    #[serde(default)]
    operators: Vec<String>,
    #[serde(default)]
    open: bool,
    #[serde(default)]
    runs_project_code: bool,
    #[serde(default)]
    subcommands: BTreeMap<String, Entry>,
    /// Other names of the same program (`egrep` for `grep`).
    #[serde(default)]
    aliases: Vec<String>,
    /// The grammar of another program, which this one reads as is
    /// (`gawk: {same_as: awk}`).
    #[serde(default)]
    same_as: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OptionEntry {
    Spellings(String),
    WithRole { spell: String, value: String },
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Operands {
    One(String),
    Each(Vec<String>),
}

/// Reads the data; `Err` names the entry and what is wrong with it.
pub fn load(text: &str) -> Result<BTreeMap<String, Grammar>, String> {
    let entries: BTreeMap<String, Entry> = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    let mut same = Vec::new();
    for (name, entry) in &entries {
        if let Some(other) = &entry.same_as {
            same.push((name.clone(), other.clone()));
            continue;
        }
        let grammar = build(name, entry)?;
        for alias in &entry.aliases {
            out.insert(alias.clone(), Grammar { name: alias.clone(), ..grammar.clone() });
        }
        out.insert(name.clone(), grammar);
    }
    for (name, other) in same {
        let grammar =
            out.get(&other).ok_or_else(|| format!("{name}: same_as names `{other}`, not an entry"))?;
        out.insert(name.clone(), Grammar { name, ..grammar.clone() });
    }
    Ok(out)
}

fn build(name: &str, entry: &Entry) -> Result<Grammar, String> {
    let mut spellings = Vec::new();
    for (option, spec) in &entry.options {
        let (text, role) = match spec {
            OptionEntry::Spellings(text) => (text.as_str(), Role::Text),
            OptionEntry::WithRole { spell, value } => (
                spell.as_str(),
                Role::parse(value)
                    .ok_or_else(|| format!("{name}: option `{option}` has an unknown role `{value}`"))?,
            ),
        };
        for word in text.split_whitespace() {
            let (spelled, takes) = if let Some(s) = word.strip_suffix("=?") {
                (s, Takes::Optional)
            } else if let Some(s) = word.strip_suffix("==") {
                (s, Takes::Two)
            } else if let Some(s) = word.strip_suffix('=') {
                (s, Takes::Value)
            } else {
                (word, Takes::Nothing)
            };
            let dashes = spelled.starts_with('-') || spelled.starts_with('+');
            if !dashes || spelled.len() < 2 {
                return Err(format!(
                    "{name}: option `{option}` has a spelling `{word}` that is not an option"
                ));
            }
            if takes == Takes::Nothing && role != Role::Text {
                return Err(format!("{name}: option `{option}` gives its value a role but takes no value"));
            }
            if takes == Takes::Two && (spelled.len() == 2 || !entry.single_dash_long) {
                return Err(format!(
                    "{name}: `{spelled}` takes two values, which only a long option of a program \
                     that spells them with one dash can (no `--x=v`, no bundling)"
                ));
            }
            if spellings.iter().any(|s: &Spelling| s.text == spelled) {
                return Err(format!("{name}: `{spelled}` is spelled twice"));
            }
            spellings.push(Spelling { text: spelled.to_owned(), option: option.clone(), takes, role });
        }
    }
    let operands = match &entry.operands {
        None => Vec::new(),
        Some(Operands::One(role)) => vec![role.as_str()],
        Some(Operands::Each(roles)) => roles.iter().map(String::as_str).collect(),
    };
    let operands: Vec<Role> = operands
        .into_iter()
        .map(|r| Role::parse(r).ok_or_else(|| format!("{name}: operands have an unknown role `{r}`")))
        .collect::<Result<Vec<_>, _>>()?;
    for option in &entry.first_operand_unless {
        if !entry.options.contains_key(option) {
            return Err(format!("{name}: first_operand_unless names `{option}`, not one of its options"));
        }
    }
    let mut subcommands = BTreeMap::new();
    for (sub, sub_entry) in &entry.subcommands {
        let grammar = build(&format!("{name} {sub}"), sub_entry)?;
        for alias in &sub_entry.aliases {
            subcommands.insert(alias.clone(), grammar.clone());
        }
        subcommands.insert(sub.clone(), grammar);
    }
    // A program that runs a command reads its options first, or the
    // command's options would be read as its own.
    let options_first =
        entry.options_first || operands.iter().any(|r| matches!(r, Role::Command | Role::ShellWords));
    Ok(Grammar {
        name: name.to_owned(),
        spellings,
        operands,
        first_operand_unless: entry.first_operand_unless.clone(),
        options_first,
        single_dash_long: entry.single_dash_long,
        operators: entry.operators.clone(),
        open: entry.open,
        runs_project_code: entry.runs_project_code,
        subcommands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_loads_and_every_entry_is_well_formed() {
        let grammars = load(include_str!("programs.yaml")).unwrap();
        assert!(grammars.len() > 100, "{} grammars", grammars.len());
        for (name, grammar) in &grammars {
            assert_eq!(&grammar.name, name);
            // A wrapper reads options first, or its command's options would
            // be read as its own.
            if grammar.operands.contains(&Role::Command) {
                assert!(grammar.options_first, "{name} runs a command but reads options after operands");
            }
        }
    }

    #[test]
    fn mistakes_in_the_data_are_named() {
        let bad = [
            ("x: {options: {a: 'r'}}", "not an option"),
            ("x: {options: {a: '-r', b: '-r'}}", "spelled twice"),
            ("x: {options: {a: {spell: '-r', value: shell}}}", "takes no value"),
            ("x: {options: {a: {spell: '-r=', value: nope}}}", "unknown role"),
            ("x: {operands: [nope]}", "unknown role"),
            ("x: {first_operand_unless: [e]}", "not one of its options"),
            ("x: {same_as: y}", "not an entry"),
            ("x: {colour: 1}", "unknown field"),
        ];
        for (text, expected) in bad {
            let error = load(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
