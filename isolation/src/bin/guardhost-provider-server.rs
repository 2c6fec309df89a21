//! `guardhost-provider-server`: the program a provider with
//! `isolation: process` runs in, for programs that embed the guardhost
//! library without the `guardhost` command (it does what
//! `guardhost provider-server` does). The host starts it with the single
//! argument `provider-server`; logs go to stderr, filtered by
//! `GUARDHOST_LOG` (default `warn`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (first, rest) = (args.next(), args.next());
    if first.as_deref() != Some("provider-server".as_ref()) || rest.is_some() {
        eprintln!(
            "guardhost-provider-server runs a provider for a guardhost host, which starts it as \
             `guardhost-provider-server provider-server`; it is not for interactive use"
        );
        return ExitCode::from(2);
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("GUARDHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .init();
    // `use: builtin:...` resolves here as in the host that started it.
    guardhost_builtins::register();
    match guardhost_isolation::entry::run() {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(2)
        }
    }
}
