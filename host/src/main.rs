//! The `guardhost` command line: `check`, `eval` and `run`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
