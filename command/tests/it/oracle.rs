//! The command model against what `bash` really runs: generated commands
//! (simple commands, pipelines, lists, subshells, groups, conditions,
//! loops, functions, substitutions, `sh -c`, `bash -c`, `eval`, code piped
//! or given as a here-string to a shell, wrappers, `xargs`, `find -exec`,
//! quoting and escapes of every kind, assignments, redirections,
//! here-strings) and the same commands mutated (a character dropped,
//! doubled or inserted) are run by the real `bash` in a root of its own,
//! where every program is a shim that logs its argv and runs nothing else.
//!
//! The root: throwaway mount, network and PID namespaces (`unshare --mount
//! --net --pid --fork`), a tmpfs mounted there (invisible outside, gone
//! with the namespace), the host's `bash` and the libraries `ldd` names
//! copied into it, a shim for each program of [`SHIMS`] in its `/bin` and
//! `/usr/bin`, `/dev/null` bound in, then `chroot`. One `bash` inside (the
//! driver) reads the commands and runs each with a fresh `bash -c`, the
//! command's stdin `/dev/null`, its CPU time and file sizes capped, and
//! waits until every process it started has exited (or kills them all after
//! 10 s); then it hands back the shims' log. The wrappers' shims
//! (`timeout`, `env`, `nice`, `nohup`, `sudo`, `xargs`, `find`) read their
//! options as the real programs do and run their command (`find` as if each
//! starting path were a file: the model's `{}` stands for the starting
//! paths); `sh` and `bash` log, then are the real `bash`.
//!
//! What is compared, for each command the model reads with every program
//! name known, no doubt, no code made at run time (a shell fed by a pipe
//! from `echo` of a variable) and no environment change that affects what
//! runs: every program `bash` ran must be one the model lists (by
//! basename), with the argv the shim logged equal to the words of one of
//! the model's runs of that program (a `Word::Dyn` stands for any number of
//! arguments; a model word starting with `~` for itself or the home
//! directory). The model may list more than ran: both branches of an `if`,
//! code after an `exit`, a function never called. It over- approximates; it
//! must never under-approximate. The counts are by set, not multiset: a
//! loop runs a program several times, the model lists it once.
//!
//! 1,200 generated commands and 600 mutations, in one namespace (about 50 s
//! on two cores busy with other builds); the counts (run, compared, skipped
//! and why) are printed. The divergences known are in [`KNOWN`], each with
//! why; the generator leaves their constructs out, and the test fails when
//! one of them stops diverging.
//!
//! Skipped, saying so, when not root, when `unshare` or `bash` is missing,
//! or when the namespaces cannot be made (a container without the
//! privilege).
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use guardhost_command::shell::Word;
use guardhost_command::Model;

use crate::rng::Rng;

/// The home directory inside the root.
const HOME: &str = "/home/user";

/// Programs the generator runs: each a shim that logs and exits (1 when
/// one of its arguments is `fail`, so `||` and `if` take both ways).
const PROGRAMS: &[&str] = &[
    "rm", "ls", "cat", "grep", "git", "curl", "python3", "touch", "mkdir", "cp", "chmod", "head", "sort",
    "id",
];

/// Every shim in the root: the programs, the wrappers, the shells, and the
/// programs a wrapper may be handed that `bash` has as builtins.
const SHIMS: &[&str] = &[
    "rm", "ls", "cat", "grep", "git", "curl", "python3", "touch", "mkdir", "cp", "chmod", "head", "sort",
    "id", "timeout", "env", "nice", "nohup", "sudo", "xargs", "find", "sh", "bash", "echo", "printf", "true",
    "false", "test", "kill", "time",
];

/// The shim: logs its argv (`argc;` then each argument as `length:bytes`,
/// then `.`), then does what the program would about running others.
const SHIM: &str = r#"#!/.oracle/bash
LC_ALL=C
n=${0##*/}
r="$(($# + 1));${#n}:$n"
for a in "$@"; do r+="${#a}:$a"; done
printf '%s.' "$r" >> /.oracle/log
# A program as execvp runs it: never a builtin or a function.
run() {
  [[ $1 == */* ]] || set -- "/usr/bin/$1" "${@:2}"
  exec "$@"
}
case $n in
timeout)
  while (($#)); do case $1 in -s|-k|--signal|--kill-after) shift 2;; --) shift; break;; -?*) shift;; *) break;; esac; done
  shift
  (($#)) && run "$@"; exit 125;;
env)
  while (($#)); do case $1 in
    -i|--ignore-environment|-) for v in $(compgen -e); do unset "$v"; done; shift;;
    -u|--unset) unset "$2"; shift 2;;
    -C|--chdir) cd "$2" || exit 125; shift 2;;
    -u?*) unset "${1#-u}"; shift;;
    --unset=*) unset "${1#*=}"; shift;;
    --) shift; break;;
    -?*) shift;;
    *) break;; esac; done
  while [[ $1 == *=* ]]; do export "$1"; shift; done
  (($#)) && run "$@"; exit 0;;
nice)
  while (($#)); do case $1 in -n|--adjustment) shift 2;; --) shift; break;; -?*) shift;; *) break;; esac; done
  (($#)) && run "$@"; exit 0;;
time)
  while (($#)); do case $1 in -f|-o|--format|--output) shift 2;; --) shift; break;; -?*) shift;; *) break;; esac; done
  (($#)) && run "$@"; exit 0;;
nohup)
  [[ $1 == -- ]] && shift
  (($#)) && run "$@"; exit 125;;
sudo)
  while (($#)); do case $1 in -[ughpCDrtTUR]) shift 2;; --) shift; break;; -?*) shift;; *) break;; esac; done
  (($#)) && run "$@"; exit 1;;
xargs)
  empty=
  while (($#)); do case $1 in -r|--no-run-if-empty) empty=1; shift;; --) shift; break;; -?*) shift;; *) break;; esac; done
  read -r -d '' -a items
  ((${#items[@]} == 0)) && [[ $empty ]] && exit 0
  (($#)) || set -- echo
  run "$@" "${items[@]}";;
find)
  starts=()
  while (($#)) && [[ $1 == -[HLP] ]]; do shift; done
  while (($#)) && [[ $1 != -* && $1 != '(' && $1 != '!' ]]; do starts+=("$1"); shift; done
  ((${#starts[@]})) || starts=(.)
  while (($#)); do
    if [[ $1 == -exec || $1 == -execdir || $1 == -ok ]]; then
      shift; template=()
      while (($#)) && [[ $1 != ';' ]] && ! [[ $1 == + && ${#template[@]} -gt 0 && ${template[-1]} == '{}' ]]; do template+=("$1"); shift; done
      if [[ $1 == + ]]; then
        words=(); for w in "${template[@]}"; do if [[ $w == '{}' ]]; then words+=("${starts[@]}"); else words+=("$w"); fi; done
        (run "${words[@]}")
      else
        for s in "${starts[@]}"; do words=(); for w in "${template[@]}"; do words+=("${w//'{}'/$s}"); done; (run "${words[@]}"); done
      fi
    fi
    shift
  done
  exit 0;;
sh|bash) exec -a "$n" /.oracle/bash "$@";;
false) exit 1;;
*) for a in "$@"; do [[ $a == fail ]] && exit 1; done; exit 0;;
esac
"#;

/// The driver: reads NUL-terminated commands, runs each, and answers
/// `length:log` then `length:stderr` for each.
const DRIVER: &str = r#"cd /work || exit 1
# Each command a job of its own, so a command that runs too long is
# killed with every process it started (its process group).
set -m
printf 'READY\n'
while IFS= read -r -d '' command; do
  : > /.oracle/log; : > /.oracle/err
  cd /work
  # Descriptor 9 is inherited by every process the command starts: the
  # reader sees the end when the last of them has exited, or kills them
  # all after 10 seconds.
  { ulimit -t 3 -f 20000; /.oracle/bash -c "$command" 9>&1 >/dev/null 2>/.oracle/err </dev/null; } |
    { IFS= read -r -t 10 -d '' _; (($? > 128)) && printf 'timed out\n' >> /.oracle/err && kill -KILL 0; }
  log= err=
  IFS= read -r -d '' log < /.oracle/log
  IFS= read -r -d '' err < /.oracle/err
  err=${err:0:600}
  printf '%d:%s%d:%s' "${#log}" "$log" "${#err}" "$err"
done
"#;

/// Run by the host's `bash` inside the new namespaces: builds the root in
/// a tmpfs and starts the driver in it.
const SETUP: &str = r#"set -eu
mount -t tmpfs -o size=256m,mode=0755 oracle /tmp
r=/tmp/root
mkdir -p "$r/.oracle" "$r/bin" "$r/usr/bin" "$r/tmp" "$r/work" "$r/home/user" "$r/dev"
chmod 1777 "$r/tmp"
cp -L "$BASH" "$r/.oracle/bash"
for lib in $(ldd "$BASH" 2>/dev/null | grep -o '/[^ ]*' || true); do
  mkdir -p "$r${lib%/*}"; cp -L "$lib" "$r$lib"
done
printf '%s' "$ORACLE_SHIM" > "$r/.oracle/shim"; chmod 755 "$r/.oracle/shim"
printf '%s' "$ORACLE_DRIVER" > "$r/.oracle/driver"
for name in $ORACLE_SHIMS; do ln -s /.oracle/shim "$r/bin/$name"; ln -s /.oracle/shim "$r/usr/bin/$name"; done
: > "$r/dev/null"; mount --bind /dev/null "$r/dev/null"
chroot=$(command -v chroot)
exec env -i PATH=/usr/bin:/bin HOME=/home/user LC_ALL=C "$chroot" "$r" /.oracle/bash /.oracle/driver
"#;

/// Commands on which the model and `bash` disagree, each with why; the
/// generator leaves their constructs out. [`the_model_lists_what_bash_runs`]
/// runs them too and fails when one no longer diverges.
const KNOWN: &[(&str, &str)] = &[
    // None now: `sh -c 'time -p ls'` (the `time` program under a POSIX
    // `sh`) and `find a.txt dir -exec ls {} +` (one run with every path)
    // were the last, and the generator makes both.
];

/// Text as one single-quoted shell word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A program's name, written one of the ways `bash` reads as that name.
fn name(rng: &mut Rng, program: &str) -> String {
    let (first, rest) = program.split_at(1);
    match rng.below(14) {
        0..=5 => program.to_owned(),
        6 => format!("\\{program}"),
        7 => format!("'{first}'{rest}"),
        8 => format!("\"{program}\""),
        9 => format!("$'\\x{:02x}'{rest}", first.as_bytes()[0]),
        10 => format!("/bin/{program}"),
        11 => format!("/usr/bin/{program}"),
        12 => format!("{first}\\{rest}"),
        _ => format!("{first}\"\"{rest}"),
    }
}

fn plain_arg(rng: &mut Rng) -> String {
    rng.pick(&["a.txt", "-f", "-la", "x", "fail", "--flag=v", "-n", "1", "dir/f", "~/d", "-rf", "."])
        .to_owned()
}

fn arg(rng: &mut Rng, depth: usize) -> String {
    match rng.below(if depth == 0 { 9 } else { 13 }) {
        0..=3 => plain_arg(rng),
        4 => rng
            .pick(&[
                "'a b'",
                "\"q w\"",
                "a\\ b",
                "$'t\\tx'",
                "''",
                "\\$x",
                "\"it's\"",
                "'~'",
                "\"$HOME\"/h",
                "x\"y\"'z'",
                "\\-n",
                "\"a\\\"b\"",
                "$'\\101'",
            ])
            .to_owned(),
        5 | 6 => rng.pick(&["$v", "\"$v\"", "${v:-d}", "$((1 + 2))", "\"$f\"", "$f", "\"$@\""]).to_owned(),
        7 | 8 => format!("{}{}", plain_arg(rng), rng.pick(&["", "=$v", "\"z\""])),
        9 => format!("$({})", list(rng, depth - 1)),
        10 => format!("\"$({})\"", simple(rng, depth - 1)),
        11 => format!("`{}`", simple(rng, 0)),
        _ => format!("<({})", simple(rng, depth - 1)),
    }
}

fn redirect(rng: &mut Rng, depth: usize) -> String {
    match rng.below(8) {
        0 => "> out.txt".into(),
        1 => ">> log".into(),
        2 => "2>&1".into(),
        3 => "< /dev/null".into(),
        4 => format!("<<< {}", arg(rng, depth)),
        5 => "&> /dev/null".into(),
        6 => "2> /dev/null".into(),
        _ => "> \"o u\"".into(),
    }
}

/// A program and its arguments, no assignment, no redirection.
fn call(rng: &mut Rng, depth: usize) -> String {
    let program = rng.pick(PROGRAMS);
    let mut parts = vec![name(rng, program)];
    for _ in 0..rng.below(4) {
        parts.push(arg(rng, depth));
    }
    parts.join(" ")
}

/// A wrapper (or a few) and what it runs.
fn wrapped(rng: &mut Rng, depth: usize) -> String {
    let inner = if rng.below(4) == 0 { wrapped(rng, depth) } else { call(rng, depth) };
    let (wrapper, options) = match rng.below(13) {
        0 => ("timeout", rng.pick(&["5", "-s KILL 1.5", "--signal=TERM 5", "-k 1 5", "--preserve-status 9"])),
        1 => ("env", rng.pick(&["", "A=1", "-i", "-u HOME B=2", "-i C=3", "--"])),
        2 => ("nice", rng.pick(&["", "-n 5", "-n5", "--adjustment=3"])),
        3 => ("nohup", ""),
        4 => ("sudo", rng.pick(&["", "-u root", "-n", "-E"])),
        5 => ("command", ""),
        6 => ("exec", ""),
        // Under `sh` the `time` program runs for `time -p`.
        7 => ("time", rng.pick(&["", "-p"])),
        8 => ("timeout", "3"),
        9 => ("env", "D=x"),
        10 => ("nice", ""),
        11 => ("builtin", ""),
        _ => ("sudo", ""),
    };
    if wrapper == "builtin" {
        // `builtin` runs builtins only.
        return format!("builtin echo {}", arg(rng, depth));
    }
    let written = match wrapper {
        "command" | "exec" | "time" => wrapper.to_owned(),
        _ => name(rng, wrapper),
    };
    [written.as_str(), options, inner.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Code handed to a shell, `eval`, `xargs` or `find -exec`.
fn hands_on(rng: &mut Rng, depth: usize) -> String {
    let code = quote(&list(rng, depth.saturating_sub(1)));
    match rng.below(12) {
        0 => format!("{} -c {code}", name(rng, "sh")),
        1 => format!("{} -c {code}", name(rng, "bash")),
        2 => format!("sh -c {code} zero {}", plain_arg(rng)),
        3 => format!("eval {code}"),
        4 => format!("eval {}", call(rng, 0)),
        5 => format!("echo {code} | {}", rng.pick(&["sh", "bash", "bash -s"])),
        6 => format!("{} <<< {code}", rng.pick(&["sh", "bash"])),
        7 => format!("echo a b | xargs {}", rng.pick(&["", "-r "]).to_owned() + &call(rng, 0)),
        8 => format!("printf '%s\\n' x y | xargs {}", call(rng, 0)),
        9 => format!("find {} -exec {} {{}} \\;", rng.pick(&[".", "a.txt dir", "-L x"]), call(rng, 0)),
        10 => format!(
            "find {} -exec {} {{}} +",
            rng.pick(&[".", "x", "a.txt dir", "-P a.txt . x"]),
            call(rng, 0)
        ),
        // `... ;` puts the path inside a word too.
        _ => format!("find {} -exec sh -c 'ls {{}}' \\;", rng.pick(&[".", "a.txt dir"])),
    }
}

fn simple(rng: &mut Rng, depth: usize) -> String {
    let mut parts = Vec::new();
    if rng.below(6) == 0 {
        parts.push(rng.pick(&["V=1", "v=$'z'", "W=\"a b\"", "f=x"]).to_owned());
    }
    parts.push(match rng.below(10) {
        0 | 1 => wrapped(rng, depth),
        2 if depth > 0 => hands_on(rng, depth),
        _ => call(rng, depth),
    });
    if rng.below(4) == 0 {
        parts.push(redirect(rng, depth.min(1)));
    }
    parts.join(" ")
}

fn command(rng: &mut Rng, depth: usize) -> String {
    if depth == 0 {
        return simple(rng, 0);
    }
    let d = depth - 1;
    match rng.below(16) {
        0 => format!("( {} )", list(rng, d)),
        1 => format!("{{ {}; }}", list(rng, d)),
        2 => format!("if {}; then {}; fi", pipeline(rng, d), list(rng, d)),
        3 => format!("if {}; then {}; else {}; fi", simple(rng, d), simple(rng, d), list(rng, d)),
        4 => format!(
            "if {}; then {}; elif {}; then {}; fi",
            simple(rng, d),
            simple(rng, d),
            simple(rng, d),
            list(rng, d)
        ),
        5 => format!("for f in {} {}; do {}; done", plain_arg(rng), arg(rng, 0), list(rng, d)),
        6 => format!("printf '%s\\n' a b | while read -r f; do {}; done", list(rng, d)),
        7 => format!("case {} in *.txt) {};; *) {};; esac", plain_arg(rng), simple(rng, d), simple(rng, d)),
        // In braces: a definition in a pipeline's stage is that stage's only.
        8 => format!("{{ f() {{ {}; }}; f {}; }}", list(rng, d), plain_arg(rng)),
        9 => format!("v={}; {}", arg(rng, 0), simple(rng, d)),
        10 => format!("[[ -n {} ]] && {}", arg(rng, 0), simple(rng, d)),
        11 => format!("until {}; do {}; done", rng.pick(&["true", ":", "[[ 1 ]]"]), list(rng, d)),
        _ => simple(rng, d),
    }
}

fn pipeline(rng: &mut Rng, depth: usize) -> String {
    let mut stages = vec![command(rng, depth)];
    for _ in 0..rng.below(3) {
        stages.push(rng.pick(&[" | ", " | ", " |& "]).to_owned());
        stages.push(command(rng, depth));
    }
    let bang = if rng.below(8) == 0 { "! " } else { "" };
    format!("{bang}{}", stages.concat())
}

fn list(rng: &mut Rng, depth: usize) -> String {
    let mut out = pipeline(rng, depth);
    for _ in 0..rng.below(3) {
        out.push_str(rng.pick(&["; ", " && ", " || ", "\n", " & "]));
        out.push_str(&pipeline(rng, depth));
    }
    out
}

/// A whole command: a list, or code on a shell's standard input in a
/// here-document.
fn generated(rng: &mut Rng, depth: usize) -> String {
    if rng.below(12) == 0 {
        let quoted = rng.pick(&["'EOF'", "EOF"]);
        let code = list(rng, depth.saturating_sub(1)).replace("EOF", "E");
        return format!("{} <<{quoted}\n{code}\nEOF\n", rng.pick(&["sh", "bash", "bash -s"]));
    }
    list(rng, depth)
}

/// A command changed the way a typo would.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = rng.below(chars.len().max(1));
    let mut out: String = chars[..at].iter().collect();
    match rng.below(4) {
        0 => out.extend(chars.iter().skip(at + 1)),
        1 => {
            out.extend(chars.get(at));
            out.extend(&chars[at..]);
        }
        2 if at + 1 < chars.len() => {
            out.push(chars[at + 1]);
            out.push(chars[at]);
            out.extend(&chars[at + 2..]);
        }
        _ => {
            out.push_str(
                rng.pick(&[
                    "\\", "'", "\"", " ", ";", "$", "|", "&&", "#", "\n", "(", ")", "{", "`", "=", "~",
                ]),
            );
            out.extend(&chars[at..]);
        }
    }
    out
}

/// What `bash` ran for one command: each exec's argv (the program's
/// basename first), and the start of its standard error.
#[derive(Debug, Default)]
struct Ran {
    execs: Vec<Vec<String>>,
    stderr: String,
}

/// Why the oracle could not run.
enum Unavailable {
    /// The machine cannot host it (not root, no `unshare` or `bash`, no
    /// namespaces): skip.
    Skip(String),
    /// It can, and something broke: fail.
    Broken(String),
}

fn probe() -> Result<(), String> {
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|e| format!("no /proc/self/status ({e})"))?;
    let root = status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root {
        return Err("not root".into());
    }
    for program in ["unshare", "bash", "chroot", "ldd"] {
        let found = Command::new("bash")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Err(format!("`{program}` is not installed"));
        }
    }
    let made = Command::new("unshare")
        .args(["--mount", "--net", "--pid", "--fork", "--", "bash", "-c", "mount -t tmpfs oracle /tmp"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("`unshare` cannot run ({e})"))?;
    if !made.status.success() {
        return Err(format!(
            "the namespaces or the tmpfs cannot be made here ({})",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    Ok(())
}

/// Runs `commands` in the root, one `bash -c` each.
fn run_in_root(commands: &[String]) -> Result<Vec<Ran>, Unavailable> {
    probe().map_err(Unavailable::Skip)?;
    let broken = |what: String| Unavailable::Broken(what);
    let mut child = Command::new("unshare")
        .args(["--mount", "--net", "--pid", "--fork", "--kill-child", "--", "bash", "-c", SETUP])
        .env("ORACLE_SHIM", SHIM)
        .env("ORACLE_DRIVER", DRIVER)
        .env("ORACLE_SHIMS", SHIMS.join(" "))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| broken(format!("unshare: {e}")))?;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let input: Vec<u8> = commands.iter().flat_map(|c| c.bytes().chain([0])).collect();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // A watchdog: a command that hangs past the caps fails the test, it
    // does not hang it.
    let (done, finished) = mpsc::channel::<()>();
    let id = child.id();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(Duration::from_secs(240)).is_err() {
            let _ = Command::new("kill").args(["-KILL", &id.to_string()]).status();
        }
    });
    let mut out = Vec::new();
    let read = stdout.read_to_end(&mut out);
    let _ = done.send(());
    let _ = watchdog.join();
    let status = child.wait();
    let _ = writer.join();
    let errors = errors.join().unwrap_or_default();
    read.map_err(|e| broken(format!("reading the driver: {e}")))?;
    let Some(mut rest) = out.strip_prefix(b"READY\n") else {
        return Err(broken(format!("the root did not start ({status:?}): {errors}")));
    };
    let mut ran = Vec::with_capacity(commands.len());
    while !rest.is_empty() {
        let (log, after) = counted(rest).ok_or_else(|| broken("a garbled answer".into()))?;
        let (err, after) = counted(after).ok_or_else(|| broken("a garbled answer".into()))?;
        rest = after;
        let execs = parse_log(log)
            .ok_or_else(|| broken(format!("a garbled log: {}", String::from_utf8_lossy(log))))?;
        ran.push(Ran { execs, stderr: String::from_utf8_lossy(err).into_owned() });
    }
    if ran.len() != commands.len() {
        return Err(broken(format!(
            "the root answered {} of {} commands ({status:?}; the next was {:?}): {errors}",
            ran.len(),
            commands.len(),
            commands.get(ran.len())
        )));
    }
    Ok(ran)
}

/// `length:bytes`, and what follows.
fn counted(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = text.iter().position(|b| *b == b':')?;
    let length: usize = std::str::from_utf8(&text[..colon]).ok()?.parse().ok()?;
    let start = colon + 1;
    (text.len() >= start + length).then(|| (&text[start..start + length], &text[start + length..]))
}

/// The shims' log: `argc;` then the arguments, counted, then `.`, each.
fn parse_log(mut log: &[u8]) -> Option<Vec<Vec<String>>> {
    let mut execs = Vec::new();
    while !log.is_empty() {
        let semicolon = log.iter().position(|b| *b == b';')?;
        let argc: usize = std::str::from_utf8(&log[..semicolon]).ok()?.parse().ok()?;
        log = &log[semicolon + 1..];
        let mut argv = Vec::with_capacity(argc);
        for _ in 0..argc {
            let (arg, rest) = counted(log)?;
            argv.push(String::from_utf8_lossy(arg).into_owned());
            log = rest;
        }
        log = log.strip_prefix(b".")?;
        execs.push(argv);
    }
    Some(execs)
}

/// Why a command is not compared, if it is not.
fn skipped(model: &Result<Model, guardhost_command::Finding>) -> Option<&'static str> {
    let model = match model {
        Err(_) => return Some("the model does not read it"),
        Ok(model) => model,
    };
    if model.runs.iter().any(|r| r.words.first().is_some_and(|w| w.lit().is_none())) {
        Some("a program name known only when it runs")
    } else if !model.doubts.is_empty() {
        Some("a doubt")
    } else if !model.runtime_code.is_empty() {
        Some("code made at run time")
    } else if !model.environment.is_empty() {
        Some("an environment change that affects what runs")
    } else {
        None
    }
}

/// Whether `argv` (after the program) is what `words` (after the program)
/// say: a literal equal, a `Word::Dyn` any number of arguments.
fn matches(words: &[Word], argv: &[String]) -> bool {
    match words.split_first() {
        None => argv.is_empty(),
        Some((Word::Dyn(_), rest)) => (0..=argv.len()).any(|skip| matches(rest, &argv[skip..])),
        Some((Word::Lit(text), rest)) => argv.split_first().is_some_and(|(first, others)| {
            let home = text.strip_prefix('~').map(|tail| format!("{HOME}{tail}"));
            (first == text || home.as_ref() == Some(first)) && matches(rest, others)
        }),
    }
}

/// The under-approximations of the model for one command: each program
/// `bash` ran that the model does not list, or lists with other words.
fn disagreements(model: &Model, ran: &Ran) -> Vec<String> {
    let mut out = Vec::new();
    for argv in &ran.execs {
        let program = argv[0].as_str();
        let runs: Vec<_> = model.runs.iter().filter(|r| r.program() == Some(program)).collect();
        if runs.is_empty() {
            out.push(format!("bash ran {argv:?}; the model lists no `{program}`"));
        } else if !runs.iter().any(|r| matches(&r.words[1..], &argv[1..])) {
            let listed: Vec<String> = runs.iter().map(|r| words(&r.words)).collect();
            out.push(format!("bash ran {argv:?}; the model lists {}", listed.join(", ")));
        }
    }
    out
}

fn words(words: &[Word]) -> String {
    let shown: Vec<String> = words
        .iter()
        .map(|w| match w {
            Word::Lit(text) => format!("{text:?}"),
            Word::Dyn(_) => "<dyn>".into(),
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

#[test]
fn the_model_lists_what_bash_runs() {
    let started = Instant::now();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d, 0);
    let mut commands: Vec<String> = KNOWN.iter().map(|(c, _)| (*c).to_owned()).collect();
    let mut mutated = 0;
    for i in 0..1200 {
        let text = generated(&mut rng, 1 + i % 2);
        if i % 2 == 0 {
            commands.push(mutate(&mut rng, &text));
            mutated += 1;
        }
        commands.push(text);
    }
    let ran = match run_in_root(&commands) {
        Ok(ran) => ran,
        Err(Unavailable::Skip(why)) => {
            eprintln!("skipped the_model_lists_what_bash_runs: {why}");
            return;
        }
        Err(Unavailable::Broken(why)) => panic!("the oracle's root broke: {why}"),
    };
    let ran_for = started.elapsed();
    let mut skips: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut compared, mut execs, mut exact) = (0, 0, 0);
    let mut wrong = Vec::new();
    let mut still_known = Vec::new();
    for (index, (command, ran)) in commands.iter().zip(&ran).enumerate() {
        let model = Model::read(command);
        if let Some(why) = skipped(&model) {
            *skips.entry(why).or_default() += 1;
            if index < KNOWN.len() {
                panic!("{command:?} is on KNOWN but is not compared ({why})");
            }
            continue;
        }
        let model = model.unwrap();
        compared += 1;
        execs += ran.execs.len();
        exact += ran
            .execs
            .iter()
            .filter(|argv| {
                model.runs.iter().any(|r| {
                    r.program() == Some(argv[0].as_str())
                        && r.words.iter().all(|w| w.lit().is_some())
                        && matches(&r.words[1..], &argv[1..])
                })
            })
            .count();
        let found = disagreements(&model, ran);
        if index < KNOWN.len() {
            if found.is_empty() {
                still_known.push(format!("{command:?} ({})", KNOWN[index].1));
            }
        } else if !found.is_empty() {
            wrong.push(format!("{command:?}\n  {}\n  stderr: {:?}", found.join("\n  "), ran.stderr));
        }
    }
    let skipped_total: usize = skips.values().sum();
    eprintln!(
        "{} commands ({mutated} mutated, {} known) run by bash in {:.1?}: {compared} compared \
         ({execs} programs run, {exact} of them equal to a run with every word known), \
         {skipped_total} skipped: {skips:?}",
        commands.len(),
        KNOWN.len(),
        ran_for
    );
    assert!(
        still_known.is_empty(),
        "the model now agrees with bash on KNOWN commands, take them off:\n{}",
        still_known.join("\n")
    );
    assert!(wrong.is_empty(), "{} commands under-approximated:\n{}", wrong.len(), wrong.join("\n"));
    assert!(compared > commands.len() / 2 && execs > compared, "a corpus that tests little");
}
