//! Which programs are shells, other interpreters, downloaders and
//! decoders, and where an interpreter takes the program it runs from.

use crate::shell::Word;

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
pub(super) const DECODERS: &[&str] = &[
    "base64", "base32", "basenc", "xxd", "uudecode", "openssl", "gunzip", "zcat", "gzip", "bzip2", "bunzip2",
    "xz", "unxz", "zstd", "rev", "tr", "od", "printf",
];

/// The basename of a word (`/usr/bin/rm` → `rm`).
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

pub(crate) fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// Whether `name` is a POSIX `sh` (where `time` is no reserved word
/// before an option, or at all).
pub(super) fn is_posix_sh(name: &str) -> bool {
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
