//! What a shell command runs, read as `bash` reads the script and as each
//! program reads its own arguments.
//!
//! A command guard asks this crate, never the command's text: the OAP
//! provider's command pack and the Cedar provider's `derive: [command]`
//! judge the same model. The design is to prove a command good, not to
//! recognise it bad: a program is known by its grammar (its options as
//! `getopt_long` reads them, which of its operands are files, which of its
//! options run other programs), and what cannot be said about a command is
//! a [`Finding`] with a [`Code`] that says why.
//!
//! - [`shell`]: the script as `bash` parses it, every simple command
//!   wherever it sits, words after quote removal;
//! - [`grammar`]: the programs' grammars, data reviewed like code
//!   (`src/programs.yaml`);
//! - [`argv`]: one program's arguments read with its grammar;
//! - [`path`]: paths normalised once, with what could not be resolved
//!   marked;
//! - [`model`]: the facts a policy needs: programs run (through wrappers
//!   and exec vectors too), environment changes, code made at run time,
//!   unknowns;
//! - [`analysis`]: the checks on a script's structure (wrappers unwrapped,
//!   code handed on, the built-in dangerous operations), judged on the
//!   model, one module per check;
//! - [`text`]: APort's checks on the command's text (an injection, its
//!   dangerous strings), which the OAP provider keeps beside the model;
//! - [`url`]: where a URL goes, read as HTTP clients read it.

pub mod analysis;
pub mod argv;
mod finding;
pub mod grammar;
mod languages;
pub mod model;
pub mod path;
pub mod shell;
pub mod text;
pub mod url;

pub use finding::{Code, Finding};
pub use model::{Model, Run};
